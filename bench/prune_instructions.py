"""Instructions the built-in engine executes on the prune_speed inputs, counted by valgrind.

    python bench/prune_instructions.py [--sets code,python,logs,docs] [--sizes 2000,50000]

Wall time on a shared machine swings by half between identical runs; the count of
instructions does not (the same to the million run after run, PYTHONHASHSEED fixed), so a
change of a few per cent is seen here before prune_speed can show it. Each figure is one
select_lines call: the count of a process that makes the input and calls it, less that of one
that only makes the input. Needs valgrind; a 50,000-line input takes about a minute.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jeeves_mcp.pruning.engine._code import AST_MAX_LINES  # noqa: E402

COLLECTED = re.compile(r"Collected : (\d+)")
# Run inside valgrind: make the input, warm up on its head, call select_lines if asked.
CHILD = """
import sys
sys.path[:0] = [{bench!r}, {root!r}]
from prune_speed import corpus, python_module
from prune_quality import RESPONSE_BUDGET
from jeeves_mcp.pruning.engine import select_lines
kind, size, call = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
source = {{"code": "needles", "logs": "logs", "docs": "docs"}}
lines, question = python_module(size) if kind == "python" else corpus(source[kind], size)
source_type = "code" if kind == "python" else kind
select_lines(lines[:50], question, source_type, max_bytes=RESPONSE_BUDGET)
if call:
    select_lines(lines, question, source_type, max_bytes=RESPONSE_BUDGET)
"""


def instructions(kind: str, size: int, call: bool) -> int:
    code = CHILD.format(bench=str(ROOT / "bench"), root=str(ROOT))
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, "-c", code, kind, str(size), "1" if call else "0"],
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}, check=True,
    )
    found = COLLECTED.search(done.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no count: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default="code,python,logs,docs")
    ap.add_argument("--sizes", default="2000,50000")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    print(f"{'set':<6} {'lines':>7} {'M instructions':>15}")
    for kind in args.sets.split(","):
        for size in (int(x) for x in args.sizes.split(",")):
            if kind == "python" and size > AST_MAX_LINES:
                continue  # a Python text this long is read as code is
            millions = (instructions(kind, size, True) - instructions(kind, size, False)) / 1e6
            print(f"{kind:<6} {size:>7} {millions:>15.0f}", flush=True)


if __name__ == "__main__":
    main()
