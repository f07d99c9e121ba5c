"""Seed 001's tools: `prune_text`, `recover_text` (alias `recover_range`), `health`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jeeves_mcp.mcp.errors import INVALID_RANGE, PRUNE_ID_NOT_FOUND, McpError
from jeeves_mcp.mcp.health import health_payload
from jeeves_mcp.pruning import SOURCE_TYPES, EngineError, PruneOptions
from jeeves_mcp.pruning.contract import estimate_tokens
from jeeves_mcp.pruning.pruner import line_counts
from jeeves_mcp.pruning.render import Row, fit_rows, rows_text, text_bytes
from jeeves_mcp.tools.base import (
    READ_ONLY,
    CallContext,
    Tool,
    ToolOutput,
    clip_summary,
    plural,
    text_budget,
    timeout_ms_arg,
)

PRUNE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "goal_hint": {"type": "string"},
        "source_type": {"type": "string", "enum": list(SOURCE_TYPES)},
        "options": {
            "type": "object",
            "properties": {
                "max_prune_ratio": {"type": "number", "minimum": 0, "maximum": 1},
                "min_keep_lines": {"type": "integer", "minimum": 0},
                "timeout_ms": {"type": "integer", "minimum": 1},
                "annotate_lines": {"type": "boolean"},
                "include_markers": {"type": "boolean"},
            },
            "required": [
                "max_prune_ratio",
                "min_keep_lines",
                "timeout_ms",
                "annotate_lines",
                "include_markers",
            ],
            "additionalProperties": False,
        },
    },
    "required": ["text", "goal_hint", "source_type", "options"],
    "additionalProperties": False,
}

RECOVER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prune_id": {"type": "string"},
        "ranges": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    # No minimum here: a line 0 is seed 001's -32005 invalid_range, not -32602.
                    "start_line": {"type": "integer"},
                    "end_line": {"type": "integer"},
                },
                "required": ["start_line", "end_line"],
                "additionalProperties": False,
            },
        },
        "include_line_numbers": {"type": "boolean"},
    },
    "required": ["prune_id", "ranges", "include_line_numbers"],
    "additionalProperties": False,
}

HEALTH_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False}


async def prune_text(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    raw_options = args["options"]
    options = PruneOptions(
        max_prune_ratio=float(raw_options["max_prune_ratio"]),
        min_keep_lines=int(raw_options["min_keep_lines"]),
        timeout_ms=timeout_ms_arg(raw_options, ctx.config.prune_timeout_ms, "options.timeout_ms"),
        annotate_lines=raw_options["annotate_lines"],
        include_markers=raw_options["include_markers"],
        max_bytes=text_budget(ctx.config),
    )
    outcome = await ctx.pruner.prune(
        args["text"], args["goal_hint"], args["source_type"], options, request_id=ctx.request_id
    )
    contract = outcome.contract()
    stats = outcome.stats
    if outcome.used_fallback:  # say why, in the summary an agent reads first
        reason = outcome.warnings[0] if outcome.warnings else "fallback"
        summary = clip_summary(
            f"prune_text: not pruned ({reason}), {plural(stats['original_lines'], 'line')} as given"
        )
    else:
        summary = clip_summary(
            f"prune_text: kept {stats['kept_lines']} of {plural(stats['original_lines'], 'line')}"
        )

    def fit(budget: int) -> dict[str, Any]:
        result = {"summary": summary, **contract}
        rows, annotations = outcome.within(budget)  # the lines ranked last cut first
        budget_cut = annotations is not outcome.annotations
        rows, cut = fit_rows(rows, budget, outcome.prune_id)
        if cut is not None or budget_cut:
            result["pruned_text"] = rows_text(rows)
            result["annotations"] = annotations if cut is None else _merge_annotation(annotations, cut)
            result["warnings"] = [*result["warnings"], "response_budget"]
            # The counts of what is shown, the budget's cut included: they said 210 kept of 606
            # where the annotations hid 449 (the review of 2026-11-29).
            total = stats["original_lines"]
            kept = max(0, total - sum(a["pruned_line_count"] for a in result["annotations"]))
            result["stats"] = {**stats, **line_counts(total, kept),
                               "tokens_est_after": estimate_tokens(result["pruned_text"])}
            if not outcome.used_fallback:  # else it says why the text was not pruned
                result["summary"] = clip_summary(f"prune_text: kept {kept} of {plural(total, 'line')}")
        return result

    return ToolOutput(summary=summary, fit_raw=fit)


def _merge_annotation(annotations: list[dict[str, Any]], cut: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget cut replaces the annotations it covers."""
    start, end = cut["original_start_line"], cut["original_end_line"]
    kept = [a for a in annotations if a["original_end_line"] < start or a["original_start_line"] > end]
    return sorted([*kept, cut], key=lambda a: a["original_start_line"])


