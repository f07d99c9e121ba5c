"""A TCP listener with a cap on the connections it holds at once, for ports every local user
can reach: the daemon's TCP control API and each pruner child's port (`ps` shows it).

Without a cap, one local user's connections took every descriptor the daemon (attack T1)
or a child (F3) had. At `limit` a new connection makes room by resetting the oldest one
without a request in progress; only when every one has a request in progress is the new
one reset instead, before a byte of it is read. Refusing the newest whatever the others held
let a run's 300 half-sent connections keep every other client out for as long as they
lasted (NF4).

A request is in progress while the app handles one it vouched for (`vouch_for`: the token
was checked), and only then. hypercorn's own notion (`Updated(idle=False)`) is not used: an
invalid WebSocket upgrade, which it answers itself, or the bare HTTP/2 preface left it
"busy" for good without the app ever called, so a cap's worth of such tokenless connections
were never reset for room and kept everyone else out (attack G1, G2).

The header deadline: a connection with no request in progress for `header_timeout_s` (since
it was accepted, or since its last vouched request ended) is closed; bytes trickled in do
not extend it. hypercorn's keep-alive timer, set to the same, closes an idle connection
gracefully; it stops while hypercorn thinks itself busy, so the listener keeps its own, a
moment later (BACKSTOP_S), and resets. An answer to a request the app did not vouch for
must be sent within UNVOUCHED_ANSWER_S or its connection is reset: a tokenless HTTP/2
request granting no window for the answer's body, or HTTP/1.1 requests pipelined by a client
that never reads, otherwise held its connection's socket writes for good.
An answer sent before its request's body was read says `Connection: close`
(_closing_when_body_unread): hypercorn then closes the connection, and the client must know.
Each connection is served by hypercorn's own connection handler, as `hypercorn.trio.serve`
would (which has no cap).
"""

from __future__ import annotations

import contextlib
import copy
import errno
import logging
import math
import os
import socket
import stat
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import repr_socket_addr, wrap_app

from jeeves_mcp import _log
from jeeves_mcp.paths import unix_socket_name

__all__ = [
    "UNVOUCHED_ANSWER_S", "inherited_listening_socket", "listening_socket", "serve_capped", "unix_listening_socket",
    "vouch_for",
]

log = logging.getLogger("jeeves_mcp.listener")

# accept() errors that mean "not now" (trio.serve_listeners's list): wait and accept again.
ACCEPT_CAPACITY_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS)
ACCEPT_RETRY_S = 0.1
REPORT_EVERY_S = 10.0  # resets and accept errors are logged at most this often
# Unvouched answers (a 401, /health) are a few hundred bytes: a client taking longer is not listening.
UNVOUCHED_ANSWER_S = 1.0
# After the header deadline, for hypercorn's keep-alive timer (started a moment earlier) to
# close an idle connection first, with a FIN: a reset would drop an answer's unsent tail.
BACKSTOP_S = 0.5
_CONNECTION = "jeeves_mcp.tcp_connection"  # the _Connection, in a request's scope["state"]
_VOUCH = "jeeves_mcp.vouch"  # in a request's scope: what vouch_for calls


def vouch_for(scope: Any) -> None:
    """The app has checked this request's token (or needs none): its answer may take as long
    as it takes, its connection is neither reset for room nor closed by the header deadline
    until the app returns."""
    vouch = scope.get(_VOUCH)
    if vouch is not None:  # None: not served by serve_capped
        vouch()


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    host = host.strip("[]")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)

    def bind() -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))

    return _listening(sock, bind, backlog)


def inherited_listening_socket(fd: int, backlog: int) -> socket.socket:
    """The listening TCP socket the supervisor handed down as `fd` (it holds the slot's port for
    the slot's whole life, so that nobody else can take it while a child restarts: attack-seventh
    M1). Closed on exec: the run's commands never get it."""
    os.set_inheritable(fd, False)
    sock = socket.socket(fileno=fd)
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            raise OSError(errno.ENOTSOCK, f"descriptor {fd} is not a TCP socket")
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise OSError(errno.EINVAL, f"descriptor {fd} is not listening")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return _listening(sock, lambda: None, backlog)


