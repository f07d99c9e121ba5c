"""read / bash / grep with a context_focus_question, through a real child and the built-in engine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import httpx
import trio

from tests._child import Child, tool_json
from tests.test_engine import SHOP_METHODS, shop_source
from tests.test_http import call

MARKER = re.compile(r"^⟦PRUNÉ: prune_id=(\S+) lignes (\d+)-(\d+) \((\d+)\) raison=(.*)⟧$")


def module_source() -> str:
    parts = ["import json\nimport os\n\n"]
    for n in range(40):
        parts.append(
            f"def helper_{n}(value):\n    total = value * {n}\n    return total + {n}\n\n\n"
        )
    parts.append(
        "def parse_config_file(path):\n"
        "    with open(path) as handle:\n"
        "        data = json.load(handle)\n"
        "    return data['settings']\n"
    )
    return "".join(parts)


async def test_read_with_a_question_prunes_and_every_marker_recovers(child: Child, workspace: Path) -> None:
    source = module_source()
    (workspace / "module.py").write_text(source)
    original = source.split("\n")[:-1]
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "module.py",
            "context_focus_question": "where is the config file parsed and its settings returned?",
        }))
        pruning = result["pruning"]
        assert pruning["attempted"] and pruning["applied"] and not pruning["fallback"]
        assert pruning["engine"] == "builtin"
        lines = result["content"].split("\n")
        assert any("def parse_config_file(path):" in line for line in lines)
        assert any("return data['settings']" in line for line in lines)
        assert len(result["content"]) < len(source) / 2
        markers = [MARKER.match(line) for line in lines if line.startswith("⟦")]
        assert markers and all(markers)
        covered = set()
        for match in markers:
            prune_id, start, end, count = match.group(1), int(match.group(2)), int(match.group(3)), int(match.group(4))
            assert count == end - start + 1
            back = tool_json(await call(http, child, "recover_text", {
                "prune_id": prune_id, "ranges": [{"start_line": start, "end_line": end}],
                "include_line_numbers": False,
            }))
            assert back["raw_text"].split("\n") == original[start - 1 : end]
            covered.update(range(start, end + 1))
        kept = {int(line.split("│", 1)[0]) for line in lines if "│" in line and not line.startswith("⟦")}
        assert kept | covered == set(range(1, len(original) + 1))
        assert not kept & covered


async def test_bash_output_is_pruned_as_logs(child: Child) -> None:
    script = (
        "for i in $(seq 1 300); do echo \"INFO request $i served in 3 ms\"; done; "
        "echo 'Traceback (most recent call last):'; "
        "echo '  File \"app.py\", line 12, in handler'; "
        "echo \"KeyError: 'user_id'\"; "
        "for i in $(seq 301 400); do echo \"INFO request $i served in 2 ms\"; done"
    )
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "bash", {
            "cmd": script, "context_focus_question": "why did the handler fail?",
        }))
    assert result["pruning"]["applied"] is True
    stdout = result["stdout"]
    assert "KeyError: 'user_id'" in stdout
    assert "Traceback (most recent call last):" in stdout
    assert stdout.count("INFO request") < 100
    assert "truncated" not in result  # pruning brought it under the budget


QUESTION = "where is the config file parsed and its settings returned?"


async def shown_by_bash(http: httpx.AsyncClient, child: Child, cmd: str) -> tuple[dict, list[re.Match]]:
    result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": QUESTION}))
    assert result["pruning"]["applied"], result["pruning"]
    markers = [MARKER.match(line) for line in result["stdout"].split("\n") if line.startswith("⟦")]
    assert markers and all(markers)
    return result, markers  # type: ignore[return-value]


async def test_a_file_printed_by_bash_is_pruned_as_read_prunes_it(child: Child, workspace: Path) -> None:
    """`cat F`, `sed -n 'A,Bp' F`, `nl -ba F`: the output is the file's lines, pruned as code
    (markers name the functions they hide) and numbered as the file's lines."""
    source = module_source()
    (workspace / "module.py").write_text(source)
    original = source.split("\n")
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        for cmd, first in [
            ("cat module.py", 1), ("sed -n '60,$p' module.py", 60), ("nl -ba module.py | sed -n '60,210p'", 60),
        ]:
            result, markers = await shown_by_bash(http, child, cmd)
            stdout = result["stdout"]
            assert "def parse_config_file(path):" in stdout and "return data['settings']" in stdout, cmd
            assert all("helper_" in match.group(5) for match in markers), cmd
            for match in markers:
                start, end = int(match.group(2)), int(match.group(3))
                assert start >= first, cmd
                back = tool_json(await call(http, child, "recover_text", {
                    "prune_id": match.group(1), "ranges": [{"start_line": start, "end_line": end}],
                    "include_line_numbers": False,
                }))
                expected = original[start - 1 : end]
                if cmd.startswith("nl"):
                    expected = [f"{n:6d}\t{line}" for n, line in zip(range(start, end + 1), expected, strict=True)]
                assert back["raw_text"].split("\n") == expected, cmd


