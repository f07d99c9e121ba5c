"""Seed 001's pruning contract around any engine: invariants, fail-open, recovery.

An engine only chooses which lines to keep (`Selection`). This module checks
the choice against the invariants, renders markers and annotations, stores
the original for `recover_text`, and turns every failure into a raw pass-through
with a warning code, so a broken engine can never cost the agent its output.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning.recovery import RecoveryStore
from jeeves_mcp.pruning.render import (
    BUDGET_REASON,
    FOCUS_REASON,
    Row,
    line_count,
    pruned_rows,
    raw_rows,
    rows_text,
    text_bytes,
    trim_by_order,
)

from .contract import (
    Engine,
    EngineError,
    FileAges,
    FileReader,
    LineHistory,
    PruneOptions,
    Selection,
    Window,
    check_selection,
    estimate_tokens,
)

log = logging.getLogger("jeeves_mcp.pruning")

# A window of a file larger than this is ranked alone: laying out the file (an `ast` parse of
# 2 MiB holds the interpreter for seconds) would be paid again for each page of it.
AROUND_MAX_CHARS = 512 * 1024
# Share of the engine's time a window may take ranked within its file before it is ranked alone.
AROUND_TIME_SHARE = 0.5


class LocalEngine:
    """The built-in engine (`jeeves_mcp.pruning.engine`), run in a worker thread."""

    name = "builtin"

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
    ) -> Selection:
        from jeeves_mcp.pruning import engine  # imported on first use: keeps child start-up light

        timeout_s = options.timeout_ms / 1000
        deadline = time.monotonic() + timeout_s

        def choose(around: engine.Around | None, by: float, as_type: str = source_type) -> Selection:
            chosen = engine.select_lines(
                lines,
                question,
                as_type,
                max_prune_ratio=options.max_prune_ratio,
                min_keep_lines=options.min_keep_lines,
                path=path,
                deadline=by,
                max_bytes=options.max_bytes,
                line_prior=None if line_prior is None else line_prior.prior,
                line_subjects=None if line_prior is None else line_prior.subjects,
                around=around,
                files=files,
                file_ages=file_ages,
            )
            return Selection(list(chosen.keep), list(chosen.reasons), chosen.order, chosen.reasons_for)

        def work() -> Selection:
            if window is not None:  # split here, in the worker thread
                history = window.history
                around = engine.Around(
                    window.file_text.removesuffix("\n").split("\n"), window.first_line - 1,
                    None if history is None else history.prior, None if history is None else history.subjects,
                    window.matches,
                )
                try:
                    return choose(around, min(deadline, time.monotonic() + AROUND_TIME_SHARE * timeout_s))
                except engine.PruneTimeout:
                    pass  # the file costs too much: the window alone, in the time left
            # A search's rows alone are a command's output.
            return choose(None, deadline, "logs" if window is not None and window.matches else source_type)

        # The engine checks its deadline itself; the outer bound only covers a
        # thread that stopped checking, which is then abandoned.
        with trio.move_on_after(timeout_s + 0.5) as scope:
            try:
                return await trio.to_thread.run_sync(work, abandon_on_cancel=True)
            except engine.PruneTimeout as exc:
                raise EngineError("timeout", "built-in engine passed its deadline") from exc
        assert scope.cancelled_caught
        raise EngineError("timeout", "built-in engine passed its deadline")

    async def aclose(self) -> None:
        return None


@dataclass
class PruneOutcome:
    """A pruning as seed 001 returns it, plus the rows for the response budget."""

    prune_id: str
    text: str
    rows: list[Row]
    annotations: list[dict[str, Any]]
    stats: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    error: str | None = None  # seed 000's pruning.error when fallen back
    # Cuts the view to a smaller budget by the engine's order; None without a ranking (a fallback).
    cut_by_order: Callable[[int], tuple[list[Row], list[dict[str, Any]]]] | None = None

    def within(self, budget: int) -> tuple[list[Row], list[dict[str, Any]]]:
        """The rows and annotations in `budget` bytes, the lines the engine ranked last cut first;
        as they are when they fit or nothing ranked them (fit_rows then cuts them)."""
        if self.cut_by_order is None or text_bytes(rows_text(self.rows)) <= budget:
            return self.rows, self.annotations
        return self.cut_by_order(budget)

    @property
    def used_fallback(self) -> bool:
        return bool(self.stats["used_fallback"])

    def contract(self) -> dict[str, Any]:
        return {
            "prune_id": self.prune_id,
            "pruned_text": rows_text(self.rows),
            "annotations": self.annotations,
            "stats": self.stats,
            "warnings": self.warnings,
        }


def line_counts(n: int, kept: int) -> dict[str, Any]:
    """Seed 001's kept / pruned line counts and ratio of a text of `n` lines."""
    return {"kept_lines": kept, "pruned_lines": n - kept, "pruned_ratio": round((n - kept) / n, 4) if n else 0.0}


