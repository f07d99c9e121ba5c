"""Seed 000's request pipeline for `tools/call`, the same for every transport.

    received → validating → executing_tool → raw_output_ready → prune_check
    → (calling_pruner) → respond_raw | respond_pruned → responded

Every state logs its seed 000 event. Tool failures become `isError` results
with seed 004's `{message, code, ...}`; protocol misuse becomes -32602.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.config import PrunerConfig
from jeeves_mcp.mcp.errors import INVALID_PARAMS, McpError, ToolError
from jeeves_mcp.mcp.progress import ProgressReporter
from jeeves_mcp.mcp.schema import validate
from jeeves_mcp.pruning import PruneOptions, Pruner
from jeeves_mcp.pruning.counters import SavingsStats
from jeeves_mcp.pruning.recovery import RecoveryStore
from jeeves_mcp.pruning.render import Row, fit_lines, fit_rows, rows_text, text_bytes
from jeeves_mcp.tools._base import CallContext, TextOutput, Tool, ToolOutput

log = logging.getLogger("jeeves_mcp.tools")

MIN_PRUNE_BYTES = 512  # smaller outputs are returned whole: a marker would cost as much
FOCUS = "context_focus_question"


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
            return error_result(
                ToolError(
                    "INVALID_REQUEST",
                    f"unknown tool: {name}",
                    tools=[t["name"] for t in self._definitions],
                )
            )
        if arguments is None:
            arguments = {}
        problems = validate(arguments, tool.input_schema)
        if problems:
            _log.event(log, "tool.request_invalid", tool=name, request_id=request_id,
                       validation_errors=problems)
            raise McpError(
                INVALID_PARAMS,
                f"invalid arguments for {name}: {'; '.join(problems)}",
                {"code": "INVALID_REQUEST", "errors": problems},
            )
        if self.active_calls >= self.config.max_concurrent_calls:
            return error_result(
                ToolError(
                    "QUEUE_OVERLOADED",
                    f"{self.active_calls} tool calls already running",
                    hint="retry when one finishes",
                )
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
            output = await tool.handler(ctx, args)
        except ToolError as exc:
            event = "tool.exec_timeout" if exc.code == "TOOL_TIMEOUT" else "tool.exec_failed"
            _log.event(log, event, tool=tool.name, request_id=request_id, error_code=exc.code,
                       error=exc.message, duration_ms=_log.monotonic_ms(started))
            return error_result(exc)
        except McpError:
            raise
        except trio.Cancelled:
            raise
        except Exception as exc:
            log.error("tool.internal_error", exc_info=exc,
                      extra={"tool": tool.name, "request_id": request_id})
            return error_result(ToolError("INTERNAL", f"internal error in {tool.name}",
                                          request_id=request_id))
        raw_bytes = sum(len(t.text.encode("utf-8", "surrogatepass")) for t in output.texts)
        _log.event(log, "tool.exec_ok", tool=tool.name, request_id=request_id,
                   duration_ms=_log.monotonic_ms(started), bytes=raw_bytes)
        if output.raw_result is not None:
            if tool.name == "prune_text":
                self.stats.record(
                    tool.name, args["text"], output.raw_result["pruned_text"],
                    pruned=bool(output.raw_result["annotations"]),
                    fallback=(output.raw_result["warnings"] or [None])[0]
                    if output.raw_result["stats"]["used_fallback"] else None,
                )
            result = _result(output.raw_result, is_error=False)
            _log.event(log, "tool.respond_ok", tool=tool.name, request_id=request_id, mode="raw")
            return result
        structured, mode = await self._shape(tool, args, output, request_id)
        _log.event(log, "tool.respond_ok", tool=tool.name, request_id=request_id, mode=mode)
        return _result(structured, is_error=output.error is not None)

    async def _shape(
        self, tool: Tool, args: dict[str, Any], output: ToolOutput, request_id: str
    ) -> tuple[dict[str, Any], str]:
        """Prune (when asked) and fit every output text into the response budget."""
        question = args.get(FOCUS)
        pruning: dict[str, Any] = {"attempted": False, "applied": False, "fallback": False}
        # Pruned texts as rows; raw ones stay lines (`None` rows): most outputs
        # fit the budget whole, and a row per line would cost more than the call.
        rows_per_text: list[list[Row] | None] = []
        ids: list[str | None] = []
        reasons: list[str] = []
        errors: list[str] = []
        # Texts pruned together share the response budget.
        share = self.config.response_budget_bytes // max(1, len(output.texts))
        for text in output.texts:
            reason = self._prune_check(text, question)
            if reason is not None:
                reasons.append(reason)
                rows_per_text.append(None)
                ids.append(None)
                continue
            pruning["attempted"] = True
            assert isinstance(question, str)  # _prune_check refuses anything else
            outcome = await self.pruner.prune(
                text.text, question, text.source_type,
                PruneOptions(timeout_ms=self.config.prune_timeout_ms, max_bytes=share),
                path=text.path_hint, request_id=request_id, first_line=text.first_line,
            )
            rows_per_text.append(outcome.rows)
            ids.append(outcome.prune_id)
            if outcome.used_fallback:
                pruning["fallback"] = outcome.error is not None or pruning["fallback"]
                if outcome.error:
                    errors.append(outcome.error)
                reasons.extend(outcome.warnings)
            elif outcome.annotations:
                pruning["applied"] = True
            else:
                reasons.append("nothing_to_prune")
        if not pruning["applied"] and reasons:
            pruning["reason"] = reasons[0]
        if errors:
            pruning["error"] = errors[0]
        if pruning["applied"] or pruning["attempted"]:
            pruning["engine"] = self.pruner.engine.name

        sizes = [
            text_bytes(text.text if rows is None else rows_text(rows))
            for text, rows in zip(output.texts, rows_per_text, strict=True)
        ]
        budgets = share_budget(sizes, self.config.response_budget_bytes)
        structured: dict[str, Any] = {"summary": output.summary}
        if output.error is not None:
            structured.update(output.error.payload())
        structured.update(output.fields)
        truncated: dict[str, Any] = {}
        for text, rows, prune_id, budget, size in zip(
            output.texts, rows_per_text, ids, budgets, sizes, strict=True
        ):
            if size > budget and prune_id is None:  # it will be cut: store the whole text first
                prune_id = self.store.put(text.text, first_line=text.first_line)
            if rows is None:
                fitted, cut = fit_lines(text.text.split("\n"), text.first_line, budget, prune_id or "")
            else:
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
        structured["pruning"] = pruning
        self.stats.record(
            tool.name,
            "\n".join(text.text for text in output.texts),
            "\n".join(structured[text.name] for text in output.texts),
            pruned=pruning["applied"],
            fallback=pruning.get("error") if pruning["fallback"] else None,
        )
        return structured, "pruned" if pruning["applied"] else "raw"

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


def share_budget(sizes: list[int], total: int) -> list[int]:
    """Split `total` bytes between texts: small ones whole, the rest share equally."""
    budgets = [0] * len(sizes)
    remaining = total
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        fair = remaining // len(pending)
        index = pending[0]
        if sizes[index] <= fair:
            budgets[index] = sizes[index]
            remaining -= sizes[index]
            pending.pop(0)
            continue
        for index in pending:
            budgets[index] = fair
        break
    return budgets


def _result(structured: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}],
        "structuredContent": structured,
        "isError": is_error,
    }


def error_result(error: ToolError) -> dict[str, Any]:
    return _result(error.payload(), is_error=True)
