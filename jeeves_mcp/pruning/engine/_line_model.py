"""A line's worth learned from real tasks, on top of the hand-made one.

The planner's line values (unit chance, line evidence, history priors) are one guess at the
chance that a line holds what the question asks about. Which of their parts to trust, and what
else tells (a docstring line, a blank line inside a function, the distance to the nearest
matching line, how sure the unit ranking is), was fitted on real bug-fix tasks and function
needles: each line gets a score w . features(line), and the values become a softmax of those
scores within the text (a conditional logit over its lines, fitted by the log-likelihood of
the lines the fix changed). The fit is `bench/fit_line_model.py`; the weights are its output.
With every weight 0 but `value` at 1, the values are the planner's own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from ._plan import smooth
from ._units import Layout

__all__ = ["FEATURES", "WEIGHTS", "learned_values", "line_features"]

FEATURES = (
    "value",  # log of the planner's value, relative to an even share
    "unit_chance",  # log of the line's share of its unit's chance, relative to an even share
    "evidence",  # the smoothed line evidence, against the text's best
    "own_evidence",  # the line's own BM25 evidence
    "recency",  # the history prior (1 for the newest commit's lines, halved per older one)
    "recent",  # any history prior at all
    "on_topic",  # last changed by a commit whose subject shares the question's terms
    "blank",
    "comment",
    "docstring",
    "signature",
    "import",
    "always",  # kept by the layout whatever the question (module header, imports)
    "module_level",  # held by no unit
    "length",  # log of the stripped line's length
    "indent",  # indentation, in 4-space steps (at most 10)
    "unit_size",  # log of the unit's lines
    "unit_rank",  # log(1 + the unit's place by chance)
    "unit_place",  # where in its unit the line sits, 0 (head) to 1 (tail)
    "to_evidence",  # log(1 + lines to the nearest line with evidence)
    "to_recent",  # log(1 + lines to the nearest line with a history prior)
    "unit_matches",  # the unit holds a line with evidence
    "unit_best",  # log(1 + the unit's best line evidence)
    "value_sure",  # value x the best unit's chance
    "evidence_sure",  # evidence x the best unit's chance
    "recency_sure",  # recency x the best unit's chance
    "control",  # raise, return, if, for, with ...
    "string",  # a line that opens with a string literal, not a docstring's
    "decorator",
    "closer",  # a line of closing brackets
    "best_unit",  # held by the unit ranked first
)

# Fitted by bench/fit_line_model.py on the tuning sets (README, Performance).
WEIGHTS: dict[str, float] = {
    "value": 0.333,
    "unit_chance": 0.082,
    "evidence": 0.517,
    "own_evidence": 0.302,
    "recency": 1.045,
    "recent": -0.139,
    "on_topic": 0.733,
    "blank": 0.480,
    "comment": -0.583,
    "docstring": -1.724,
    "signature": -0.581,
    "import": -0.763,
    "always": 0.112,
    "module_level": 0.213,
    "length": 0.269,
    "indent": 0.097,
    "unit_size": -0.068,
    "unit_rank": -0.387,
    "unit_place": 0.034,
    "to_evidence": 0.279,
    "to_recent": -0.158,
    "unit_matches": -1.671,
    "unit_best": 0.760,
    "value_sure": 0.184,
    "evidence_sure": -0.147,
    "recency_sure": -0.018,
    "control": 0.160,
    "string": -0.127,
    "decorator": 0.183,
    "closer": 0.486,
    "best_unit": -0.287,
}

# The model is used where it was fitted: the tasks' files hold 300 lines or more (a commit
# task's file before the fix, a needle's module), and have structure to rank by (no unit over
# this share of the lines). Below, the planner's values stand: on a small file the view is
# a small share of a small text whatever the model says.
MIN_LINES = 300
UNSTRUCTURED = 0.6

_CONTROL = re.compile(
    r"(?:raise|return|if|elif|else|except|for|while|try|finally|with|yield|assert)\b"
)
_STRING_OPENERS = ("'", '"', 'f"', "f'", 'r"', "r'", 'b"', "b'")
_CLOSERS = frozenset((")", "]", "}", "),", "],", "},", ")]", "):", "]:"))
_FAR = 1000
_EPS = 1e-3


def _distances(flags: Sequence[bool]) -> list[int]:
    """Per line, the lines to the nearest flagged one (at most _FAR)."""
    n = len(flags)
    out = [_FAR] * n
    last = -_FAR
    for i in range(n):
        if flags[i]:
            last = i
        out[i] = min(_FAR, i - last)
    last = n + _FAR
    for i in range(n - 1, -1, -1):
        if flags[i]:
            last = i
        out[i] = min(out[i], last - i)
    return out


def line_features(
    lines: Sequence[str],
    layout: Layout,
    chances: Sequence[float],
    evidence: Sequence[float],
    values: Sequence[float],
    recency: Sequence[float],
    on_topic: Sequence[float],
    prose: AbstractSet[int],
) -> dict[str, list[float]]:
    """Each of FEATURES, a value per line (columns: a pass per feature is what keeps 50,000
    lines fast in Python)."""
    n = len(lines)
    total = sum(values) or 1.0
    smoothed = smooth(evidence)
    top = max(smoothed, default=0.0) or 1.0
    units = layout.units
    owner = [-1] * n
    for k, u in enumerate(units):
        owner[u.start : u.end + 1] = [k] * (u.end - u.start + 1)
    rank = [0] * len(units)
    for r, k in enumerate(sorted(range(len(units)), key=lambda k: -chances[k])):
        rank[k] = r
    sure = max(chances, default=0.0)
    stripped = [line.strip() for line in lines]
    log1p, log = math.log1p, math.log

    def unit_column(per_unit: Sequence[float], outside: float) -> list[float]:
        return [per_unit[k] if k >= 0 else outside for k in owner]

    def flags(rows: Iterable[int]) -> list[float]:
        column = [0.0] * n
        for i in rows:
            column[i] = 1.0
        return column

    sizes = [u.end - u.start + 1 for u in units]
    best = [max(evidence[u.start : u.end + 1]) for u in units]
    value = [log(v / total * n + _EPS) for v in values]
    ev = [log1p(e / top * 10) for e in smoothed]
    place = [0.5] * n
    for u, size in zip(units, sizes, strict=True):
        place[u.start : u.end + 1] = [j / size for j in range(size)]
    return {
        "value": value,
        "unit_chance": unit_column(
            [log(c / size * n + _EPS) for c, size in zip(chances, sizes, strict=True)], log(_EPS)
        ),
        "evidence": ev,
        "own_evidence": [log1p(e) for e in evidence],
        "recency": list(recency),
        "recent": [1.0 if p > 0 else 0.0 for p in recency],
        "on_topic": list(on_topic),
        "blank": [0.0 if s else 1.0 for s in stripped],
        "comment": [1.0 if s.startswith("#") else 0.0 for s in stripped],
        "docstring": flags(prose),
        "signature": flags(i for u in units if u.sig for i in range(u.sig[0], u.sig[1] + 1)),
        "import": flags(layout.context),
        "always": flags(layout.always),
        "module_level": [1.0 if k < 0 else 0.0 for k in owner],
        "length": [log1p(len(s)) for s in stripped],
        "indent": [min(len(x) - len(x.lstrip()), 40) / 4.0 for x in lines],
        "unit_size": unit_column([log(size) for size in sizes], 0.0),
        "unit_rank": unit_column([log1p(r) for r in rank], 5.0),
        "unit_place": place,
        "to_evidence": [log1p(d) for d in _distances([e > 0 for e in evidence])],
        "to_recent": [log1p(d) for d in _distances([p > 0 for p in recency])],
        "unit_matches": unit_column([1.0 if b > 0 else 0.0 for b in best], 0.0),
        "unit_best": unit_column([log1p(b) for b in best], 0.0),
        "value_sure": [x * sure for x in value],
        "evidence_sure": [x * sure for x in ev],
        "recency_sure": [x * sure for x in recency],
        "control": [1.0 if _CONTROL.match(s) else 0.0 for s in stripped],
        "string": flags(
            i for i, s in enumerate(stripped) if s.startswith(_STRING_OPENERS) and i not in layout.prose
        ),
        "decorator": [1.0 if s.startswith("@") else 0.0 for s in stripped],
        "closer": [1.0 if s in _CLOSERS else 0.0 for s in stripped],
        "best_unit": unit_column([1.0 if r == 0 else 0.0 for r in rank], 0.0),
    }


def learned_values(
    lines: Sequence[str],
    layout: Layout,
    chances: Sequence[float],
    evidence: Sequence[float],
    values: Sequence[float],
    recency: Sequence[float],
    on_topic: Sequence[float],
    prose: AbstractSet[int],
) -> list[float]:
    """The values as the learned model weighs them: a softmax of w . features over the
    lines, scaled to the planner's total (all 0 stays all 0); the planner's own values for a
    text the model was not fitted on (see MIN_LINES)."""
    total = sum(values)
    if total <= 0 or len(lines) < MIN_LINES or any(
        u.end - u.start + 1 > UNSTRUCTURED * len(lines) for u in layout.units
    ):
        return list(values)
    columns = line_features(lines, layout, chances, evidence, values, recency, on_topic, prose)
    scores = [0.0] * len(lines)
    for name in FEATURES:
        w = WEIGHTS[name]
        if w:
            scores = [s + w * x for s, x in zip(scores, columns[name], strict=True)]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    scale = total / sum(weights)
    return [x * scale for x in weights]
