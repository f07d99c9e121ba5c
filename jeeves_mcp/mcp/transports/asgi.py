"""The little of ASGI the child needs: read a bounded body, send JSON or SSE."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class RouteHost(Protocol):
    """What an extra route may use of the app that serves it."""

    async def guard(self, scope: dict[str, Any], send: Send) -> bool: ...

    async def read_body(self, receive: Receive, send: Send) -> bytes | None: ...

    async def watching(self, receive: Receive, work: Awaitable[Any]) -> Any: ...


# An extra route: the app serving it, then the ASGI call.
Route = Callable[[RouteHost, dict[str, Any], Receive, Send], Awaitable[None]]
Routes = dict[tuple[str, str], Route]


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


def header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON. A lone surrogate (a client may send "\\ud800" in an id or a
    method) cannot be UTF-8: it goes out as the same JSON escape it came in as."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: str | None,
    headers: Iterable[tuple[str, str]] = (),
) -> None:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers]
    if content_type:
        raw.append((b"content-type", content_type.encode()))
    raw.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_json(
    send: Send, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()
) -> None:
    await send_bytes(send, status, dumps(payload), "application/json", headers)


async def start_sse(send: Send, headers: Iterable[tuple[str, str]] = ()) -> None:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers]
    raw += [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache, no-transform"),
        (b"x-accel-buffering", b"no"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": raw})


async def send_sse_event(send: Send, payload: Any) -> None:
    data = b"event: message\ndata: " + dumps(payload) + b"\n\n"
    await send({"type": "http.response.body", "body": data, "more_body": True})


async def end_stream(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})
