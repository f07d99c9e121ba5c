"""The transport-agnostic MCP / JSON-RPC dispatcher of the pruner child.

Transports (Streamable HTTP, legacy /rpc, stdio) parse bytes, find the
session, and hand each message to `Dispatcher.handle`, which returns the
response object (or None for notifications). Two eras are served:

- handshake era (2025-03-26, 2025-06-18, 2025-11-25): `initialize` picks the
  version, a session carries it;
- stateless era (2026-07-28): every request names its version in
  `params._meta`, `server/discover` replaces `initialize`.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.mcp.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    McpError,
    ToolError,
)
from jeeves_mcp.mcp.health import health_payload
from jeeves_mcp.mcp.progress import Notify, ProgressReporter
from jeeves_mcp.pipeline import ToolRunner
from jeeves_mcp.results import META_SERVER_INFO, SERVER_INFO

log = logging.getLogger("jeeves_mcp.protocol")

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[-1]
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")  # RFC 5424
META_VERSION = "io.modelcontextprotocol/protocolVersion"
INSTRUCTIONS = (
    "read, bash and grep work like the usual tools. Add context_focus_question to get only "
    "what answers it; cut blocks show as ⟦PRUNÉ prune_id=… lignes a-b⟧ and recover_text "
    "returns them."
)
# Stateless-era results that carry cache hints (CacheableResult in the 2026-07-28 schema).
CACHEABLE_METHODS = frozenset(
    {"server/discover", "tools/list", "resources/list", "resources/templates/list", "prompts/list"}
)
# Only what is served. resources/list and prompts/list still answer empty lists for
# clients that ask without looking (Codex lists every server's resources).
CAPABILITIES: dict[str, Any] = {"tools": {"listChanged": False}}
# JSON-RPC batches exist in 2025-03-26 only: 2024-11-05's schema has no batch
# message and 2025-06-18 removed them.
BATCH_VERSIONS = frozenset({"2025-03-26"})
# Its replies are sent together: 80,000 tools/list in a 4 MB batch made a 243 MB reply.
MAX_BATCH_MESSAGES = 100


@dataclass
class InFlight:
    scope: trio.CancelScope
    cancelled: bool = False


@dataclass
class Session:
    """One client conversation: an MCP session, the /rpc peer, or stdio."""

    id: str = field(default_factory=lambda: secrets.token_hex(16))
    protocol_version: str | None = None
    client_info: dict[str, Any] | None = None
    in_flight: dict[str, InFlight] = field(default_factory=dict)
    closed: bool = False

    def cancel_all(self) -> None:
        self.closed = True
        for entry in self.in_flight.values():
            entry.cancelled = True
            entry.scope.cancel()


def canonical_id(request_id: Any) -> str:
    """Seed 004: in-flight requests are tracked under String(id)."""
    return request_id if isinstance(request_id, str) else str(request_id)


def is_valid_id(request_id: Any) -> bool:
    return isinstance(request_id, str) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    )


def request_version(message: Any) -> str | None:
    """The stateless-era version a request names in `params._meta`, if any."""
    if isinstance(message, dict):
        params = message.get("params")
        if isinstance(params, dict) and isinstance(params.get("_meta"), dict):
            version = params["_meta"].get(META_VERSION)
            return version if isinstance(version, str) else None
    return None


def batches_allowed(version: str | None) -> bool:
    """Whether a batch may be answered; a peer that negotiated nothing (/rpc, stdio
    before initialize) speaks plain JSON-RPC 2.0, which has them."""
    return version is None or version in BATCH_VERSIONS


def batch_refused(version: str | None) -> McpError:
    return McpError(INVALID_REQUEST, f"JSON-RPC batches are not part of protocol {version}")


def batch_problem(batch: list[Any]) -> McpError | None:
    """Why `batch` is answered with one error instead of its replies, as JSON-RPC 2.0
    answers an empty one; None when it is not."""
    if not batch:
        return McpError(INVALID_REQUEST, "empty batch")
    if len(batch) > MAX_BATCH_MESSAGES:
        return McpError(INVALID_REQUEST, f"a batch holds at most {MAX_BATCH_MESSAGES} messages, not {len(batch)}")
    return None


# A progress token is echoed in every notification: a 3 MiB one made a 1.8 s call's stream
# 18.9 MB (the attack review of 2026-11-29).
MAX_PROGRESS_TOKEN_CHARS = 256


def progress_token(value: Any) -> str | int | None:
    """The call's progress token as the specification types it (a string or an integer), or
    None (no progress sent) for any other value and a string over MAX_PROGRESS_TOKEN_CHARS."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, str) and len(value) > MAX_PROGRESS_TOKEN_CHARS:
        return None
    return value


def error_response(request_id: Any, error: McpError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}


def unsupported_version(requested: str) -> McpError:
    return McpError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"unsupported protocol version {requested}",
        {"supported": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS], "requested": requested},
    )


