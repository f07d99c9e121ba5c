"""Search output's rows ranked within the files they are lines of.

A search's rows (`path:12:line`) were ranked by their own words and their file's: the rows of
the function a question is about looked like every other row holding the searched word. The
files the most valued rows are of are laid out whole (their functions, names and words), and
each file's share of the view is spread over its rows as the file's own ranking values them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ._line_model import learned_values
from ._matches import row_of
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
    rows: dict[str, list[tuple[int, int, str]]] = {}
    for j, line in enumerate(lines):
        if (row := row_of(line)) is not None:
            path, number, text = row
            rows.setdefault(path, []).append((j, number - 1, text))
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
        found = rows[path]
        if any(not 0 <= i < len(file_lines) or file_lines[i] != line for _, i, line in found):
            continue  # not the file's lines (it changed, or the rows are not its)
        layout, prose, scored = scored_text(file_lines, question, "code", path, qterms, identifiers)
        own = learned_values(plan_code(file_lines, layout, scored, prose, qterms, None, None))
        weights = [own[i] for _, i, _ in found]
        total, weight = totals[path], max(sum(weights), 1e-12)
        for (j, _, _), w in zip(found, weights, strict=True):
            out[j] = (1 - FILES_SHARE) * values[j] + FILES_SHARE * total * w / weight
    return out
