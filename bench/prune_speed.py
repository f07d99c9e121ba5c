"""Latency of the built-in pruning engine on 2k / 10k / 50k-line inputs.

    python bench/prune_speed.py [--repeat 5] [--json]

Inputs are real texts cut or repeated to size: code = the Python sources of the
needle set (one file after another), logs = the logs bench set, docs = the docs
bench set. The question is the first case's; the view is bounded by the child's
response budget, as prune_text bounds it. Prints the median wall time of
select_lines over --repeat runs (after one warm-up run), and ms per 1k lines to
show whether the cost grows linearly.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from prune_quality import RESPONSE_BUDGET, SETS  # noqa: E402

from jeeves_mcp.pruning.engine import select_lines  # noqa: E402

SIZES = (2_000, 10_000, 50_000)
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = []
    for name, source_type in KINDS.items():
        if not SETS[name].exists():
            continue
        for size in SIZES:
            lines, question = corpus(name, size)
            select_lines(lines, question, source_type, max_bytes=RESPONSE_BUDGET)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                select_lines(lines, question, source_type, max_bytes=RESPONSE_BUDGET)
                times.append((time.perf_counter() - t0) * 1000)
            ms = statistics.median(times)
            results.append(
                {"set": source_type, "lines": size, "median_ms": ms, "ms_per_1k_lines": ms / size * 1000}
            )
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'set':<5} {'lines':>7} {'median ms':>10} {'ms/1k lines':>12}")
    for r in results:
        print(
            f"{r['set']:<5} {r['lines']:>7} {r['median_ms']:>10.1f} {r['ms_per_1k_lines']:>12.2f}"
        )


if __name__ == "__main__":
    main()