class Dispatcher:
    def __init__(self, runner: ToolRunner) -> None:
        self.runner = runner

    async def handle(
        self,
        message: Any,
        session: Session,
        notify: Notify | None = None,
        *,
        modern: bool = False,
    ) -> dict[str, Any] | None:
        """Answer one JSON-RPC message; None for notifications and client responses."""
        if not isinstance(message, dict):
            return error_response(None, McpError(INVALID_REQUEST, "message must be a JSON object"))
        request_id = message.get("id")
        has_id = "id" in message
        if message.get("jsonrpc") != "2.0":
            return error_response(
                request_id if is_valid_id(request_id) else None,
                McpError(INVALID_REQUEST, 'jsonrpc must be "2.0"'),
            )
        method = message.get("method")
        if method is None and ("result" in message or "error" in message):
            return None  # a response to a server request; we send none, so nothing waits
        if not isinstance(method, str):
            return error_response(
                request_id if is_valid_id(request_id) else None,
                McpError(INVALID_REQUEST, "method must be a string"),
            )
        params = message.get("params", {})
        if params is not None and not isinstance(params, dict | list):
            if not has_id:
                return None
            return error_response(
                request_id if is_valid_id(request_id) else None,
                McpError(INVALID_REQUEST, "params must be an object"),
            )
        if not has_id:
            self._notification(method, params if isinstance(params, dict) else {}, session)
            return None
        if not is_valid_id(request_id):
            return error_response(None, McpError(INVALID_REQUEST, "id must be a string or integer"))
        try:
            result = await self._request(
                method, params if params is not None else {}, request_id, session, notify, modern
            )
        except McpError as exc:
            return error_response(request_id, exc)
        except Exception as exc:  # one bad request must not take the server down
            log.error("tool.internal_error", exc_info=exc, extra={"method": method})
            return error_response(
                request_id, McpError(INTERNAL_ERROR, "internal error", {"code": "INTERNAL"})
            )
        if modern:
            result = {**result, "resultType": "complete"}
            if method in CACHEABLE_METHODS:
                result.setdefault("cacheScope", "private")
                result.setdefault("ttlMs", 0)
            result.setdefault("_meta", {})[META_SERVER_INFO] = SERVER_INFO
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _notification(self, method: str, params: dict[str, Any], session: Session) -> None:
        if method in ("notifications/cancelled", "$/cancelRequest"):
            target = params.get("requestId", params.get("id"))
            if is_valid_id(target):
                entry = session.in_flight.get(canonical_id(target))
                if entry is not None:
                    _log.event(log, "tool.cancel_requested", request_id=canonical_id(target),
                               reason=params.get("reason"))
                    entry.cancelled = True
                    entry.scope.cancel()
        # notifications/initialized and anything else: nothing to do.

    async def _request(
        self,
        method: str,
        params: Any,
        request_id: Any,
        session: Session,
        notify: Notify | None,
        modern: bool,
    ) -> dict[str, Any]:
        if method == "initialize":
            return self._initialize(params, session)
        if method == "server/discover":
            return {
                "supportedVersions": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS],
                "capabilities": CAPABILITIES,
                "instructions": INSTRUCTIONS,
                "cacheScope": "private",
                "ttlMs": 0,
                "_meta": {META_SERVER_INFO: SERVER_INFO},
            }
        if method == "ping":
            return {}
        version = session.protocol_version
        if method == "tools/list":
            return {"tools": self.runner.definitions(version)}
        if method == "tools/call":
            return await self._call_tool(params, request_id, session, notify)
        if method == "resources/list":
            return {"resources": []}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "prompts/list":
            return {"prompts": []}
        if method == "logging/setLevel":
            level = params.get("level") if isinstance(params, dict) else None
            if level not in LOG_LEVELS:
                raise McpError(INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}",
                               {"code": "INVALID_REQUEST"})
            return {}
        if method == "health":
            return health_payload()
        shown = _log.quoted(method)  # echoed twice: a long name must not double into the reply
        raise McpError(METHOD_NOT_FOUND, f"method not found: {shown}", {"method": shown})

    def _initialize(self, params: Any, session: Session) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise McpError(INVALID_PARAMS, "initialize needs params")
        requested = params.get("protocolVersion")
        version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        session.protocol_version = version
        info = params.get("clientInfo")
        session.client_info = info if isinstance(info, dict) else None
        return {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }

    async def _call_tool(
        self, params: Any, request_id: Any, session: Session, notify: Notify | None
    ) -> dict[str, Any]:
        key = canonical_id(request_id)
        if key in session.in_flight:
            raise McpError(INVALID_REQUEST, f"request id {key} is already in flight")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = progress_token(meta.get("progressToken") if isinstance(meta, dict) else None)
        reporter = ProgressReporter(token, notify)
        entry = InFlight(trio.CancelScope())
        session.in_flight[key] = entry
        result: dict[str, Any] | None = None
        failure: McpError | None = None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reporter.run)
                with entry.scope:
                    try:
                        result = await self.runner.call(params, request_id=key, progress=reporter)
                    except McpError as exc:  # kept out of the nursery's exception group
                        failure = exc
                reporter.close()
                nursery.cancel_scope.cancel()
        finally:
            reporter.close()
            session.in_flight.pop(key, None)
        if failure is not None:
            raise failure
        if result is None:  # the scope was cancelled by the client
            _log.event(log, "tool.cancelled", request_id=key)
            tool = params.get("name") if isinstance(params, dict) else None
            return self.runner.error_result(
                ToolError("CANCELLED", "request cancelled by the client"), str(tool or "tools/call")
            )
        return result
