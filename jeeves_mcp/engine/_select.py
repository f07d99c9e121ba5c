"""`select_lines`: which lines of a text to keep for a question."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ._code import code_layout
from ._docs import docs_layout
from ._logs import logs_layout
from ._rank import score_units
from ._text import query_terms
from ._units import Layout

__all__ = ["PruneTimeout", "Selection", "select_lines"]

NO_PRUNE_BEGIN = "⟦NO_PRUNE_BEGIN⟧"
NO_PRUNE_END = "⟦NO_PRUNE_END⟧"

# Share of the characters the ranked units may fill; the best unit is kept even past it.
BUDGET = 0.25
# A unit scoring below this share of the best one is not worth keeping.
REL_CUT = 0.2
# Docs: a softmax of the section scores, at a temperature relative to the best score,
# is read as the chance that each section is the one asked about. Sections are taken
# by that chance per character (the first even past the budget) until they hold DOCS_MASS of it
# or fill DOCS_BUDGET of the characters: a clear winner is kept alone, close
# candidates are kept together.
DOCS_MASS = 0.9
DOCS_TEMP = 0.2
DOCS_BUDGET = 0.25


class PruneTimeout(Exception):
    """The deadline given to `select_lines` passed before a selection was made."""


@dataclass(frozen=True)
class Selection:
    keep: list[bool]
    reasons: list[str | None]


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise PruneTimeout("pruning deadline passed")


def select_lines(
    lines: Sequence[str],
    question: str,
    source_type: str,
    *,
    max_prune_ratio: float = 0.9,
    min_keep_lines: int = 0,
    path: str | None = None,
    deadline: float | None = None,
) -> Selection:
    if source_type not in ("code", "logs", "docs"):
        raise ValueError(f"unknown source_type {source_type!r}")
    n = len(lines)
    _check(deadline)
    qterms = query_terms(question) if question and question.strip() else []
    if not qterms or n == 0:
        return Selection([True] * n, [None] * n)
    lines = list(lines)
    layout = _layout(lines, source_type, path)
    _check(deadline)
    scores = score_units(lines, layout.units, qterms)
    _check(deadline)
    if source_type == "docs":
        keep = _choose_by_chance(lines, layout, scores)
    else:
        keep = _choose(lines, layout, scores)
    _check(deadline)
    _enforce(lines, layout, scores, keep, max_prune_ratio, min_keep_lines)
    return Selection(keep, _reasons(layout, keep))


def _layout(lines: list[str], source_type: str, path: str | None) -> Layout:
    if source_type == "code":
        return code_layout(lines, path)
    if source_type == "docs":
        return docs_layout(lines)
    return logs_layout(lines)


def _choose(lines: list[str], layout: Layout, scores: list[float]) -> list[bool]:
    n = len(lines)
    keep = [False] * n
    for i in layout.always:
        keep[i] = True
    sizes = [len(x) + 1 for x in lines]
    total = sum(sizes)
    kept = 0  # the budget is for ranked units: lines kept by the safety rules are not counted
    order = sorted(range(len(scores)), key=lambda k: (-scores[k], k))
    if not order or scores[order[0]] <= 0:
        return keep
    top = scores[order[0]]
    for rank, k in enumerate(order):
        if scores[k] < REL_CUT * top:
            break
        u = layout.units[k]
        rows = [i for a, b in u.heads for i in range(a, b + 1)]
        rows.extend(range(u.start, u.end + 1))
        cost = sum(sizes[i] for i in set(rows) if not keep[i])
        if rank > 0 and kept + cost > BUDGET * total:
            continue
        for i in rows:
            keep[i] = True
        kept += cost
    return keep


def _choose_by_chance(lines: list[str], layout: Layout, scores: list[float]) -> list[bool]:
    n = len(lines)
    keep = [False] * n
    for i in layout.always:
        keep[i] = True
    cand = [k for k in range(len(scores)) if scores[k] > 0]
    if not cand:
        return keep
    sizes = [len(x) + 1 for x in lines]
    total = sum(sizes)
    top = max(scores[k] for k in cand)
    temp = DOCS_TEMP * top
    chance = {k: math.exp((scores[k] - top) / temp) for k in cand}
    z = sum(chance.values())
    rows_of: dict[int, list[int]] = {}
    density: dict[int, float] = {}
    for k in cand:
        u = layout.units[k]
        rows = sorted(
            {i for a, b in u.heads for i in range(a, b + 1)} | set(range(u.start, u.end + 1))
        )
        rows_of[k] = rows
        density[k] = chance[k] / max(1, sum(sizes[i] for i in rows if not keep[i]))
    order = sorted(cand, key=lambda k: (-density[k], k))
    mass = 0.0
    kept = 0
    for rank, k in enumerate(order):
        if mass >= DOCS_MASS * z:
            break
        cost = sum(sizes[i] for i in rows_of[k] if not keep[i])
        if rank > 0 and kept + cost > DOCS_BUDGET * total:
            continue
        for i in rows_of[k]:
            keep[i] = True
        kept += cost
        mass += chance[k]
    return keep


def _enforce(
    lines: list[str],
    layout: Layout,
    scores: list[float],
    keep: list[bool],
    max_prune_ratio: float,
    min_keep_lines: int,
) -> None:
    """The invariants: protected blocks, at most max_prune_ratio pruned, min_keep_lines,
    enclosing signatures and headings of every kept line, atoms whole."""
    n = len(lines)
    inside = False
    for i, line in enumerate(lines):
        if NO_PRUNE_BEGIN in line:
            inside = True
        if inside:
            keep[i] = True
        if NO_PRUNE_END in line:
            inside = False
    ratio = min(1.0, max(0.0, max_prune_ratio))
    need = max(n - math.floor(n * ratio + 1e-9), min(n, max(0, min_keep_lines)))
    have = sum(keep)
    if have < need:
        have = _fill_by_rank(layout, scores, keep, have, need)
    if have < need:
        _fill_by_distance(keep, need - have)
    for u in layout.units:
        if u.heads and any(keep[u.start : u.end + 1]):
            for a, b in u.heads:
                for i in range(a, b + 1):
                    keep[i] = True
    for a, b in layout.atoms:
        if any(keep[a : b + 1]):
            for i in range(a, b + 1):
                keep[i] = True


def _fill_by_rank(
    layout: Layout, scores: list[float], keep: list[bool], have: int, need: int
) -> int:
    """Add the lines of the best units that scored at all, heads first, until `need` lines are kept."""
    order = sorted((k for k in range(len(scores)) if scores[k] > 0), key=lambda k: (-scores[k], k))
    for k in order:
        u = layout.units[k]
        for a, b in [*u.heads, (u.start, u.end)]:
            for i in range(a, b + 1):
                if not keep[i]:
                    keep[i] = True
                    have += 1
                    if have >= need:
                        return have
    return have


def _fill_by_distance(keep: list[bool], missing: int) -> None:
    """Add the `missing` pruned lines nearest to a kept line (context first), earlier lines on ties."""
    n = len(keep)
    far = n + 1
    dist = [far] * n
    d = far
    for i in range(n):
        d = 0 if keep[i] else d + 1
        dist[i] = d
    d = far
    for i in range(n - 1, -1, -1):
        d = 0 if keep[i] else d + 1
        dist[i] = min(dist[i], d)
    for i in sorted((i for i in range(n) if not keep[i]), key=lambda i: (dist[i], i))[:missing]:
        keep[i] = True


def _reasons(layout: Layout, keep: list[bool]) -> list[str | None]:
    label: list[str | None] = [None] * len(keep)
    for u in layout.units:
        for i in range(u.start, u.end + 1):
            label[i] = u.label
    return [
        None if k else (f"hors focus: {lab}" if lab else "hors focus")
        for k, lab in zip(keep, label, strict=True)
    ]
