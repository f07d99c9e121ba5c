"""`select_lines`: which lines of a text to keep for a question."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Sequence

from jeeves_mcp.pruning.contract import Selection, protected_lines
from jeeves_mcp.pruning.render import fill_cheap_gaps, marker_change, numbered_view_bytes

from ._ages import with_file_ages
from ._line_model import learned_values
from ._logs import failures_first
from ._markers import BUDGET_REASON_NAMES, block_reasons, innermost_name
from ._plan import MARKER_BYTES, Ranking, line_bytes, line_values, unit_chances
from ._planner import CODE_TEMP, plan_code, scored_text, text_layout
from ._searched import within_files
from ._sniff import without_line_numbers
from ._text import bounded_question, query_identifiers, query_terms
from ._units import Around, Layout, UnitRanking, part_of

__all__ = ["PruneTimeout", "Selection", "select_lines"]


# Share of the characters the ranked units may fill; the best unit is kept even past it.
BUDGET = 0.25
# A unit scoring below this share of the best one is not worth keeping.
REL_CUT = 0.2
# Docs: a softmax of the section scores, at a temperature relative to the best score,
# is read as the chance that each section is the one asked about. Sections are taken by
# that chance per character, the first even past the budget; a later one only if its chance
# is worth DOCS_PRICE times its share of the characters and it fits within DOCS_BUDGET of
# them: a clear winner is kept alone, close candidates together (see VIEW_PRICE).
DOCS_PRICE = 0.45
DOCS_TEMP = 0.2
DOCS_BUDGET = 0.5


class PruneTimeout(Exception):
    """The deadline given to `select_lines` passed before a selection was made."""


# Source types whose lines are ranked one by one (see _plan).
PLANNED = ("code",)
# Docs without structure go through the line ranking with this share of the view.
DOCS_SHARE = 0.3
# A unit over this share of the lines means the text has no structure to rank by.
UNSTRUCTURED = 0.6
# Code: share of the view's bytes the chosen lines fill, plus UNSURE_SHARE x (1 - the
# chance that the best unit is the one asked about, see unit_chances). A view always fills
# it (or the response budget): an early stop once the ranking looked confident left a large
# file's budget partly unused, and on real bug-fix tasks a confident ranking is wrong too
# often. An unsure ranking keeps more: at the same mean reduction, +0.3 points of recall on
# held-out commit tasks, +0.5 on the tuning set, +0.3 on held-out function needles (share
# >= 0.9 +0.4) against one share for every view (0.3); +0.3 on commit tasks from 12 more
# repositories made after it was settled. Small: within chance case by case
# (bench/compare_engines.py).
CODE_SHARE = 0.25
UNSURE_SHARE = 0.1
# ... and past that share while the lines next in order hold more value than VIEW_PRICE
# times their share of the text's characters (see _worth_its_size): a view's size is the
# one that keeps the most expected recall net of that price, so a ranking sure of a few
# lines keeps a small view and one spread over many lines a large one.
VIEW_PRICE = 0.4
# A window of a file (see Around) holds a share of the value of the window's lines ^ (1 - this)
# x the file's ^ this: with the window's alone (0), a window that holds nothing the file ranks
# high had its lines' values even and was kept two thirds whole, 21 points of reduction below
# the window ranked alone (200-line windows off the fix's lines, two looked-at commit sets);
# with the file's (1), a window holding the fix kept no more of it than ranked alone. 0.3: off
# the fix level with alone, on it +1.7 to +3.1 points of recall and +1.3 to +2.3 of reduction
# (0.2: +2.4 to +4.3 at level reduction, off it -4 to -7).
FILE_VALUE_WEIGHT = 0.3
# Search output: the share of the view its best lines fill before VIEW_PRICE decides (0.12 from two
# looked-at sets, 0.08 / 0.12 without the price: smaller views, less recall than BM25 there); never
# less than CODE_MIN_BYTES (or half a small text): below it pruning saves little and risks much.
SEARCH_SHARE = 0.12
CODE_MIN_BYTES = 2048
# A partly kept unit is completed when the rest takes at most this share of the budget.
COMPLETE_SHARE = 0.2
# Imports lead the view when they take at most this share of the budget...
CONTEXT_CHEAP = 0.05
# ... or this share when the question is about an import (their lines are not scored: a large file's
# imports were lost to "Remove unused cgi import"): held-out commit tasks 6 up / 0 down, level size.
IMPORTS_CHEAP = 0.5
ABOUT_IMPORTS = re.compile(r"\bimport(?:s|ed|ing)?\b", re.IGNORECASE)


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
    max_bytes: int | None = None,
    line_prior: Sequence[float] | None = None,
    line_subjects: Sequence[str | None] | None = None,
    around: Around | None = None,
    files: Callable[[str], str | None] | None = None,
    file_ages: Callable[[str], int | None] | None = None,
) -> Selection:
    """The lines to keep; `max_bytes` is the size the caller's view may take (line numbers and
    markers included), so that the lines chosen first fit it. Code only: `line_prior`, per line
    a worth known before the question is read (recent changes); `line_subjects`, per line the
    subject of the commit that last changed it; `around`, the file `lines` are a window of, with
    its priors, which replace the window's. `files`, `file_ages`: the text of the file a search
    output's row names and how many commits ago it last changed (see _searched), or None."""
    if source_type not in ("code", "logs", "docs"):
        raise ValueError(f"unknown source_type {source_type!r}")
    n = len(lines)
    _check(deadline)
    question = bounded_question(question)
    qterms = query_terms(question) if question and question.strip() else []
    identifiers = query_identifiers(question) if qterms or (question and question.strip()) else []
    if not (qterms or identifiers) or n == 0:
        return Selection([True] * n, [None] * n)
    shown = list(lines)
    # Numbered lines (`cat -n`, `nl` in a command's output) are read without their numbers
    # and priced with them.
    lines = without_line_numbers(shown) or shown
    rows = around.part(lines) if source_type == "code" and around is not None else None
    if rows is None and around is not None and around.matches:
        source_type = "logs"  # not the file's rows after all: a command's output
    whole = around if rows is not None else None
    file_lines = whole.lines if whole is not None else lines
    layout, prose, scored = scored_text(
        file_lines, question, source_type, path, qterms, identifiers, lambda: _check(deadline), file_ages
    )
    scores = scored.units
    _check(deadline)
    ranking: Ranking | UnitRanking | None = None
    of_value: float | None = None  # the value a view's share of it is taken of (a window's)
    if source_type in PLANNED or (source_type == "docs" and _unstructured(layout, n)) or layout.by_line:
        docs = source_type == "docs"
        chances: Sequence[float]
        if docs:
            chances = unit_chances(scores, DOCS_TEMP)
            values = line_values(n, layout, chances, scored.lines, prose=prose)
        elif layout.by_line:  # search output: the planner's values, no model fitted to it
            chances = with_file_ages(unit_chances(scores, CODE_TEMP), layout, file_ages)
            values = line_values(n, layout, chances, scored.lines, prose=frozenset())
            _check(deadline)
            if files is not None and layout.paths is not None:  # half the time left, at most, for the files' layouts
                until = None if deadline is None else (time.monotonic() + deadline) / 2
                values = within_files(lines, layout.paths, values, files, question, qterms, identifiers, until)
                _check(deadline)
        elif whole is None:
            text = plan_code(lines, layout, scored, prose, qterms, line_prior, line_subjects)
            chances = text.chances
            _check(deadline)
            values = learned_values(text)
        else:
            # Ranked within the file: the window's units are the file's, cut at its edges, and
            # their chances are the file's; its view is sized as a share of a value between the
            # window's and the file's (FILE_VALUE_WEIGHT).
            text = plan_code(file_lines, layout, scored, prose, qterms, whole.line_prior, whole.line_subjects)
            _check(deadline)
            file_values = learned_values(text)
            assert rows is not None
            values = [0.0 if row is None else file_values[row] for row in rows]
            in_window = max(sum(values), 1e-12)
            of_value = in_window ** (1 - FILE_VALUE_WEIGHT) * max(sum(file_values), in_window) ** FILE_VALUE_WEIGHT
            layout, index = part_of(layout, rows)
            chances = [text.chances[k] for k in index]
            scores = [scores[k] for k in index]
        view = numbered_view_bytes(shown)
        if docs:
            share = DOCS_SHARE
        elif layout.by_line:
            share = SEARCH_SHARE
        else:
            share = CODE_SHARE + UNSURE_SHARE * (1 - max(chances, default=0.0))
        budget = max(min(CODE_MIN_BYTES, 0.6 * sum(view)), share * sum(view))
        cap = sum(view) if max_bytes is None else max_bytes
        first = set(layout.always)
        cheap = IMPORTS_CHEAP if ABOUT_IMPORTS.search(question) else CONTEXT_CHEAP
        if sum(view[i] for i in layout.context) <= max(256, cheap * min(budget, cap)):
            first |= layout.context
        ranking = Ranking(view, layout, values, first)
        if not docs:
            budget = max(budget, _worth_its_size(shown, ranking, values, cap, of_value))
        budget = min(budget, cap)
        keep = _prefix(shown, ranking, budget)
        _complete_units(shown, layout, keep, max(256, COMPLETE_SHARE * budget))
    elif source_type == "docs":
        keep = _choose_by_chance(lines, layout, scores)
        ranking = UnitRanking(n, layout, scores, keep)
    else:
        keep = _choose(lines, layout, scores)
        lead, between = failures_first(lines, layout, scores, keep, max_bytes)
        ranking = UnitRanking(n, layout, scores, keep, lead, between)
    _check(deadline)
    _enforce(lines, layout, scores, keep, max_prune_ratio, min_keep_lines, ranking)
    order = None
    if ranking is not None:
        if source_type != "logs" or layout.listed is not None or layout.sections or layout.by_line:  # a log's short gaps are noise
            fill_small_gaps(lines, keep)
        ranked = set(ranking.order)
        order = ranking.order + [i for i in range(n) if keep[i] and i not in ranked]
    return Selection(keep, block_reasons(layout, scores, keep), order,
                     reasons_for=lambda mask: block_reasons(layout, scores, mask, BUDGET_REASON_NAMES))