class Pruner:
    """Prunes text with one engine under seed 001's contract."""

    def __init__(self, config: PrunerConfig, store: RecoveryStore, engine: Engine) -> None:
        self.config = config
        self.store = store
        self.engine = engine

    async def prune(
        self,
        text: str,
        question: str,
        source_type: str,
        options: PruneOptions,
        *,
        path: str | None = None,
        request_id: str | None = None,
        first_line: int = 1,
        line_prior: LineHistory | None = None,
        whole: str | None = None,
        matches: bool = False,
        files: FileReader | None = None,
        file_ages: FileAges | None = None,
    ) -> PruneOutcome:
        """`whole`: the file `text` is lines of from `first_line` (a read's or a printed
        file's), or with `matches` the rows `grep -n` printed of it; `line_prior` is then the
        file's history; else `line_prior` is `text`'s. `files`, `file_ages`: the text of a file
        a search's row names, and how many commits ago it last changed."""
        started = time.monotonic()
        if text.endswith("\n"):
            text = text[:-1]  # a final newline ends the last line; it does not start another
        lines = text.split("\n")
        window = None
        if whole is not None:
            history = line_prior
            line_prior = None if history is None or matches else history[first_line - 1 :]
            # A window, not the file whole (counted in lines: `nl` numbers make a window longer).
            if 0 < len(whole) <= min(AROUND_MAX_CHARS, self.config.max_prune_input_bytes) and (
                matches or first_line > 1 or len(lines) < line_count(whole)
            ):
                window = Window(whole, first_line, history, matches)
            elif matches:  # a search's rows of a file too large to lay out: a command's output
                source_type = "logs"
        if line_prior is not None:
            line_prior = line_prior[: len(lines)] if len(line_prior) >= len(lines) else None
        prune_id = self.store.put(text, first_line=first_line)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.config.max_prune_input_bytes:
            return self._fallback(
                text, lines, prune_id, started, first_line, "input_too_large", options)
        if not question.strip():
            return self._fallback(
                text, lines, prune_id, started, first_line, "empty_question", options)
        _log.event(log, "pruner.call_start", endpoint=self.engine.name, request_id=request_id)
        try:
            selection = await self.engine.select(
                lines, question, source_type, options=options, path=path, line_prior=line_prior, window=window,
                files=files, file_ages=file_ages,
            )
        except EngineError as exc:
            _log.event(
                log,
                "pruner.call_failed",
                logging.WARNING,
                reason=exc.kind,
                detail=str(exc),
                duration_ms=_log.monotonic_ms(started),
                request_id=request_id,
            )
            return self._fallback(
                text, lines, prune_id, started, first_line, exc.kind, options, error=exc.kind)
        except Exception as exc:  # any engine bug fails open; Cancelled is not an Exception
            log.warning("pruner.call_failed", exc_info=exc, extra={"reason": "internal_error"})
            return self._fallback(
                text, lines, prune_id, started, first_line, "internal_error", options, error="internal_error"
            )
        broken = check_selection(selection, lines, options)
        if broken is not None:
            _log.event(log, "pruner.call_failed", logging.WARNING, reason="constraints_unmet", detail=broken)
            return self._fallback(
                text, lines, prune_id, started, first_line, "constraints_unmet", options)
        chosen, rows, annotations = rows_by_order(selection, lines, prune_id, options, options.max_bytes, first_line)

        def cut_by_order(budget: int) -> tuple[list[Row], list[dict[str, Any]]]:
            _, rows, annotations = rows_by_order(selection, lines, prune_id, options, budget, first_line)
            return rows, annotations

        kept = sum(chosen.keep)
        pruned_text = rows_text(rows)
        outcome = PruneOutcome(
            prune_id=prune_id,
            text=text,
            rows=rows,
            annotations=annotations,
            stats=self._stats(text, pruned_text, len(lines), kept, started, fallback=False),
            cut_by_order=cut_by_order if selection.order is not None else None,
        )
        _log.event(
            log,
            "pruner.call_ok",
            duration_ms=outcome.stats["elapsed_ms"],
            pruned_bytes=len(pruned_text.encode()),
            request_id=request_id,
        )
        return outcome

    def _fallback(
        self,
        text: str,
        lines: list[str],
        prune_id: str,
        started: float,
        first_line: int,
        warning: str,
        options: PruneOptions,
        *,
        error: str | None = None,
    ) -> PruneOutcome:
        rows = raw_rows(lines, first_line)
        return PruneOutcome(
            prune_id=prune_id,
            text=text,
            rows=rows,
            annotations=[],
            stats=self._stats(text, text, len(lines), len(lines), started, fallback=True),
            warnings=[warning],
            error=error,
        )

    @staticmethod
    def _stats(
        text: str, pruned: str, n: int, kept: int, started: float, *, fallback: bool
    ) -> dict[str, Any]:
        return {
            "original_lines": n,
            **line_counts(n, kept),
            "tokens_est_before": estimate_tokens(text),
            "tokens_est_after": estimate_tokens(pruned),
            "elapsed_ms": _log.monotonic_ms(started),
            "used_fallback": fallback,
        }


