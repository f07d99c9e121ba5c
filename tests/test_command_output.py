"""Command output with a structure of its own, pruned for a question. git's log, show and diff
output: a commit with its changes, a file's diff or a hunk whole, markers naming the commits and
files they hide (texts made by real git). Search output (grep -rn, rg -n, the grep tool, and
`path:text` of rg or grep -r without -n): a file's matches together, markers naming the files
they hide."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import httpx
import pytest

from jeeves_mcp.pruning.engine import select_lines
from jeeves_mcp.pruning.engine._git import git_layout, is_git_output
from jeeves_mcp.pruning.engine._matches import is_search_output, line_paths
from jeeves_mcp.pruning.pruner import pruned_blocks
from jeeves_mcp.pruning.render import marker_line
from tests._child import Child, tool_json
from tests.test_http import call

SUBJECTS = [
    "Add retry backoff to the uploader",
    "Parse timezone offsets in timestamps",
    "Cache compiled templates per locale",
    "Reject empty passwords at signup",
    "Stream large exports to disk",
    "Count dropped packets in the metrics",
]


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo),
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def history(repo: Path) -> None:
    """Six commits, each changing a module of its own by 30 lines."""
    git(repo, "init", "-q")
    for n, subject in enumerate(SUBJECTS):
        body = "".join(f"def step_{n}_{k}(value):\n    return value + {k}\n\n" for k in range(10))
        (repo / f"module_{n}.py").write_text(body)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", subject)


def kept_text(lines: list[str], keep: list[bool]) -> str:
    return "\n".join(line for line, k in zip(lines, keep, strict=True) if k)


def test_a_commit_asked_about_is_kept_with_its_changes(tmp_path: Path) -> None:
    history(tmp_path)
    lines = git(tmp_path, "log", "-p").split("\n")
    selection = select_lines(lines, "where did we start to parse timezone offsets?", "logs")
    kept = kept_text(lines, selection.keep)
    assert "Parse timezone offsets in timestamps" in kept
    # Its diff whole, though no line of it names a timezone...
    assert "+def step_1_0(value):" in kept and "+def step_1_9(value):" in kept
    # ... and not the other commits' diffs.
    assert not any(f"+def step_{n}_" in kept for n in (0, 2, 3, 4, 5))
    reasons = {reason for reason in selection.reasons if reason}
    # Markers name the commits they hide, by their subjects and shas.
    assert any(reason.startswith("hors focus: ") and any(f"{subject[:20]}" in reason for subject in SUBJECTS[2:])
               for reason in reasons), reasons


def test_a_diff_keeps_the_file_asked_about_and_names_the_others(tmp_path: Path) -> None:
    history(tmp_path)
    first = git(tmp_path, "rev-list", "--max-parents=0", "HEAD").strip()
    lines = git(tmp_path, "diff", first, "HEAD").split("\n")
    selection = select_lines(lines, "what changed in module_4?", "logs")
    kept = kept_text(lines, selection.keep)
    assert "diff --git a/module_4.py b/module_4.py" in kept and "+def step_4_9(value):" in kept
    assert "+def step_2_0(value):" not in kept
    reasons = {reason for reason in selection.reasons if reason}
    assert reasons and all("module_" in reason and "module_4" not in reason for reason in reasons), reasons


def test_a_long_file_diff_is_cut_into_hunks_kept_with_their_file_header(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    names = [f"handler_{k}" for k in range(40)]
    source = "".join(f"def {name}(request):\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n    return a\n\n\n"
                     for name in names)
    (tmp_path / "handlers.py").write_text(source)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "handlers")
    (tmp_path / "handlers.py").write_text(source.replace("    return a\n", "    return b\n"))
    lines = git(tmp_path, "diff").split("\n")
    selection = select_lines(lines, "why does handler_31 return b now?", "logs")
    kept = kept_text(lines, selection.keep)
    assert "diff --git a/handlers.py b/handlers.py" in kept and "+++ b/handlers.py" in kept
    hunk = next(k for k, line in enumerate(lines) if line.startswith("@@") and "handler_30" in line)
    assert all(selection.keep[hunk : hunk + 7])
    assert not all(selection.keep)


def test_search_output_keeps_the_matches_of_the_file_asked_about() -> None:
    lines = []
    for module in ("billing", "shipping", "inventory", "accounts", "reports", "payroll"):
        lines += [f"src/{module}/service.py:{12 * k}:    timeout = settings.get('timeout', {k})" for k in range(1, 13)]
    lines += ["src/gateway/retry.py:40:    timeout = backoff_timeout(attempt)"]
    lines += [f"tests/test_{k}.py:{k}:    client.timeout = {k}" for k in range(60)]
    selection = select_lines(lines, "how does the gateway retry compute its backoff timeout?", "logs")
    assert selection.keep[lines.index("src/gateway/retry.py:40:    timeout = backoff_timeout(attempt)")]
    assert not all(selection.keep)
    reasons = {reason for reason in selection.reasons if reason}
    assert reasons and all(reason.startswith("hors focus: ") and "/" in reason for reason in reasons), reasons


def test_no_marker_in_search_output_costs_more_than_the_rows_it_hides() -> None:
    """A one-row gap between kept rows of a search hid `def echo(` (39 bytes) under a 99-byte
    marker (the agent-view review of 2026-11-29): such gaps are shown, as in code. Searches of
    generated files, ranked within them; before, 22 of 300 had such a marker."""
    words = "echo bytes empty message stream write flush file color style output".split()
    for seed in range(300):
        rnd = random.Random(seed)
        files: dict[str, str] = {}
        rows: list[str] = []
        for f in range(rnd.randint(2, 6)):
            name = f"src/m{f}.py"
            lines = []
            for k in range(rnd.randint(20, 120)):
                lines.append("    " + " ".join(rnd.choice(words) + "(" * (rnd.random() < 0.2)
                                               for _ in range(rnd.randint(1, 8))))
                if rnd.random() < 0.1:
                    lines.append(f"def {rnd.choice(words)}_{k}(x):")
            files[name] = "\n".join(lines) + "\n"
            rows += [f"{name}:{n + 1}:{line}" for n, line in enumerate(lines) if "echo" in line]
        if len(rows) < 10:
            continue
        budget = rnd.choice([1500, 3000, 6000])
        selection = select_lines(rows, "handle empty bytes in echo", "logs", max_bytes=budget, files=files.get)
        for start, end in pruned_blocks(selection.keep):
            hidden = sum(len(f"{n + 1}│ {rows[n]}\n".encode()) for n in range(start, end + 1))
            marker = marker_line("prn_01234567", start + 1, end + 1, selection.reasons[start] or "")
            assert hidden >= len(marker.encode()) + 1, (seed, start, end, hidden)


# Logs whose lines look like `path:12:` or a diff's `-` lines, each with one error line among
# routine ones (review16: the search or git layout lost it).
LOG_SHAPES = {
    "journal": "Nov 29 01:{m:02d}:{s:02d} web01 gunicorn[812]: POST /api/orders 201 40ms",
    "klog": "I1129 01:{m:02d}:{s:02d}.100 1 controller.go:{n}] synced pod api-{n}",
    "bracket": "[01:{m:02d}:{s:02d}] worker {n} idle",
    "clock": "12:{m:02d}:{s:02d} INFO request {n} served",
    "date": "2024-01-{d:02d} request {n} served",
    "cmake": "-- Detecting C compile features {n}",
    "gcc": "src/crc32.c:{n}:20: warning: conversion may change value [-Wconversion]",
    "mypy": "src/boltons/urlutils.py:{n}: note: see the annotation of value {n}",
    "shellcheck": "deploy.sh:{n}:5: note: Double quote to prevent globbing [SC2086]",
    # `path:text` with no line number, as `rg X` prints to a pipe
    "pylog": "INFO:app.db:request {n} served",
    "logger": "app.db:request {n} served",
    "loggers": "worker.{w}:job {n} done",
    "pytest": "tests/test_api.py::test_case_{n} PASSED",
    # ... and reports of several files, each file's lines together (review18: these lost
    # their error to the search layout)
    "gcc-files": "src/m{g}.c:{n}:5: warning: unused variable 'v{n}' [-Wunused-variable]",
    "ruff-concise": "src/m{g}.py:{n}:1: F401 `os` imported but unused",
    "mypy-files": "src/m{g}.py:{n}: note: see the annotation of value {n}",
    "go-build": "./pkg{g}/store.go:{n}:2: undefined: cacheEntry{n}",
    "severity": "src/m{g}.go: warning: exported function F{n} should have a comment",
    "checksums": "dist/pkg-{g}.tar.gz: OK",
    "logger-groups": "myshop.{logger}:INFO:step {n} ok",
}
ERROR_LINE = "ERROR: payment for order 4411 failed: card declined"


@pytest.mark.parametrize("shape", sorted(LOG_SHAPES))
@pytest.mark.parametrize("prefix", ["", "git"])
def test_a_log_keeps_its_error_whatever_its_lines_look_like(shape: str, prefix: str, tmp_path: Path) -> None:
    loggers = ("config", "db", "cache", "api", "tasks", "views")
    lines = [LOG_SHAPES[shape].format(m=n // 60 % 60, s=n % 60, d=n % 28 + 1, n=n, w="ab"[n % 2], g=n // 50,
                                      logger=loggers[n // 50]) for n in range(300)]
    lines.insert(170, ERROR_LINE)
    if prefix:  # `git log -1 && make`: a build log with a commit on top
        history(tmp_path)
        lines = git(tmp_path, "log", "-1").split("\n") + lines
    assert not is_search_output(lines) and not is_git_output(lines)
    selection = select_lines(lines, "what went wrong overnight?", "logs")
    assert selection.keep[lines.index(ERROR_LINE)] and not all(selection.keep)


def test_search_output_without_line_numbers_keeps_the_file_asked_about() -> None:
    """`rg X` and `grep -r X` print `path:text` to a pipe, and `path-text` for context lines."""
    lines = []
    for module in ("billing", "shipping", "inventory", "accounts", "reports", "payroll"):
        for k in range(1, 13):
            lines += [f"src/{module}/service.py-    # step {k}", f"src/{module}/service.py:    timeout = get('t', {k})", "--"]
    lines += ["src/gateway/retry.py-def retry(attempt):", "src/gateway/retry.py:    timeout = backoff_timeout(attempt)"]
    lines += ["CHANGES:- retry timeouts", "CHANGES:- more timeouts"]
    lines += [f"tests/test_{k}.py:    client.timeout = {k}" for k in range(60)]
    assert is_search_output(lines)
    selection = select_lines(lines, "how does the gateway retry compute its backoff timeout?", "logs")
    assert selection.keep[lines.index("src/gateway/retry.py:    timeout = backoff_timeout(attempt)")]
    assert not all(selection.keep)
    reasons = {reason for reason in selection.reasons if reason}
    assert reasons and all(reason.startswith("hors focus: ") and "/" in reason for reason in reasons), reasons
    # A context line whose text reads as a path of its own is its match's neighbour.
    assert is_search_output(["a/x.py-b.py:1", "a/x.py:timeout", "a/y.py:timeout", "a/y.py:timeouts"])


def test_the_file_of_each_line_of_search_output_without_line_numbers() -> None:
    """Context lines whose text reads as `name:` (YAML) or starts with `:` (rst roles), file
    names holding `-`, and the search tool's own messages among the matches (review18)."""
    lines = ["./ci.yml-name: CI", "./ci.yml-on: push", "./ci.yml:  timeout: 5", "--",
             "./x.rst-:exc:`E` is raised", "./x.rst::class:`Foo` holds a timeout", "./x.rst-  more text",
             "grep: ./x.pyc: binary file matches",
             "./a-b.py-x = 1", "./a-b.py:timeout = 2", "grep: ./b.pyc: binary file matches",
             "./c.py:timeout = 3", "./c.py:timeout = 4"]
    assert line_paths(lines) == ["./ci.yml"] * 3 + [None] + ["./x.rst"] * 3 + [None] + ["./a-b.py"] * 2 + [None] + [
        "./c.py"] * 2
    # Any character but a blank or a colon (Next.js routes).
    routes = ["app/[slug]/page.tsx:export default Page", "app/[slug]/page.tsx:const slug = 1",
              "app/(auth)/$id.tsx:const id = 2"]
    assert line_paths(routes) == ["app/[slug]/page.tsx"] * 2 + ["app/(auth)/$id.tsx"]