def _unstructured(layout: Layout, n: int) -> bool:
    """One unit holds most of the text: there is no structure to choose by."""
    return n > 20 and any(u.end - u.start + 1 > UNSTRUCTURED * n for u in layout.units)


def _worth_its_size(
    lines: Sequence[str], order: Iterable[int], values: Sequence[float], cap: float, of_value: float | None = None,
) -> float:
    """The size of the prefix of `order` (up to `cap` bytes of view) whose lines hold the most
    of the text's value (or of `of_value`) net of VIEW_PRICE times their share of its characters."""
    total_value = of_value if of_value is not None else sum(values)
    if total_value <= 0:
        return 0.0
    total_chars = sum(len(x) + 1 for x in lines)
    shown = [False] * len(lines)
    used = most = MARKER_BYTES
    value = chars = 0.0
    best = best_size = 0.0
    for i in order:
        used += line_bytes(i, lines[i]) + marker_change(shown, i, MARKER_BYTES)
        shown[i] = True
        most = max(most, used)
        if most > cap:
            break
        value += values[i]
        chars += len(lines[i]) + 1
        net = value / total_value - VIEW_PRICE * chars / total_chars
        if net > best:
            best, best_size = net, most
        elif net + (total_value - value) / total_value <= best:
            break  # even all the value left could not beat the best: no need to rank the rest
    return best_size


