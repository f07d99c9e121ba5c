"""Cutting a text into rankable units: functions and classes, log records, doc sections.

Line numbers here are 0-based and ranges inclusive. A unit is kept or pruned
whole; `heads` are the line ranges that must come with it (its own signature
and the signatures of everything that encloses it, or a section's heading path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Around", "Layout", "Unit", "window_of"]


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


def window_of(layout: Layout, first: int, n: int) -> tuple[Layout, list[int]]:
    """The layout of lines `first` to `first + n - 1` of a text laid out whole, numbered from
    0, and for each of its units the index of the unit it was cut from in `layout.units`."""
    last = first + n - 1

    def inside(a: int, b: int) -> tuple[int, int] | None:
        a, b = max(a, first), min(b, last)
        return (a - first, b - first) if a <= b else None

    def rows(of: set[int]) -> set[int]:
        return {i - first for i in of if first <= i <= last}

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
        always=rows(layout.always),
        atoms=[atom for a, b in layout.atoms if (atom := inside(a, b)) is not None],
        context=rows(layout.context),
        prose=rows(layout.prose),
        follows={position[k]: position[lead] for k, lead in layout.follows.items() if k in position and lead in position},
        by_line=layout.by_line,
    ), index


@dataclass(frozen=True)
class Around:
    """The file a window of code was cut from (`read` with an offset, `sed -n 'A,Bp'`): the
    window is ranked as a part of it, its functions whole with their names and the file's
    words, and only its own lines are kept. `first`: the index of the window's first line."""

    lines: list[str]
    first: int
    line_prior: Sequence[float] | None = None
    line_subjects: Sequence[str | None] | None = None

    def holds(self, window: list[str]) -> bool:
        """Whether `window` is lines of the file from `first`, and not all of them."""
        return 0 <= self.first and len(window) < len(self.lines) and self.lines[self.first : self.first + len(window)] == window