def test_search_output_ranks_the_lines_of_a_file_one_by_one() -> None:
    """The asked-about match, the 25th of its file's 30, comes first in the view's order (a
    smaller result keeps it before any other line), not with the ten lines around it."""
    lines = [f"src/shop/orders.py:{10 * k}:    order.total = compute(order, item_{k})" for k in range(30)]
    lines[24] = "src/shop/orders.py:240:    order.total = apply_discount_coupon(order, coupon_code)"
    lines += [f"src/shop/m{k}.py:{k}:    order.total = compute(order)" for k in range(200)]
    selection = select_lines(lines, "where is the discount coupon applied to the order total?", "logs", max_bytes=2048)
    assert selection.keep[24]
    assert selection.order is not None and selection.order[0] == 24, selection.order[:12]


def test_a_command_run_after_a_search_keeps_its_traceback() -> None:
    lines = [f"src/app/module_{n}.py:{n + 3}:    discriminator = schema.get('kind')" for n in range(60)]
    lines += ["Traceback (most recent call last):", '  File "run.py", line 3, in <module>',
              "    main()", "ValueError: no discriminator for 'circle'"]
    assert is_search_output(lines)
    selection = select_lines(lines, "why does run.py fail?", "logs")
    assert all(selection.keep[-4:]) and not all(selection.keep)