def committed(repo: Path) -> None:
    """`repo` made a git repository whose one commit holds its files."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "files"]):
        subprocess.run([*git, *args], check=True, capture_output=True)


async def test_a_file_the_pruner_does_not_read_printed_by_bash_is_laid_out_by_its_name(
    child: Child, workspace: Path, tmp_path: Path,
) -> None:
    """A library's module outside the run root, a file at a git revision (neither read by the
    pruner): laid out by its name, numbered from the command's first line; a log, or the last
    lines of a file, stay output."""
    library = tmp_path / "lib"
    library.mkdir()
    (workspace / "module.py").write_text(module_source())
    committed(workspace)
    (workspace / "module.py").write_text("x = 1\n")  # the working tree's is another
    (library / "module.py").write_text(module_source())
    (library / "module.log").write_text(module_source())
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        for cmd, first in [(f"cat {library}/module.py", 1), (f"sed -n '60,$p' {library}/module.py", 60)]:
            result, markers = await shown_by_bash(http, child, cmd)
            stdout = result["stdout"]
            assert "def parse_config_file(path):" in stdout, cmd
            assert all("helper_" in match.group(5) for match in markers), cmd
            assert min(int(match.group(2)) for match in markers) >= first, cmd
            back = tool_json(await call(http, child, "recover_text", {
                "prune_id": markers[0].group(1), "include_line_numbers": False,
                "ranges": [{"start_line": int(markers[0].group(2)), "end_line": int(markers[0].group(3))}],
            }))
            assert back["raw_text"].split("\n") == module_source().split("\n")[
                int(markers[0].group(2)) - 1 : int(markers[0].group(3))], cmd
        # The file as a commit left it: read from git, laid out by its name.
        result, markers = await shown_by_bash(http, child, "git show HEAD:module.py")
        assert "def parse_config_file(path):" in result["stdout"]
        assert all("helper_" in match.group(5) for match in markers)
        for cmd in (f"cat {library}/module.log", f"tail -n 150 {library}/module.py"):
            result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": QUESTION}))
            markers = [MARKER.match(line) for line in result["stdout"].split("\n") if line.startswith("⟦")]
            assert not any(match and "helper_" in match.group(5) for match in markers), cmd


async def test_bash_output_is_read_as_the_file_the_command_names(child: Child, workspace: Path) -> None:
    """After `cd DIR &&` the file is DIR's; output that is not the file's lines stays logs."""
    (workspace / "module.py").write_text("x = 1\n" * 300)
    (workspace / "src" / "module.py").write_text(module_source())
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        _, markers = await shown_by_bash(http, child, "cd src && cat module.py")
        assert all("helper_" in match.group(5) for match in markers)
        # The same lines, not printed by a command that names their file: command output.
        result = tool_json(await call(http, child, "bash", {
            "cmd": "cat src/module.py | cat", "context_focus_question": QUESTION,
        }))
    markers = [MARKER.match(line) for line in result["stdout"].split("\n") if line.startswith("⟦")]
    assert not any(match and "helper_" in match.group(5) for match in markers)


async def test_a_search_of_one_file_through_bash_is_ranked_within_the_file(child: Child, workspace: Path) -> None:
    """`grep -n WORD F`: its rows are the file's lines by number, ranked as parts of the
    file's functions (the method asked about keeps its rows, markers name the methods they
    hide); rows that are not the file's lines by number, or a file that is not code, stay a
    command's output, and a search of a file too large to lay out is still pruned."""
    source = shop_source()
    for name in ("shop.py", "shop.txt", "src/shop.py"):
        (workspace / name).write_text("\n".join(source) + "\n")
    (workspace / "big.py").write_text("x = 1\n" * 100_000 + "\n".join(source) + "\n")  # over 512 KiB: not laid out
    asked = {f"{i + 1}:{line}" for i, line in enumerate(source) if "offset" in line
             and source.index("    def refund_card(self, order):") < i < source.index("    def close_ledger(self, order):")}
    question = "how is a card refund computed?"
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        # A window of the rows (the rows asked about are in the last 250), context rows and `--`.
        for cmd in ("grep -n offset shop.py", "grep -n -e offset shop.py | tail -n 250",
                    "cd src && grep -n -C1 offset shop.py"):
            ran = await trio.run_process(cmd, shell=True, cwd=workspace, capture_stdout=True)
            rows = ran.stdout.decode().split("\n")[:-1]
            result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": question}))
            assert result["pruning"]["applied"], (cmd, result["pruning"])
            shown = result["stdout"].split("\n")
            kept = {line.split("│ ", 1)[1] for line in shown if "│ " in line and not line.startswith("⟦")}
            assert asked <= kept and len(kept) < len(rows) // 2, cmd
            markers = [MARKER.match(line) for line in shown if line.startswith("⟦")]
            assert markers and all(match and match.group(5).startswith("hors focus: Shop.") for match in markers)
            for match in markers:  # 20 rows of each: a longer range is cut to the response budget
                start, end = int(match.group(2)), min(int(match.group(3)), int(match.group(2)) + 19)
                back = tool_json(await call(http, child, "recover_text", {
                    "prune_id": match.group(1), "include_line_numbers": False,
                    "ranges": [{"start_line": start, "end_line": end}],
                }))
                assert back["raw_text"].split("\n") == rows[start - 1 : end], cmd
        for cmd in ("grep -n offset shop.txt", "grep -Hn offset shop.py", "grep -n offset shop.py | cat",
                    "grep -n offset big.py"):
            result = tool_json(await call(http, child, "bash", {"cmd": cmd, "context_focus_question": question}))
            markers = [MARKER.match(line) for line in result["stdout"].split("\n") if line.startswith("⟦")]
            assert markers and not any(match and "Shop." in match.group(5) for match in markers), cmd


