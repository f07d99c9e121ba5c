"""Make logs cases from real test suites broken by one injected change: large outputs, many failures.

    python bench/data/make_test_runs.py --mirror MIRRORS --out FILE [--repo OWNER/NAME ...]
                                        [--per-repo 2] [--tries 40] [--seconds 600] [--python PYTHON]
                                        [--runner pytest|unittest|jest|mocha|vitest|node|go]

bench/data/logs.jsonl's scenarios are small projects written for one failure each (at most 34 KB);
an agent's test run is often a whole suite that a regression breaks in many places, hundreds of
kilobytes where the response budget binds. For each repository (a bare clone with history under
MIRRORS/OWNER+NAME/repo, as the search tool's `fetch` leaves it) this checks out HEAD, runs its
tests with PYTHON (pytest, which must be able to import the package and its test dependencies)
and, if they pass, changes one line of one of its largest modules (a comparison turned around, a
`return True` made `False`, an off-by-one: candidates drawn with a fixed seed) until --per-repo
runs fail with at least MIN_FAILURES failing tests and MIN_BYTES of output, or --seconds pass (a
suite that takes minutes gets few tries). Each case is written as it is made. The case:

- text: the run's stdout and stderr (`python -m pytest -q` or `-v`, alternating, a quiet run that
  fails enough tests in too few bytes run again verbose; with --runner
  unittest, `python -m unittest discover`, plain or `-v`), ANSI colours removed, the checkout's
  path written /tmp/work;
- gold = [first, last]: make_logs.py's pytest rule (the first `>` line of the FAILURES section
  through the next `path:line: Type` line): the first failure's cause, as an agent reads it; for
  unittest its first `FAIL:` or `ERROR:` title through the exception line ending its traceback;
- question: what an agent asks after such a run, one of QUESTIONS in turn, written without
  looking at the engine;
- source: OWNER/NAME, so that bench/prune_quality.py splits tuned-on and held-out by repository;
  `mutation`: the file, line and change.

With a JavaScript runner (jest, mocha, vitest, node) the package's dependencies are installed from
the npm registry (`npm ci`, or `npm install` without a lock file; no install scripts), its
`pretest` script runs before each run (a TypeScript build), its largest source files under src/,
lib/ or source/ are changed (`===` and `!==`, `return true`, `if (!`, ...), and bench/data/js_test_runners.py
says how each runner is called and where its gold is. A suite failing up to MAX_BROKEN tests as
checked out (a test needing the network) is taken: a changed run must fail MIN_FAILURES more,
and its gold is the first failure the unchanged run did not report.

With --runner go, `go test ./...` (plain or `-v`) with no module proxy: packages whose tests need
only the standard library; bench/data/go_test_runner.py says where the gold is.

It runs each repository's own test code, unsandboxed, as whoever runs it: run it as an unprivileged
user or in a throwaway container, on repositories you would run the tests of anyway.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import go_test_runner as go
import js_test_runners as js
from make_logs import ANSI, g_pytest

QUESTIONS = (
    "which tests failed and why?",
    "why do the tests fail?",
    "what is the error in the test run?",
    "the test suite fails after my change, what broke?",
)
MIN_FAILURES = 5
# A JavaScript suite failing more than this many tests as checked out is left out.
MAX_BROKEN = 20
MIN_BYTES = 12_000
RUN_TIMEOUT_S = 240


# One line changed: each pattern's first match on a line, turned into its replacement; the
# comparisons, off-by-ones and negations are the same kinds in each language, spelled its way.
def _changes(equal: str, unequal: str, true: str, false: str, negated_if: str, plain_if: str):
    return (
        (re.compile(f" {re.escape(equal)} "), f" {unequal} "),
        (re.compile(f" {re.escape(unequal)} "), f" {equal} "),
        (re.compile(rf"\breturn {true}\b"), f"return {false}"),
        (re.compile(rf"\breturn {false}\b"), f"return {true}"),
        (re.compile(r" < "), " <= "),
        (re.compile(r" > "), " >= "),
        (re.compile(r" \+ 1\b"), " + 2"),
        (re.compile(r" - 1\b"), " - 2"),
        (re.compile(r"\b" + re.escape(negated_if)), plain_if),
    )


_PYTHON = _changes("==", "!=", "True", "False", "if not ", "if ")
MUTATIONS = (
    *_PYTHON[:2],
    (re.compile(r" is not None"), " is None"),
    (re.compile(r" is None"), " is not None"),
    *_PYTHON[2:],
)
JS_MUTATIONS = _changes("===", "!==", "true", "false", "if (!", "if (")
GO_MUTATIONS = _changes("==", "!=", "true", "false", "if !", "if ")
_SUMMARY = re.compile(r"(\d+) failed")
NPM_TIMEOUT_S = 600


@dataclass(frozen=True)
class Language:
    """Where a language's code to change is and which of its lines are candidates: indented at
    least `indent` (inside a function), not a comment."""

    sources: Callable[[Path], list[Path]]
    changes: tuple[tuple[re.Pattern[str], str], ...]
    indent: str
    comments: tuple[str, ...]


def checkout(mirror: Path, into: Path) -> str:
    subprocess.run(["git", "clone", "-q", "--shared", str(mirror), str(into)], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(into), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def package_dirs(work: Path) -> list[Path]:
    """Where the package's modules live: src/*, or top-level folders holding __init__.py."""
    roots = [p for p in (work / "src").glob("*") if (p / "__init__.py").exists()] if (work / "src").is_dir() else []
    roots += [p for p in work.iterdir() if p.is_dir() and (p / "__init__.py").exists()
              and not p.name.startswith(("test", "doc", "example", "bench", "."))]
    return roots


