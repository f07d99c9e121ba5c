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
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import pairwise

from ._plan import smooth
from ._rank import line_owner
from ._units import Layout

__all__ = ["FEATURES", "WEIGHTS", "PlannedText", "fitted_for", "learned_values", "line_features"]

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

# The model is used where it was fitted: the tasks' files hold 300 to about 5,000 lines (a
# commit task's file before the fix, a needle's module) and have structure to rank by (no unit
# over UNSTRUCTURED of the lines). Elsewhere the planner's values stand: on a small file the
# view is a small share of a small text whatever the model says, and a text of tens of
# thousands of lines (a log, a generated file) is not what it learned from, nor worth its
# passes over every line (50,000 lines stay within the engine's half second).
MIN_LINES = 300
MAX_LINES = 6000
UNSTRUCTURED = 0.6

_CONTROL = re.compile(
    r"(?:raise|return|if|elif|else|except|for|while|try|finally|with|yield|assert)\b"
)
_STRING_OPENERS = ("'", '"', 'f"', "f'", 'r"', "r'", 'b"', "b'")
_CLOSERS = frozenset((")", "]", "}", "),", "],", "},", ")]", "):", "]:"))
_FAR = 1000
_EPS = 1e-3


def _distances(rows: Sequence[int], n: int) -> list[float]:
    """Per line, log(1 + the lines to the nearest of `rows`, sorted; at most _FAR)."""
    far = math.log1p(_FAR)
    if not rows:
        return [far] * n
    logs = [math.log1p(d) for d in range(_FAR)] + [far]

    def away(count: int) -> list[float]:
        """The distances 1..count, as logs."""
        return logs[1 : count + 1] + [far] * (count - _FAR)

    out = away(rows[0])[::-1]
    out.append(0.0)
    for a, b in pairwise(rows):
        gap = b - a - 1
        half = gap // 2
        out += away(gap - half)
        out += away(half)[::-1]
        out.append(0.0)
    out += away(n - rows[-1] - 1)
    return out


@dataclass(frozen=True, slots=True)
class PlannedText:
    """What the planner made of a code text: the model's input. `evidence`: each line's own
    BM25; `values`: the planner's line values, history priors included; `recency`, `on_topic`:
    the history priors alone; `prose`: the docstring lines that weigh as prose."""

    lines: Sequence[str]
    layout: Layout
    chances: Sequence[float]
    evidence: Sequence[float]
    values: Sequence[float]
    recency: Sequence[float]
    on_topic: Sequence[float]
    prose: AbstractSet[int]


class _Features:
    """FEATURES in three shapes, so that scoring takes one pass per distinct column: `dense`, a
    column per line times a scale (`value_sure` is `value` x the ranking's sureness); `per_unit`,
    a value per unit and one for lines outside any unit; `flags`, the lines where it is 1."""

    __slots__ = ("dense", "flags", "owner", "per_unit", "sparse")

    def __init__(self, owner: list[int]) -> None:
        self.owner = owner
        self.dense: dict[str, tuple[list[float], float]] = {}
        self.per_unit: dict[str, tuple[list[float], float]] = {}
        self.flags: dict[str, list[int]] = {}
        # A value on a few lines, 0 elsewhere, times a scale: (rows, values, scale).
        self.sparse: dict[str, tuple[list[int], list[float], float]] = {}

    def columns(self) -> dict[str, list[float]]:
        """Each feature as a value per line, in FEATURES order."""
        n = len(self.owner)
        out: dict[str, list[float]] = {}
        for name in FEATURES:
            if name in self.dense:
                column, scale = self.dense[name]
                out[name] = [x * scale for x in column]
            elif name in self.per_unit:
                per_unit, outside = self.per_unit[name]
                out[name] = [per_unit[k] if k >= 0 else outside for k in self.owner]
            elif name in self.sparse:
                rows, values, scale = self.sparse[name]
                out[name] = [0.0] * n
                for i, x in zip(rows, values, strict=True):
                    out[name][i] = x * scale
            else:
                out[name] = [0.0] * n
                for i in self.flags[name]:
                    out[name][i] = 1.0
        return out

    def scores(self, weights: dict[str, float]) -> list[float]:
        """Per line, the sum of weight x feature (what columns() dotted with weights gives)."""
        by_column: dict[int, tuple[list[float], float]] = {}
        for name, (column, scale) in self.dense.items():
            kept, w = by_column.get(id(column), (column, 0.0))
            by_column[id(column)] = (kept, w + weights[name] * scale)
        units = len(next(iter(self.per_unit.values()))[0]) if self.per_unit else 0
        unit_score = [0.0] * units
        outside = 0.0
        for name, (per_unit, out) in self.per_unit.items():
            w = weights[name]
            if w:
                unit_score = [a + w * b for a, b in zip(unit_score, per_unit, strict=True)]
                outside += w * out
        for column, w in by_column.values():
            if w and min(column) == max(column):  # a constant: no pass over the lines
                unit_score = [a + w * column[0] for a in unit_score]
                outside += w * column[0]
        scores = [unit_score[k] if k >= 0 else outside for k in self.owner]
        for column, w in by_column.values():
            if w and min(column) != max(column):
                scores = [a + w * b for a, b in zip(scores, column, strict=True)]
        for name, (rows, values, scale) in self.sparse.items():
            w = weights[name] * scale
            if w:
                for i, x in zip(rows, values, strict=True):
                    scores[i] += w * x
        for name, rows in self.flags.items():
            w = weights[name]
            if w:
                for i in rows:
                    scores[i] += w
        return scores