async def test_a_search_of_many_files_is_ranked_within_the_files_it_names(
    child: Child, workspace: Path, tmp_path: Path,
) -> None:
    """`grep -rn WORD DIR` through bash and the `grep` tool: the rows of the files the search
    values most are ranked as those files' own rankings value them. A file outside the run root
    that rows name is never read: the view is the same whether it exists or not."""
    shop = shop_source()
    other = [f"def tally_{k}(offset):" if k % 3 == 0 else f"    return offset * {k}" for k in range(300)]
    (workspace / "src" / "shop.py").write_text("\n".join(shop) + "\n")
    (workspace / "src" / "other.py").write_text("\n".join(other) + "\n")
    asked = {line for line in shop[shop.index("    def refund_card(self, order):") : shop.index("    def close_ledger(self, order):")]
             if "offset" in line}
    question = "which offset does a card refund add?"

    def kept(result: dict, key: str) -> set[str]:
        shown = [line.split("│ ", 1)[1] for line in result[key].split("\n") if "│ " in line and not line.startswith("⟦")]
        return {row.split(":", 2)[2] for row in shown if row.count(":") >= 2}

    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        for name, args, key in [
            ("bash", {"cmd": "grep -rn offset src"}, "stdout"),
            ("grep", {"pattern": "offset", "paths": ["src"], "max_matches": 1000}, "matches"),
        ]:
            result = tool_json(await call(http, child, name, {**args, "context_focus_question": question}))
            assert result["pruning"]["applied"], (name, result["pruning"])
            assert asked <= kept(result, key), name
        # Rows naming a file outside the root, printed by a command that is no search.
        outside = tmp_path / "lib"
        outside.mkdir()
        rows = [f"{outside}/shop.py:{i + 1}:{line}" for i, line in enumerate(shop) if "offset" in line]
        rows += [f"{outside}/other.py:{i + 1}:{line}" for i, line in enumerate(other) if "offset" in line]
        (workspace / "rows.log").write_text("\n".join(rows) + "\n")
        views = []
        for present in (False, True):
            if present:
                (outside / "shop.py").write_text("\n".join(shop) + "\n")
                (outside / "other.py").write_text("\n".join(other) + "\n")
            result = tool_json(await call(http, child, "bash", {
                "cmd": "cat rows.log | cat", "context_focus_question": question}))
            assert result["pruning"]["applied"]
            views.append(kept(result, "stdout"))
        assert views[0] == views[1] and not asked <= views[1]


