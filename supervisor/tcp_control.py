"""The TCP control listener, with a cap on the connections it holds at once.

Every run's commands can reach a loopback port, and the token is checked only once a
request has been read: without a cap, one local user's half-sent connections took every
descriptor the daemon had (attack T1). Past `tcp_max_connections` a new connection is
closed (reset) as soon as it is accepted, before a byte of it is read; the Unix socket
is served apart and never capped. Each connection is served by hypercorn's own
connection handler, as `hypercorn.trio.serve` would (hypercorn's `serve` has no cap).
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app

from jeeves_mcp import _log
from jeeves_mcp.supervisor.descriptors import DESCRIPTOR_ERRNOS

log = logging.getLogger("jeeves_mcp.supervisor")

# accept() errors that mean "not now" (trio.serve_listeners's list): wait and accept again.
ACCEPT_CAPACITY_ERRNOS = (*DESCRIPTOR_ERRNOS, errno.ENOMEM, errno.ENOBUFS)
ACCEPT_RETRY_S = 0.1
REPORT_EVERY_S = 10.0  # refusals and accept errors are logged at most this often


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _Connection:
    """A connection's stream that gives its place back as soon as it is closed: hypercorn's
    handler outlives the connection it closed by its keep-alive timer (5 s), and a client
    that has hung up must not keep the next one out that long. Not SSL (no `do_handshake`)."""

    def __init__(self, conn: trio.socket.SocketType, release: Any) -> None:
        self._stream = trio.SocketStream(conn)
        self.socket = self._stream.socket
        self._release = release

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self.release()

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


async def serve_tcp(
    app: Any, config: HypercornConfig, sock: socket.socket, limit: int, shutdown: trio.Event,
    *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on the listening `sock`, at most `limit` connections at once. At
    `shutdown` it closes `sock` and lets the open connections finish their requests;
    it returns when they are done (or it is cancelled)."""
    wrapped = wrap_app(app, config.wsgi_max_body_size, None)
    context = WorkerContext(None)
    listener = trio.socket.from_stdlib_socket(sock)
    refused = _log.Throttle(REPORT_EVERY_S)
    starved = _log.Throttle(REPORT_EVERY_S)
    active = 0

    def release() -> None:
        nonlocal active
        active -= 1

    async def handle(conn: trio.socket.SocketType) -> None:
        stream = _Connection(conn, release)
        try:
            await TCPServer(wrapped, config, context, ConnectionState({}), stream)  # type: ignore[arg-type]
        except Exception as exc:  # one connection's fault is not the listener's
            log.error("daemon.tcp_connection_failed", exc_info=exc)
        finally:
            stream.release()

    async with trio.open_nursery() as connections:
        with listener, trio.CancelScope() as accepting:

            async def stop_accepting() -> None:
                await shutdown.wait()
                accepting.cancel()

            connections.start_soon(stop_accepting)
            task_status.started(f"http://{repr_socket_addr(sock.family, sock.getsockname())}")
            while True:
                try:
                    conn, _ = await listener.accept()
                except OSError as exc:
                    if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    if (held := starved.allow()) is not None:
                        _log.event(log, "daemon.tcp_accept_failed", logging.WARNING, count=held + 1,
                                   error=exc.strerror)
                    await trio.sleep(ACCEPT_RETRY_S)
                    continue
                if active >= limit:
                    # A reset, not a FIN: nothing of it is read, nothing lingers in TIME_WAIT.
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    conn.close()
                    if (held := refused.allow()) is not None:
                        _log.event(log, "daemon.tcp_connection_refused", logging.WARNING, count=held + 1,
                                   limit=limit)
                    continue
                active += 1
                connections.start_soon(handle, conn)
        await context.terminated.set()  # kept-alive connections close after their request
