"""Streamable HTTP at /mcp, seed 001's legacy JSON-RPC at /rpc, and GET /health.

A plain ASGI app served by hypercorn's trio worker: five routes do not need a
framework, and the child starts faster and smaller without one (every run
pays for its own child).
"""

from __future__ import annotations

import hmac
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.capped_listener import vouch_for
from jeeves_mcp.mcp.errors import HEADER_MISMATCH, INVALID_REQUEST, McpError
from jeeves_mcp.mcp.health import health_payload
from jeeves_mcp.mcp.progress import Notify
from jeeves_mcp.mcp.protocol import (
    HANDSHAKE_VERSIONS,
    MODERN_VERSIONS,
    Dispatcher,
    Session,
    batch_problem,
    batch_refused,
    batches_allowed,
    error_response,
    is_valid_id,
    request_version,
    unsupported_version,
)
from jeeves_mcp.mcp.transports.asgi import (
    BodyTooLarge,
    ClientGone,
    Receive,
    Routes,
    Send,
    end_stream,
    header,
    read_body,
    send_bytes,
    send_json,
    send_sse_event,
    start_sse,
)
from jeeves_mcp.mcp.transports.checks import (
    is_local_host,
    is_local_origin,
    is_request,
    parse,
    routing_header_mismatch,
    status,
    wants_stream,
)
from jeeves_mcp.pruner_config import PrunerConfig

log = logging.getLogger("jeeves_mcp.http")
# Refused Host / Origin headers logged at most once per this many seconds (with a count of
# the others): an unauthenticated client must not be able to rotate the log away.
REFUSAL_LOG_INTERVAL_S = 10.0

# Errors of the stateless era carry an HTTP status, as the official SDK server does.
MODERN_ERROR_STATUS = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}

NOTHING = object()  # no message: the request was already answered (null is a valid JSON body)


class HttpSession:
    def __init__(self) -> None:
        self.session = Session()
        self.closed = trio.Event()
        # The session's GET event stream; a new one ends it (the client came back for it).
        self.event_stream: trio.CancelScope | None = None

    def close(self) -> None:
        self.session.cancel_all()
        self.closed.set()


