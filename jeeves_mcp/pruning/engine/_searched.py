"""Search output's rows ranked within the files they are lines of.

A search's rows (`path:12:line`) were ranked by their own words and their file's: the rows of
the function a question is about looked like every other row holding the searched word. The
files the most valued rows are of are laid out whole (their functions, names and words), and
each file's share of the view is spread over its rows as the file's own ranking values them,
the files whose best function the question matches best taking more of the share.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

from ._line_model import learned_values
from ._matches import row_of
from ._planner import plan_code, scored_text
from ._text import Matcher

__all__ = ["FILES_SHARE", "within_files"]

# The share of a file's rows' value spread by the file's own ranking (the rest stays the
# search's): on two looked-at search sets, 0.7 / 0.85 / 1.0 gave recall +7.3 / +7.4 / +6.2
# points (mean of the two), at level reduction.
FILES_SHARE = 0.7
# The most valued files, laid out when they can be: 5 / 7 gained +5.2 / +6.8, every file +5.7.
# A file the search values little still holds the rows asked about often enough: laying out
# only those worth a twentieth of the best lost most of the gain, and filling the slots of
# files that cannot be (not source, missing, changed) with the next ones lost a point.
MOST_FILES = 10
# Characters laid out in all, past which no more files are (each is at most 512 KiB; 2 MiB
# gained nothing more on the looked-at sets).
MAX_CHARS = 1024 * 1024
# The files laid out share the value their rows had between them as x exp(BEST_UNIT_WEIGHT x
# their best unit's score): a file holding a function the question names gets more of it. The
# gold file ranked first among the files 0.54 -> 0.67 of the time by this (mean reciprocal rank)
# on two looked-at search sets at 0.4, yet the view gained nothing there: a strong shift starves
# the other files, where the rows asked about often are. 0.03 / 0.06 / 0.1 / 0.5 gave recall
# 0.778 / 0.789 / 0.789 / 0.767 and 0.792 / 0.802 / 0.792 / 0.755 (0.778 and 0.802 without).
BEST_UNIT_WEIGHT = 0.06


def within_files(
    lines: Sequence[str], paths: Sequence[str | None], values: Sequence[float], read: Callable[[str], str | None],
    question: str, qterms: list[str], identifiers: list[str], until: float | None = None,
) -> list[float]:
    """`values` of search output `lines` (`paths`: the file each is a row of), the rows of the MOST_FILES most valued files whose
    rows are their lines (`read(path)`: the file's text, or None) revalued by that file's own
    ranking, while time is left before `until` (monotonic): a file whose layout runs past it
    keeps the search's values, and no more files are laid out."""
    rows = _rows(lines, paths)
    out = list(values)
    totals = {path: sum(values[j] for j, _, _ in found) for path, found in rows.items()}
    chars = 0
    laid_out: list[tuple[str, list[tuple[int, int]], list[float], float]] = []
    match = Matcher(qterms, compound=True)  # the files' words are much the same words
    for path in sorted(rows, key=lambda p: -totals[p])[:MOST_FILES]:
        if _past(until):
            break
        content = read(path)
        if content is None or chars + len(content) > MAX_CHARS:
            continue
        file_lines = content.removesuffix("\n").split("\n")
        placed = _placed(file_lines, rows[path])
        if placed is None:
            continue  # not the file's lines (it changed, or the rows are not its)
        chars += len(content)
        try:
            layout, prose, scored = scored_text(
                file_lines, question, "code", path, qterms, identifiers, between=lambda: _stop(until), match=match)
        except _Overrun:
            break
        own = learned_values(plan_code(file_lines, layout, scored, prose, qterms, None, None))
        top = max(scored.units, default=0.0)
        laid_out.append((path, placed, [own[i] for _, i in placed], top if math.isfinite(top) else 0.0))
    # Their value moved toward the files whose best unit the question matches best, its sum kept.
    best = max((score for *_, score in laid_out), default=0.0)
    weighed = {path: totals[path] * math.exp(BEST_UNIT_WEIGHT * (score - best)) for path, *_, score in laid_out}
    scale = sum(totals[path] for path in weighed) / max(sum(weighed.values()), 1e-300)
    for path, placed, weights, _ in laid_out:
        total, weight = weighed[path] * scale, max(sum(weights), 1e-12)
        share = total / max(totals[path], 1e-300)
        for (j, _), w in zip(placed, weights, strict=True):
            out[j] = (1 - FILES_SHARE) * values[j] * share + FILES_SHARE * total * w / weight
    return out


class _Overrun(Exception):
    pass


def _past(until: float | None) -> bool:
    return until is not None and time.monotonic() > until


def _stop(until: float | None) -> None:
    if _past(until):
        raise _Overrun


def _rows(lines: Sequence[str], paths: Sequence[str | None]) -> dict[str, list[tuple[int, int | None, str]]]:
    """Per file, its rows: (index in `lines`, the file line's index when the row says it, the
    line). Rows that say no number (`rg X` to a pipe: `path:line`) when none does."""
    rows: dict[str, list[tuple[int, int | None, str]]] = {}
    for j, line in enumerate(lines):
        if (row := row_of(line)) is not None:
            path, number, text = row
            rows.setdefault(path, []).append((j, number - 1, text))
    if rows:
        return rows
    for j, (line, named) in enumerate(zip(lines, paths, strict=True)):
        if named is not None and line[len(named) : len(named) + 1] in (":", "-") and line.startswith(named):
            rows.setdefault(named, []).append((j, None, line[len(named) + 1 :]))
    return rows


def _placed(file_lines: list[str], found: list[tuple[int, int | None, str]]) -> list[tuple[int, int]] | None:
    """(row index, file line index) of each row: the line its number says, or for a row with
    none the next line after the last row's that reads the same (a search prints a file's
    lines in order); None when a row is not the file's line."""
    # A line's `\r` (a CRLF file) is one the grep tool takes off its rows, and grep keeps.
    plain = [line.removesuffix("\r") for line in file_lines]
    where: dict[str, list[int]] = {}
    if any(number is None for _, number, _ in found):
        for i, line in enumerate(plain):
            where.setdefault(line, []).append(i)
    placed: list[tuple[int, int]] = []
    last = -1
    for j, number, row in found:
        line = row.removesuffix("\r")
        if number is None:
            at = where.get(line, [])
            k = bisect_right(at, last)
            if k == len(at):
                return None
            number = at[k]
        elif not 0 <= number < len(plain) or plain[number] != line:
            return None
        placed.append((j, number))
        last = number
    return placed
