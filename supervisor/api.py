"""The control API: versioned JSON under /v1, errors `{"error": {"code", "message"}}`."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import re
import urllib.parse
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, Scope
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from jeeves_mcp import __version__
from jeeves_mcp.capped_listener import vouch_for
from jeeves_mcp.client import MAX_TTL_S
from jeeves_mcp.paths import foreign_symlink
from jeeves_mcp.proc import can_switch_users, user_name
from jeeves_mcp.supervisor import savings
from jeeves_mcp.supervisor.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from jeeves_mcp.supervisor.slots import RUN_ID, RUN_ID_RULE, AcquireRequest, SlotError, SlotManager
from jeeves_mcp.supervisor.strictmodes import root_problem

log = logging.getLogger("jeeves_mcp.supervisor.api")

SSE_KEEPALIVE_S = 15.0
RESERVED_ENV_PREFIXES = ("JEEVES_MCP_", "JEEVES_PRUNER_", "MCP_PRUNER_")
MAX_LOG_TAIL = 10_000
MAX_ENV_STRING = 128 * 1024  # MAX_ARG_STRLEN, with its final NUL
# A shielded last send (shield_last_send) waits this long at most: a client that never reads
# its answer must not keep a cancelled request, and the daemon's shutdown, waiting for it.
LAST_SEND_S = 5.0
EVENT_ID = re.compile(r"\A[A-Za-z0-9_.:]{1,64}-[0-9]{1,19}\Z")  # ASCII digits only: int("²") fails


# Roots that are not a workspace: the whole filesystem, or kernel interfaces.
FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")


def check_endpoint(value: str) -> str:
    """An external pruner: http(s) with a host, not a link-local (cloud metadata) address."""
    url = urllib.parse.urlsplit(value)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError("must be an http:// or https:// URL with a host")
    try:
        address = ipaddress.ip_address(url.hostname)
    except ValueError:
        return value  # a name
    if address.is_link_local:
        raise ValueError("must not be a link-local address")
    return value


class AcquireBody(BaseModel):
    # strict: `true` is not a 1 s lease, "no" is not a boolean, 1 is not a string
    model_config = ConfigDict(extra="forbid", strict=True)

    run_id: str = Field(min_length=1, max_length=128)
    root: str = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    pruner_endpoint: str | None = None
    ttl_s: float | None = Field(None, gt=0, le=MAX_TTL_S)
    labels: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True

    @field_validator("root")
    @classmethod
    def _directory(cls, value: str) -> str:
        path = Path(value).expanduser()
        if not path.is_absolute():
            raise ValueError("must be an absolute path")
        try:
            if not path.is_dir():
                raise ValueError("is not a directory")
            resolved = path.resolve()
        except OSError as exc:  # a name too long, a loop of symlinks, ...
            raise ValueError(f"cannot use it: {exc.strerror}") from exc
        if (problem := foreign_symlink(path)) is not None:
            raise ValueError(problem)
        if resolved == Path("/") or any(resolved.is_relative_to(top) for top in FORBIDDEN_ROOTS):
            raise ValueError(f"{resolved} cannot be a run root")
        if (problem := root_problem(resolved)) is not None:
            raise ValueError(problem)
        return str(resolved)

    @field_validator("pruner_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_endpoint(value)

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"bad variable name {name!r}")
            # The run's env is for its commands; these would configure the child itself
            # (its root confinement, bind address, token).
            if name.startswith(RESERVED_ENV_PREFIXES):
                raise ValueError(f"{name} is reserved for jeeves-mcp's own settings")
            if "\0" in value[name]:
                raise ValueError(f"the value of {name} contains a NUL byte")
            if len(f"{name}={value[name]}".encode()) >= MAX_ENV_STRING:
                # The kernel's limit for one environment string: no command could start with it.
                raise ValueError(f"{name}=... is over {MAX_ENV_STRING // 1024} KiB, the most one variable can hold")
        return value

    @field_validator("labels")
    @classmethod
    def _text(cls, value: dict[str, str]) -> dict[str, str]:
        # A lone surrogate is no text: the CLI could not print the slot, nor `ls --json` any
        # (the attack review of 2026-11-29); env refuses them the same way, on encoding.
        for key, text in value.items():
            try:
                key.encode()
                text.encode()
            except UnicodeEncodeError:
                raise ValueError(f"label {key!r} holds a lone surrogate, which is no text") from None
        return value


class RenewBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    ttl_s: float | None = Field(None, gt=0, le=MAX_TTL_S)


def error_body(code: str, message: str, **extra: Any) -> str:
    return json.dumps({"error": {"code": code, "message": message, **extra}})


def error(code: str, message: str, status: int, **extra: Any) -> Response:
    return Response(error_body(code, message, **extra), status=status, mimetype="application/json")


def ok(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


async def _json_body(model: type[BaseModel], *, optional: bool = False) -> BaseModel | Response:
    raw = await request.get_data(as_text=False)
    if not raw.strip() and optional:
        raw = b"{}"
    try:
        data = json.loads(raw)
    except RecursionError:
        return error("INVALID_REQUEST", "body is not JSON: nested too deeply", 400)
    except ValueError as exc:
        return error("INVALID_REQUEST", f"body is not JSON: {exc}", 400)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = [
            {"field": ".".join(map(str, e["loc"])) or "body", "message": e["msg"]} for e in exc.errors()
        ]
        return error("INVALID_REQUEST", "invalid request body", 400, fields=fields)


ASGIApp = Callable[[Scope, ASGIReceiveCallable, ASGISendCallable], Coroutine[Any, Any, None]]
_REFUSED = error_body("UNAUTHORIZED", "missing or wrong bearer token").encode()


def shield_last_send(app: ASGIApp) -> ASGIApp:
    """The last send of every response is shielded from cancellation, for at most LAST_SEND_S.

    Inside that send, once the response's last byte is out, hypercorn ends the request: it
    closes a connection whose body is left unread (the 413 and 408, `Connection: close`) and
    readies a keep-alive one for its next request. Once the client's disconnect reached
    quart-trio, it cancelled the send before that: the connection stayed open, counted as a
    request in progress. hypercorn shields its socket writes alike."""

    async def app_with_shielded_end(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        async def send_end_shielded(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with trio.CancelScope(shield=True, deadline=trio.current_time() + LAST_SEND_S):
                    await send(message)
            else:
                await send(message)

        await app(scope, receive, send_end_shielded)

    return app_with_shielded_end


def refuse_websockets(app: ASGIApp) -> ASGIApp:
    """No route takes a WebSocket upgrade: refused (403) before quart's 404 handler, which
    failed on it (a 500 and a traceback in the log per request), whoever asks on whichever
    listener."""

    async def without_websockets(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": ""})
            return
        await app(scope, receive, send)

    return without_websockets


def require_token(app: ASGIApp, token: bytes) -> ASGIApp:
    """TCP peers (a scope with a client address) need the bearer token; Unix-socket peers
    are trusted by the socket's mode. Asked before the app reads the body, which a request
    without the token could trickle for BODY_TIMEOUT while holding one of the capped TCP
    connections; the refusal closes the connection, whose body is left unread. A request
    with the token is vouched for: the capped listener bounds the sends of the others."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_REFUSED)).encode()),
        (b"connection", b"close"),
    ]

    async def guarded(scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        if scope["type"] == "http" and scope.get("client") is not None:
            supplied = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            scheme, _, credential = supplied.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), token):
                await send({"type": "http.response.start", "status": 401, "headers": headers, "trailers": False})
                await send({"type": "http.response.body", "body": _REFUSED, "more_body": False})
                return
            vouch_for(scope)
        await app(scope, receive, send)

    return guarded