def _prefix(lines: Sequence[str], order: Iterable[int], max_bytes: float) -> list[bool]:
    """The longest prefix of `order` whose view fits `max_bytes`."""
    n = len(lines)
    keep = [False] * n
    used = MARKER_BYTES  # a view that hides anything has at least one marker
    for i in order:
        c = line_bytes(i, lines[i]) + marker_change(keep, i, MARKER_BYTES)
        if used + c > max_bytes and any(keep):
            break
        keep[i] = True
        used += c
    return keep


def _complete_units(lines: Sequence[str], layout: Layout, keep: list[bool], room: float) -> None:
    """Keep the rest of a unit partly kept when the rest is small: a whole function reads
    better than its matching lines, and costs little more."""
    for u in layout.units:
        rows = range(u.start, u.end + 1)
        missing = [i for i in rows if not keep[i]]
        if not missing or len(missing) == len(rows):
            continue
        if sum(line_bytes(i, lines[i]) for i in missing) <= room:
            for i in missing:
                keep[i] = True


def fill_small_gaps(lines: Sequence[str], keep: list[bool]) -> None:
    """Keep the lines of every pruned block that would cost more as a marker than as text."""
    fill_cheap_gaps(list(lines), keep, MARKER_BYTES)


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
    kept = 0
    for rank, k in enumerate(order):
        cost = sum(sizes[i] for i in rows_of[k] if not keep[i])
        if rank > 0 and (chance[k] / z < DOCS_PRICE * cost / total or kept + cost > DOCS_BUDGET * total):
            continue
        for i in rows_of[k]:
            keep[i] = True
        kept += cost
    return keep


def _enforce(
    lines: list[str],
    layout: Layout,
    scores: list[float],
    keep: list[bool],
    max_prune_ratio: float,
    min_keep_lines: int,
    order: Iterable[int] | None = None,
) -> None:
    """The invariants: protected blocks, at most max_prune_ratio pruned, min_keep_lines,
    enclosing signatures and headings of every kept line, atoms whole."""
    n = len(lines)
    protected = protected_lines(lines)
    if any(protected):
        for i, protect in enumerate(protected):
            if protect:
                keep[i] = True
    ratio = min(1.0, max(0.0, max_prune_ratio))
    need = max(n - math.floor(n * ratio + 1e-9), min(n, max(0, min_keep_lines)))
    have = sum(keep)
    if have < need and order is not None:
        for i in order:
            if not keep[i]:
                keep[i] = True
                have += 1
                if have >= need:
                    break
    if have < need:
        have = _fill_by_rank(layout, scores, keep, have, need)
    if have < need:
        _fill_by_distance(keep, need - have)
    for u in layout.units:
        if u.heads and any(keep[u.start : u.end + 1]):
            for a, b in u.heads:
                keep[a : b + 1] = [True] * (b + 1 - a)
    for a, b in layout.atoms:
        if any(keep[a : b + 1]):
            keep[a : b + 1] = [True] * (b + 1 - a)


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


def hidden_unit_name(lines: Sequence[str], source_type: str, line: int, path: str | None = None) -> str | None:
    """How a marker hiding `line` (0-based) names the innermost named unit holding it (a
    function, a section), or None when no named unit holds it."""
    return innermost_name(text_layout(list(lines), source_type, path), line)
