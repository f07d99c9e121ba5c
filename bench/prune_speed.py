"""Latency of the built-in pruning engine on 2k / 10k / 50k-line inputs.

    python bench/prune_speed.py [--repeat 5] [--json]

Inputs are real texts cut or repeated to size: code = the Python sources of the needle set
(one file after another, cut mid-file: not valid Python, so read by indentation), python = the
same modules whole, their `from __future__` lines dropped, so that the text parses and is read
through `ast` as a real module is (2k and 10k lines; over 20,000 lines `ast` is not used), logs =
the logs bench set, docs = the docs bench set, quoted = a Rust text dense with strings, characters,
lifetimes and raw strings that span lines (the string scan's worst case: a token every few
characters), escaped = Go lines of escaped quotes ending in a backslash (the one-line string
scan's worst case), typed = TypeScript blocks opened by 400-character lines of `a:a:a:...` (the
worst case of naming a function assigned to a name), git = this project's own `git log -p`, repeated
to size (read as commits, files and hunks), search = its `git grep -n -i def -- '*.py'`, repeated to size
(each line ranked, the rows of the ten files it values most within those files, read from the
checkout as the tools read them; both skipped outside a git checkout), window = 200 lines from the middle of the
code text, ranked within it (as `read` with an offset gives them: the size is the file's), grep = the
rows `grep -n return` prints of the code text, ranked within it (as `bash` gives a search of one file:
the size is the file's). The question is the first case's; the view is
bounded by the child's response budget, as prune_text bounds it. Prints the median wall time of
select_lines over --repeat runs (after one warm-up run; the code layouts the engine keeps between
calls cleared before each, so a row is a first read), and ms per 1k lines to show whether the cost
grows linearly (a search's counting the lines of the files it laid out, `+ file lines`); the
`again` rows (python, window, search) are the same call on the same text with the layouts kept,
as a run's next read of a file, next page of it or next search finds them.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from prune_quality import RESPONSE_BUDGET, SETS  # noqa: E402

from jeeves_mcp.pruning.engine import Around, select_lines  # noqa: E402
from jeeves_mcp.pruning.engine._code import AST_MAX_LINES  # noqa: E402
from jeeves_mcp.pruning.engine._planner import code_layouts  # noqa: E402
from jeeves_mcp.pruning.pruner import AROUND_MAX_CHARS  # noqa: E402
from jeeves_mcp.tools.read import SOURCE_SUFFIXES  # noqa: E402

SIZES = (2_000, 10_000, 50_000)
# The inputs measured a second time on the same text too (code layouts kept between calls).
AGAIN = ("python", "window", "search")
# The set each source type's text comes from.
KINDS = {"needles": "code", "logs": "logs", "docs": "docs"}


def corpus(name: str, lines_wanted: int) -> tuple[list[str], str]:
    cases = [json.loads(x) for x in SETS[name].read_text().splitlines() if x.strip()]
    out: list[str] = []
    k = 0
    while len(out) < lines_wanted:
        out.extend(cases[k % len(cases)]["text"].split("\n"))
        k += 1
    return out[:lines_wanted], cases[0]["question"]


def python_module(lines_wanted: int) -> tuple[list[str], str]:
    """Whole needle modules one after another, each that still fits (the set over again when it
    runs out), blank lines for the few left: a text `ast` parses."""
    cases = [json.loads(x) for x in SETS["needles"].read_text().splitlines() if x.strip()]
    modules = [[x for x in c["text"].split("\n") if not x.startswith("from __future__")] for c in cases]
    out: list[str] = []
    while any(len(out) + len(m) <= lines_wanted for m in modules):
        for module in modules:
            if len(out) + len(module) <= lines_wanted:
                out.extend(module)
    out += [""] * (lines_wanted - len(out))
    ast.parse("\n".join(out))  # a text that does not parse would measure the other path
    return out, cases[0]["question"]


QUOTED_RUST = [
    "impl<'a> Flag for Quoted<'a> {",
    "    fn name(&self) -> &'static str { \"quoted\" }",
    "    fn chars(&self) -> [char; 3] { ['\"', '\\'', '`'] }",
    "    fn doc_long(&self) -> &'static str {",
    "        r#\"",
    "A help text at the margin, \"quoted\" inside.",
    "\"#",
    "    }",
    "}",
]


def quoted_rust(lines_wanted: int) -> tuple[list[str], str]:
    return (QUOTED_RUST * (lines_wanted // len(QUOTED_RUST) + 1))[:lines_wanted], "quoted help text"


def escaped_go(lines_wanted: int) -> tuple[list[str], str]:
    """Go lines of escaped quotes, each ending in a backslash: every quote once started a
    string scan to the end of the text (10k lines took 7 s before the scan skipped them)."""
    body = ['\tx = a\\"\\'] * (lines_wanted - 3)
    lines = ["var usage = `x`", "func parseConfig() {", *body, "}"]
    return lines, "how does parseConfig read the value"


# The crafted inputs, each read as code of the language its path names.
CRAFTED_PATHS = {"quoted": "quoted.rs", "escaped": "escaped.go", "typed": "typed.ts"}


def typed_ts(lines_wanted: int) -> tuple[list[str], str]:
    """TypeScript blocks under 400-character `a:a:a:` heads: a lazy type annotation in the
    naming pattern made each head cost 0.7 ms (6,000 lines took 4 s)."""
    block = ["a:" * 200 + " {", "  run();", "}"]
    return (block * (lines_wanted // len(block) + 1))[:lines_wanted], "how does run start"


def search_output(lines_wanted: int) -> tuple[list[str], str]:
    """`git grep -n -i def -- '*.py'` of this checkout (search output: each line ranked, as code's),
    repeated to size; no lines outside one."""
    done = subprocess.run(["git", "-C", str(ROOT), "grep", "-I", "-n", "-i", "def", "--", "*.py"], capture_output=True,
                          text=True, errors="replace")
    found = done.stdout.rstrip("\n").split("\n")
    if done.returncode or len(found) < 100:
        return [], ""
    return (found * (lines_wanted // len(found) + 1))[:lines_wanted], "where is the response budget applied"


def checkout_file(path: str) -> str | None:
    """A source file of this checkout, as the bash and grep tools read one a search names."""
    file = ROOT / path
    if file.suffix.lower() not in SOURCE_SUFFIXES or not file.is_file() or file.stat().st_size > AROUND_MAX_CHARS:
        return None
    return file.read_text(errors="replace")


def counting(read: dict[str, int]) -> Callable[[str], str | None]:
    """checkout_file, noting in `read` how many lines each file it gave holds."""
    def text_of(path: str) -> str | None:
        text = checkout_file(path)
        read[path] = 0 if text is None else text.count("\n") + 1
        return text
    return text_of


def git_log(lines_wanted: int) -> tuple[list[str], str]:
    """`git log -p` of this checkout, repeated to size; no lines outside one."""
    done = subprocess.run(["git", "-C", str(ROOT), "log", "-p", "-n", "300"], capture_output=True, text=True,
                          errors="replace")
    log = done.stdout.split("\n")
    if done.returncode or len(log) < 100:
        return [], ""
    return (log * (lines_wanted // len(log) + 1))[:lines_wanted], "where is the response budget applied"


def window_in_code(lines_wanted: int) -> tuple[list[str], str, Around]:
    """200 lines from the middle of the code text of that size, and the text around them."""
    lines, question = corpus("needles", lines_wanted)
    first = len(lines) // 2
    return lines[first : first + 200], question, Around(lines, first)


def matches_in_code(lines_wanted: int) -> tuple[list[str], str, Around]:
    """The rows `grep -n return` prints of the code text of that size, and the text they are of."""
    lines, question = corpus("needles", lines_wanted)
    rows = [f"{i + 1}:{line}" for i, line in enumerate(lines) if "return" in line]
    return rows, question, Around(lines, 0, matches=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    inputs: list[tuple[str, int, Callable[[], tuple]]] = []
    for name, source_type in KINDS.items():
        if not SETS[name].exists():
            continue
        inputs += [(source_type, size, partial(corpus, name, size)) for size in SIZES]
        if name == "needles":
            inputs += [("window", size, partial(window_in_code, size)) for size in SIZES]
            inputs += [("grep", size, partial(matches_in_code, size)) for size in SIZES]
            inputs += [("python", size, partial(python_module, size))
                       for size in SIZES if size <= AST_MAX_LINES]
    inputs += [("quoted", size, partial(quoted_rust, size)) for size in SIZES]
    inputs += [("escaped", size, partial(escaped_go, size)) for size in SIZES]
    inputs += [("typed", size, partial(typed_ts, size)) for size in SIZES]
    if git_log(100)[0]:
        inputs += [("git", size, partial(git_log, size)) for size in SIZES]
        inputs += [("search", size, partial(search_output, size)) for size in SIZES]
    results = []
    for label, size, make in inputs:
        lines, question, *around = make()
        source_type = "code" if label in ("python", "window", "grep") or label in CRAFTED_PATHS else label
        source_type = "logs" if label in ("git", "search") else source_type
        path = CRAFTED_PATHS.get(label)
        read: dict[str, int] = {}
        run = partial(select_lines, lines, question, source_type, max_bytes=RESPONSE_BUDGET, path=path,
                      around=around[0] if around else None, files=counting(read) if label == "search" else None)
        run()
        # A search also lays out the files it values most: their lines are ranked too.
        file_lines = sum(read.values())
        # Each row the first call on its text (no code layout kept from the one before); `again`
        # rows a second call on the same text, as a run's next read or search of the files finds it.
        for again in (False, True) if label in AGAIN else (False,):
            times = []
            for _ in range(args.repeat):
                if not again:
                    code_layouts.clear()
                t0 = time.perf_counter()
                run()
                times.append((time.perf_counter() - t0) * 1000)
            ms = statistics.median(times)
            name = f"{label} again" if again else label
            results.append({"set": name, "lines": size, "median_ms": ms,
                            "ms_per_1k_lines": ms / (size + file_lines) * 1000, "file_lines": file_lines})
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'set':<12} {'lines':>7} {'median ms':>10} {'ms/1k lines':>12} {'+ file lines':>13}")
    for r in results:
        files = f"{r['file_lines']:>13}" if r["file_lines"] else ""
        print(f"{r['set']:<12} {r['lines']:>7} {r['median_ms']:>10.1f} {r['ms_per_1k_lines']:>12.2f} {files}")


if __name__ == "__main__":
    main()