class McpHttpApp:
    def __init__(
        self, config: PrunerConfig, dispatcher: Dispatcher, routes: Routes | None = None
    ) -> None:
        self.config = config
        self.dispatcher = dispatcher
        self.sessions: OrderedDict[str, HttpSession] = OrderedDict()
        self.rpc_session = Session(id="rpc")
        self.extra_routes: Routes = dict(routes or {})
        self._token = config.token.encode() if config.token else None
        self._loopback = is_local_host(config.host)
        # Anyone local may send these; each kind counts its own held-back lines.
        self._host_refusals = _log.Throttle(REFUSAL_LOG_INTERVAL_S)
        self._origin_refusals = _log.Throttle(REFUSAL_LOG_INTERVAL_S)

    # -- ASGI entry ---------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        started = False

        async def tracked_send(message: dict[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._route(method, path, scope, receive, tracked_send)
        except ClientGone:
            return
        except Exception as exc:  # one bad request must not cost the others their server
            log.error("http.internal_error", exc_info=exc, extra={"method": method, "path": path})
            if not started:
                await send_json(send, 500, {"error": {"code": 500, "message": "internal error"}})

    async def _route(self, method: str, path: str, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if path == "/health" and method == "GET":
            await send_json(send, 200, {**health_payload(), "model_loaded": True})
        elif path == "/stats" and method == "GET":
            if await self.guard(scope, send):
                await send_json(send, 200, self.dispatcher.runner.stats.to_json())
        elif path == "/mcp":
            if await self.guard(scope, send):
                await self._mcp(scope, receive, send)
        elif path == "/rpc":
            if method != "POST":
                await status(send, 405, "use POST", allow="POST")
            elif await self.guard(scope, send):
                await self._rpc(receive, send)
        elif (method, path) in self.extra_routes:
            await self.extra_routes[(method, path)](self, scope, receive, send)
        else:
            await status(send, 404, f"no route {method} {path}")

    def close_sessions(self) -> None:
        """At shutdown: their GET streams end now, not when the listener's grace runs out."""
        for entry in self.sessions.values():
            entry.close()

    # -- security -------------------------------------------------------------

    async def guard(self, scope: dict[str, Any], send: Send) -> bool:
        """Host and Origin (DNS rebinding), then the bearer token; False once refused. A request
        let through is vouched for: the capped listener bounds the answers of all the others."""
        host = header(scope, b"host")
        if self._loopback and host is not None and not is_local_host(host):
            if (held := self._host_refusals.allow()) is not None:
                _log.event(log, "http.host_rejected", logging.WARNING, host=_log.quoted(host), suppressed=held)
            await status(send, 421, "host not allowed: this server answers only to localhost")
            return False
        origin = header(scope, b"origin")
        if origin is not None and not is_local_origin(origin):
            if (held := self._origin_refusals.allow()) is not None:
                _log.event(log, "http.origin_rejected", logging.WARNING, origin=_log.quoted(origin), suppressed=held)
            await status(send, 403, "origin not allowed")
            return False
        if self._token is not None:
            supplied = header(scope, b"authorization") or ""
            scheme, _, credential = supplied.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                credential.strip().encode(), self._token
            ):
                await status(
                    send, 401, "missing or wrong bearer token", www_authenticate='Bearer realm="jeeves-mcp"'
                )
                return False
        vouch_for(scope)
        return True

    async def _read_message(self, receive: Receive, send: Send, content_type: str | None = None) -> Any:
        """The request's JSON-RPC payload, or NOTHING once a 4xx has been sent. With its
        `content_type`, which must be JSON: checked once the body is read, so that the
        connection can serve the client's next request."""
        body = await self.read_body(receive, send)
        if body is None:
            return NOTHING
        if content_type is not None and content_type.split(";")[0].strip().lower() != "application/json":
            await status(send, 415, "Content-Type must be application/json")
            return NOTHING
        message = parse(body)
        if isinstance(message, McpError):
            await send_json(send, 400, error_response(None, message))
            return NOTHING
        return message

    async def read_body(self, receive: Receive, send: Send) -> bytes | None:
        try:
            with trio.fail_after(self.config.body_timeout_s):
                return await read_body(receive, self.config.max_body_bytes)
        except BodyTooLarge:
            await status(send, 413, f"body larger than {self.config.max_body_bytes} bytes")
        except trio.TooSlowError:
            await status(send, 408, "request body too slow")
        return None

    # -- /rpc -------------------------------------------------------------------

    async def _rpc(self, receive: Receive, send: Send) -> None:
        message = await self._read_message(receive, send)
        if message is NOTHING:
            return
        reply = await self.watching(receive, self._batch(message, self.rpc_session, None, False))
        if reply is None:
            await send_bytes(send, 202, b"", None)
        else:
            await send_json(send, 200, reply)

    # -- /mcp -------------------------------------------------------------------

    async def _mcp(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        method = scope["method"]
        if method == "POST":
            await self._mcp_post(scope, receive, send)
        elif method == "GET":
            await self._mcp_get(scope, receive, send)
        elif method == "DELETE":
            entry = await self._session_for(scope, send)
            if entry is not None:
                self.sessions.pop(entry.session.id, None)
                entry.close()
                _log.event(log, "mcp.session_closed", session=entry.session.id)
                await send_bytes(send, 200, b"", None)
        else:
            await status(send, 405, "use POST, GET or DELETE", allow="POST, GET, DELETE")

    async def _mcp_post(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        message = await self._read_message(receive, send, header(scope, b"content-type") or "")
        if message is NOTHING:
            return
        header_version = header(scope, b"mcp-protocol-version")
        body_version = request_version(message)
        if header_version in MODERN_VERSIONS or body_version is not None:
            await self._mcp_modern(scope, receive, send, message, header_version, body_version)
            return
        if header_version is not None and header_version not in HANDSHAKE_VERSIONS:
            await send_json(
                send, 400, error_response(None, unsupported_version(header_version))
            )
            return
        messages = message if isinstance(message, list) else [message]
        initializing = any(isinstance(m, dict) and m.get("method") == "initialize" for m in messages)
        response_headers: list[tuple[str, str]] = []
        if initializing and isinstance(message, list):
            refused = McpError(INVALID_REQUEST, "initialize must not be part of a JSON-RPC batch")
            await send_json(send, 400, error_response(None, refused))
            return
        if initializing:
            entry = self._new_session()
            response_headers.append(("mcp-session-id", entry.session.id))
        else:
            found = await self._session_for(scope, send)
            if found is None:
                return
            entry = found
        session = entry.session
        if isinstance(message, list) and not batches_allowed(session.protocol_version):
            await send_json(send, 400, error_response(None, batch_refused(session.protocol_version)))
            return
        if isinstance(message, list) and (problem := batch_problem(message)) is not None:
            await send_json(send, 400, error_response(None, problem))
            return
        if not any(is_request(m) for m in messages):
            # Notifications and responses get 202; malformed items still get their errors.
            errors = await self._batch(message, session, None, False)
            if errors is None:
                await send_bytes(send, 202, b"", None, response_headers)
            else:
                await send_json(send, 400, errors, response_headers)
            return
        if wants_stream(scope, messages):
            await self._stream(
                receive, send, response_headers, lambda notify: self._batch(message, session, notify, False)
            )
            return
        reply = await self.watching(receive, self._batch(message, session, None, False))
        await send_json(send, 200, reply, response_headers)

    async def _mcp_modern(
        self,
        scope: dict[str, Any],
        receive: Receive,
        send: Send,
        message: Any,
        header_version: str | None,
        body_version: str | None,
    ) -> None:
        """Stateless 2026-07-28 request: one self-contained POST, no session."""
        request_id = message.get("id") if isinstance(message, dict) else None
        if not is_valid_id(request_id):
            request_id = None  # an object, a float, a boolean: not an id to echo
        problem: McpError | None = None
        if not isinstance(message, dict):
            problem = McpError(INVALID_REQUEST, "batches are not part of protocol 2026-07-28")
        elif body_version is None or (header_version is not None and header_version != body_version):
            problem = McpError(
                HEADER_MISMATCH,
                "MCP-Protocol-Version header and params._meta protocolVersion differ",
                {"header": header_version, "body": body_version},
            )
        elif body_version not in MODERN_VERSIONS:
            problem = unsupported_version(body_version)
        else:
            problem = routing_header_mismatch(scope, message)
        if problem is not None:
            status = MODERN_ERROR_STATUS.get(problem.code, 200)
            await send_json(send, status, error_response(request_id, problem))
            return
        if not is_request(message):
            # A notification, or a client's response to a server request: nothing to answer.
            await self.dispatcher.handle(message, Session(), None, modern=True)
            await send_bytes(send, 202, b"", None)
            return
        session = Session(protocol_version=body_version)
        if wants_stream(scope, [message]):
            await self._stream(
                receive, send, [], lambda notify: self.dispatcher.handle(message, session, notify, modern=True)
            )
            return
        reply = await self.watching(receive, self.dispatcher.handle(message, session, None, modern=True))
        status = 200
        if reply is not None and "error" in reply:
            status = MODERN_ERROR_STATUS.get(reply["error"]["code"], 200)
        await send_json(send, status, reply)

    async def _mcp_get(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        accept = header(scope, b"accept") or ""
        if "text/event-stream" not in accept or header(scope, b"mcp-protocol-version") in MODERN_VERSIONS:
            await status(send, 405, "GET /mcp serves only a session's text/event-stream", allow="POST, DELETE")
            return
        entry = await self._session_for(scope, send)
        if entry is None:
            return
        # The server sends no requests of its own: the stream stays open, quiet, until the
        # client leaves, the session ends or the session opens another. Streams whose clients
        # were killed stayed until the session's end, each a connection of max_connections
        # (the attack review of 2026-11-29: 128 of them shut the port to every request).
        if entry.event_stream is not None:
            entry.event_stream.cancel()
        stream = entry.event_stream = trio.CancelScope(deadline=trio.current_time() + 24 * 3600)
        await start_sse(send)
        try:
            with stream:
                await self.watching(receive, entry.closed.wait())  # ClientGone: nothing to end
        finally:
            if entry.event_stream is stream:
                entry.event_stream = None
        await end_stream(send)

    # -- helpers ----------------------------------------------------------------

    async def _stream(
        self,
        receive: Receive,
        send: Send,
        headers: list[tuple[str, str]],
        work: Callable[[Notify], Awaitable[Any]],
    ) -> None:
        """Answer as SSE: the call's notifications (progress) as they come, then its reply."""
        await start_sse(send, headers)

        async def notify(method: str, params: dict[str, Any]) -> None:
            await send_sse_event(send, {"jsonrpc": "2.0", "method": method, "params": params})

        reply = await self.watching(receive, work(notify))
        if reply is not None:
            await send_sse_event(send, reply)
        await end_stream(send)

    def _new_session(self) -> HttpSession:
        while len(self.sessions) >= self.config.max_sessions:
            _, oldest = self.sessions.popitem(last=False)
            oldest.close()
        entry = HttpSession()
        self.sessions[entry.session.id] = entry
        _log.event(log, "mcp.session_started", session=entry.session.id)
        return entry

    async def _session_for(self, scope: dict[str, Any], send: Send) -> HttpSession | None:
        session_id = header(scope, b"mcp-session-id")
        if session_id is None:
            await status(send, 400, "missing Mcp-Session-Id header; send initialize first")
            return None
        entry = self.sessions.get(session_id)
        if entry is None:
            await status(send, 404, "unknown or ended session; initialize again")
            return None
        self.sessions.move_to_end(session_id)
        return entry

    async def _batch(
        self, message: Any, session: Session, notify: Any, modern: bool
    ) -> Any:
        if not isinstance(message, list):
            return await self.dispatcher.handle(message, session, notify, modern=modern)
        if (problem := batch_problem(message)) is not None:
            return error_response(None, problem)
        replies: list[Any] = [None] * len(message)

        async def one(index: int, item: Any) -> None:
            replies[index] = await self.dispatcher.handle(item, session, notify, modern=modern)

        async with trio.open_nursery() as nursery:
            for index, item in enumerate(message):
                nursery.start_soon(one, index, item)
        answered = [reply for reply in replies if reply is not None]
        return answered or None

    @staticmethod
    async def watching(receive: Receive, work: Awaitable[Any]) -> Any:
        """Await `work`, cancelling it if the client disconnects meanwhile."""
        result: Any = None
        gone = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                gone = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            result = await work
            nursery.cancel_scope.cancel()
        if gone:
            raise ClientGone
        return result