def unix_listening_socket(path: Path, backlog: int) -> socket.socket:
    """Listening at `path`, mode 0600; a socket left there (by a child that was killed) is
    replaced, anything else is not."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def bind() -> None:
        try:
            with unix_socket_name(path) as name:
                sock.bind(name)
        except OSError as exc:  # bind names no path: the reason a slot shows should
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        path.chmod(0o600)

    return _listening(sock, bind, backlog)


def _listening(sock: socket.socket, bind: Callable[[], None], backlog: int) -> socket.socket:
    """`sock` once `bind` has bound it, listening and non-blocking; closed if any of it fails."""
    try:
        bind()
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

    def __init__(self, conn: trio.socket.SocketType, held: dict[_Connection, None], idle_s: float) -> None:
        self._stream = trio.SocketStream(conn)
        self.socket = self._stream.socket
        self._held = held
        held[self] = None
        self._idle_s = idle_s
        # Its header deadline (watch_idle); none while a vouched request is in progress.
        self.idle = trio.CancelScope(deadline=trio.current_time() + idle_s)
        self.vouched = 0  # of its requests, those vouched for whose app call has not returned
        self.unvouched = 0  # of its requests, those answering unvouched (_unvouched_answers_let_go)
        self.send_deadline = math.inf  # the earliest of theirs

    @property
    def in_request(self) -> bool:
        return self.vouched > 0

    def vouched_started(self) -> None:
        self.vouched += 1
        self.idle.deadline = math.inf

    def vouched_ended(self) -> None:
        self.vouched -= 1
        if not self.vouched:
            self.idle.deadline = trio.current_time() + self._idle_s

    async def watch_idle(self) -> None:
        """Reset it once its header deadline passes; returns only then (cancel it)."""
        with self.idle:
            await trio.sleep_forever()
        self.reset()

    def answer_unvouched(self, deadline: float) -> None:
        self.unvouched += 1
        self.send_deadline = min(self.send_deadline, deadline)

    def answered_unvouched(self) -> None:
        self.unvouched -= 1
        if not self.unvouched:
            self.send_deadline = math.inf

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        # hypercorn shields this write from cancellation: an unvouched answer's deadline
        # is kept here, inside the shield.
        with trio.CancelScope(deadline=self.send_deadline):
            await self._stream.send_all(data)
            return
        self.reset()
        raise trio.BrokenResourceError("an unvouched answer was not taken in time")

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


def _closing_when_body_unread(app: Any) -> Any:
    """An HTTP/1.1 answer that starts before its request's body was all read says
    `Connection: close`. hypercorn closes such a connection once the answer ends, but silently:
    a client that kept it lost its next request ("Server disconnected without sending a
    response") whenever it wrote before the FIN arrived (a 415 or 404 sent early)."""

    async def app_closing_when_body_unread(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("http_version") not in ("1.0", "1.1"):
            await app(scope, receive, send)
            return
        body_read = not any(name in (b"content-length", b"transfer-encoding") and value.strip() != b"0"
                            for name, value in scope["headers"])

        async def receive_noting_the_end() -> Any:
            nonlocal body_read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_read = True
            return message

        async def send_closing(message: Any) -> None:
            if message["type"] == "http.response.start" and not body_read and not any(
                name.lower() == b"connection" for name, _ in message.get("headers", ())
            ):
                message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        await app(scope, receive_noting_the_end, send_closing)

    return app_closing_when_body_unread


def _unvouched_answers_let_go(app: Any) -> Any:
    """Counts the requests vouched for in progress on a connection, and resets a connection
    whose answer to a request not vouched for is not taken within UNVOUCHED_ANSWER_S:
    nothing else would end a wait for an HTTP/2 window (here) or a write to a full socket
    (send_all) while the header deadline is away."""

    async def app_letting_unvouched_answers_go(scope: Any, receive: Any, send: Any) -> None:
        connection = (scope.get("state") or {}).get(_CONNECTION)
        if connection is None:
            await app(scope, receive, send)
            return
        deadline: float | None = None
        vouched = False

        def vouch() -> None:
            nonlocal vouched
            if not vouched:
                vouched = True
                connection.vouched_started()

        # A closure, not a flag: a scope copied on the way still reaches this request.
        scope[_VOUCH] = vouch

        async def send_or_let_go(message: Any) -> None:
            nonlocal deadline
            if vouched:
                await send(message)
                return
            if deadline is None:  # its first send: the answer starts
                deadline = trio.current_time() + UNVOUCHED_ANSWER_S
                connection.answer_unvouched(deadline)
            with trio.CancelScope(deadline=deadline):
                await send(message)
                return
            connection.reset()

        try:
            await app(scope, receive, send_or_let_go)
        finally:
            if deadline is not None:
                connection.answered_unvouched()
            if vouched:
                connection.vouched_ended()

    return app_letting_unvouched_answers_go


async def serve_capped(
    app: Any, config: HypercornConfig, sock: socket.socket, limit: int, header_timeout_s: float,
    shutdown: trio.Event, *, events: str, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on the listening `sock`, at most `limit` connections at once, each closed
    when it has had no request in progress for `header_timeout_s`. At `shutdown` it closes
    `sock` and gives the open connections `config.graceful_timeout` to finish their requests,
    as hypercorn's `serve` does; it returns when they are done (or it is cancelled). Its log
    events are named `events` + `connection_dropped` and so on."""
    config = copy.copy(config)  # the caller's other servers keep theirs
    config.keep_alive_timeout = header_timeout_s
    wrapped = wrap_app(_closing_when_body_unread(_unvouched_answers_let_go(app)), config.wsgi_max_body_size, None)
    context = WorkerContext(None)
    listener = trio.socket.from_stdlib_socket(sock)
    refused = _log.Throttle(REPORT_EVERY_S)
    dropped = _log.Throttle(REPORT_EVERY_S)
    starved = _log.Throttle(REPORT_EVERY_S)
    held: dict[_Connection, None] = {}
    serving = trio.CancelScope()

    async def handle(stream: _Connection) -> None:
        try:
            async with trio.open_nursery() as watching:
                watching.start_soon(stream.watch_idle)
                # hypercorn's own handler; the connection in its requests' scope (state)
                state = ConnectionState({_CONNECTION: stream})
                await TCPServer(wrapped, config, context, state, stream)  # type: ignore[arg-type]
                watching.cancel_scope.cancel()
        except Exception as exc:  # one connection's fault is not the listener's
            log.error(f"{events}connection_failed", exc_info=exc)
        finally:
            stream.release()

    async def let_go_of_held() -> None:
        # hypercorn shields its socket writes: a client that never reads its answer would
        # hold a stopping (or cancelled) server forever. A closed socket ends the write.
        try:
            await shutdown.wait()
            await trio.sleep(config.graceful_timeout)
            serving.cancel()
        finally:
            for connection in list(held):
                connection.reset()

    async with trio.open_nursery() as guard:
        guard.start_soon(let_go_of_held)
        with serving:
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
                                _log.event(log, f"{events}accept_failed", logging.WARNING, count=count + 1,
                                           error=exc.strerror)
                            await trio.sleep(ACCEPT_RETRY_S)
                            continue
                        if len(held) >= limit:
                            oldest = next((other for other in held if not other.in_request), None)
                            if oldest is None:  # every one has a request in progress: nothing of it is read
                                _reset(conn)
                                if (count := refused.allow()) is not None:
                                    _log.event(log, f"{events}connection_refused", logging.WARNING,
                                               count=count + 1, limit=limit)
                                continue
                            oldest.reset()
                            if (count := dropped.allow()) is not None:
                                _log.event(log, f"{events}connection_dropped", logging.WARNING, count=count + 1,
                                           limit=limit)
                        connections.start_soon(handle, _Connection(conn, held, header_timeout_s + BACKSTOP_S))
                await context.terminated.set()  # kept-alive connections close after their request
        guard.cancel_scope.cancel()  # every connection is done
