"""Cutting a text into rankable units: functions and classes, log records, doc sections.

Line numbers here are 0-based and ranges inclusive. A unit is kept or pruned
whole; `heads` are the line ranges that must come with it (its own signature
and the signatures of everything that encloses it, or a section's heading path).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Layout", "Unit"]


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