def modules(work: Path) -> list[Path]:
    """The package's largest modules (tests and vendored code left out)."""
    found = [
        p for root in package_dirs(work) for p in root.rglob("*.py")
        if not re.search(r"(^|/)(tests?|_vendor|vendor|compat)(/|$)|test_", str(p.relative_to(work)))
    ]
    if not found:
        found = [p for p in work.glob("*.py") if not p.name.startswith(("test", "setup", "conf"))]
    return sorted(found, key=lambda p: -p.stat().st_size)[:6]


LANGUAGES = {
    "python": Language(modules, MUTATIONS, "        ", ("#", '"', "'")),
    "javascript": Language(js.modules, JS_MUTATIONS, "    ", ("//", "*", "/*")),
    "go": Language(go.modules, GO_MUTATIONS, "\t\t", ("//",)),
}


def run_tests(python: str, work: Path, verbose: bool, runner: str = "pytest") -> tuple[str, int]:
    if runner == "go":
        return _run(go.command(work, verbose), work, go.environment(work))
    if runner in js.RUNNERS:
        # No colour asked for (ANSI is removed anyway): commander.js tests how it reads NO_COLOR.
        env = {"PATH": f"{work / 'node_modules' / '.bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(work),
               "CI": "true", "TERM": "dumb"}
        if js.has_script(work, "pretest"):  # a TypeScript package compiles its sources first
            built, code = _run(["npm", "run", "pretest"], work, env)
            if code != 0:
                return built, -1
        return _run(js.command(work, runner, verbose) or ["false"], work, env)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "NO_COLOR": "1", "TERM": "dumb", "PYTHONHASHSEED": "0",
           "PYTHONPATH": str(work / "src") if (work / "src").is_dir() else str(work), "PYTHONDONTWRITEBYTECODE": "1"}
    if runner == "unittest":
        tests = next((d for d in ("tests", "test") if (work / d).is_dir()), ".")
        args = [python, "-m", "unittest", "discover", "-s", tests, "-t", "."] + (["-v"] if verbose else [])
    else:
        args = [python, "-m", "pytest", "-v" if verbose else "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                "-p", "no:randomly", "-p", "no:xdist"]
    return _run(args, work, env)


def _run(args: list[str], work: Path, env: dict[str, str]) -> tuple[str, int]:
    """The run's output and exit code; a run past RUN_TIMEOUT_S is killed with every process it
    started (mocha's bin starts its CLI as a child, and a test's servers outlive both)."""
    with subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, start_new_session=True) as run:
        try:
            stdout, _ = run.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return "", -1
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
    out = ANSI.sub("", stdout.decode("utf-8", "replace")).replace(str(work), "/tmp/work")
    return out.replace("\r\n", "\n").rstrip("\n"), run.returncode


