"""Seed 001's pruning contract: what an engine is asked, what it answers, the invariants.

Every engine (the built-in one, the SWE-Pruner client) and every consumer (the
pipeline, the SWE-Pruner-compatible API) speaks these types; the markers of a
protected block are defined here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

NO_PRUNE_BEGIN = "⟦NO_PRUNE_BEGIN⟧"
NO_PRUNE_END = "⟦NO_PRUNE_END⟧"
SOURCE_TYPES = ("code", "logs", "docs")


@dataclass(frozen=True)
class PruneOptions:
    max_prune_ratio: float = 0.9
    min_keep_lines: int = 0
    timeout_ms: int = 3000
    annotate_lines: bool = True
    include_markers: bool = True
    # Bytes the pruned view may take in the response (not a seed 001 option: the
    # response budget of seed 002); None for no bound.
    max_bytes: int | None = None


@dataclass(frozen=True)
class LineHistory:
    """What git says of each line of a file (pruning.history): a recency prior, and the
    subject of the commit that last changed the line (None: not committed)."""

    prior: list[float]
    subjects: list[str | None]

    def __len__(self) -> int:
        return len(self.prior)

    def __getitem__(self, lines: slice) -> LineHistory:
        return LineHistory(self.prior[lines], self.subjects[lines])


@dataclass(frozen=True)
class Window:
    """The file a text is a window of (`read` with an offset, `sed -n 'A,Bp' F`): its text,
    the number of the window's first line in it, and the file's history. The built-in
    engine ranks the window within the file."""

    file_text: str
    first_line: int
    history: LineHistory | None = None
    matches: bool = False  # the text is rows `grep -n` printed of the file (`12:line`), not a window


# The text of the file a search output's row names (`src/a.py:12:line`), or None; called in the
# engine's thread. The built-in engine ranks a search's rows within their files.
FileReader = Callable[[str], str | None]
# How many commits ago the file a search output's row names last changed (0: the newest), None
# when not lately (see pruning.history.file_ages); called in the engine's thread.
FileAges = Callable[[str], int | None]


@dataclass(frozen=True)
class Selection:
    keep: list[bool]
    reasons: list[str | None]
    # Line indices, most worth showing first, when the engine ranks lines: a view
    # over budget then drops the lines that come last instead of its middle.
    order: list[int] | None = None
    # The reasons of the blocks of the keep mask a cut to the response budget leaves, by the
    # engine's own units, as such markers name them (one unit: engine._markers).
    reasons_for: Callable[[list[bool]], list[str | None]] | None = None


class EngineError(Exception):
    """An engine could not prune; `kind` is seed 000's `pruning.error` value."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "timeout" | "http_error" | "invalid_response" | "internal_error"


class Engine(Protocol):
    name: str

    async def select(
        self,
        lines: list[str],
        question: str,
        source_type: str,
        *,
        options: PruneOptions,
        path: str | None,
        line_prior: LineHistory | None = None,
        window: Window | None = None,
        files: FileReader | None = None,
        file_ages: FileAges | None = None,
    ) -> Selection: ...

    async def aclose(self) -> None: ...


def estimate_tokens(text: str) -> int:
    # Four characters a token is the usual rule of thumb for code and English.
    return math.ceil(len(text) / 4)


def protected_lines(lines: list[str]) -> list[bool]:
    """Lines inside ⟦NO_PRUNE_BEGIN⟧ ... ⟦NO_PRUNE_END⟧, directive lines included."""
    protected = [False] * len(lines)
    if not any(NO_PRUNE_BEGIN in line for line in lines):
        return protected
    inside = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.endswith(NO_PRUNE_BEGIN) or stripped == NO_PRUNE_BEGIN:
            inside = True
        if inside:
            protected[i] = True
        if NO_PRUNE_END in stripped:
            inside = False
    return protected


def check_selection(selection: Selection, lines: list[str], options: PruneOptions) -> str | None:
    """The first broken invariant, or None."""
    n = len(lines)
    if len(selection.keep) != n or len(selection.reasons) != n:
        return "engine returned a selection of the wrong length"
    kept = sum(selection.keep)
    if n - kept > math.floor(options.max_prune_ratio * n + 1e-9):
        return f"pruned {n - kept} of {n} lines, above max_prune_ratio {options.max_prune_ratio}"
    if kept < min(options.min_keep_lines, n):
        return f"kept {kept} lines, fewer than min_keep_lines {options.min_keep_lines}"
    for keep, protect in zip(selection.keep, protected_lines(lines), strict=True):
        if protect and not keep:
            return "pruned a line inside a NO_PRUNE block"
    return None
