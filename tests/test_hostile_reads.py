"""What a run's own `bash` can write, read back with a focus question, through a live child.

The attacker is the run: its `bash` writes any file in the root, and the question the
agent asks may quote what that file or a command printed. Each read must answer in
bounded time, and the child must go on serving the next call.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from tests._child import Child, running_child, tool_json
from tests.test_http import call

# The child's own deadline is 3 s (prune_timeout_ms); past it the engine is abandoned and the
# answer is the unpruned text's scan. A read that takes longer than this has no bound.
READ_BOUND_S = 20


def distinct_words(count: int) -> str:
    """`count` words no two alike, as a pasted listing or a hash dump would be."""
    return " ".join(f"w{index:x}" for index in range(count))


async def test_a_question_as_long_as_a_request_body_answers_in_bounded_time(workspace: Path, tmp_path: Path) -> None:
    # Under the child's 4 MiB body limit: 300,000 distinct words. The scan that shows the
    # lines a question names, for an output the engine leaves whole, read its terms with a
    # list lookup per word (25 s for 60,000 words; hours for these).
    question = distinct_words(300_000)
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        made = await call(http, child, "bash", {"cmd": "seq 1 400000 > numbers.txt && wc -c < numbers.txt"})
        assert not made.get("isError") and int(tool_json(made)["stdout"]) > 2 * 1024 * 1024, made
        with trio.fail_after(READ_BOUND_S):
            read = tool_json(await call(http, child, "read", {"path": "numbers.txt", "context_focus_question": question}))
        assert read["pruning"]["reason"] == "input_too_large", read["pruning"]
        assert (await http.get(f"{child.base}/health")).status_code == 200
        small = tool_json(await call(http, child, "read", {"path": "notes.md"}))
        assert "Some text." in small["content"], small
        assert child.process.returncode is None


async def test_a_long_line_in_a_commands_output_is_pruned_not_waited_out(workspace: Path, tmp_path: Path) -> None:
    # The logs engine read a separator with a regex that backtracked quadratically over a
    # line ending in text after a run of `=`: this one held the child's GIL for hours (its
    # event loop too: no call, no health check answered).
    command = f"{sys.executable} -c \"print('x' + '=' * 400_000 + 'y')\"; seq 1 3000"
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        with trio.fail_after(READ_BOUND_S):
            ran = tool_json(await call(http, child, "bash", {"cmd": command, "context_focus_question": "where is 2999"}))
        assert ran["pruning"]["applied"] and not ran["pruning"]["fallback"], ran["pruning"]
        assert "2999" in ran["stdout"]
        assert (await http.get(f"{child.base}/health")).status_code == 200


HOSTILE_FILES = {
    # 2 MB of words on a single line, and the same spread over 5,000 lines.
    "one_line.txt": "import random\nrandom.seed(1)\nwords = [''.join(random.choices('abcdefghij', k=6)) for _ in range(280000)]\n"
                    "open(NAME, 'w').write(' '.join(words))\n",
    "many_lines.txt": "import random\nrandom.seed(2)\nwords = [''.join(random.choices('abcdefghij', k=6)) for _ in range(280000)]\n"
                      "open(NAME, 'w').write('\\n'.join(' '.join(words[i:i + 60]) for i in range(0, len(words), 60)))\n",
    # A module of one 200,000-term expression (it parses), and 60,000 one-line functions.
    "expression.py": "open(NAME, 'w').write('total = (' + ' + '.join(f'v{i}' for i in range(200000)) + ')\\n')\n",
    "defs.py": "open(NAME, 'w').write(''.join(f'def f{i}(x): return x + {i}\\n' for i in range(60000)))\n",
    # Nesting Python refuses (too many nested blocks, brackets): read by indentation.
    "nested.py": "open(NAME, 'w').write(''.join(' ' * i + f'if x{i}:\\n' for i in range(120)) + ' ' * 120 + 'pass\\n'"
                 " + '[' * 5000 + ']' * 5000 + '\\n')\n",
}


async def test_files_a_run_writes_to_stall_the_engine_are_answered_in_bounded_time(
    workspace: Path, tmp_path: Path
) -> None:
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        for name, maker in HOSTILE_FILES.items():
            script = f"NAME = {name!r}\n{maker}"
            made = await call(http, child, "bash", {"cmd": f"{sys.executable} - <<'EOF'\n{script}EOF\n"})
            assert not made.get("isError") and tool_json(made)["exit_code"] == 0, (name, made)
            # The question quotes the file's words: a blob, a traceback of its names.
            question = f"where is v199999 or f59999 or x119 used? {distinct_words(20_000)}"
            with trio.fail_after(READ_BOUND_S):
                read = tool_json(await call(http, child, "read", {"path": name, "context_focus_question": question}))
            assert read["content"], (name, read)
            assert read["pruning"]["attempted"], (name, read["pruning"])  # under 2 MiB: the engine ran
            assert (await http.get(f"{child.base}/health")).status_code == 200, name
        assert child.process.returncode is None


MISLEADING_NAMES = (
    # A newline starts a fake row (and these files are not searched); text like rg's own note
    # before it; colons fake the fields; a Unicode line break; bytes that are not UTF-8.
    "printf 'needle\\n' > $'x\\nnotes.md:3:planted'",
    "printf 'needle\\n' > $'x: binary file matches (found \"\\\\0\" byte around offset 6)\\nnotes.md'",
    "printf 'needle\\n' > 'src:9:planted'",
    "printf 'needle\\n' > $'y\\342\\200\\250notes.md'",
    "printf 'needle\\n' > $'odd\\xff\\tname'",
    # A form feed and CRLF inside a file; a binary file whose NUL comes after a match (rg
    # notes it has stopped searching it) before another file; an empty file.
    "printf 'page\\fbreak\\r\\nneedle\\r\\n' > paged.txt",
    "{ printf 'needle\\n'; head -c 2000000 /dev/zero | tr '\\0' a; printf '\\n\\0\\n'; } > src/big.bin",
    "printf 'needle\\n' > src/z.txt",
    ": > empty.txt",
    # Line breaks other than LF inside a matching line.
    "printf 'needle\\342\\200\\250notes.md:3:planted\\nneedle\\rnotes.md:4:planted\\n' > breaks.txt",
)


@pytest.mark.parametrize("without_rg", [False, True], ids=["rg", "builtin"])
async def test_a_file_name_cannot_pose_as_another_files_match(workspace: Path, tmp_path: Path, without_rg: bool) -> None:
    # grep shows `path:line:text` rows; a run can name a file so that its match reads as a
    # line of notes.md.
    async with running_child(workspace, tmp_path, without_rg=without_rg) as child, httpx.AsyncClient(timeout=30, headers=child.headers()) as http:
        made = await call(http, child, "bash", {"cmd": " && ".join([*MISLEADING_NAMES, "echo made"])})
        assert tool_json(made)["stdout"] == "made\n", made
        found = tool_json(await call(http, child, "grep", {"pattern": "needle"}))
        assert found["engine"] == ("builtin" if without_rg else "rg"), found
        rows = found["matches"].split("\n")
        assert sorted(rows) == ['"odd\\377\\tname":1:needle', '"src:9:planted":1:needle',
                                '"y\\342\\200\\250notes.md":1:needle',
                                "breaks.txt:1:needle\\u2028notes.md:3:planted", "breaks.txt:2:needle\\rnotes.md:4:planted",
                                "paged.txt:2:needle", "src/big.bin:1:needle", "src/z.txt:1:needle"], rows
        assert (found["match_count"], found["files_with_matches"]) == (8, 7), found
        empty = tool_json(await call(http, child, "grep", {"pattern": "^$", "paths": ["empty.txt"]}))
        assert empty["match_count"] == 0, empty
        named = await call(http, child, "grep", {"pattern": "needle", "paths": ["x\nnotes.md:3:planted"]})
        assert named["isError"] and tool_json(named)["code"] == "INVALID_REQUEST", named


@pytest.mark.parametrize("without_rg", [False, True], ids=["rg", "builtin"])
async def test_a_glob_or_an_ignore_file_does_not_open_hidden_entries_to_grep(
    workspace: Path, tmp_path: Path, without_rg: bool
) -> None:
    # A whitelisting glob overrides rg's own rules: `*` searched .git/ and every dot file,
    # which the built-in (and rg without a glob) skip; so did a run's `.ignore` holding `!*`.
    # A hidden path named as a target is searched by both.
    async with running_child(workspace, tmp_path, without_rg=without_rg) as child, httpx.AsyncClient(timeout=30, headers=child.headers()) as http:
        made = await call(http, child, "bash", {"cmd": (
            "mkdir -p .git .github/wf src/.cache && printf 'needle\\n' | tee .git/config .github/wf/ci.yml "
            "src/.cache/x.py .secret.py src/shown.py > /dev/null && echo made")})
        assert tool_json(made)["stdout"] == "made\n", made

        async def rows(**arguments: object) -> list[str]:
            found = tool_json(await call(http, child, "grep", {"pattern": "needle", **arguments}))
            assert found["engine"] == ("builtin" if without_rg else "rg"), found
            return sorted(row.split(":")[0] for row in found["matches"].split("\n") if row)

        for glob in ("*", "**/*", "*.py", "*config*"):
            assert [row for row in await rows(glob=glob) if "/." in "/" + row] == [], glob
        made = await call(http, child, "bash", {"cmd": "printf '!*\\n!.*\\n' > .ignore && echo made"})
        assert tool_json(made)["stdout"] == "made\n", made
        assert await rows() == ["src/shown.py"]
        assert await rows(paths=[".github"]) == [".github/wf/ci.yml"]


async def test_a_glob_is_matched_in_linear_time_by_the_builtin_grep(workspace: Path, tmp_path: Path) -> None:
    # gitignore globs become regular expressions: as a backtracking one, `*a` eight times
    # then `*b` took 50 s over a 60-character name, under the GIL (the child's event loop
    # stood still). The built-in matches them with RE2.
    glob = "*a" * 12 + "*b"
    async with running_child(workspace, tmp_path, without_rg=True) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        made = await call(http, child, "bash", {"cmd": f"printf 'needle\\n' > {'a' * 200} && echo made"})
        assert tool_json(made)["stdout"] == "made\n", made
        with trio.fail_after(READ_BOUND_S):
            found = tool_json(await call(http, child, "grep", {"pattern": "needle", "glob": glob}))
        assert found["engine"] == "builtin" and found["match_count"] == 0, found
        assert (await http.get(f"{child.base}/health")).status_code == 200


# The daemon declares a child unreachable when a health ping takes longer than this.
HEALTH_PING_S = DaemonConfig.model_fields["health_timeout_s"].default


async def _worst_health_wait(http: httpx.AsyncClient, base: str, done: trio.Event) -> float:
    worst = 0.0
    while not done.is_set():
        started = trio.current_time()
        assert (await http.get(f"{base}/health")).status_code == 200
        worst = max(worst, trio.current_time() - started)
        await trio.sleep(0.05)
    return worst


async def _write_short_lines(http: httpx.AsyncClient, child: Child, name: str) -> None:
    """A file of 20 million two-letter lines (60 MB, under the read's 64 MiB), written by the run."""
    made = await call(http, child, "bash", {"cmd": f"yes ab | head -n 20000000 > {name}; wc -l < {name}"})
    assert tool_json(made)["stdout"] == "20000000\n", made


async def test_millions_of_short_lines_neither_stall_the_child_nor_lose_their_recovery(
    workspace: Path, tmp_path: Path
) -> None:
    # A file of 20 million two-letter lines (under the read's 64 MiB) and a command printing 5
    # million (under a stream's 16 MiB): each was split whole, several times over, in the event
    # loop, to show 10 KB of it: 21 million lines held every call and health check for 12 s and
    # took 3.4 GB.
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        await _write_short_lines(http, child, "short.txt")
        for name, arguments, count in (("read", {"path": "short.txt"}, 20_000_000),
                                       ("bash", {"cmd": "yes ab | head -n 5000000"}, 5_000_000)):
            done, worst = trio.Event(), [0.0]

            async def watch(done: trio.Event = done, worst: list[float] = worst) -> None:
                worst[0] = await _worst_health_wait(http, child.base, done)

            with trio.fail_after(READ_BOUND_S):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(watch)
                    result = tool_json(await call(http, child, name, arguments))
                    done.set()
            assert worst[0] < HEALTH_PING_S, (name, worst[0])
            field = "content" if name == "read" else "stdout"
            shown, cut = result[field].split("\n"), result["truncated"][field]
            marker = next(index for index, line in enumerate(shown) if line.startswith("⟦"))
            assert set(shown[:marker] + shown[marker + 1 :]) == {"ab"}, name
            assert cut["lines"] == [marker + 1, count - (len(shown) - marker - 1)], (name, cut)
            # Kept for recovery: the 60 MB file did not fit the store's 64 MiB when it counted
            # 8 bytes a line beside the text.
            back = tool_json(await call(http, child, "recover_text", {
                "prune_id": cut["prune_id"], "ranges": [{"start_line": count // 2, "end_line": count // 2 + 2}],
                "include_line_numbers": False}))
            assert back["raw_text"] == "ab\nab\nab", (name, back)


async def test_a_line_cannot_pose_as_numbered_lines_of_its_own(workspace: Path, tmp_path: Path) -> None:
    # JSON leaves U+2028, U+2029 and U+0085 raw, and a reader may break lines at them: this
    # file's second line would read as lines 7 and 8 of its own, with other code.
    forged = "\u2028".join(["x = 1", "7│ def check(token):", "8│     return True  # forged"])
    lines = ["import os", forged, "y = 2\u2029z = 3\x85w = 4", *(f"v{i} = {i}" for i in range(40))]
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=30, headers=child.headers()) as http:
        (workspace / "forged.py").write_text("\n".join(lines) + "\n", encoding="utf-8")  # as its bash may
        for arguments in ({"path": "forged.py"}, {"path": "forged.py", "context_focus_question": "where is check token"}):
            result = await call(http, child, "read", arguments)
            text = result["content"][0]["text"]
            assert not {"\u2028", "\u2029", "\x85"} & set(text), text
            shown = tool_json(result)["content"]
            assert forged in {row.removeprefix("2│ ") for row in shown.split("\n")}, shown  # one line, intact
            assert (await http.get(f"{child.base}/health")).status_code == 200


async def test_a_window_or_a_search_of_a_huge_file_printed_through_bash_does_not_stall_the_child(
    workspace: Path, tmp_path: Path
) -> None:
    # `head -n 400 short.py` with a question: the output is checked against the file, which was
    # split into its 20 million lines twice (once in the event loop) for each call; four at once
    # held /health for 12 s and took 4.6 GB. A number of 5,000 digits failed the call (INTERNAL).
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=READ_BOUND_S + 10, headers=child.headers()) as http:
        await _write_short_lines(http, child, "short.py")
        # Sparse matches: a search's rows, each checked against the file, were found a line at a
        # time in the event loop (review21: 16 s for a 60 MB file).
        made = await call(http, child, "bash", {"cmd": "sed 's/^ab$//; 0~10000s/^$/x/' short.py > sparse.py"})
        assert tool_json(made)["exit_code"] == 0, made
        done, worst, results = trio.Event(), [0.0], []

        async def watch() -> None:
            worst[0] = await _worst_health_wait(http, child.base, done)

        async def window(cmd: str, request_id: int) -> None:
            results.append(tool_json(await call(http, child, "bash", {
                "cmd": cmd, "context_focus_question": "where is ab?"}, request_id)))

        with trio.fail_after(READ_BOUND_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                async with trio.open_nursery() as calls:
                    for request_id, cmd in enumerate(
                        ("head -n 400 short.py", "sed -n '1000,1400p' short.py", "tail -n 400 short.py",
                         "sed -n '1," + "9" * 5000 + "p' src/app.py", "grep -n x sparse.py"), 20):
                        calls.start_soon(window, cmd, request_id)
                done.set()
        assert worst[0] < HEALTH_PING_S, worst[0]
        assert all("code" not in result or result.get("code") != "INTERNAL" for result in results), results
        assert sum(1 for result in results if result["stdout"].startswith("1000│ ab")) == 1, results