async def test_small_outputs_and_missing_questions_are_not_pruned(child: Child) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        small = tool_json(await call(http, child, "read", {
            "path": "notes.md", "context_focus_question": "what notes?",
        }))
        plain = tool_json(await call(http, child, "read", {"path": "notes.md"}))
    assert small["pruning"] == {"attempted": False, "applied": False, "fallback": False, "reason": "below_threshold"}
    assert plain["pruning"]["reason"] == "no_question"
    assert small["content"] == plain["content"] == "# Notes\n\nSome text."


async def test_input_too_large_is_reported(workspace: Path, tmp_path: Path) -> None:
    from tests._child import running_child

    (workspace / "big.log").write_text("line of log output\n" * 2000)
    env = {"JEEVES_MCP_MAX_PRUNE_INPUT_BYTES": "1000"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient(
        headers=child.headers()
    ) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "big.log", "context_focus_question": "any errors?",
        }))
        tool = tool_json(await call(http, child, "prune_text", {
            "text": "line of log output\n" * 2000, "goal_hint": "any errors?", "source_type": "logs",
            "options": {"max_prune_ratio": 0.9, "min_keep_lines": 0, "timeout_ms": 2000,
                        "annotate_lines": True, "include_markers": True},
        }))
    assert result["pruning"] == {"attempted": False, "applied": False, "fallback": False, "reason": "input_too_large"}
    assert result["truncated"]["content"]["prune_id"].startswith("prn_")
    assert tool["summary"] == "prune_text: not pruned (input_too_large), 2000 lines as given"
    assert tool["warnings"][0] == "input_too_large" and tool["stats"]["used_fallback"] is True


async def test_prune_text_contract(child: Child) -> None:
    text = "\n".join(
        ["# Guide", "", "## Install", "pip install thing", "", "## Usage", "run thing --fast", "",
         "⟦NO_PRUNE_BEGIN⟧", "keep me", "⟦NO_PRUNE_END⟧", "", "## License", "MIT"]
    )
    options = {"max_prune_ratio": 0.5, "min_keep_lines": 3, "timeout_ms": 2000,
               "annotate_lines": True, "include_markers": True}
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "prune_text", {
            "text": text, "goal_hint": "how do I install it?", "source_type": "docs", "options": options,
        }))
    assert set(result) >= {"prune_id", "pruned_text", "annotations", "stats", "warnings"}
    stats = result["stats"]
    assert stats["original_lines"] == 14 and stats["pruned_lines"] <= 7
    assert stats["kept_lines"] >= 3
    rendered = result["pruned_text"].split("\n")
    for annotation in result["annotations"]:
        assert annotation["kind"] == "pruned_block"
        assert annotation["marker"] in rendered  # identical, never prefixed by N│
    for n, line in enumerate(text.split("\n"), 1):
        if "NO_PRUNE" in line or line == "keep me":
            assert f"{n}│ {line}" in rendered
    numbered = [line for line in rendered if not line.startswith("⟦")]
    assert [int(line.split("│")[0]) for line in numbered] == sorted(int(line.split("│")[0]) for line in numbered)


async def test_a_window_of_a_file_keeps_the_files_line_numbers(child: Child, workspace: Path) -> None:
    source = module_source()
    (workspace / "module.py").write_text(source)
    original = source.split("\n")
    first = 100
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "module.py", "offset": first, "limit": 110,
            "context_focus_question": "where is the config file parsed and its settings returned?",
        }))
        assert result["pruning"]["applied"]
        lines = result["content"].split("\n")
        kept = [line for line in lines if "│" in line and not line.startswith("⟦")]
        for line in kept:
            number, text = line.split("│ ", 1)
            assert original[int(number) - 1] == text
            assert first <= int(number) < first + 110
        match = next(MARKER.match(line) for line in lines if line.startswith("⟦"))
        prune_id, start, end = match.group(1), int(match.group(2)), int(match.group(3))
        assert start >= first
        back = tool_json(await call(http, child, "recover_text", {
            "prune_id": prune_id, "ranges": [{"start_line": start, "end_line": end}],
            "include_line_numbers": False,
        }))
        assert back["raw_text"].split("\n") == original[start - 1 : end]
        before = (await http.post(f"{child.base}/rpc", json={
            "jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recover_text", "arguments": {
                "prune_id": prune_id, "ranges": [{"start_line": 1, "end_line": 2}], "include_line_numbers": False}},
        })).json()
        assert before["error"]["code"] == -32005
        assert before["error"]["data"]["available"]["start_line"] == first


