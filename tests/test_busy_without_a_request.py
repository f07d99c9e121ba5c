"""Connections hypercorn holds busy without ever calling the app (attack G1, G2).

An invalid WebSocket upgrade (hypercorn answers 400 itself) or the bare HTTP/2 preface
makes hypercorn report a request in progress for good, no token needed. The capped listener
took that for a request of ours: such a connection was never reset for room, and hypercorn's
keep-alive timer, the header deadline, stopped for it. A cap's worth of them, from another
run's bash, reset every new connection unread: the run's agent lost every MCP call, a
token holder the daemon's TCP API. Replayed here against a real child and a real daemon.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.client import AsyncControlClient
from tests._child import running_child
from tests._daemon import running_daemon
from tests._sockets import closed_by_the_server, h2_frame
from tests.test_child_listener import pinged
from tests.test_descriptors import TCP_ENV, TOKEN, still_streams, tcp_events, tcp_port
from tests.test_http import rpc

CAP = 8
CHILD_HEADER_S = 5.0  # a child's header deadline: hypercorn's default keep-alive timeout
DAEMON_HEADER_S = 0.5
SLACK_S = 5.0  # on top of a header deadline, for a loaded machine
DAEMON_ENV = {**TCP_ENV, "JEEVES_MCP_TCP_MAX_CONNECTIONS": str(CAP),
              "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": str(DAEMON_HEADER_S)}

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b"")  # and empty SETTINGS


def literals(*pairs: tuple[bytes, bytes]) -> bytes:
    """HPACK: each header as a literal, not indexed."""
    return b"".join(b"\x00" + bytes([len(k)]) + k + bytes([len(v)]) + v for k, v in pairs)


SHAPES = {
    "websocket_without_key":
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "h2_websocket_without_version": PREFACE + h2_frame(1, 4, 1, literals(
        (b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"http"), (b":path", b"/"),
        (b":authority", b"127.0.0.1"))),
    "h2_preface_alone": PREFACE,
}


async def open_answered(port: int, payload: bytes) -> socket.socket:
    """A connection that sent `payload` and was answered (hypercorn's 400 or SETTINGS: it has
    read it), or closed; a plain socket, see closed_by_the_server."""
    sock = socket.socket()
    sock.setblocking(False)
    try:
        await trio.socket.from_stdlib_socket(sock).connect(("127.0.0.1", port))
        sock.send(payload)
        await trio.lowlevel.wait_readable(sock)
    except OSError:  # reset to make room before it could send: closed already
        pass
    except BaseException:
        sock.close()
        raise
    return sock


async def open_many(port: int, shape: str) -> list[socket.socket]:
    """Twice the cap of `shape`, one after the other."""
    held: list[socket.socket] = []
    try:
        with trio.fail_after(20):
            for _ in range(2 * CAP):
                held.append(await open_answered(port, SHAPES[shape]))
    except BaseException:
        for sock in held:
            sock.close()
        raise
    return held


async def all_closed(held: list[socket.socket], header_s: float) -> None:
    with trio.fail_after(header_s + SLACK_S):
        for sock in held:
            await closed_by_the_server(sock)


@pytest.mark.parametrize("shape", SHAPES)
async def test_connections_hypercorn_holds_busy_keep_no_run_from_its_child(
    run_root: Path, tmp_path: Path, shape: str
) -> None:
    """G1: a new connection makes room by resetting one of them, the daemon's ping with the
    token is answered, and those left are closed by the header deadline."""
    async with running_child(run_root, tmp_path, env={"JEEVES_MCP_MAX_CONNECTIONS": str(CAP)}) as child:
        held = await open_many(child.port, shape)
        try:
            with trio.fail_after(10):
                assert await pinged(child)
            await all_closed(held, CHILD_HEADER_S)
        finally:
            for sock in held:
                sock.close()


@pytest.mark.parametrize("shape", SHAPES)
async def test_connections_hypercorn_holds_busy_keep_no_token_holder_from_the_tcp_api(
    tmp_path: Path, run_root: Path, shape: str
) -> None:
    """G2: the same at the daemon's TCP control port."""
    async with running_daemon(tmp_path, DAEMON_ENV) as daemon:
        port = tcp_port(daemon)
        held = await open_many(port, shape)
        try:
            with trio.fail_after(10):
                async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
                    assert (await tcp.list())["slots"] == []
            await all_closed(held, DAEMON_HEADER_S)
        finally:
            for sock in held:
                sock.close()


