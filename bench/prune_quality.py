"""Quality of the built-in pruning engine on needle sets, beside a line-BM25 baseline.

    python bench/prune_quality.py [--set code|logs|docs|all] [--json]

Sets: code = ../shared/bench/needles-dev.jsonl (or $JEEVES_NEEDLES), logs and docs =
bench/data/{logs,docs}.jsonl. Each case has `text`, `question`, `source_type` and
`gold` = [first, last], 1-based inclusive line numbers over `text.split("\\n")`.

Figures, at the engine's defaults (max_prune_ratio 0.9, min_keep_lines 0):
- recall: share of the gold lines kept, averaged over cases;
- share>=0.9: share of cases whose recall is at least 0.9;
- reduction: 1 - kept chars / original chars, where a line counts len(line)+1 and
  only kept original lines count (the markers the contract layer adds are excluded);
- ms: median wall time of select_lines.
Cases are split in halves A/B by a hash of their id, so a parameter chosen on one
half can be checked on the other. The baseline ranks single lines with BM25 over
plain lower-cased words, keeps each chosen line with 3 lines of context either
side, and stops at the engine's reduction for the same case (so both keep the same
number of characters), and again at a fixed reduction of 0.70. "BM25+" is the same
baseline with the engine's own terms, to show what structure adds over wording.

Measured and not adopted (docs, recall / share>=0.9 / reduction; engine then at
A 0.787/0.750/0.767, B 0.806/0.773/0.730, and 0.752/0.732/0.730 (A, 41) and
0.615/0.596/0.744 (B, 47) on a fresh 88-case set built by make_docs.py's rule from
.md/.rst/.txt files it did not use, under its roots and /root/.pyenv, /root/.rustup,
/usr/lib/jvm, /usr/share):
- pseudo-relevance feedback (RM3: the m terms of the k best sections weighted by
  p(term | sections, by score) x in-text IDF, added at weight beta, re-ranked;
  k 1-5, m 5-20, beta 0.2-0.5): A never moves, B and fresh only lose (B down to
  0.680, fresh down to 0.637); feedback reinforces whatever the first pass ranked
  first, and the misses rank the gold section below other sections.
- background IDF (ln(N/df) over 25k de-duplicated docstrings of the stdlib and
  site-packages, a 22 KB gzip table; in-text IDF x (bg / max)^g, g 0.25-3): no
  gain on A at any g, fresh 0.679 -> 0.689 at g 0.5 and worse above; not kept.
- heading path (ancestor titles in the section's name): A 0.787 -> 0.739, B and
  fresh +1 or +2 cases.
- term proximity (bonus p x the best sum of IDF over the question terms met in a
  window of w lines; p 0.1-2, w 1-5): A unchanged or worse (never better, docs A
  0.739 at p 2), B and fresh B up (p 1, w 3: docs B 0.846/0.818, fresh B
  0.696/0.681) for about 0.01 less reduction. The best setting does not improve A,
  so it is not adopted; worth re-measuring on a larger docs set.
The misses rank the gold section 2nd to 6th (about half) or below 10th; often
only a third of the question's terms occur in the section once its first
paragraph is removed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jeeves_mcp.engine import select_lines  # noqa: E402
from jeeves_mcp.engine._text import terms  # noqa: E402

SETS = {
    "code": Path(
        os.environ.get("JEEVES_NEEDLES", ROOT.parent / "shared" / "bench" / "needles-dev.jsonl")
    ),
    "logs": ROOT / "bench" / "data" / "logs.jsonl",
    "docs": ROOT / "bench" / "data" / "docs.jsonl",
}


def half(case_id: str) -> str:
    return "AB"[hashlib.sha256(case_id.encode()).digest()[0] & 1]


def sizes(lines: list[str]) -> list[int]:
    return [len(x) + 1 for x in lines]


PLAIN = re.compile(r"\w+")


def plain_terms(text: str) -> list[str]:
    return PLAIN.findall(text.lower())


def baseline_keep(
    lines: list[str], question: str, target_chars: int, context: int = 3, tokens=plain_terms
) -> list[bool]:
    """Line-level BM25: best lines first, each with `context` lines around, up to target_chars."""
    q = set(tokens(question))
    docs = [tokens(x) for x in lines]
    n = len(lines)
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d) & q)
    avg = max(1.0, sum(len(d) for d in docs) / max(1, n))
    scores = []
    for d in docs:
        tf = Counter(t for t in d if t in q)
        s = 0.0
        for t, f in tf.items():
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * len(d) / avg))
        scores.append(s)
    sz = sizes(lines)
    keep = [False] * n
    kept = 0
    for i in sorted(range(n), key=lambda k: (-scores[k], k)):
        if kept >= target_chars or scores[i] <= 0:
            break
        for j in range(max(0, i - context), min(n, i + context + 1)):
            if not keep[j]:
                keep[j] = True
                kept += sz[j]
    return keep


def measure(keep: list[bool], lines: list[str], gold: list[int]) -> tuple[float, float]:
    sz = sizes(lines)
    total = sum(sz)
    kept = sum(s for s, k in zip(sz, keep, strict=True) if k)
    a, b = gold
    g = range(a - 1, b)
    recall = sum(1 for i in g if keep[i]) / len(g)
    return recall, 1 - kept / total


def run(name: str, path: Path) -> dict:
    cases = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows = []
    for c in cases:
        lines = c["text"].split("\n")
        t0 = time.perf_counter()
        sel = select_lines(lines, c["question"], c["source_type"], path=c.get("path"))
        ms = (time.perf_counter() - t0) * 1000
        assert len(sel.keep) == len(lines)
        recall, red = measure(sel.keep, lines, c["gold"])
        total = sum(sizes(lines))
        b_same = measure(
            baseline_keep(lines, c["question"], round((1 - red) * total)), lines, c["gold"]
        )
        b_70 = measure(baseline_keep(lines, c["question"], round(0.30 * total)), lines, c["gold"])
        b_split = measure(
            baseline_keep(lines, c["question"], round((1 - red) * total), tokens=terms),
            lines,
            c["gold"],
        )
        rows.append(
            {
                "id": c["id"],
                "half": half(c["id"]),
                "recall": recall,
                "reduction": red,
                "ms": ms,
                "base_recall": b_same[0],
                "base_reduction": b_same[1],
                "base70_recall": b_70[0],
                "base70_reduction": b_70[1],
                "split_recall": b_split[0],
                "split_reduction": b_split[1],
            }
        )
    return {"set": name, "path": str(path), "rows": rows}


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {}
    m = statistics.fmean
    return {
        "cases": len(rows),
        "recall": m(r["recall"] for r in rows),
        "share_ge_0.9": m(r["recall"] >= 0.9 for r in rows),
        "reduction": m(r["reduction"] for r in rows),
        "median_ms": statistics.median(r["ms"] for r in rows),
        "baseline_recall": m(r["base_recall"] for r in rows),
        "baseline_share_ge_0.9": m(r["base_recall"] >= 0.9 for r in rows),
        "baseline_reduction": m(r["base_reduction"] for r in rows),
        "baseline70_recall": m(r["base70_recall"] for r in rows),
        "baseline70_reduction": m(r["base70_reduction"] for r in rows),
        "split_baseline_recall": m(r["split_recall"] for r in rows),
        "split_baseline_share_ge_0.9": m(r["split_recall"] >= 0.9 for r in rows),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", choices=[*SETS, "all"], default="all")
    ap.add_argument("--json", action="store_true", help="print per-set summaries as JSON")
    ap.add_argument("--cases", action="store_true", help="also print each case")
    args = ap.parse_args()
    names = list(SETS) if args.set == "all" else [args.set]
    out = {}
    for name in names:
        if not SETS[name].exists():
            print(f"{name}: {SETS[name]} missing, skipped", file=sys.stderr)
            continue
        res = run(name, SETS[name])
        rows = res["rows"]
        out[name] = {
            part: summary([r for r in rows if part == "all" or r["half"] == part])
            for part in ("all", "A", "B")
        }
        if args.cases:
            for r in rows:
                print(
                    f"  {r['id']:>8} {r['half']} recall {r['recall']:.2f} red {r['reduction']:.2f} "
                    f"base {r['base_recall']:.2f} {r['ms']:.1f} ms"
                )
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        "reduction = 1 - kept chars / original chars, counting kept original lines only (markers excluded)"
    )
    print(
        "BM25 = plain line-level BM25 (lower-cased \\w+ words) keeping each chosen line with +-3 lines,"
    )
    print("  stopped at the engine's reduction for each case, and at a fixed 0.70 reduction;")
    print("BM25+ = the same with the engine's terms (identifier splitting, stemming, stop words)")
    print(
        f"{'set':<5} {'half':<4} {'n':>4} | {'recall':>6} {'>=0.9':>6} {'reduc':>6} {'ms':>5} |"
        f" {'BM25 rec':>8} {'>=0.9':>6} {'reduc':>6} | {'@0.70 rec':>9} {'reduc':>6} | {'BM25+ rec':>9} {'>=0.9':>6}"
    )
    for name, parts in out.items():
        for part, s in parts.items():
            if not s:
                continue
            print(
                f"{name:<5} {part:<4} {s['cases']:>4} | {s['recall']:>6.3f} {s['share_ge_0.9']:>6.3f} "
                f"{s['reduction']:>6.3f} {s['median_ms']:>5.1f} | {s['baseline_recall']:>8.3f} "
                f"{s['baseline_share_ge_0.9']:>6.3f} {s['baseline_reduction']:>6.3f} | "
                f"{s['baseline70_recall']:>9.3f} {s['baseline70_reduction']:>6.3f} | "
                f"{s['split_baseline_recall']:>9.3f} {s['split_baseline_share_ge_0.9']:>6.3f}"
            )


if __name__ == "__main__":
    main()