async def recover_text(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    prune_id = args["prune_id"]
    entry = ctx.store.get(prune_id)
    if entry is None:
        raise McpError(
            PRUNE_ID_NOT_FOUND,
            "prune_id_not_found",
            {"code": "prune_id_not_found", "prune_id": prune_id},
        )
    first, last = entry.first_line, entry.last_line
    spans: list[tuple[int, int]] = []
    for item in args["ranges"]:
        start, end = int(item["start_line"]), int(item["end_line"])
        if start > end or start > last or start < first:
            raise McpError(
                INVALID_RANGE,
                "invalid_range",
                {
                    "code": "invalid_range",
                    "range": {"start_line": start, "end_line": end},
                    "available": {"start_line": first, "end_line": last},
                },
            )
        spans.append((start, min(end, last)))
    ranges = [{"start_line": start, "end_line": end} for start, end in spans]
    numbered = args["include_line_numbers"]

    def row(n: int) -> Row:
        line = entry.line(n)
        return Row(n, n, f"{n}│ {line}" if numbered else line)

    total = sum(end - start + 1 for start, end in spans)
    # Ranges may overlap (each is shown as asked): the summary counts each line once.
    distinct = _distinct_lines(spans)
    repeated = "" if distinct == total else f" ({total:,} as the ranges ask)"
    summary = clip_summary(
        f"recover_text {prune_id}: {distinct} of {plural(len(entry.lines), 'line')}{repeated}"
    )

    def fit(budget: int) -> dict[str, Any]:
        rows, cut = fit_rows(_bounded_rows(spans, total, row, budget), budget, prune_id)
        result: dict[str, Any] = {
            "summary": summary,
            "raw_text": rows_text(rows),
            "metadata": {"prune_id": prune_id, "ranges": ranges, "line_numbering": "original"},
        }
        if cut is not None:
            result["metadata"]["truncated"] = cut
            # The summary alone told "614 of 3,495 lines" where 209 came back (the agent-view
            # review of 2026-11-29): it says the budget held some back.
            result["summary"] = clip_summary(summary, tail="; cut to fit (metadata.truncated)")
        return result

    return ToolOutput(summary=summary, fit_raw=fit)


def _distinct_lines(spans: list[tuple[int, int]]) -> int:
    """How many line numbers the inclusive spans cover between them."""
    count, reached = 0, 0
    for start, end in sorted(spans):
        if end > reached:
            count += end - max(start, reached + 1) + 1
            reached = end
    return count


def _bounded_rows(spans: list[tuple[int, int]], total: int, row: Any, budget: int) -> list[Row]:
    """The rows `fit_rows` needs from the chosen lines, in work bounded by the budget.

    Lines are rendered from the front and from the back only until each side
    passes the budget; whatever lies between becomes one placeholder row too
    big to keep, spanning the smallest and largest line numbers it stands
    for, so `fit_rows` cuts it and its marker names the right lines.
    """

    def numbers(reverse: bool) -> Iterator[int]:
        for start, end in reversed(spans) if reverse else spans:
            yield from range(end, start - 1, -1) if reverse else range(start, end + 1)

    def take(reverse: bool) -> list[Row]:
        taken, used = [], 0
        for n in numbers(reverse):
            if used > budget:
                break
            taken.append(row(n))
            used += text_bytes(taken[-1].text) + 1
        return taken

    head = take(reverse=False)
    if len(head) == total:
        return head
    tail = take(reverse=True)[::-1]
    if len(head) + len(tail) >= total:  # the sides meet: the whole is at most twice the budget
        return [row(n) for n in numbers(reverse=False)]
    low, high, position = None, None, 0
    middle = (len(head), total - len(tail))  # positions [a, b) of the chosen lines not rendered
    for start, end in spans:
        a, b = max(middle[0], position), min(middle[1], position + end - start + 1)
        if a < b:
            first_n, last_n = start + a - position, start + b - 1 - position
            low = first_n if low is None else min(low, first_n)
            high = last_n if high is None else max(high, last_n)
        position += end - start + 1
    assert low is not None and high is not None
    return [*head, Row(low, high, "x" * (budget + 1)), *tail]


async def health(ctx: CallContext, args: dict[str, Any]) -> ToolOutput:
    payload = health_payload()
    engine = ctx.pruner.engine
    payload["engine"] = engine.name
    check = getattr(engine, "health", None)  # an external service can be down: say so
    if check is not None:
        try:
            payload["engine_status"] = await check()
        except EngineError as exc:
            payload["engine_status"] = {"status": "unreachable", "error": exc.kind, "detail": str(exc)}
            payload["warnings"] = ["pruning falls back to raw output until the engine answers"]
    engine_state = payload.get("engine_status", {}).get("status", "ok")
    payload["summary"] = clip_summary(f"healthy, engine {engine.name} ({engine_state})")
    return ToolOutput(summary=payload["summary"], raw_result=payload)


PRUNE_TEXT = Tool(
    name="prune_text",
    title="Prune text",
    description="Keep what goal_hint asks; cuts become ⟦PRUNÉ⟧ markers.",
    input_schema=PRUNE_SCHEMA,
    handler=prune_text,
    annotations=READ_ONLY,
)
RECOVER_TEXT = Tool(
    name="recover_text",
    title="Recover pruned lines",
    description="Lines behind a ⟦PRUNÉ prune_id=… lignes a-b⟧ marker.",
    input_schema=RECOVER_SCHEMA,
    handler=recover_text,
    annotations=READ_ONLY,
)
RECOVER_RANGE = Tool(
    name="recover_range",
    title="Recover pruned lines",
    description=RECOVER_TEXT.description,
    input_schema=RECOVER_SCHEMA,
    handler=recover_text,
    annotations=READ_ONLY,
)
HEALTH = Tool(
    name="health",
    title="Server health",
    description="Server status.",
    input_schema=HEALTH_SCHEMA,
    handler=health,
    annotations=READ_ONLY,
)