def create_app(manager: SlotManager, *, tcp_token: str | None = None) -> QuartTrio:
    app = QuartTrio(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 1024 * 1024
    app.config["BODY_TIMEOUT"] = manager.config.body_timeout_s
    token = tcp_token.encode() if tcp_token else None

    asgi_app = shield_last_send(app.asgi_app)
    if token is not None:
        asgi_app = require_token(asgi_app, token)
    app.asgi_app = refuse_websockets(asgi_app)  # type: ignore[method-assign,assignment]

    @app.before_request
    async def guard() -> Response | None:
        # Read the whole body (bounded by MAX_CONTENT_LENGTH and BODY_TIMEOUT) before any
        # answer: a keep-alive connection whose request body a route left unread (a GET
        # or DELETE with a body) stopped being answered after a few requests.
        await request.get_data(cache=True)
        # Every /v1/slots/<run_id> route: the run id acquire accepts, or 400 before any lookup.
        # Checked here, after the body is read: a check before it (a URL value preprocessor)
        # left a body unread and the keep-alive connection unanswered (the control fuzz).
        run_id = (request.view_args or {}).get("run_id")
        if run_id is not None and not RUN_ID.match(run_id):
            return error("INVALID_REQUEST", f"run_id: {RUN_ID_RULE}", 400)
        return None

    @app.errorhandler(SlotError)
    async def slot_error(exc: SlotError) -> Response:
        return error(exc.code, exc.message, exc.status, **exc.extra)

    @app.errorhandler(404)
    async def not_found(_: Exception) -> Response:
        return error("NOT_FOUND", f"no route {request.method} {request.path}", 404)

    @app.errorhandler(405)
    async def not_allowed(_: Exception) -> Response:
        return error("METHOD_NOT_ALLOWED", f"{request.method} not allowed on {request.path}", 405)

    @app.errorhandler(413)
    async def too_large(_: Exception) -> Response:
        # Answered before the body is read: the rest of it is still on the connection,
        # which can serve no other request. Close it, or the client's next request
        # on it waits for an answer that never comes.
        response = error("INVALID_REQUEST", "body too large", 413)
        response.headers["Connection"] = "close"
        return response

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Response:
        # 408 (a body slower than BODY_TIMEOUT) and the rest, which the Exception
        # handler below would otherwise turn into 500 INTERNAL.
        status = exc.code or 500
        code = {400: "INVALID_REQUEST", 408: "REQUEST_TIMEOUT"}.get(status, f"HTTP_{status}")
        response = error(code, exc.description or exc.name, status)
        if status == 408:  # as after a 413: the rest of the body is still on the connection
            response.headers["Connection"] = "close"
        return response

    @app.errorhandler(Exception)
    async def internal(exc: Exception) -> Response:
        log.error("api.internal_error", exc_info=exc)
        return error("INTERNAL", "internal error; see the daemon log", 500)

    @app.get("/healthz")
    async def healthz() -> Response:
        fork_server = manager.fork_server
        return ok({
            "status": "ok", "version": __version__, "slots": len(manager.slots),
            # Where this daemon keeps its state: `doctor` checks these, not its own guess.
            "state_dir": str(manager.config.state_dir), "socket": str(manager.config.socket),
            "enabled": manager.config.pruner_enabled,
            # Whether commands can run as their run root's owner (`doctor` reports it).
            "isolation": {"user": user_name(os.geteuid()) or str(os.geteuid()), "switch_users": can_switch_users()},
            # noted: the runs of pending records are named in unsaved.runs, so a restart degrades them.
            "store": {"write_failures": manager.store.write_failures, "pending": manager.store.pending,
                      "noted": manager.store.unsaved_noted},
            "fork_server": None if fork_server is None else {
                "up": fork_server.up.is_set(), "pid": fork_server.pid,
                "spawns": fork_server.spawns, "starts": fork_server.starts,
            },
        })

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(manager.metrics.render(), content_type=METRICS_CONTENT_TYPE)

    @app.get("/v1/stats")
    async def stats() -> Response:
        run_id = request.args.get("run_id")
        runs = await manager.savings_by_run(run_id)
        if run_id is not None and not runs:
            raise SlotError("NOT_FOUND", f"no slot for run {run_id!r}", 404)
        total = savings.merge(*runs.values())
        return ok({
            "runs": {name: {**value, "summary": savings.summarize(value)} for name, value in runs.items()},
            "total": {**total, "summary": savings.summarize(total)},
        })

    @app.post("/v1/slots")
    async def acquire() -> Response:
        body = await _json_body(AcquireBody)
        if isinstance(body, Response):
            return body
        assert isinstance(body, AcquireBody)
        view, created = await manager.acquire(
            AcquireRequest(
                run_id=body.run_id,
                root=Path(body.root),
                env=body.env,
                pruner_endpoint=body.pruner_endpoint,
                ttl_s=body.ttl_s,
                labels=body.labels,
                enabled=body.enabled,
            )
        )
        return ok(view, 201 if created else 200)

    @app.get("/v1/slots")
    async def list_slots() -> Response:
        return ok({"slots": [slot.view() for slot in manager.slots.values()]})

    @app.get("/v1/slots/<run_id>")
    async def show(run_id: str) -> Response:
        return ok((await manager.get(run_id)).view())

    @app.post("/v1/slots/<run_id>/renew")
    async def renew(run_id: str) -> Response:
        body = await _json_body(RenewBody, optional=True)
        if isinstance(body, Response):
            return body
        assert isinstance(body, RenewBody)
        return ok(await manager.renew(run_id, body.ttl_s))

    @app.delete("/v1/slots/<run_id>")
    async def release(run_id: str) -> Response:
        return ok(await manager.release(run_id))

    @app.get("/v1/slots/<run_id>/logs")
    async def logs(run_id: str) -> Response:
        try:
            tail = int(request.args.get("tail", "200"))
        except ValueError:
            return error("INVALID_REQUEST", "tail must be an integer", 400)
        tail = max(0, min(tail, MAX_LOG_TAIL))
        if run_id not in manager.slots and await manager.store.get(run_id) is None:
            raise SlotError("NOT_FOUND", f"no slot for run {run_id!r}", 404)
        lines = await trio.to_thread.run_sync(read_tail, manager.log_path(run_id), tail)
        return ok({"run_id": run_id, "lines": lines})

    @app.get("/v1/events")
    async def events() -> Response:
        # Standard SSE resumption (Last-Event-ID), or ?since=<id> for scripts.
        last_id = request.headers.get("Last-Event-ID") or request.args.get("since")
        if last_id is not None and not EVENT_ID.match(last_id):
            # Checked before the stream starts: a bad id mid-stream broke it after a 200.
            return error("INVALID_REQUEST", "since / Last-Event-ID: an event id, <boot>-<sequence number>", 400)

        async def stream() -> AsyncIterator[bytes]:
            async with manager.events.subscribe(last_id) as receive:
                yield b": connected\n\n"
                while True:
                    with trio.move_on_after(SSE_KEEPALIVE_S) as idle:
                        event = await receive.receive()
                    if idle.cancelled_caught:
                        yield b": keep-alive\n\n"
                        continue
                    yield f"id: {event['id']}\nevent: {event['event']}\ndata: {json.dumps(event)}\n\n".encode()

        response = Response(stream(), mimetype="text/event-stream")
        response.headers["Cache-Control"] = "no-cache"
        response.timeout = None
        return response

    return app


def read_tail(path: Path, count: int) -> list[str]:
    """The last `count` lines of the slot's log and its one rotated predecessor."""
    lines: list[str] = []
    for candidate in (path.with_name(path.name + ".1"), path):
        try:
            with candidate.open("rb") as handle:
                lines.extend(handle.read().decode("utf-8", "replace").splitlines())
        except FileNotFoundError:
            continue
    return lines[-count:] if count else []
