"""Tool results within the response budget (seed 002): the budget shared between a result's
texts, a result's size as the protocol measures it, the fit that lowers the texts' budget
until the result is under the limit, and error results."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from jeeves_mcp import __version__
from jeeves_mcp.mcp.errors import ToolError, clip_json
from jeeves_mcp.pruning.render import text_bytes
from jeeves_mcp.tools.base import clip_summary

__all__ = ["error_result", "error_summary", "fit_result", "result_bytes", "share_budget"]


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


def result_bytes(result: dict[str, Any]) -> int:
    """A tool result's size as seed 002 measures it (`JSON.stringify(result)`), in UTF-8 bytes."""
    return text_bytes(_dumps(result))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_BREAKS_JSON_LEAVES_RAW)


# JSON escapes every control character but these, which a reader may take for line breaks:
# a line of a file could then pose as a numbered line of its own in what the agent reads.
# Escaped, the JSON parses back to the same text.
_BREAKS_JSON_LEAVES_RAW = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def fit_result(
    build: Callable[[int], tuple[dict[str, Any], bool]], limit: int, budget: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first result `build(budget)` makes that serializes under `limit` bytes, and
    the JSON it carries (so callers need not parse it back).

    Output text is escaped twice over in content[0].text (a JSON string inside
    the result's JSON), so the budget is lowered by what is over, divided by what
    a kept byte costs serialized, and tried again;
    what still does not fit after that loses long strings and lists (seed 002's
    500 characters and 10 items), then the fields besides the summary.
    """
    target = limit - 1 - PROTOCOL_RESERVE  # seed 002: strictly less than the limit
    for _ in range(MAX_FIT_TRIES):
        structured, is_error = build(budget)
        result = _result(structured, is_error=is_error)
        over = result_bytes(result) - target
        if over <= 0:
            return result, structured
        if budget == 0:
            break
        # A byte of text costs a serialized byte or more when escaped ("\n" is 2
        # bytes, then 3 inside content[0].text): measured on what was kept.
        texts = [v for v in structured.values() if isinstance(v, str)]
        kept = sum(text_bytes(v) for v in texts)
        cost = sum(text_bytes(_dumps(_dumps(v))) for v in texts)
        slope = max(1.0, cost / max(kept, 1))
        budget = max(0, int(min(budget, kept) - over / slope) - 16)
    clipped = clip_json(structured, MAX_LIST_ITEMS)
    result = _result(clipped, is_error=is_error)
    if result_bytes(result) <= target:
        return result, clipped
    keep: dict[str, Any] = {key: structured[key] for key in ("summary", "code") if key in structured}
    last = {**keep, "message": "result over the response budget"}
    return _result(last, is_error=is_error), last


MAX_FIT_TRIES = 8
# What the protocol layer adds to a result in the stateless revision (mcp/protocol.py): its
# `resultType` and a `_meta` with the server's name and version. The room kept for them is
# exactly their size (112 bytes at 0.1.0), not a guess: a guess of 256 left a view 144 bytes
# of lines short.
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "jeeves-mcp", "version": __version__}
PROTOCOL_ADDS = {"resultType": "complete", "_meta": {META_SERVER_INFO: SERVER_INFO}}
PROTOCOL_RESERVE = text_bytes(_dumps(PROTOCOL_ADDS))  # its braces pay for the comma before it
MAX_LIST_ITEMS = 10


def _result(structured: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    # The JSON once, in content[0].text: no structuredContent (the tools declare no
    # outputSchema), since a second copy would halve what fits in the response budget.
    return {"content": [{"type": "text", "text": _dumps(structured)}], "isError": is_error}



def error_result(error: ToolError, tool: str, limit: int) -> dict[str, Any]:
    """An `isError` result: seed 004's `{message, code, ...}` with a summary, within `limit`."""
    payload = {"summary": error_summary(tool, error), **error.payload()}
    return fit_result(lambda budget: (payload, True), limit, 0)[0]


def error_summary(tool: str, error: ToolError) -> str:
    """`read: no such file: x.py [NOT_FOUND]`, the message clipped so the code stays."""
    tail = f" [{error.code}]"
    return clip_summary(f"{tool}: {error.message}", tail=tail)