def test_merges_renames_and_long_names(tmp_path: Path) -> None:
    """`diff --cc` is a file's diff; a rename is named by its new path; a hunk by its function
    first, so that a marker's 40 characters hold it."""
    lines = ["commit " + "d398e70e66" * 4, "Merge: 7580526 1b8dbfa", "Author: a <a@b>", "Date:   now", "",
             "    Add pydantic-core", "",
             "diff --cc pydantic/_internal/_generate_schema.py", "mode 000000,100644..100644", "index 1,2..3",
             "@@@ -1,3 -1,3 +1,3 @@@ def f():",
             *(f"  -    x = {k}" for k in range(5)),
             "diff --git a/old_name.py b/new_name.py", "similarity index 90%", "rename from old_name.py",
             "rename to new_name.py", "--- a/old_name.py", "+++ b/new_name.py", "@@ -1 +1 @@", "-a", "+b"]
    assert is_git_output(lines)
    layout = git_layout(lines)
    names = [unit.name for unit in layout.units]
    assert "pydantic/_internal/_generate_schema.py" in names and "new_name.py" in names
    long_file = ["diff --git a/pydantic/_internal/_generate_schema.py b/pydantic/_internal/_generate_schema.py",
                 "--- a/pydantic/_internal/_generate_schema.py", "+++ b/pydantic/_internal/_generate_schema.py"]
    for k in range(8):
        long_file += [f"@@ -{k * 20},9 +{k * 20},9 @@ def _generate_schema_for_type_{k}(self, obj):",
                      *(f" line {j}" for j in range(4)), f"-    old = {k}", f"+    new = {k}", *(f" line {j}" for j in range(3))]
    labels = [unit.label for unit in git_layout(long_file).units]
    assert any(label.startswith("def _generate_schema_for") and "(_gen" in label for label in labels), labels


