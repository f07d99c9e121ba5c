"""stdio transport: newline-delimited JSON-RPC; stdout carries protocol only."""

from __future__ import annotations

import logging
from typing import Any

import trio

from jeeves_mcp.mcp.errors import INTERNAL_ERROR, PARSE_ERROR, McpError
from jeeves_mcp.mcp.protocol import (
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
from jeeves_mcp.mcp.transports.asgi import dumps
from jeeves_mcp.mcp.transports.checks import parse

log = logging.getLogger("jeeves_mcp.stdio")

MAX_LINE_BYTES = 64 * 1024 * 1024


async def serve_stdio(
    dispatcher: Dispatcher,
    stdin: trio.abc.ReceiveStream | None = None,
    stdout: trio.abc.SendStream | None = None,
) -> None:
    """Serve until stdin closes and the calls already read have answered."""
    stdin = stdin or trio.lowlevel.FdStream(0)
    stdout = stdout or trio.lowlevel.FdStream(1)
    session = Session(id="stdio")
    write_lock = trio.Lock()

    async def write(payload: Any) -> None:
        data = dumps(payload) + b"\n"
        async with write_lock:
            await stdout.send_all(data)

    async def notify(method: str, params: dict[str, Any]) -> None:
        await write({"jsonrpc": "2.0", "method": method, "params": params})

    async def answer(line: bytes) -> None:
        try:
            await answer_line(line)
        except Exception as exc:  # one bad message must not end the session
            log.error("stdio.internal_error", exc_info=exc)
            await write(error_response(None, McpError(INTERNAL_ERROR, "internal error", {"code": "INTERNAL"})))

    async def answer_line(line: bytes) -> None:
        message = parse(line)
        if isinstance(message, McpError):
            await write(error_response(None, message))
            return
        version = request_version(message)
        if version is not None and version not in MODERN_VERSIONS:
            request_id = message.get("id") if isinstance(message, dict) else None
            request_id = request_id if is_valid_id(request_id) else None
            await write(error_response(request_id, unsupported_version(version)))
            return
        if isinstance(message, list) and (problem := batch_problem(message)) is not None:
            await write(error_response(None, problem))
            return
        if isinstance(message, list) and not batches_allowed(session.protocol_version):
            await write(error_response(None, batch_refused(session.protocol_version)))
            return
        messages = message if isinstance(message, list) else [message]
        replies = []
        for item in messages:
            reply = await dispatcher.handle(item, session, notify, modern=version is not None)
            if reply is not None:
                replies.append(reply)
        if replies:
            await write(replies if isinstance(message, list) else replies[0])

    buffer = bytearray()
    scanned = 0  # bytes of `buffer` known to hold no newline: a long line is scanned once
    async with trio.open_nursery() as nursery:
        while True:
            chunk = await stdin.receive_some(65536)
            if not chunk:
                break
            buffer += chunk
            while (newline := buffer.find(b"\n", scanned)) >= 0:
                line = bytes(buffer[:newline]).strip()
                del buffer[: newline + 1]
                scanned = 0
                if line:
                    nursery.start_soon(answer, line)
            scanned = len(buffer)
            if len(buffer) > MAX_LINE_BYTES:
                buffer.clear()
                scanned = 0
                await write(error_response(None, McpError(PARSE_ERROR, "message too large")))
        # stdin closed: let the calls already read finish and answer, then stop.