async def test_a_window_is_ranked_within_the_file_it_was_cut_from(child: Child, workspace: Path) -> None:
    """`read` with an offset and `sed -n 'A,Bp'` through bash: a window that starts inside
    the method asked about keeps that method's lines (the file around the window names them);
    a numbered window too, though its numbers make it longer than the file (review19 F3)."""
    source = shop_source()
    (workspace / "shop.py").write_text("\n".join(source) + "\n")
    first = source.index("    def refund_card(self, order):") + 11  # 1-based, ten lines into it
    rest = range(first, source.index("    def close_ledger(self, order):") + 1)  # its lines in the window
    question = "how is a card refund computed?"
    # The method asked about first: a window from ten lines into it to the end is most of the file.
    later = shop_source((*SHOP_METHODS[3:], *SHOP_METHODS[:3]))
    (workspace / "later.py").write_text("\n".join(later) + "\n")
    start = later.index("    def refund_card(self, order):") + 11
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        for name, args, key in [
            ("read", {"path": "shop.py", "offset": first, "limit": 200}, "content"),
            ("bash", {"cmd": f"sed -n '{first},{first + 199}p' shop.py"}, "stdout"),
            ("bash", {"cmd": f"nl -ba later.py | sed -n '{start},$p'"}, "stdout"),
        ]:
            if "later.py" in args.get("cmd", ""):
                first, rest = start, range(start, later.index("    def close_ledger(self, order):") + 1)
            result = tool_json(await call(http, child, name, {**args, "context_focus_question": question}))
            assert result["pruning"]["applied"], (name, result["pruning"])
            shown = result[key].split("\n")
            numbers = {int(line.split("│", 1)[0]) for line in shown if "│" in line and not line.startswith("⟦")}
            assert len(numbers & set(rest)) >= len(rest) - 1, (name, sorted(numbers))
            markers = [MARKER.match(line) for line in shown if line.startswith("⟦")]
            assert markers and any(match and match.group(5).startswith("hors focus: Shop.") for match in markers)


async def test_a_window_of_a_file_too_large_to_lay_out_is_ranked_alone(child: Child, workspace: Path) -> None:
    """Over 512 KiB the file is not laid out for a window of it (review19: 2 MiB of calls held
    the engine past its 3 s deadline, and the window came back unpruned)."""
    calls = "f(" + ",".join("abcdefghijklmnopqrstuvwxyz" * 2) + ")\n"
    (workspace / "calls.py").write_text(calls * (1900 * 1024 // len(calls)) + "\n".join(shop_source()) + "\n")
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "calls.py", "offset": 3000, "limit": 200, "context_focus_question": "where is g12 computed?",
        }))
    assert result["pruning"]["applied"] and not result["pruning"]["fallback"], result["pruning"]


def large_module(target_at: int = 750, helpers: int = 1500) -> str:
    """About 110 KB of Python with one function the question asks about in the middle:
    max_prune_ratio's tenth of its lines alone is over the response budget."""
    parts = ["import json\n\n\n"]
    for n in range(helpers):
        if n == target_at:
            parts.append(
                "def parse_config_file(path):\n"
                "    with open(path) as handle:\n"
                "        data = json.load(handle)\n"
                "    return data['settings']\n\n\n"
            )
        parts.append(f"def helper_{n}(value):\n    total = value * {n}\n    return total + {n}\n\n\n")
    return "".join(parts)


async def test_prune_text_over_the_response_budget_keeps_what_was_asked_about(child: Child) -> None:
    source = large_module()
    assert len(source) > 3 * 10240  # three response budgets
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "prune_text", {
            "text": source, "goal_hint": "where is the config file parsed and its settings returned?",
            "source_type": "code",
            "options": {"max_prune_ratio": 0.9, "min_keep_lines": 0, "timeout_ms": 5000,
                        "annotate_lines": True, "include_markers": True},
        }))
    text = result["pruned_text"]
    assert len(text.encode()) <= 10240
    assert "def parse_config_file(path):" in text and "return data['settings']" in text
    reasons = {a["reason"] for a in result["annotations"]}
    assert any(r.startswith("budget de réponse") for r in reasons)  # the lines ranked last were cut, recoverably


