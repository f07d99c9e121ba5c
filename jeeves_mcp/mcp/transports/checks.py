"""What the HTTP app reads off a request: a local Host or Origin, routing headers that match
the body, whether the client wants a stream; parsing, and plain HTTP error answers."""

from __future__ import annotations

import ipaddress
import json
from typing import Any
from urllib.parse import urlsplit

from jeeves_mcp.mcp.errors import HEADER_MISMATCH, PARSE_ERROR, McpError
from jeeves_mcp.mcp.transports.asgi import Send, header, send_json

LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def is_request(message: Any) -> bool:
    """A message the dispatcher answers: an id, and not a client's response ("method"
    absent or null with "result" or "error"), as `Dispatcher.handle` decides."""
    return isinstance(message, dict) and "id" in message and not (
        message.get("method") is None and ("result" in message or "error" in message)
    )


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(body: bytes) -> Any:
    """The message, or the parse error to answer. NaN and Infinity, which Python's json reads
    by default, are refused: echoed back they made replies no JSON parser reads (the attack
    review of 2026-11-29)."""
    try:
        return json.loads(body, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return McpError(PARSE_ERROR, f"parse error: {exc}"[:200])


def routing_header_mismatch(scope: dict[str, Any], message: dict[str, Any]) -> McpError | None:
    method_header = header(scope, b"mcp-method")
    if method_header is not None and method_header != message.get("method"):
        return McpError(HEADER_MISMATCH, "Mcp-Method header does not match the body",
                        {"header": method_header, "body": message.get("method")})
    name_header = header(scope, b"mcp-name")
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if name_header is not None and name is not None and name_header != name:
        return McpError(HEADER_MISMATCH, "Mcp-Name header does not match params.name",
                        {"header": name_header, "body": name})
    return None


def wants_stream(scope: dict[str, Any], messages: list[Any]) -> bool:
    """SSE only when there is something to stream: progress for a tools/call."""
    accept = header(scope, b"accept") or ""
    if "text/event-stream" not in accept:
        return False
    if "application/json" not in accept:
        return True
    for message in messages:
        params = message.get("params") if isinstance(message, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and meta.get("progressToken") is not None:
            return True
    return False


def is_local_host(host: str) -> bool:
    """A Host header (or bind address) naming this machine's loopback, port optional."""
    try:
        name = urlsplit(f"//{host}").hostname
    except ValueError:
        return False
    if name in LOCAL_HOSTS:
        return True
    try:  # 127.0.0.2 is loopback; 127.0.0.1.evil.example is a name anyone can point at us
        return ipaddress.ip_address(name or "").is_loopback
    except ValueError:
        return False


def is_local_origin(origin: str) -> bool:
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in LOCAL_HOSTS


async def status(send: Send, status: int, message: str, **headers: str) -> None:
    extra = [(key.replace("_", "-"), value) for key, value in headers.items()]
    await send_json(send, status, {"error": {"code": status, "message": message}}, extra)
