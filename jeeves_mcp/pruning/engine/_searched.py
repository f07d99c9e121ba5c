"""Search output's rows ranked within the files they are lines of.

A search's rows (`path:12:line`) were ranked by their own words and their file's: the rows of
the function a question is about looked like every other row holding the searched word. The
files the most valued rows are of are laid out whole (their functions, names and words), and
each file's share of the view is spread over its rows as the file's own ranking values them.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence

from ._line_model import learned_values
from ._matches import line_paths, row_of
from ._planner import plan_code, scored_text

__all__ = ["FILES_SHARE", "within_files"]

# The share of a file's rows' value spread by the file's own ranking (the rest stays the
# search's): on two looked-at search sets, 0.7 / 0.85 / 1.0 gave recall +7.3 / +7.4 / +6.2
# points (mean of the two), at level reduction.
FILES_SHARE = 0.7
# Files laid out, the most valued first: 5 / 7 gained +5.2 / +6.8, every file +5.7. A file
# the search values little still holds the rows asked about often enough: laying out only
# those worth a twentieth of the best lost most of the gain.
MOST_FILES = 10
# Characters laid out in all, past which no more files are (each is at most 512 KiB; 2 MiB
# gained nothing more on the looked-at sets).
MAX_CHARS = 1024 * 1024


def within_files(
    lines: Sequence[str], values: Sequence[float], read: Callable[[str], str | None],
    question: str, qterms: list[str], identifiers: list[str], until: float | None = None,
) -> list[float]:
    """`values` of search output `lines`, each of the MOST_FILES most valued files' rows
    revalued by that file's own ranking (`read(path)`: the file's text, or None), while
    time is left before `until` (monotonic)."""
    rows = _rows(lines)
    out = list(values)
    chars = 0
    totals = {path: sum(values[j] for j, _, _ in found) for path, found in rows.items()}
    for path in sorted(rows, key=lambda p: -totals[p])[:MOST_FILES]:
        if until is not None and time.monotonic() > until:
            break
        content = read(path)
        if content is None or chars + len(content) > MAX_CHARS:
            continue
        chars += len(content)
        file_lines = content.removesuffix("\n").split("\n")
        placed = _placed(file_lines, rows[path])
        if placed is None:
            continue  # not the file's lines (it changed, or the rows are not its)
        layout, prose, scored = scored_text(file_lines, question, "code", path, qterms, identifiers)
        own = learned_values(plan_code(file_lines, layout, scored, prose, qterms, None, None))
        weights = [own[i] for _, i in placed]
        total, weight = totals[path], max(sum(weights), 1e-12)
        for (j, _), w in zip(placed, weights, strict=True):
            out[j] = (1 - FILES_SHARE) * values[j] + FILES_SHARE * total * w / weight
    return out


def _rows(lines: Sequence[str]) -> dict[str, list[tuple[int, int | None, str]]]:
    """Per file, its rows: (index in `lines`, the file line's index when the row says it, the
    line). Rows that say no number (`rg X` to a pipe: `path:line`) when none does."""
    rows: dict[str, list[tuple[int, int | None, str]]] = {}
    for j, line in enumerate(lines):
        if (row := row_of(line)) is not None:
            path, number, text = row
            rows.setdefault(path, []).append((j, number - 1, text))
    if rows or (paths := line_paths(list(lines))) is None:
        return rows
    for j, (line, named) in enumerate(zip(lines, paths, strict=True)):
        if named is not None and line[len(named) : len(named) + 1] in (":", "-") and line.startswith(named):
            rows.setdefault(named, []).append((j, None, line[len(named) + 1 :]))
    return rows


def _placed(file_lines: list[str], found: list[tuple[int, int | None, str]]) -> list[tuple[int, int]] | None:
    """(row index, file line index) of each row: the line its number says, or for a row with
    none the next line after the last row's that reads the same (a search prints a file's
    lines in order); None when a row is not the file's line."""
    where: dict[str, list[int]] = {}
    if any(number is None for _, number, _ in found):
        for i, line in enumerate(file_lines):
            where.setdefault(line, []).append(i)
    placed: list[tuple[int, int]] = []
    last = -1
    for j, number, line in found:
        if number is None:
            at = where.get(line, [])
            k = bisect_right(at, last)
            if k == len(at):
                return None
            number = at[k]
        elif not 0 <= number < len(file_lines) or file_lines[number] != line:
            return None
        placed.append((j, number))
        last = number
    return placed
