"""JavaScript test runners for make_test_runs.py: how each is run, counts failures, and where its
first failure's report is (the gold).

A repository's own invocation is read from its package.json scripts (the first `&&`-part that
calls the runner; coverage wrappers, reporters and watch flags dropped), so its setup files and
test folders are the ones its maintainers run; the output is the runner's plain one (`NO_COLOR`,
no terminal), quiet or verbose in turn as make_test_runs.py alternates:

- jest: plain or `--verbose` (a line per test); gold the first `●` block's title through its
  first `at` line (the test's line under the code frame);
- mocha: `--reporter dot` or `spec`; gold the first numbered failure (`1) suite`) through its
  first `at` line;
- vitest: `run`, plain or `--reporter=verbose`; gold the first ` FAIL ` title of the failed-tests
  report through its first `❯ file:line` line;
- node (`node --test`): the TAP reporter or `spec`; gold the first `not ok` test holding an error
  (children report before their suites) through its `error:` (the message's first line, a diff
  after it can run to thousands of lines); under spec, which prints a failure where it happens
  and again in its closing `failing tests` list, the first `✖` test holding an error through its
  first `at` line.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

RUNNERS = ("jest", "mocha", "vitest", "node")
# Flags of a package's own script that change the output's shape or never end.
_DROPPED = {"--coverage", "--verbose", "--watch", "--watchAll", "--silent", "--color", "--colors", "-w",
            "--enable-source-maps", "--forbid-only"}
_DROPPED_WITH_VALUE = {"--reporter", "-R", "--test-reporter", "--reporter-option", "--coverageReporters"}
_COUNTS = {
    "jest": re.compile(r"^Tests:\s+(\d+) failed", re.M),
    "mocha": re.compile(r"^\s*(\d+) failing$", re.M),
    "vitest": re.compile(r"^\s*Tests\s+(\d+) failed", re.M),
    "node": re.compile(r"^(?:# fail|ℹ fail) (\d+)$", re.M),
}


def _script_part(scripts: dict[str, str], runner: str) -> list[str] | None:
    """The first `&&`-part of the package's scripts (`test` first) that calls `runner`."""
    calls = re.compile(r"(?:^|\s)node\s+(?:[^&|;]*\s)?--test\b" if runner == "node" else rf"(?:^|[\s/]){runner}\b")
    for name in sorted(scripts, key=lambda n: (n != "test", not n.startswith("test"), n)):
        for part in re.split(r"&&|\|\||;", scripts[name]):
            if calls.search(part):
                return shlex.split(part)
    return None


def _scripts(work: Path) -> dict[str, str]:
    try:
        return json.loads((work / "package.json").read_text()).get("scripts") or {}
    except (OSError, ValueError):
        return {}


def has_script(work: Path, name: str) -> bool:
    return name in _scripts(work)


def command(work: Path, runner: str, verbose: bool) -> list[str] | None:
    """The argv that runs `runner` as the package at `work` runs it, or None if it does not."""
    words = _script_part(_scripts(work), runner)
    if words is None:
        return None
    start = next((i for i, w in enumerate(words) if w == runner or w.endswith("/" + runner)), None)
    if start is None:  # the runner called by a path of its own (`node .../vitest/dist/cli.js`)
        return None
    args: list[str] = []
    skip = False
    for word in words[start + 1:]:
        if skip:
            skip = False
        elif word.split("=", 1)[0] in _DROPPED_WITH_VALUE:
            skip = "=" not in word
        elif word not in _DROPPED and not word.startswith("--coverage"):
            args.append(word)
    if runner == "node":  # Node 20 reads no glob of its own: a shell gave it the files
        files = [str(m.relative_to(work)) for a in args for m in (sorted(work.glob(a)) if "*" in a else [])]
        args = [a for a in args if "*" not in a] + files
        return ["node", "--test-reporter=spec" if verbose else "--test-reporter=tap", *args]
    binary = str(work / "node_modules" / ".bin" / runner)
    if runner == "jest":
        return [binary, *args, "--ci", *(["--verbose"] if verbose else [])]
    if runner == "mocha":
        return [binary, *args, "--reporter", "spec" if verbose else "dot"]
    if args[:1] != ["run"]:
        args = ["run", *[a for a in args if a != "run"]]
    return [binary, *args, *(["--reporter=verbose"] if verbose else [])]


def failures(out: str, runner: str) -> int:
    found = _COUNTS[runner].findall(out)
    return int(found[-1]) if found else 0


def _starts(lines: list[str], runner: str) -> list[int]:
    """Where each failure's report starts, in order."""
    def matching(pattern: str, start: int = 0) -> list[int]:
        return [i for i in range(start, len(lines)) if re.match(pattern, lines[i])]

    def first(pattern: str) -> int:
        return next(iter(matching(pattern)), len(lines))

    if runner == "jest":
        return matching(r"^\s+● (?!Console)")
    if runner == "mocha":
        return matching(r"^\s+\d+\) ", first(r"^\s*\d+ failing$"))
    if runner == "vitest":
        return matching(r"^\s*FAIL ", first(r".*Failed Tests \d+"))
    if any(x.startswith("TAP version") for x in lines[:5]):
        return [i for i in matching(r"^\s*not ok \d+") if "subtestsFailed" not in "".join(lines[i:i + 8])]
    return [i for i in matching(r"^\s*✖ (?!failing tests:)") if i + 1 < len(lines)
            and re.match(r"^\s+\S", lines[i + 1]) and not lines[i + 1].lstrip().startswith(("✖", "✔", "▶"))]


def _end(lines: list[str], runner: str, a: int) -> int:
    def after(pattern: str) -> int:
        return next(i for i in range(a + 1, len(lines)) if re.match(pattern, lines[i]))

    if runner == "vitest":
        return after(r"^\s*❯ \S+:\d+")
    if runner == "node" and re.match(r"^\s*not ok \d+", lines[a]):
        error = after(r"^\s+error: ")
        return error + 1 if lines[error].rstrip().endswith(("|-", "|", ">-")) else error
    return after(r"^\s+at ")


def _identity(lines: list[str], a: int) -> str:
    """A failure's title and first lines, numbers aside (mocha and TAP number their failures)."""
    return re.sub(r"\d+", "0", "\n".join(x.strip() for x in lines[a:a + 4]))


def failing(lines: list[str], runner: str) -> set[str]:
    """The failures a run reports, each as _identity gives it."""
    return {_identity(lines, a) for a in _starts(lines, runner)}


def gold(lines: list[str], runner: str, known: set[str] = frozenset()) -> tuple[int, int]:
    """0-based first and last line of the first failure's report that is not among `known` (a run
    of the unchanged suite's own failures); StopIteration if none."""
    a = next(a for a in _starts(lines, runner) if _identity(lines, a) not in known)
    return a, _end(lines, runner, a)


def modules(work: Path) -> list[Path]:
    """The package's largest source files (tests, builds, typings and vendored code left out)."""
    roots = [work / d for d in ("src", "lib", "source", "packages") if (work / d).is_dir()] or [work]
    found = [
        p for root in roots for p in root.rglob("*")
        if p.suffix in (".js", ".mjs", ".cjs", ".ts") and not p.name.endswith(".d.ts") and p.is_file()
        and not re.search(r"(^|/)(node_modules|tests?|__tests__|spec|dist|build|vendor|fixtures?)(/|$)|\.(test|spec)\.",
                          str(p.relative_to(work)))
    ]
    return sorted(found, key=lambda p: -p.stat().st_size)[:6]
