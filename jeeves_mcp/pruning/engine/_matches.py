"""Units of search output (`grep -n`, `rg -n`, `git grep -n`, the `grep` tool): a file's matches.

Read as log records, every match was a record of its own, scored by its text alone: the file a
question named lost to lines of other files that repeat its words. A file's matches (ten in a
row at most) are a unit named by its path.
"""

from __future__ import annotations

import re

from ._units import Layout, Unit

__all__ = ["is_search_output", "search_layout"]

# `path:12:text` (a match) or `path-12-text` (context); a path git-quoted when it holds a colon.
_MATCH = re.compile(r'("(?:[^"\\]|\\.)*"|[^:\s"][^:]*?)([:-])(\d+)\2')
# Share of the lines that must look so.
MOST = 0.9
# Matches of one file in a row past this many start a new unit: a file with hundreds of
# matches is not kept or pruned whole (5, 10, 40 measured on two looked-at sets: 10).
MAX_GROUP = 10


def is_search_output(lines: list[str]) -> bool:
    """Nearly every line a match or a context line, most of them matches (a log whose lines
    open with a time or a date, `12:00:01` or `2024-01-02`, is not: its "paths" are numbers)."""
    rows = [line for line in lines[:2000] if line.strip() and line != "--"]
    found = [match for line in rows if (match := _MATCH.match(line)) and not match.group(1).isdigit()]
    return (
        len(rows) >= 3
        and len(found) >= MOST * len(rows)
        and sum(1 for match in found if match.group(2) == ":") >= len(rows) / 2
    )


def search_layout(lines: list[str]) -> Layout:
    """A file's matches (at most MAX_GROUP lines in a row) are a unit, named by its path."""
    units: list[Unit] = []
    start, path = -1, None
    for i, line in enumerate([*lines, ""]):
        match = _MATCH.match(line)
        here = match.group(1) if match else None
        if here != path or (start >= 0 and i - start >= MAX_GROUP):
            if path is not None:
                units.append(Unit(start, i - 1, path, name=path.replace("/", " ")))
            start, path = i, here
    return Layout(units=units, always=set())