def _features(text: PlannedText) -> _Features:
    lines, layout, chances, evidence = text.lines, text.layout, text.chances, text.evidence
    values, recency, on_topic = text.values, text.recency, text.on_topic
    n = len(lines)
    total = sum(values) or 1.0
    smoothed = smooth(evidence)
    top = max(smoothed, default=0.0) or 1.0
    units = layout.units
    owner = line_owner(units, n)
    rank = [0] * len(units)
    for r, k in enumerate(sorted(range(len(units)), key=lambda k: -chances[k])):
        rank[k] = r
    sure = max(chances, default=0.0)
    stripped = [line.strip() for line in lines]
    log1p, log = math.log1p, math.log
    sizes = [u.end - u.start + 1 for u in units]
    best = [max(evidence[u.start : u.end + 1]) for u in units]
    value = [log(v / total * n + _EPS) for v in values]
    ev = [log1p(e / top * 10) for e in smoothed]
    place = [0.5] * n
    for u, size in zip(units, sizes, strict=True):
        place[u.start : u.end + 1] = [j / size for j in range(size)]
    recency = list(recency)
    recent = [i for i, p in enumerate(recency) if p > 0]
    f = _Features(owner)
    f.dense = {
        "value": (value, 1.0),
        "evidence": (ev, 1.0),
        "own_evidence": ([log1p(e) for e in evidence], 1.0),
        "length": ([log1p(len(s)) for s in stripped], 1.0),
        "indent": ([min(len(x) - len(x.lstrip()), 40) / 4.0 for x in lines], 1.0),
        "unit_place": (place, 1.0),
        "to_evidence": (_distances([i for i, e in enumerate(evidence) if e > 0], n), 1.0),
        "to_recent": (_distances(recent, n), 1.0),
        "value_sure": (value, sure),
        "evidence_sure": (ev, sure),
    }
    topical = [i for i, x in enumerate(on_topic) if x]
    f.sparse = {
        "recency": (recent, [recency[i] for i in recent], 1.0),
        "on_topic": (topical, [on_topic[i] for i in topical], 1.0),
        "recency_sure": (recent, [recency[i] for i in recent], sure),
    }
    f.per_unit = {
        "unit_chance": (
            [log(c / size * n + _EPS) for c, size in zip(chances, sizes, strict=True)], log(_EPS)
        ),
        "module_level": ([0.0] * len(units), 1.0),
        "unit_size": ([log(size) for size in sizes], 0.0),
        "unit_rank": ([log1p(r) for r in rank], 5.0),
        "unit_matches": ([1.0 if b > 0 else 0.0 for b in best], 0.0),
        "unit_best": ([log1p(b) for b in best], 0.0),
        "best_unit": ([1.0 if r == 0 else 0.0 for r in rank], 0.0),
    }
    f.flags = {
        "recent": recent,
        "blank": [i for i, s in enumerate(stripped) if not s],
        "comment": [i for i, s in enumerate(stripped) if s.startswith("#")],
        "docstring": sorted(text.prose),
        "signature": sorted({i for u in units if u.sig for i in range(u.sig[0], u.sig[1] + 1)}),
        "import": sorted(layout.context),
        "always": sorted(layout.always),
        "control": [i for i, s in enumerate(stripped) if _CONTROL.match(s)],
        "string": [
            i
            for i, s in enumerate(stripped)
            if s.startswith(_STRING_OPENERS) and i not in layout.prose
        ],
        "decorator": [i for i, s in enumerate(stripped) if s.startswith("@")],
        "closer": [i for i, s in enumerate(stripped) if s in _CLOSERS],
    }
    return f


def line_features(text: PlannedText) -> dict[str, list[float]]:
    """Each of FEATURES, a value per line (what the fit reads)."""
    return _features(text).columns()


def fitted_for(text: PlannedText) -> bool:
    """Whether the text is of the kind the model was fitted on (see MIN_LINES, MAX_LINES)."""
    n = len(text.lines)
    return MIN_LINES <= n <= MAX_LINES and all(
        u.end - u.start + 1 <= UNSTRUCTURED * n for u in text.layout.units
    )


def learned_values(text: PlannedText) -> list[float]:
    """The values as the learned model weighs them: a softmax of w . features over the
    lines, scaled to the planner's total (all 0 stays all 0); the planner's own values for a
    text the model was not fitted on (fitted_for)."""
    total = sum(text.values)
    if total <= 0 or not fitted_for(text):
        return list(text.values)
    scores = _features(text).scores(WEIGHTS)
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    scale = total / sum(weights)
    return [x * scale for x in weights]
