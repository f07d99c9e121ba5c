"""Errors of the pruner child.

    McpError                     a JSON-RPC error response (`error.code`, `message`, `data`)
    ToolError                    a tool result with `isError: true` and `{message, code, ...}`

Tool error codes are seed 004's table; COMMAND_FAILED is the one addition,
for a `bash` command that ran and exited non-zero (its output still matters).
"""

from __future__ import annotations

from typing import Any

# JSON-RPC 2.0 and MCP protocol codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022
# Seed 001's domain codes.
PRUNE_ID_NOT_FOUND = -32004
INVALID_RANGE = -32005

TOOL_ERROR_CODES = frozenset(
    {
        "INVALID_REQUEST",
        "NOT_FOUND",
        "CAPABILITY_MISSING",
        "QUEUE_OVERLOADED",
        "TOOL_TIMEOUT",
        "CANCELLED",
        "INTERNAL",
        "UNAUTHORIZED",
        "FORBIDDEN",
        "COMMAND_FAILED",
    }
)


# Strings a result or an error echoes are clipped to this many characters (seed 002): an error
# echoing its input gave back a 3 MB prune_id whole (the attack review of 2026-11-29).
MAX_STRING_CHARS = 500


def clip_json(value: Any, max_items: int | None = None) -> Any:
    """`value` with every string past MAX_STRING_CHARS clipped (and every list past
    `max_items` cut), at any depth."""
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING_CHARS else value[: MAX_STRING_CHARS - 1] + "…"
    if isinstance(value, list):
        return [clip_json(item, max_items) for item in value[:max_items]]
    if isinstance(value, dict):
        return {key: clip_json(item, max_items) for key, item in value.items()}
    return value


class McpError(Exception):
    """Answered as a JSON-RPC error object."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": clip_json(self.message)}
        if self.data is not None:
            error["data"] = clip_json(self.data)
        return error


class ToolError(Exception):
    """Answered as a tool result with `isError: true`."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        assert code in TOOL_ERROR_CODES, code
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def payload(self) -> dict[str, Any]:
        return {"message": self.message, "code": self.code, **self.details}