def failures(out: str, runner: str = "pytest") -> int:
    """How many tests failed (pytest's `N failed`, unittest's `FAILED (failures=N, errors=M)`, a
    JavaScript runner's own count)."""
    if runner == "go":
        return go.failures(out)
    if runner in js.RUNNERS:
        return js.failures(out, runner)
    tail = out.rsplit("\n", 1)[-1]
    if tail.startswith("FAILED ("):
        return sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", tail))
    found = _SUMMARY.search(tail)
    return int(found.group(1)) if found else 0


def passed(out: str, code: int, runner: str = "pytest") -> bool:
    if runner in js.RUNNERS or runner == "go":
        return code == 0
    tail = out.rsplit("\n", 1)[-1]
    return ("passed" in tail and failures(out) == 0) or tail == "OK" or tail.startswith("OK (")


def install(work: Path) -> bool:
    """The package's dependencies from the npm registry, its lock file's when it has one (no
    install scripts run)."""
    locked = (work / "package-lock.json").exists()
    args = ["npm", "ci" if locked else "install", "--ignore-scripts", "--no-audit", "--no-fund"]
    for extra in ([], ["--legacy-peer-deps"]):  # an old lock or peer range npm now refuses
        try:
            if subprocess.run(args + extra, cwd=work, capture_output=True, timeout=NPM_TIMEOUT_S).returncode == 0:
                return True
        except subprocess.TimeoutExpired:
            return False
    return False


def first_failure(lines: list[str], runner: str, known: set[str]) -> tuple[int, int]:
    if runner == "go":
        return go.gold(lines)
    if runner in js.RUNNERS:
        return js.gold(lines, runner, known)
    return (g_unittest if runner == "unittest" else g_pytest)(lines)


def g_unittest(lines: list[str]) -> tuple[int, int]:
    """unittest's first failure: its `FAIL:` or `ERROR:` title after the report's first bar
    through the exception line that ends its traceback."""
    bar = next(i for i, x in enumerate(lines) if x.startswith("=" * 20))
    a = next(i for i in range(bar, len(lines)) if re.match(r"^(FAIL|ERROR): ", lines[i]))
    tb = next(i for i in range(a, len(lines)) if lines[i].startswith("Traceback (most recent call last):"))
    b = next(i for i in range(tb + 1, len(lines))
             if lines[i].strip() and not lines[i][:1].isspace() and not lines[i].startswith(("During handling",
                                                                                             "The above exception")))
    return a, b


