"""The TCP control listener, with a cap on the connections it holds at once.

Every run's commands can reach a loopback port, and the token is checked only once a
request's headers are complete: without a cap, one local user's half-sent connections took
every descriptor the daemon had (attack T1). At `tcp_max_connections` a new connection makes
room by resetting the oldest one without a request in progress; only when every one has a
request in progress is the new one reset instead, before a byte of it is read. Refusing the
newest whatever the others held let a run's 300 half-sent connections keep every other TCP
client out for as long as they lasted (NF4).

A request is in progress from its complete headers to the end of its answer (a refused
one, 401, never is): hypercorn's handler tells itself so (`Updated(idle=False)`,
`Updated(idle=True)`), and it runs its
keep-alive timer exactly while none is. That timer, set to `tcp_header_timeout_s` here,
is the header deadline: a connection that has not delivered a complete request's headers
that long after it was accepted, or after its last answer, is closed; bytes trickled in
do not extend it. The Unix socket is served apart, never capped, with hypercorn's default
keep-alive. Each connection is served by hypercorn's own connection handler, as
`hypercorn.trio.serve` would (hypercorn's `serve` has no cap).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import logging
import socket
import struct
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Event, Updated
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
REPORT_EVERY_S = 10.0  # resets and accept errors are logged at most this often
REFUSAL_SEND_S = 1.0  # a 401 is a few hundred bytes: a client taking longer is not listening
_CONNECTION = "jeeves_mcp.tcp_connection"  # the _Connection, in a request's scope["state"]


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


def _reset(sock: trio.socket.SocketType) -> None:
    """Close with a reset, not a FIN: nothing lingers in TIME_WAIT. A socket already closed
    is left so: its EBADF reached the listener, which stopped the daemon."""
    if sock.fileno() == -1:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Connection:
    """A connection's stream, held in `held` (in the order they were accepted) until it is
    closed: hypercorn's handler outlives the connection it closed by its keep-alive timer,
    and a client that has hung up must not keep the next one out that long. Not SSL (no
    `do_handshake`)."""

    def __init__(self, conn: trio.socket.SocketType, held: dict[_Connection, None]) -> None:
        self._stream = trio.SocketStream(conn)
        self.socket = self._stream.socket
        self._held = held
        held[self] = None
        self.busy = False  # hypercorn has a request of it in hand (set by _Handler)
        self.refused = False  # answered 401: never in progress, see _refusals_let_go

    @property
    def in_request(self) -> bool:
        return self.busy and not self.refused

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        # Out of `held` before the socket closes: trio's aclose checkpoints after closing,
        # and the accept loop must not pick a closed socket to make room.
        self.release()
        await self._stream.aclose()

    def release(self) -> None:
        self._held.pop(self, None)

    def reset(self) -> None:
        """Make room: its handler, reading or about to, finds it closed and finishes."""
        self.release()
        _reset(self.socket)


class _Handler(TCPServer):
    """hypercorn's connection handler, telling its connection whether a request is in progress;
    the connection is in its requests' scope (state), for _refusals_let_go."""

    def __init__(self, app: Any, config: HypercornConfig, context: WorkerContext, connection: _Connection) -> None:
        state = ConnectionState({_CONNECTION: connection})
        super().__init__(app, config, context, state, connection)  # type: ignore[arg-type]
        self.connection = connection

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, Updated):  # before the keep-alive timer hears of it
            self.connection.busy = not event.idle
        await super().protocol_send(event)


def _refusals_let_go(app: Any) -> Any:
    """A refused request (401: no token) is no request in progress, so its connection can make
    room, and a refusal the client does not take within REFUSAL_SEND_S closes its connection:
    a tokenless HTTP/2 request whose client granted no window for the answer's body stayed in
    progress for good, and cap - 1 of them left one connection to everyone."""

    async def app_letting_refusals_go(scope: Any, receive: Any, send: Any) -> None:
        connection = (scope.get("state") or {}).get(_CONNECTION)
        if connection is None:
            await app(scope, receive, send)
            return

        async def send_or_let_go(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                connection.refused = True
            if not connection.refused:
                await send(message)
                return
            with trio.move_on_after(REFUSAL_SEND_S):
                await send(message)
                return
            connection.reset()

        await app(scope, receive, send_or_let_go)

    return app_letting_refusals_go


async def serve_tcp(
    app: Any, config: HypercornConfig, sock: socket.socket, limit: int, header_timeout_s: float,
    shutdown: trio.Event, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on the listening `sock`, at most `limit` connections at once, each closed
    when it has had no request in progress for `header_timeout_s`. At `shutdown` it closes
    `sock` and lets the open connections finish their requests; it returns when they are
    done (or it is cancelled)."""
    config = copy.copy(config)  # the Unix socket's server keeps its own
    config.keep_alive_timeout = header_timeout_s
    wrapped = wrap_app(_refusals_let_go(app), config.wsgi_max_body_size, None)
    context = WorkerContext(None)
    listener = trio.socket.from_stdlib_socket(sock)
    refused = _log.Throttle(REPORT_EVERY_S)
    dropped = _log.Throttle(REPORT_EVERY_S)
    starved = _log.Throttle(REPORT_EVERY_S)
    held: dict[_Connection, None] = {}

    async def handle(stream: _Connection) -> None:
        try:
            await _Handler(wrapped, config, context, stream)
        except Exception as exc:  # one connection's fault is not the listener's
            log.error("daemon.tcp_connection_failed", exc_info=exc)
        finally:
            stream.release()

    async def reset_held_when_cancelled() -> None:
        # hypercorn shields its socket writes: a client that never reads its answer would
        # hold a cancelled daemon's shutdown forever. A closed socket ends the write.
        try:
            await trio.sleep_forever()
        finally:
            for connection in list(held):
                connection.reset()

    async with trio.open_nursery() as guard:
        guard.start_soon(reset_held_when_cancelled)
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
                        if (count := starved.allow()) is not None:
                            _log.event(log, "daemon.tcp_accept_failed", logging.WARNING, count=count + 1,
                                       error=exc.strerror)
                        await trio.sleep(ACCEPT_RETRY_S)
                        continue
                    if len(held) >= limit:
                        oldest = next((other for other in held if not other.in_request), None)
                        if oldest is None:  # every one has a request in progress: nothing of it is read
                            _reset(conn)
                            if (count := refused.allow()) is not None:
                                _log.event(log, "daemon.tcp_connection_refused", logging.WARNING, count=count + 1,
                                           limit=limit)
                            continue
                        oldest.reset()
                        if (count := dropped.allow()) is not None:
                            _log.event(log, "daemon.tcp_connection_dropped", logging.WARNING, count=count + 1,
                                       limit=limit)
                    connections.start_soon(handle, _Connection(conn, held))
            await context.terminated.set()  # kept-alive connections close after their request
        guard.cancel_scope.cancel()  # every connection is done