async def test_a_tcp_event_stream_outlasts_the_header_deadline_and_a_flood(tmp_path: Path, run_root: Path) -> None:
    """The event stream is vouched for: neither made room for, nor closed by the header
    deadline, however long it lasts."""
    async with running_daemon(tmp_path, DAEMON_ENV) as daemon, daemon.client() as control:
        port = tcp_port(daemon)
        async with tcp_events(port) as events:
            held = await open_many(port, "h2_preface_alone")
            try:
                await all_closed(held, DAEMON_HEADER_S)  # the deadline has passed for them all
            finally:
                for sock in held:
                    sock.close()
            await still_streams(events, control, run_root, "streaming")


async def test_a_long_tool_call_outlasts_the_header_deadline_and_a_flood(run_root: Path, tmp_path: Path) -> None:
    """A bash call taking longer than the child's header deadline, its connection the oldest
    through a flood at the cap, gets its result."""
    started, go = run_root / "started", run_root / "go"
    command = f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done; echo done"
    request = rpc("tools/call", {"name": "bash", "arguments": {"cmd": command}})
    async with running_child(run_root, tmp_path, env={"JEEVES_MCP_MAX_CONNECTIONS": str(CAP)}) as child:
        async with httpx.AsyncClient(timeout=60, headers=child.headers()) as http, trio.open_nursery() as nursery:
            answer: list[httpx.Response] = []

            async def call() -> None:
                answer.append(await http.post(f"{child.base}/rpc", json=request))

            nursery.start_soon(call)
            with trio.fail_after(10):
                while not started.exists():  # noqa: ASYNC110 - written by the command
                    await trio.sleep(0.05)
            held = await open_many(child.port, "websocket_without_key")
            try:
                await all_closed(held, CHILD_HEADER_S)
            finally:
                for sock in held:
                    sock.close()
            go.touch()
        assert answer[0].status_code == 200
        assert "done" in answer[0].text


async def answer(stream: trio.SocketStream, buffered: bytearray) -> bytes:
    """One answer with a content-length, read from `stream` (what follows it stays in `buffered`)."""
    while b"\r\n\r\n" not in buffered:
        buffered += await stream.receive_some(4096)
    head, _, _ = bytes(buffered).partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:"))
    while len(buffered) < len(head) + 4 + length:
        buffered += await stream.receive_some(4096)
    whole = bytes(buffered[: len(head) + 4 + length])
    del buffered[: len(whole)]
    return whole


async def test_a_kept_alive_connection_is_served_past_the_header_deadline_then_closed(
    tmp_path: Path, run_root: Path
) -> None:
    """The header deadline runs again from the end of each vouched request: requests spaced
    well under it keep one connection in use for longer than it; idle, it is then closed."""
    header_s = 2.0
    env = {**DAEMON_ENV, "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": str(header_s)}
    request = f"GET /v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode()
    async with running_daemon(tmp_path, env) as daemon:
        stream = await trio.open_tcp_stream("127.0.0.1", tcp_port(daemon))
        async with stream:
            buffered = bytearray()
            with trio.fail_after(30):
                for _ in range(8):  # 4 s in all, more than the deadline and its backstop
                    await stream.send_all(request)
                    assert (await answer(stream, buffered)).startswith(b"HTTP/1.1 200")
                    await trio.sleep(header_s / 4)
                assert await stream.receive_some(4096) == b""