def cases_of(
    repo: str, mirror: Path, python: str, per_repo: int, tries: int, seconds: float, start: int, runner: str
) -> list[dict]:
    made: list[dict] = []
    until = time.monotonic() + seconds
    with tempfile.TemporaryDirectory(prefix="jeeves-test-runs-") as tmp:
        work = Path(tmp) / "work"
        try:
            sha = checkout(mirror, work)
        except subprocess.CalledProcessError:  # a mirror may lack its largest blobs
            print(f"{repo}: no checkout of HEAD from {mirror}", file=sys.stderr)
            return made
        if runner == "go":
            go.prepare(work, repo)
        if runner in js.RUNNERS and not install(work):
            print(f"{repo}: npm could not install its dependencies", file=sys.stderr)
            return made
        base, code = run_tests(python, work, False, runner)
        # A JavaScript suite failing a few tests as checked out here (a network, a time zone) is
        # taken with them: its changed runs must fail MIN_FAILURES more, the gold a failure of theirs.
        broken = failures(base, runner) if runner in js.RUNNERS and code == 1 else 0
        known = js.failing(base.split("\n"), runner) if broken else set()
        if code not in (0, 1) or not (passed(base, code, runner) or 0 < broken <= MAX_BROKEN):
            print(f"{repo}: its tests do not pass as they are (exit {code}): {base[-200:]!r}", file=sys.stderr)
            return made
        rng = random.Random(f"{repo}@{sha}")
        candidates = []
        language = LANGUAGES["go" if runner == "go" else "javascript" if runner in js.RUNNERS else "python"]
        for path in language.sources(work):
            for number, line in enumerate(path.read_text(errors="replace").split("\n")):
                if not line.startswith(language.indent) or line.lstrip().startswith(language.comments):
                    continue
                for pattern, replacement in language.changes:
                    if pattern.search(line):
                        candidates.append((path, number, pattern, replacement))
                        break
        rng.shuffle(candidates)
        for path, number, pattern, replacement in candidates[:tries]:
            if time.monotonic() > until:
                break
            original = path.read_text()
            lines = original.split("\n")
            changed = pattern.sub(replacement, lines[number], count=1)
            lines[number] = changed
            path.write_text("\n".join(lines))
            try:
                verbose = (start + len(made)) % 2 == 1
                out, _ = run_tests(python, work, verbose, runner)
                if not verbose and failures(out, runner) >= broken + MIN_FAILURES and len(out.encode()) < MIN_BYTES:
                    out, _ = run_tests(python, work, True, runner)  # quiet, it fits the view: verbose
            finally:
                path.write_text(original)
            if failures(out, runner) < broken + MIN_FAILURES or len(out.encode()) < MIN_BYTES:
                continue
            try:
                a, b = first_failure(out.split("\n"), runner, known)
            except StopIteration:
                continue
            index = start + len(made)
            made.append({
                "id": f"{'testrun' if runner == 'pytest' else runner}-{repo.split('/')[1]}-{len(made)}", "source": repo, "source_type": "logs",
                "question": QUESTIONS[index % len(QUESTIONS)], "text": out, "gold": [a + 1, b + 1],
                "mutation": {"file": str(path.relative_to(work)), "line": number + 1, "to": changed.strip(),
                             "commit": sha, "failed": failures(out, runner)},
            })
            print(f"{repo}: {path.relative_to(work)}:{number + 1} -> {failures(out, runner)} failed, "
                  f"{len(out.encode())} bytes", file=sys.stderr)
            if len(made) >= per_repo:
                break
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repo", action="append", required=True, help="OWNER/NAME under --mirror")
    parser.add_argument("--per-repo", type=int, default=2)
    parser.add_argument("--tries", type=int, default=40)
    parser.add_argument("--seconds", type=float, default=600, help="at most this long a repository")
    parser.add_argument("--python", default=sys.executable, help="an interpreter with pytest")
    parser.add_argument("--runner", choices=("pytest", "unittest", *js.RUNNERS, "go"), default="pytest",
                        help="unittest: `python -m unittest discover`, the gold its first FAIL or ERROR block; "
                             "jest, mocha, vitest, node: a JavaScript package's runner, as bench/data/js_test_runners.py "
                             "says (its dependencies installed by npm); go: `go test ./...`, as "
                             "bench/data/go_test_runner.py says (modules from the cache only)")
    args = parser.parse_args()
    if shutil.which("git") is None:
        sys.exit("make_test_runs: git is needed")
    made = 0
    with args.out.open("w") as out:
        for repo in args.repo:
            mirror = args.mirror / repo.replace("/", "+") / "repo"
            if not mirror.is_dir():
                print(f"{repo}: no mirror at {mirror}", file=sys.stderr)
                continue
            for case in cases_of(repo, mirror, args.python, args.per_repo, args.tries, args.seconds, made,
                                 args.runner):
                out.write(json.dumps(case) + "\n")
                out.flush()
                made += 1
    print(f"{made} cases -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
