"""`go test` for make_test_runs.py: how it is run, counts failures, and where its first failure's
report is (the gold).

Modules come from the module cache only (GOPROXY=off): a repository whose tests need modules it
does not vendor is left out (the machine reaches no module proxy). Quiet runs print each failed
test's `--- FAIL: TestX (0.00s)` line and then its messages (`    x_test.go:12: got 81, want 90`);
verbose ones (`-v`) print the messages as the test runs, after its `=== RUN   TestX` line and
before its `--- FAIL:` line. The gold is the first message of a failed test, with the `--- FAIL:`
lines right above it (quiet) or its `=== RUN` line (verbose), through the lines indented under it.
"""

from __future__ import annotations

import re
from pathlib import Path

_MESSAGE = re.compile(r"^(\s+)\S+_test\.go:\d+: ")
_FAILED = re.compile(r"^\s*--- FAIL: ")


def prepare(work: Path, repo: str) -> None:
    """A package from before Go modules (no go.mod) gets one naming it as its imports do."""
    if not (work / "go.mod").exists():
        (work / "go.mod").write_text(f"module github.com/{repo}\n\ngo 1.13\n")


def command(work: Path, verbose: bool) -> list[str]:
    return ["go", "test", "-count=1", *(["-v"] if verbose else []), "./..."]


def environment(work: Path) -> dict[str, str]:
    return {"PATH": "/usr/local/go/bin:/usr/bin:/bin", "HOME": str(work), "GOPROXY": "off", "GOFLAGS": "-mod=mod",
            "GOPATH": str(work / ".gopath"), "GOCACHE": str(work / ".gocache"), "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0"}


def failures(out: str) -> int:
    """Failed tests, subtests included."""
    return sum(1 for line in out.split("\n") if _FAILED.match(line))


def gold(lines: list[str]) -> tuple[int, int]:
    """0-based first and last line of the first failed test's first message; StopIteration if none."""
    for i, line in enumerate(lines):
        found = _MESSAGE.match(line)
        if not found:
            continue
        # Whose is it: the next `--- ` line at or above its indent says (verbose), or the line above does.
        after = next((x for x in lines[i + 1:] if x.lstrip().startswith("--- ")), "")
        above = lines[i - 1] if i else ""
        if not (_FAILED.match(above) or _FAILED.match(after)):
            continue
        a = i
        while a > 0 and i - a < 3 and (_FAILED.match(lines[a - 1]) or lines[a - 1].startswith("=== RUN")):
            a -= 1
        depth = len(found.group(1))
        b = i
        while b + 1 < len(lines) and lines[b + 1].strip() and len(lines[b + 1]) - len(lines[b + 1].lstrip()) > depth:
            b += 1
        return a, b
    raise StopIteration


def modules(work: Path) -> list[Path]:
    """The package's largest Go sources (tests, examples and vendored code left out)."""
    found = [p for p in work.rglob("*.go") if not p.name.endswith("_test.go")
             and not re.search(r"(^|/)(vendor|testdata|examples?|_\w+)(/|$)", str(p.relative_to(work)))]
    return sorted(found, key=lambda p: -p.stat().st_size)[:6]
