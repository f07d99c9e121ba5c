"""Units of search output (`grep -n`, `rg -n`, `git grep -n`, the `grep` tool): a file's matches.

Read as log records, every match was a record of its own, scored by its text alone: the file a
question named lost to lines of other files that repeat its words. A file's matches (ten in a
row at most) are a unit named by its path, and its lines are ranked one by one within it, as
code's are (the layout's `by_line`).

Diagnostics (`x.c:12:5: error: ...`, mypy's `x.py:3: error:`) have the same shape but are a
build's log: they stay with the logs layout, which keeps error lines whatever the question.
"""

from __future__ import annotations

import re

from ._git import short_path
from ._logs import error_lines
from ._units import Layout, Unit

__all__ = ["is_search_output", "search_layout"]

# `path:12:text`: a path with no blank (a log line's `Nov 29 01:02:03` is not one), git-quoted
# when it holds a colon; not a time's `01:02:03` (a digit after the second colon).
_PATH = r'("(?:[^"\\]|\\.)*"|[^:\s"][^:\s]*?)'
_MATCH = re.compile(_PATH + r":(\d+):(?!\d)")
# `path-12-text`: a context line of `grep -C` / `rg -C`; not a date's `2024-01-02`.
_CONTEXT = re.compile(_PATH + r"-(\d+)-(?!\d)")
# What follows `path:line:` in a compiler's or a linter's diagnostic: a column, a severity.
_DIAGNOSTIC = re.compile(r"\d+:| (?:fatal )?(?:error|warning|note|info|hint):", re.IGNORECASE)
# A share of the matches this large being diagnostics makes the text a build's log (a search
# may meet a `x.py:3: note: ...` line of its own).
DIAGNOSTICS = 0.2
# Share of the lines that must be matches or context lines.
MOST = 0.9
# Matches of one file in a row past this many start a new unit: a file with hundreds of
# matches is not kept or pruned whole (5, 10, 40 measured on two looked-at sets: 10).
MAX_GROUP = 10


def _parts(line: str) -> tuple[str, str] | None:
    """(path, the rest) of a match or context line, or None."""
    match = _MATCH.match(line) or _CONTEXT.match(line)
    return None if match is None else (match.group(1), line[match.end() :])


def is_search_output(lines: list[str]) -> bool:
    """Nearly every line a match or a context line, most of them matches, and none a
    compiler's or linter's diagnostic."""
    rows = [line for line in lines[:2000] if line.strip() and line != "--"]
    matches = parsed = diagnostics = 0
    for line in rows:
        match = _MATCH.match(line)
        if match is not None:
            diagnostics += _DIAGNOSTIC.match(line, match.end()) is not None
            matches += 1
            parsed += 1
        elif _CONTEXT.match(line):
            parsed += 1
    return len(rows) >= 3 and parsed >= MOST * len(rows) and 0 < matches and diagnostics < DIAGNOSTICS * matches


def search_layout(lines: list[str]) -> Layout:
    """A file's matches (at most MAX_GROUP lines in a row) are a unit, named by its path; the
    lines between that are no match (a `--`, a command's own output after the search) are
    units of their own, worth more when they report an error, as in the logs layout."""
    units: list[Unit] = []
    start, path = 0, None
    for i, line in enumerate([*lines, None]):
        parts = _parts(line) if line is not None else None
        here = parts[0] if parts else None
        if i == len(lines) or here != path or i - start >= MAX_GROUP:
            if i > start:
                if path is not None:
                    units.append(Unit(start, i - 1, short_path(path), name=path.replace("/", " ")))
                else:
                    units.append(Unit(start, i - 1, "", prior=float(any(error_lines(lines[start:i])))))
            start, path = i, here
    return Layout(units=units, always=set(), by_line=True)
