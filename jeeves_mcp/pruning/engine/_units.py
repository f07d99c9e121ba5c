"""Cutting a text into rankable units: functions and classes, log records, doc sections.

Line numbers here are 0-based and ranges inclusive. A unit is kept or pruned
whole; `heads` are the line ranges that must come with it (its own signature
and the signatures of everything that encloses it, or a section's heading path).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = ["Around", "Layout", "Unit", "UnitRanking", "part_of"]


@dataclass(slots=True)
class Unit:
    start: int
    end: int
    label: str  # shown in reasons: "def parse_yaml", "section Install", ...
    name: str = ""  # text weighted as the unit's name
    owner: str = ""  # the enclosing class(es), "Outer.Inner": a weaker name
    sig: tuple[int, int] | None = None  # own signature lines (weighted as signature)
    heads: list[tuple[int, int]] = field(default_factory=list)  # kept with the unit
    prior: float = 0.0  # relevance independent of the question (errors in logs)


@dataclass(slots=True)
class Layout:
    units: list[Unit]
    always: set[int]  # lines that are always kept (imports, headings, errors...)
    atoms: list[tuple[int, int]] = field(default_factory=list)  # kept or pruned whole
    context: set[int] = field(default_factory=set)  # worth keeping when there is room (imports)
    prose: set[int] = field(default_factory=set)  # docstring lines: worth less than code
    # unit -> the unit it belongs with (a file's diff -> its commit): worth at least as much
    follows: dict[int, int] = field(default_factory=dict)
    # Logs whose lines are ranked one by one, as code's are (search output: the best matches
    # of every file rather than a file's matches ten at a time)
    by_line: bool = False
    # Search output: the file each line is a match or a context row of (None: neither).
    paths: list[str | None] | None = None
    # A file listing (`find`, `ls -R`, `tree`): the path each line names (None: none), and
    # whether it is `tree`'s. A short gap in it is paths, not a log's noise.
    listed: list[str | None] | None = None
    tree: bool = False
    # Files' lines under `==> path <==` headers (`head`, `tail` of several files): a short gap in
    # them is a file's lines, as a listing's is paths.
    sections: bool = False
    # A command's log (logs_layout): the lines a cut by the response budget reads after the best
    # record, its errors first (_logs.failures_first).
    errors_first: list[int] | None = None


def part_of(layout: Layout, rows: Sequence[int | None]) -> tuple[Layout, list[int]]:
    """The layout of a text whose line j is line `rows[j]` of a text laid out whole (a window
    of it, or the lines a search of it printed; None: a line of the search's own, `--`), rows
    increasing, numbered from 0, and for each of its units the index of the unit it was cut
    from in `layout.units`."""
    at = [j for j, row in enumerate(rows) if row is not None]
    numbers = [row for row in rows if row is not None]
    where = dict(zip(numbers, at, strict=True))

    def inside(a: int, b: int) -> tuple[int, int] | None:
        lo, hi = bisect_left(numbers, a), bisect_right(numbers, b) - 1
        return (at[lo], at[hi]) if lo <= hi else None

    def mapped(of: set[int]) -> set[int]:
        return {where[i] for i in of if i in where}

    units: list[Unit] = []
    index: list[int] = []
    for k, u in enumerate(layout.units):
        if (span := inside(u.start, u.end)) is None:
            continue
        heads = [head for a, b in u.heads if (head := inside(a, b)) is not None]
        sig = None if u.sig is None else inside(*u.sig)
        units.append(Unit(span[0], span[1], u.label, u.name, u.owner, sig, heads, u.prior))
        index.append(k)
    position = {k: j for j, k in enumerate(index)}
    return Layout(
        units=units,
        always=mapped(layout.always),
        atoms=[atom for a, b in layout.atoms if (atom := inside(a, b)) is not None],
        context=mapped(layout.context),
        prose=mapped(layout.prose),
        follows={position[k]: position[lead] for k, lead in layout.follows.items() if k in position and lead in position},
        by_line=layout.by_line,
    ), index


# A row of `grep -n` / `rg -n` over one file: its line's number, `:` for a match or `-` for
# context, the line; `--` between groups of context.
_MATCH_ROW = re.compile(r"(\d{1,18})([:-])")


def _match_row(row: str) -> tuple[int, str] | None:
    """(0-based line number, text) of a `grep -n` row, or None (a `--`, anything else)."""
    match = _MATCH_ROW.match(row)
    return None if match is None else (int(match.group(1)) - 1, row[match.end() :])


@dataclass(frozen=True)
class Around:
    """The file a text of code was cut from: a window of it (`read` with an offset, `sed -n
    'A,Bp'`) from line index `first`, or with `matches` the rows `grep -n PATTERN F` printed of
    it. The text is ranked as a part of the file, its functions whole with their names and the
    file's words, and only its own lines are kept."""

    lines: list[str]
    first: int
    line_prior: Sequence[float] | None = None
    line_subjects: Sequence[str | None] | None = None
    matches: bool = False

    def part(self, text: list[str]) -> Sequence[int | None] | None:
        """For each line of `text`, the index of the file's line it is (None: grep's `--`),
        when `text` is the window from `first` (not the file whole) or the search's rows."""
        if not self.matches:
            n = len(text)
            if 0 <= self.first and n < len(self.lines) and self.lines[self.first : self.first + n] == text:
                return range(self.first, self.first + n)
            return None
        rows: list[int | None] = []
        last = -1
        for row in text:
            if row == "--":
                rows.append(None)
                continue
            if (parsed := _match_row(row)) is None:
                return None
            i, line = parsed
            if not last < i < len(self.lines) or self.lines[i] != line:
                return None
            rows.append(i)
            last = i
        return rows if last >= 0 else None


class UnitRanking:
    """Lines by worth for a budget cut, from whole units: the kept units best first (each
    with its headings), then the lines kept by the layout's rules, then the rest."""

    def __init__(
        self, n: int, layout: Layout, scores: list[float], keep: list[bool], lead: Sequence[int] | None = None,
        between: Sequence[int] = (),
    ) -> None:
        """`lead`, `between`: the units that come first, then lines before the other units."""
        seen = [False] * n
        order: list[int] = []

        def add(a: int, b: int) -> None:
            for i in range(a, b + 1):
                if not seen[i]:
                    seen[i] = True
                    order.append(i)

        def add_unit(k: int) -> None:
            u = layout.units[k]
            for a, b in [*u.heads, (u.start, u.end)]:
                add(a, b)

        ranked = sorted(
            (k for k, u in enumerate(layout.units) if any(keep[u.start : u.end + 1])),
            key=lambda k: (-scores[k], k),
        )
        if lead is None:
            lead, rest = ranked, []
        else:
            chosen = set(lead)
            rest = [k for k in ranked if k not in chosen]
        for k in lead:
            add_unit(k)
        for i in between:
            add(i, i)
        for k in rest:
            add_unit(k)
        for i in sorted(layout.always):
            add(i, i)
        order.extend(i for i in range(n) if not seen[i])
        self.order = order

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)