async def test_git_log_through_bash_keeps_the_commit_asked_about(child: Child, workspace: Path) -> None:
    history(workspace)
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "bash", {
            "cmd": "git log -p", "context_focus_question": "which commit made signup reject empty passwords?",
        }))
    assert result["pruning"]["applied"], result["pruning"]
    stdout = result["stdout"]
    assert "Reject empty passwords at signup" in stdout and "+def step_3_9(value):" in stdout
    assert "+def step_0_0(value):" not in stdout


def timeout_modules(workspace: Path) -> None:
    """Six modules that read a timeout twelve times each, and the gateway that computes one."""
    for module in ("billing", "shipping", "inventory", "accounts", "reports", "payroll"):
        (workspace / f"{module}.py").write_text(
            "".join(f"def step_{k}(settings):\n    return settings.get('timeout', {k})\n\n" for k in range(12)))
    (workspace / "gateway.py").write_text("def retry(attempt):\n    timeout = backoff_timeout(attempt)\n")


@pytest.mark.parametrize("cmd", ["grep -r timeout .", "grep -r -C1 timeout ."])
async def test_grep_without_line_numbers_through_bash_keeps_the_file_asked_about(
    cmd: str, child: Child, workspace: Path,
) -> None:
    timeout_modules(workspace)
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "bash", {
            "cmd": cmd, "context_focus_question": "how does the gateway retry compute its backoff?",
        }))
    assert result["pruning"]["applied"], result["pruning"]
    stdout = result["stdout"]
    assert "./gateway.py:    timeout = backoff_timeout(attempt)" in stdout
    markers = [line for line in stdout.split("\n") if line.startswith("⟦")]
    assert markers and all(".py" in line.split("raison=", 1)[1] for line in markers), markers


async def test_the_grep_tool_keeps_the_matches_of_the_file_asked_about(child: Child, workspace: Path) -> None:
    timeout_modules(workspace)
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:
        result = tool_json(await call(http, child, "grep", {
            "pattern": "timeout", "context_focus_question": "how does the gateway retry compute its backoff?",
        }))
    assert result["pruning"]["applied"], result["pruning"]
    matches = result["matches"]
    assert "gateway.py:2:    timeout = backoff_timeout(attempt)" in matches
    markers = [line for line in matches.split("\n") if line.startswith("⟦")]
    assert markers and all(".py" in line.split("raison=", 1)[1] for line in markers), markers