async def test_read_of_a_large_file_keeps_the_asked_function_not_its_head_and_tail(
    child: Child, workspace: Path
) -> None:
    (workspace / "large.py").write_text(large_module())
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "large.py",
            "context_focus_question": "where is the config file parsed and its settings returned?",
        }))
    assert result["pruning"]["applied"]
    assert "def parse_config_file(path):" in result["content"]
    assert "return data['settings']" in result["content"]


async def test_a_patch_file_is_read_as_the_diff_it_holds(child: Child, workspace: Path) -> None:
    """A `.diff` / `.patch` file is command output saved (git's layout: each file's diff a unit
    named by its path), not code to lay out by indentation."""
    parts = []
    for module in ("billing", "shipping", "inventory", "accounts", "reports", "payroll"):
        parts.append(f"diff --git a/{module}.py b/{module}.py\n--- a/{module}.py\n+++ b/{module}.py\n@@ -1,12 +1,12 @@\n"
                     + "".join(f"-    step_{k}(order)\n+    step_{k}(order, strict=True)\n" for k in range(12)))
    (workspace / "change.patch").write_text("".join(parts))
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "change.patch", "context_focus_question": "what changed in inventory?",
        }))
    assert result["pruning"]["applied"], result["pruning"]
    content = result["content"]
    assert "diff --git a/inventory.py b/inventory.py" in content and "diff --git a/billing.py" not in content
    reasons = [MARKER.match(line).group(5) for line in content.split("\n") if line.startswith("⟦")]  # type: ignore[union-attr]
    assert reasons and all(".py" in reason for reason in reasons), reasons


async def test_a_focused_cat_gets_the_budget_read_gets(child: Child, workspace: Path) -> None:
    """stdout and an empty stderr split the budget evenly before pruning: a focused `cat F` kept
    about half the lines a focused `read F` kept (the review of 2026-11-29)."""
    functions = [
        f"def handler_{k}(request, settings):\n    '''Answer request {k}.'''\n"
        f"    value = settings.get('limit_{k}', {k})\n    if request.size > value:\n"
        f"        raise ValueError('request {k} too large')\n    return request.body[:value]\n"
        for k in range(400)
    ]
    (workspace / "handlers.py").write_text("\n".join(functions))
    question = "how are request sizes checked against their limits?"
    number = re.compile(r"^\d+│ ", re.MULTILINE)
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        read = tool_json(await call(http, child, "read", {"path": "handlers.py", "context_focus_question": question}))
        shown = tool_json(await call(http, child, "bash", {"cmd": "cat handlers.py", "context_focus_question": question}))
    by_read, by_cat = len(number.findall(read["content"])), len(number.findall(shown["stdout"]))
    assert by_read > 100 and by_cat >= 0.9 * by_read, (by_read, by_cat)