def fit_by_order(
    selection: Selection, lines: list[str], options: PruneOptions, first_line: int
) -> Selection:
    """Within the response budget, the lines the engine ranked first (the rest is cut as
    the budget's, recoverable like any pruned block)."""
    if options.max_bytes is None or selection.order is None:
        return selection
    keep = trim_by_order(
        lines, selection.keep, selection.order, options.max_bytes, first_line=first_line
    )
    if keep is None:
        return selection
    reasons: list[str | None] = [None] * len(keep)
    named = None
    for start, end in pruned_blocks(keep):
        reason: str | None
        if any(selection.keep[start : end + 1]):
            # The budget cut lines the engine chose (alone, or joining blocks): the reason says
            # so and names what the block hides (`budget de réponse: Pool.acquire +2`), so an
            # agent knows which of them to recover.
            if named is None and selection.reasons_for is not None:
                named = selection.reasons_for(keep)
            names = (named[start] or "").removeprefix(FOCUS_REASON) if named is not None else ""
            reason = BUDGET_REASON + names
        else:
            reason = selection.reasons[start]
        reasons[start : end + 1] = [reason] * (end + 1 - start)
    return Selection(keep, reasons, selection.order, selection.reasons_for)


def pruned_blocks(keep: list[bool]) -> list[tuple[int, int]]:
    """The (first, last) lines of each run of lines not kept."""
    blocks: list[tuple[int, int]] = []
    start = None
    for i, kept in enumerate(keep):
        if not kept and start is None:
            start = i
        elif kept and start is not None:
            blocks.append((start, i - 1))
            start = None
    if start is not None:
        blocks.append((start, len(keep) - 1))
    return blocks


# Tries at trimming a view by the engine's order until its rows, markers as long as their
# reasons make them, fit: the trim reserves a typical marker's bytes, and a view left over
# was cut by fit_rows in its middle (the asked function's signature, 55 of 635 views of one
# commit set cut so).
TRIM_TRIES = 4


def rows_by_order(
    selection: Selection, lines: list[str], prune_id: str, options: PruneOptions, budget: int | None,
    first_line: int,
) -> tuple[Selection, list[Row], list[dict[str, Any]]]:
    """The selection cut to `budget` bytes of view by the engine's order, its rows and annotations."""
    target = budget
    for _ in range(TRIM_TRIES):
        chosen = fit_by_order(selection, lines, replace(options, max_bytes=target), first_line)
        rows, annotations = pruned_rows(
            lines, chosen.keep, chosen.reasons, prune_id, annotate_lines=options.annotate_lines,
            include_markers=options.include_markers, first_line=first_line,
        )
        if budget is None or target is None or selection.order is None:
            break
        over = text_bytes(rows_text(rows)) - budget
        if over <= 0 or target <= 0:
            break
        target = max(0, target - over)
    return chosen, rows, annotations


def make_engine(config: PrunerConfig) -> Engine:
    if config.pruner_endpoint:
        from jeeves_mcp.pruning.swe_client import ExternalEngine

        return ExternalEngine(
            config.pruner_endpoint,
            threshold=config.pruner_threshold,
            chunk_overlap_tokens=config.pruner_chunk_overlap_tokens,
        )
    return LocalEngine()
