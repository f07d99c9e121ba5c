"""Seed 000's request pipeline for `tools/call`, the same for every transport.

    received → validating → executing_tool → raw_output_ready → prune_check
    → (calling_pruner) → respond_raw | respond_pruned → responded

Every state logs its seed 000 event. Tool failures become `isError` results
with seed 004's `{message, code, ...}`; protocol misuse becomes -32602.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.mcp.errors import INVALID_PARAMS, McpError, ToolError
from jeeves_mcp.mcp.progress import ProgressReporter
from jeeves_mcp.mcp.schema import validate
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning import PruneOptions, Pruner, line_scan
from jeeves_mcp.pruning.counters import SavingsStats
from jeeves_mcp.pruning.recovery import RecoveryStore
from jeeves_mcp.pruning.render import Row, fit_rows, fit_text, rows_text, text_bytes
from jeeves_mcp.results import error_result, fit_result, share_budget
from jeeves_mcp.tools.base import (
    MIN_PRUNE_BYTES,
    CallContext,
    TextOutput,
    Tool,
    ToolOutput,
    clip_summary,
    fail_open,
    text_budget,
    unencodable_argument,
)

log = logging.getLogger("jeeves_mcp.tools")

FOCUS = "context_focus_question"


async def _run_handler(tool: Tool, ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    """`tool`'s output. JSON allows a lone surrogate (`\\ud800`) that no argv, environment or
    file name can hold: an argument holding one is the caller's error, not an internal one."""
    try:
        return await tool.handler(ctx, args)
    except UnicodeEncodeError as exc:
        name = unencodable_argument(args)
        if name is None:
            raise
        raise ToolError("INVALID_REQUEST", f"{name} is not valid Unicode (a lone surrogate)") from exc


@dataclass
class _Pruned:
    """What pruning made of a tool's texts: rows (None: raw), prune ids, the `pruning` object."""

    rows: list[list[Row] | None] = field(default_factory=list)
    # Per text, its rows within a smaller budget (PruneOutcome.within); None for a raw text.
    within: list[Callable[[int], tuple[list[Row], list[dict[str, Any]]]] | None] = field(default_factory=list)
    ids: list[str | None] = field(default_factory=list)
    # Texts left whole by the engine but over the budget: the lines their question names.
    scans: list[line_scan.LineScan | None] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pruning: dict[str, Any] = field(
        default_factory=lambda: {"attempted": False, "applied": False, "fallback": False}
    )


