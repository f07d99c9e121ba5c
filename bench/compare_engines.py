"""The engine at another revision against this tree, case by case, on the same sets.

    python bench/compare_engines.py REV [--set NAME ...] [--extra FILE ...] [--history DIR]

Runs bench/prune_quality.py (without the BM25 baseline) in a temporary git worktree at REV
and in this tree, pairs the cases by set and id, and prints per set: cases, mean recall at
REV and here, the paired difference with its 95% interval, the cases whose recall went up or
down, a two-sided sign test over those, and the change in mean reduction. A difference whose
interval holds 0, or a sign test above 0.05, is not yet told apart from chance: a tuning run
that picks the best of many such differences picks noise. Options after REV are passed to
prune_quality.py as they are.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sign_test(up: int, down: int) -> float:
    """Two-sided exact binomial p-value of `up` against `down` at even odds."""
    n = up + down
    if n == 0:
        return 1.0
    k = min(up, down)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def paired(before: dict[str, dict], after: dict[str, dict]) -> dict[str, float]:
    """Figures of the cases both runs hold, keyed by id."""
    ids = sorted(before.keys() & after.keys())
    diffs = [after[i]["recall"] - before[i]["recall"] for i in ids]
    up = sum(1 for d in diffs if d > 1e-9)
    down = sum(1 for d in diffs if d < -1e-9)
    n = len(ids)
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(n) if n > 1 else 0.0
    return {
        "cases": n,
        "recall_before": statistics.fmean(before[i]["recall"] for i in ids) if n else 0.0,
        "recall_after": statistics.fmean(after[i]["recall"] for i in ids) if n else 0.0,
        "difference": statistics.fmean(diffs) if n else 0.0,
        "interval": half,
        "up": up,
        "down": down,
        "sign_p": sign_test(up, down),
        "reduction_change": statistics.fmean(
            after[i]["reduction"] - before[i]["reduction"] for i in ids
        )
        if n
        else 0.0,
    }


def run(tree: Path, args: list[str], out: Path) -> dict[str, dict[str, dict]]:
    """Every case's figures from prune_quality.py in `tree`, by set and id."""
    cmd = [sys.executable, "bench/prune_quality.py", "--no-baseline", "--cases", str(out), *args]
    # The shared sets sit beside this tree, not beside a worktree in a temporary directory.
    env = dict(os.environ)
    shared = ROOT.parent / "shared" / "bench"
    env.setdefault("JEEVES_NEEDLES", str(shared / "needles-dev.jsonl"))
    env.setdefault("JEEVES_COMMITS", str(shared / "commits-dev.jsonl"))
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=env)
    if done.returncode != 0 or not out.exists():
        sys.exit(f"prune_quality.py failed in {tree}:\n{done.stderr.strip()}")
    rows: dict[str, dict[str, dict]] = defaultdict(dict)
    for line in out.read_text().splitlines():
        row = json.loads(line)
        rows[row["set"]][row["id"]] = row
    return rows


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    rev, args = sys.argv[1], sys.argv[2:]
    # --extra and --history paths are read in the worktree too: make them absolute.
    args = [
        str(Path(a).resolve()) if i and args[i - 1] in ("--extra", "--history") else a
        for i, a in enumerate(args)
    ]
    with tempfile.TemporaryDirectory(prefix="jeeves-compare-") as tmp:
        worktree = Path(tmp) / "tree"
        added = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), rev],
            capture_output=True,
            text=True,
        )
        if added.returncode != 0:
            sys.exit(f"cannot check out {rev}: {added.stderr.strip()}")
        try:
            before = run(worktree, args, Path(tmp) / "before.jsonl")
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)],
                capture_output=True,
            )
        after = run(ROOT, args, Path(tmp) / "after.jsonl")
    print(
        f"recall at {rev} -> this tree, paired by case; diff = mean change with its 95% interval,"
    )
    print(
        "up/down = cases whose recall changed, p = two-sided sign test, red = change in reduction"
    )
    head = (
        f"{'set':<22} {'n':>5} | {'before':>6} {'after':>6} {'diff':>7} {'+-':>6} | "
        f"{'up':>4} {'down':>4} {'p':>6} | {'red':>7}"
    )
    print(head)
    print("-" * len(head))
    for name in sorted(before.keys() & after.keys()):
        s = paired(before[name], after[name])
        print(
            f"{name[:22]:<22} {s['cases']:>5} | {s['recall_before']:>6.3f} {s['recall_after']:>6.3f} "
            f"{s['difference']:>+7.4f} {s['interval']:>6.4f} | {s['up']:>4} {s['down']:>4} "
            f"{s['sign_p']:>6.3f} | {s['reduction_change']:>+7.4f}"
        )


if __name__ == "__main__":
    main()
