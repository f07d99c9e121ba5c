"""Commit tasks from code in other languages: ../shared/bench/make_commits.py's rule, other suffixes.

    python bench/data/make_commits_lang.py OUT.jsonl --lang go|js|rust|... --mirror MIRRORS [--tests]
                                           OWNER/NAME ...

The same cases as the shared generator would make (one library file changed in one hunk of
1-40 lines, a parent file of >= 300 lines, a descriptive subject), with "library file" read
for the language: its suffixes, and none of its test files (`*_test.go`, `*.test.ts`,
`__tests__/`, ...) nor the directories the shared rule leaves out. Each case also carries
its `path`, so the engine lays it out as that language rather than trying Python first.
With --tests the file is one of the language's test files instead (`*.test.ts`, `__tests__/`,
`test/*.js`): a commit that edits existing lines of one test file in one hunk.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAKE_COMMITS = ROOT.parent / "shared" / "bench" / "make_commits.py"

LANGS: dict[str, tuple[tuple[str, ...], re.Pattern[str]]] = {
    "go": ((".go",), re.compile(r"_test\.go$")),
    "js": ((".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx"),
           re.compile(r"(\.(test|spec)\.[cm]?[jt]sx?$|\.d\.ts$|\.min\.js$)")),
    "rust": ((".rs",), re.compile(r"(^|/)(build\.rs)$")),
    "java": ((".java",), re.compile(r"Tests?\.java$")),
    "c": ((".c", ".h", ".cc", ".cpp", ".hpp"), re.compile(r"(^|/)test_[^/]*$")),
    "ruby": ((".rb",), re.compile(r"_(spec|test)\.rb$")),
    "php": ((".php",), re.compile(r"Test\.php$")),
    "kotlin": ((".kt",), re.compile(r"Test\.kt$")),
    "swift": ((".swift",), re.compile(r"Tests?\.swift$|(^|/)[^/]*Tests/")),
    "csharp": ((".cs",), re.compile(r"Tests?\.cs$|(^|/)[^/]*\.Tests?/")),
    "python": ((".py",), re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest|setup)\.py$")),
}
# Test files, for --tests (languages where it is defined).
TEST_FILES: dict[str, re.Pattern[str]] = {
    "js": re.compile(r"(\.(test|spec)\.[cm]?[jt]sx?$|(^|/)(__tests__|tests?)/.*\.[cm]?[jt]sx?$)"),
    "python": re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$"),
}
# Directories of code that is not the project's own, left out of either kind of file.
NOT_OWN = {"vendor", "node_modules", "dist", "fixtures"}
LEFT_OUT = NOT_OWN | {"tests", "test", "testing", "testdata", "__tests__", "spec", "docs", "doc",
                      "examples", "example", "benchmarks", "bench", "scripts", "tools", ".github",
                      "build", "third_party"}


def load_shared():
    spec = importlib.util.spec_from_file_location("make_commits", MAKE_COMMITS)
    assert spec and spec.loader, MAKE_COMMITS
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def library_file(lang: str):
    suffixes, tests = LANGS[lang]

    def is_lib(path: str) -> bool:
        p = pathlib.PurePosixPath(path)
        return (p.suffix in suffixes and not tests.search(path)
                and not set(p.parts[:-1]) & LEFT_OUT)
    return is_lib


def test_file(lang: str):
    suffixes, _ = LANGS[lang]
    tests = TEST_FILES[lang]

    def is_test(path: str) -> bool:
        p = pathlib.PurePosixPath(path)
        return (p.suffix in suffixes and bool(tests.search(path)) and not path.endswith(".d.ts")
                and not set(p.parts[:-1]) & NOT_OWN)
    return is_test


def fetched(mirror: pathlib.Path, names: list[str]) -> list[tuple[str, pathlib.Path]]:
    """The repositories MIRROR holds, as (OWNER/NAME, bare git directory); the others named."""
    found = []
    for name in names:
        repo = mirror / name.replace("/", "+") / "repo"
        if repo.exists():
            found.append((name, repo))
        else:
            print(f"{name}: not fetched, skipped", file=sys.stderr)
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--lang", required=True, choices=sorted(LANGS))
    ap.add_argument("--mirror", required=True, type=pathlib.Path)
    ap.add_argument("--tests", action="store_true", help="the language's test files instead")
    ap.add_argument("repos", nargs="+")
    args = ap.parse_args()
    if args.tests and args.lang not in TEST_FILES:
        ap.error(f"--tests: no test files defined for {args.lang} (only {', '.join(TEST_FILES)})")
    shared = load_shared()
    shared.is_lib = test_file(args.lang) if args.tests else library_file(args.lang)
    rows = []
    for name, repo in fetched(args.mirror, args.repos):
        got = shared.cases_for(name, repo)
        for case in got:
            case["path"] = case["source"].split(":", 1)[1]
        print(f"{name}: {len(got)} cases", file=sys.stderr)
        rows += got
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