class ToolRunner:
    def __init__(
        self,
        config: PrunerConfig,
        tools: list[Tool],
        store: RecoveryStore,
        pruner: Pruner,
        *,
        aliases: Sequence[Tool] = (),
    ) -> None:
        self.config = config
        self.store = store
        self.pruner = pruner
        self._listed = tools
        self._tools = {tool.name: tool for tool in [*tools, *aliases]}
        self._definitions = [tool.definition() for tool in tools]
        self.active_calls = 0
        self.stats = SavingsStats()

    def error_result(self, error: ToolError, tool: str) -> dict[str, Any]:
        return error_result(error, tool, self.config.response_budget_bytes)


    def definitions(self, version: str | None = None) -> list[dict[str, Any]]:
        """tools/list's entries for protocol `version` (None: every field)."""
        if version is None:
            return self._definitions
        return [tool.definition(version) for tool in self._listed]

    async def call(
        self, params: Any, *, request_id: str, progress: ProgressReporter
    ) -> dict[str, Any]:
        """Run one `tools/call`; returns the MCP CallToolResult."""
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            raise McpError(INVALID_PARAMS, "tools/call needs params.name (string)")
        name = params["name"]
        arguments = params.get("arguments", {})
        _log.event(log, "tool.request_received", tool=name, request_id=request_id)
        tool = self._tools.get(name)
        if tool is None:
            # A tool result rather than -32602: the agent sees the valid names and
            # retries, as with the official SDK server (and the conformance suite).
            _log.event(log, "tool.request_invalid", tool=name, request_id=request_id,
                       validation_errors=["unknown tool"])
            return self.error_result(
                ToolError(
                    "INVALID_REQUEST",
                    f"unknown tool: {name}",
                    tools=[t["name"] for t in self._definitions],
                ),
                name,
            )
        if arguments is None:
            arguments = {}
        problems = validate(arguments, tool.input_schema)
        if problems:
            omitted = {"errors_omitted": problems.omitted} if problems.omitted else {}
            _log.event(log, "tool.request_invalid", tool=name, request_id=request_id,
                       validation_errors=problems.shown, validation_errors_omitted=problems.omitted)
            raise McpError(INVALID_PARAMS, f"invalid arguments for {name}: {problems}",
                           {"code": "INVALID_REQUEST", "errors": problems.shown, **omitted})
        if self.active_calls >= self.config.max_concurrent_calls:
            return self.error_result(
                ToolError(
                    "QUEUE_OVERLOADED",
                    f"{self.active_calls} tool calls already running",
                    hint="retry when one finishes",
                ),
                name,
            )
        self.active_calls += 1
        try:
            return await self._execute(tool, arguments, request_id, progress)
        finally:
            self.active_calls -= 1

    async def _execute(
        self, tool: Tool, args: dict[str, Any], request_id: str, progress: ProgressReporter
    ) -> dict[str, Any]:
        ctx = CallContext(self.config, self.store, self.pruner, progress, request_id, log)
        started = time.monotonic()
        _log.event(log, "tool.exec_start", tool=tool.name, request_id=request_id)
        try:
            output = await _run_handler(tool, ctx, args)
        except ToolError as exc:
            event = "tool.exec_timeout" if exc.code == "TOOL_TIMEOUT" else "tool.exec_failed"
            _log.event(log, event, tool=tool.name, request_id=request_id, error_code=exc.code,
                       error=exc.message, duration_ms=_log.monotonic_ms(started))
            return self.error_result(exc, tool.name)
        except McpError:
            raise
        except trio.Cancelled:
            raise
        except Exception as exc:
            log.error("tool.internal_error", exc_info=exc,
                      extra={"tool": tool.name, "request_id": request_id})
            return self.error_result(
                ToolError("INTERNAL", f"internal error in {tool.name}", request_id=request_id),
                tool.name,
            )
        raw_bytes = sum(len(t.text.encode("utf-8", "surrogatepass")) for t in output.texts)
        _log.event(log, "tool.exec_ok", tool=tool.name, request_id=request_id,
                   duration_ms=_log.monotonic_ms(started), bytes=raw_bytes)
        if output.raw_result is not None or output.fit_raw is not None:
            fit_raw = output.fit_raw
            if fit_raw is None:
                fixed = output.raw_result
                assert fixed is not None

                def fit_raw(budget: int) -> dict[str, Any]:
                    return fixed

            result, structured = self._fit(lambda budget: (fit_raw(budget), False))
            if tool.name == "prune_text":
                self.stats.record(
                    tool.name, args["text"], structured["pruned_text"],
                    pruned=bool(structured["annotations"]),
                    fallback=(structured["warnings"] or [None])[0]
                    if structured["stats"]["used_fallback"] else None,
                )
            _log.event(log, "tool.respond_ok", tool=tool.name, request_id=request_id, mode="raw")
            return result
        pruned = await self._prune(args, output, request_id)
        result, structured = self._fit(
            lambda budget: (self._shape(output, pruned, budget), output.error is not None)
        )
        applied = structured["pruning"]["applied"]
        self.stats.record(
            tool.name,
            "\n".join(text.text for text in output.texts),
            "\n".join(structured[text.name] for text in output.texts),
            pruned=applied,
            fallback=structured["pruning"].get("error") if structured["pruning"]["fallback"] else None,
        )
        mode = "pruned" if applied else "raw"
        _log.event(log, "tool.respond_ok", tool=tool.name, request_id=request_id, mode=mode)
        return result

    def _fit(
        self, build: Callable[[int], tuple[dict[str, Any], bool]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The result `build(text_budget)` makes, with the budget lowered until it fits,
        and the JSON it carries."""
        return fit_result(build, self.config.response_budget_bytes, text_budget(self.config))

    async def _prune(self, args: dict[str, Any], output: ToolOutput, request_id: str) -> _Pruned:
        """Prune the texts when a question asks for it (once; fitting may try several budgets)."""
        question = args.get(FOCUS)
        pruned = _Pruned()
        pruning = pruned.pruning
        # Texts pruned together share the response budget: a small one (an empty stderr) whole, the
        # rest alike. An even split gave a focused `cat` half the budget beside an empty stderr
        # (4.7 KB views where `read` of the same file gave 9 KB; the review of 2026-11-29).
        shares = share_budget([text_bytes(text.text) for text in output.texts], text_budget(self.config))
        for text, share in zip(output.texts, shares, strict=True):
            reason = self._prune_check(text, question)
            pruned.scans.append(None)
            if reason is not None:
                pruned.reasons.append(reason)
                # Raw texts stay lines (`None` rows): most outputs fit the budget
                # whole, and a row per line would cost more than the call.
                pruned.rows.append(None)
                pruned.within.append(None)
                pruned.ids.append(None)
                if reason == "input_too_large" and isinstance(question, str):
                    await self._scan(text, question, share, pruned, reason)
                continue
            pruning["attempted"] = True
            assert isinstance(question, str)  # _prune_check refuses anything else
            prior = await fail_open(text.line_prior)
            ages = await fail_open(text.file_ages)
            outcome = await self.pruner.prune(
                text.text, question, text.source_type,
                PruneOptions(timeout_ms=self.config.prune_timeout_ms, max_bytes=share),
                path=text.path_hint, request_id=request_id, first_line=text.first_line,
                line_prior=prior, whole=text.whole, matches=text.grep_rows, files=text.files,
                file_ages=ages,
            )
            pruned.rows.append(outcome.rows)
            pruned.within.append(outcome.within)
            pruned.ids.append(outcome.prune_id)
            if outcome.used_fallback:
                pruning["fallback"] = outcome.error is not None or pruning["fallback"]
                if outcome.error:
                    pruned.errors.append(outcome.error)
                pruned.reasons.extend(outcome.warnings)
                await self._scan(text, question, share, pruned, (outcome.warnings or ["fallback"])[0])
            elif outcome.annotations:
                pruning["applied"] = True
            else:
                pruned.reasons.append("nothing_to_prune")
                await self._scan(text, question, share, pruned, "nothing_to_prune")
        if not pruning["applied"] and pruned.reasons:
            pruning["reason"] = pruned.reasons[0]
        if pruned.errors:
            pruning["error"] = pruned.errors[0]
        if pruning["attempted"]:
            pruning["engine"] = self.pruner.engine.name
        return pruned

    async def _scan(
        self, text: TextOutput, question: str, share: int, pruned: _Pruned, why: str
    ) -> None:
        """When `text` stays whole (`why`) yet the budget cuts it, show the lines its question
        names (line_scan) instead of only its head and tail."""
        if text_bytes(text.text) <= share:
            return
        prune_id = pruned.ids[-1] or self.store.put(
            text.text.removesuffix("\n"), first_line=text.first_line)
        found = await trio.to_thread.run_sync(
            line_scan.scan, text.text, question, prune_id, text.first_line)
        if found is None:
            return
        pruned.ids[-1] = prune_id
        pruned.scans[-1] = found
        pruned.pruning["applied"] = True
        pruned.pruning["line_scan"] = {
            "why": why, "terms": found.terms, "matching_lines": len(found.ranked)}

    def _shape(self, output: ToolOutput, pruned: _Pruned, total: int) -> dict[str, Any]:
        """The result's JSON with every output text fitted into `total` bytes together."""
        sizes = [
            text_bytes(text.text if rows is None or scan else rows_text(rows))
            for text, rows, scan in zip(output.texts, pruned.rows, pruned.scans, strict=True)
        ]
        budgets = share_budget(sizes, total)
        structured: dict[str, Any] = {"summary": output.summary}
        if output.error is not None:
            structured.update(output.error.payload())
        structured.update(output.fields)
        truncated: dict[str, Any] = {}
        for index, (text, rows, budget, size) in enumerate(
            zip(output.texts, pruned.rows, budgets, sizes, strict=True)
        ):
            prune_id = pruned.ids[index]
            # A final newline ends the last line; cut, it would number a phantom one after it.
            whole = text.text.removesuffix("\n") if size > budget else text.text
            if size > budget and prune_id is None:  # it will be cut: store the whole text first
                prune_id = pruned.ids[index] = self.store.put(whole, first_line=text.first_line)
            scan = pruned.scans[index]
            if scan is not None:
                kept, cut = fit_rows(scan.rows(budget), budget, prune_id or "")
                fitted = rows_text(kept)
            elif rows is None:
                fitted, cut = fit_text(whole, text.first_line, budget, prune_id or "")
            else:
                # Escaped, the view may be over what the result has room for: the engine's
                # order cuts it, not fit_rows' middle (a function's signature went so).
                if (within := pruned.within[index]) is not None:
                    rows = within(budget)[0]
                kept, cut = fit_rows(rows, budget, prune_id or "")
                fitted = rows_text(kept)
            if cut is not None:
                truncated[text.name] = {
                    "prune_id": prune_id,
                    "lines": [cut["original_start_line"], cut["original_end_line"]],
                    "original_bytes": text_bytes(text.text),
                }
            structured[text.name] = fitted
        if truncated:
            structured["truncated"] = truncated
            # A reader of the summary alone learns the text is not whole, and where the rest is.
            structured["summary"] = clip_summary(output.summary, tail=f"; {', '.join(truncated)} cut to fit (see truncated)")
        structured["pruning"] = pruned.pruning
        return structured

    def _prune_check(self, text: TextOutput, question: Any) -> str | None:
        """Why `text` is not pruned (seed 000's `pruning.reason`), or None to prune it."""
        if not isinstance(question, str) or not question.strip():
            return "no_question"
        if not self.config.pruning_enabled:
            return "disabled_or_unconfigured"
        size = len(text.text.encode("utf-8", "surrogatepass"))
        if size > self.config.max_prune_input_bytes:
            return "input_too_large"
        if size < MIN_PRUNE_BYTES:
            return "below_threshold"
        return None
