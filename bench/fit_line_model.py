"""Fit the engine's learned line model (jeeves_mcp/pruning/engine/_line_model.py) on benchmark sets.

    python bench/fit_line_model.py SET.jsonl... [--history MIRRORS] [--needles-weight 0.5]
                                   [--folds 5] [--l2 0.001]

Needs numpy and scipy (`pip install numpy scipy`; the engine itself does not). For each code
case, the engine's own features of every line (`line_features`, with the history prior
blamed in MIRRORS as bench/prune_quality.py does) and the gold lines; then a conditional logit
over the lines of each text, p(line) = softmax(w . features), fitted by the mean log-likelihood
of the gold lines (L-BFGS, L2 penalty). Each source (repository, library) weighs by the square
root of its cases, and function needles (sets named needles*) together weigh --needles-weight
against commit tasks, so that one large repository or one kind of task does not decide.

Prints, per fold of sources (--folds, sources dealt round-robin in sorted order), the mean
log-likelihood of the held-out gold lines under the planner's values and under the model
fitted without them, then the weights fitted on every case, as WEIGHTS for _line_model.py.
Texts the model is not used on (fitted_for: 300 to 6,000 lines, with structure) are left out,
as the engine leaves them out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
import prune_quality  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

from jeeves_mcp.pruning.engine._line_model import FEATURES, fitted_for, line_features  # noqa: E402
from jeeves_mcp.pruning.engine._planner import planned_code  # noqa: E402


def case_features(c: dict) -> np.ndarray | None:
    """The feature matrix of a code case's lines as select_lines would build it, or None
    when the engine would not use the model on it."""
    lines = c["text"].split("\n")
    history, _ = prune_quality.history_prior(c, lines)
    text = planned_code(lines, c["question"], c.get("path"),
                        None if history is None else history.prior,
                        None if history is None else history.subjects)
    if not fitted_for(text):
        return None
    columns = line_features(text)
    return np.column_stack([np.asarray(columns[name], dtype=np.float64) for name in FEATURES])


def fit(cases: list[tuple], l2: float, needles_weight: float, start: np.ndarray) -> np.ndarray:
    """Weights maximising the weighted mean log-likelihood of the gold lines."""
    per_source: dict[str, int] = defaultdict(int)
    for case in cases:
        per_source[case[3]] += 1
    weight = np.array([1 / np.sqrt(per_source[c[3]]) for c in cases])
    for kind, share in (("commits", 1.0), ("needles", needles_weight)):
        mask = np.array([c[4] == kind for c in cases])
        if mask.any():
            weight[mask] *= share / weight[mask].sum()
    weight /= weight.sum()
    gold_means = [x[a : b + 1].mean(0) for x, a, b, *_ in cases]

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        total, grad = l2 * (w @ w), 2 * l2 * w
        for (x, *_), gold, cw in zip(cases, gold_means, weight, strict=True):
            s = x @ w
            top = s.max()
            e = np.exp(s - top)
            z = e.sum()
            total += cw * (np.log(z) + top - gold @ w)
            grad += cw * ((e / z) @ x - gold)
        return total, grad

    return minimize(loss, start, jac=True, method="L-BFGS-B", options={"maxiter": 300}).x


def log_likelihood(cases: list[tuple], w: np.ndarray) -> float:
    out = []
    for x, a, b, *_ in cases:
        s = x @ w
        top = s.max()
        out.append(float(s[a : b + 1].mean() - (np.log(np.exp(s - top).sum()) + top)))
    return float(np.mean(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="+", type=Path)
    ap.add_argument("--history", type=Path, help="bare clones OWNER+NAME/repo to blame in")
    ap.add_argument("--needles-weight", type=float, default=0.5)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--l2", type=float, default=1e-3)
    args = ap.parse_args()
    prune_quality.HISTORY = args.history
    cases = []
    for path in args.sets:
        kind = "needles" if path.name.startswith("needles") else "commits"
        for line in path.read_text().splitlines():
            c = json.loads(line)
            if c["source_type"] != "code":
                continue
            x = case_features(c)
            if x is not None:
                a, b = c["gold"]
                cases.append((x, a - 1, b - 1, prune_quality.source_of(c).split("==")[0], kind))
    print(f"{len(cases)} cases from {len({c[3] for c in cases})} sources", flush=True)
    planner = np.zeros(len(FEATURES))
    planner[FEATURES.index("value")] = 1.0
    every = fit(cases, args.l2, args.needles_weight, planner)
    sources = sorted({c[3] for c in cases})
    for k in range(args.folds):
        out = set(sources[k :: args.folds])
        w = fit([c for c in cases if c[3] not in out], args.l2, args.needles_weight, every)
        held = [c for c in cases if c[3] in out]
        print(f"fold {k}: {len(held)} cases of {len(out)} sources held out, log-likelihood of "
              f"the gold lines: planner {log_likelihood(held, planner):.3f}, "
              f"model {log_likelihood(held, w):.3f}", flush=True)
    print("WEIGHTS: dict[str, float] = {")
    for name, x in zip(FEATURES, every, strict=True):
        print(f'    "{name}": {x:.3f},')
    print("}")


if __name__ == "__main__":
    main()