async def test_a_line_longer_than_the_budget_neither_empties_a_view_nor_loops_its_recovery(
    child: Child, workspace: Path
) -> None:
    """A focused read of a one-line 29 KB JSON file showed only a marker; a 30 KB line ranked
    first hid every line after it (a 120-line module's view was 542 bytes); recovering the one
    line gave its head, the same marker and its tail, which an agent followed forever (the
    review of 2026-11-29)."""
    line = '{"items": [' + ", ".join(f'{{"key{k}": {k}}}' for k in range(2500)) + "]}"
    (workspace / "mid.json").write_text(line)
    body = [f"def b{k}(x):\n    return x + {k}\n" for k in range(60)]
    (workspace / "mixed.py").write_text("".join(body[:30]) + f'BLOB = "{"z" * 30_000}"\n' + "".join(body[30:]))
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        read = tool_json(await call(http, child, "read", {"path": "mid.json", "context_focus_question": "what is key700?"}))
        assert '{"key700": 700}' in read["content"], read["content"]  # the line around what was asked
        # ... and a marker after it says which bytes of the line it leaves out, to print them
        # (it had no marker: nothing told the agent the line went on, nor where).
        shown, after = read["content"].split("\n")[:2]
        clipped = MARKER.match(after)
        assert clipped and clipped.group(2) == clipped.group(3) == "1", read["content"]
        spans = re.fullmatch(r"hors focus: octets 1-(\d+) et (\d+)-(\d+) de la ligne, trop longue \(cut -b\)",
                             clipped.group(5))
        assert spans and int(spans.group(3)) == len(line.encode()), clipped.group(5)
        window = line.encode()[int(spans.group(1)) : int(spans.group(2)) - 1].decode()
        assert shown == f"1│ …{window}…"
        read = tool_json(await call(http, child, "read", {"path": "mid.json", "context_focus_question": "the sky's color?"}))
        content = read["content"].split("\n")
        assert len(content) == 3 and content[0].startswith('1│ {"items"') and content[2].endswith("]}"), content
        marker = MARKER.match(content[1])
        assert marker and marker.group(5).startswith("budget de réponse: octets "), content[1]
        again = tool_json(await call(http, child, "recover_text", {
            "prune_id": marker.group(1), "ranges": [{"start_line": 1, "end_line": 1}], "include_line_numbers": False}))
        hidden = re.search(r"octets (\d+)-(\d+) de la ligne", again["raw_text"])
        head, _, tail = again["raw_text"].split("\n")
        assert hidden and head.removesuffix("…") == line[: int(hidden.group(1)) - 1], head[-40:]
        assert tail.removeprefix("…") == line[int(hidden.group(2)):]
        mixed = tool_json(await call(http, child, "read", {"path": "mixed.py", "context_focus_question": "what does b45 return?"}))
        assert "45│ def b22(x):" in mixed["content"] or "93│     return x + 45" in mixed["content"], mixed["content"]
        shown = [int(m) for m in re.findall(r"^(\d+)│ ", mixed["content"], re.MULTILINE)]
        assert 92 in shown and 93 in shown and len(shown) > 60, shown


async def test_a_blank_last_line_is_shown_or_marked_not_lost(child: Child, workspace: Path) -> None:
    """A file, or a window of one, whose last line is blank: its final newline ends that blank
    line, it is not the text's terminator. Every line is shown or under a marker."""
    source = module_source() + "\n\n"  # the module's last line, then two blank lines
    (workspace / "module.py").write_text(source)
    original = source.split("\n")[:-1]
    question = "where is the config file parsed and its settings returned?"
    blank_at = original.index("", 200) + 1  # a blank line between two helpers, as a window's last
    async with httpx.AsyncClient(headers=child.headers()) as http:
        for args, first, last in [
            ({"path": "module.py"}, 1, len(original)),
            ({"path": "module.py", "offset": blank_at - 120, "limit": 121}, blank_at - 120, blank_at),
        ]:
            result = tool_json(await call(http, child, "read", {**args, "context_focus_question": question}))
            assert result["pruning"]["applied"]
            lines = result["content"].split("\n")
            kept = {int(line.split("│", 1)[0]) for line in lines if "│" in line and not line.startswith("⟦")}
            covered: set[int] = set()
            for match in (MARKER.match(line) for line in lines if line.startswith("⟦")):
                assert match
                covered.update(range(int(match.group(2)), int(match.group(3)) + 1))
            assert kept | covered == set(range(first, last + 1)), (args, sorted(set(range(first, last + 1)) - kept - covered))


async def test_a_view_over_the_escaped_budget_is_cut_by_rank_not_in_its_middle(
    child: Child, workspace: Path
) -> None:
    """Escaped twice in the result (a quote costs 4 bytes), a pruned view sized to the text
    budget was over, and fit_rows cut its middle: rows of any function, a signature among
    them. The lines the engine ranked last go instead, as markers."""
    parts = [
        f'def render_{n}(row):\n    return "<td>" + "{n}" + "</td>" + "<td>" + row["k{n}"] + "</td>"\n\n\n'
        for n in range(300)
    ]
    source = "".join(parts)
    (workspace / "html.py").write_text(source)
    original = source.split("\n")[:-1]
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "html.py", "context_focus_question": "how is a row rendered into td cells?",
        }))
    assert result["pruning"]["applied"]
    assert "truncated" not in result, result["truncated"]  # no head-and-tail cut of the view
    lines = result["content"].split("\n")
    kept = {int(line.split("│", 1)[0]) for line in lines if "│" in line and not line.startswith("⟦")}
    bodies = [n for n in kept if original[n - 1].startswith("    return")]
    assert len(bodies) > 20
    assert all(n - 1 in kept for n in bodies)  # no body shown without its signature
