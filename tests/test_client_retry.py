"""The control client retries a connect that failed (the request never reached the daemon),
a few times, and never a request that reached it. Real daemon, real sockets."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import trio

from jeeves_mcp.client import AsyncControlClient, ControlClient, ControlError, DaemonUnavailable
from tests._child import stop_process_group
from tests._daemon import PASS_FDS, TEST_ENV, processes_with_env

# httpcore's blocking backend leaves the socket of a failed Unix connect to the GC (it is
# closed then, with a ResourceWarning): each attempt here fails that way at least once.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <socket.socket fd=\d+, family=1,:pytest.PytestUnraisableExceptionWarning"
)

@contextlib.contextmanager
def on_failed_connect(action: Callable[[], None]) -> Iterator[None]:
    """Calls `action` in the client's thread each time a connect fails (httpcore traces it)."""
    logger = logging.getLogger("httpcore.connection")

    class Hook(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.getMessage().startswith(("connect_tcp.failed", "connect_unix_socket.failed")):
                action()

    hook, level = Hook(), logger.level
    logger.addHandler(hook)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(hook)
        logger.setLevel(level)


async def test_a_control_socket_that_listens_after_the_first_connect_failed_is_reached(tmp_path: Path) -> None:
    """The first connect is refused (the socket is bound, not listening yet); then it listens,
    as systemd's socket unit does, and a real daemon started only now serves it."""
    control = tmp_path / "control.sock"
    state = tmp_path / "state"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(control))
    refused = trio.Event()

    def listen() -> None:
        listener.listen(16)  # connections wait in the backlog for the daemon
        trio.from_thread.run_sync(refused.set)

    answers: list[Any] = []

    def ask() -> None:
        with ControlClient(control, timeout=60) as client:
            answers.append(client.healthz())

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JEEVES_", "LISTEN_", "NOTIFY_"))}
    process: trio.Process | None = None
    try:
        with on_failed_connect(listen):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, ask)
                with trio.fail_after(10):
                    await refused.wait()
                with (tmp_path / "daemon.log").open("ab") as log:
                    process = await trio.lowlevel.open_process(
                        # The socket as fd 3, as jeeves-mcp.socket hands it over.
                        [sys.executable, "-c", PASS_FDS, "jeeves-mcp.socket", str(listener.fileno()),
                         "-m", "jeeves_mcp", "daemon",
                         "--state-dir", str(state), "--socket", str(tmp_path / "unused.sock")],
                        pass_fds=(listener.fileno(),), env={**env, **TEST_ENV}, stdin=subprocess.DEVNULL,
                        stdout=log, stderr=log, start_new_session=True, cwd=tmp_path,
                    )
    finally:
        with trio.CancelScope(shield=True):
            if process is not None:
                await stop_process_group(process)
            for pid in processes_with_env(f"JEEVES_MCP_STATE_DIR={state}"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            listener.close()
    assert [answer["status"] for answer in answers] == ["ok"], (tmp_path / "daemon.log").read_text()


class Counted(BaseHTTPRequestHandler):
    """GET /healthz answers; POST /v1/slots fails with 500; DELETE closes without an answer."""

    server: CountingServer

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path))
        self.answer(200, {"status": "ok"})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests.append(("POST", self.path))
        self.answer(500, {"error": {"code": "INTERNAL", "message": "it broke"}})

    def do_DELETE(self) -> None:
        self.server.requests.append(("DELETE", self.path))
        self.close_connection = True

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class CountingServer(socketserver.ThreadingMixIn, socketserver.BaseServer):
    """A real HTTP server on a socket bound now; `listen()` makes it listen and serve."""

    daemon_threads = True
    requests: list[tuple[str, str]]

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock.getsockname(), Counted)
        self.socket = sock
        self.requests = []
        self._serving: threading.Thread | None = None

    def listen(self) -> None:
        if self._serving is None:
            self.socket.listen(16)
            self._serving = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05})
            self._serving.start()

    def fileno(self) -> int:
        return self.socket.fileno()

    def get_request(self) -> tuple[socket.socket, Any]:
        return self.socket.accept()

    def shutdown_request(self, request: Any) -> None:
        with contextlib.suppress(OSError):
            request.shutdown(socket.SHUT_WR)
        request.close()

    def stop(self) -> None:
        if self._serving is not None:
            self.shutdown()
            self._serving.join(10)
        self.socket.close()


@contextlib.contextmanager
def counting_server(kind: str, tmp_path: Path) -> Iterator[tuple[CountingServer, dict[str, Any]]]:
    """The server, bound and not listening, and how a client names it."""
    if kind == "uds":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(tmp_path / "control.sock"))
        where: dict[str, Any] = {"socket": tmp_path / "control.sock"}
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        where = {"url": f"http://127.0.0.1:{sock.getsockname()[1]}", "token": "t"}
    server = CountingServer(sock)
    try:
        yield server, where
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["uds", "tcp"])
def test_a_listener_that_listens_after_the_first_connect_failed_is_reached(tmp_path: Path, kind: str) -> None:
    with counting_server(kind, tmp_path) as (server, where), on_failed_connect(server.listen):
        with ControlClient(**where, timeout=10) as client:
            assert client.healthz() == {"status": "ok"}
        assert server.requests == [("GET", "/healthz")]


@pytest.mark.parametrize("kind", ["uds", "tcp"])
async def test_the_async_client_retries_a_failed_connect_too(tmp_path: Path, kind: str) -> None:
    with counting_server(kind, tmp_path) as (server, where), on_failed_connect(server.listen):
        async with AsyncControlClient(**where, timeout=10) as client:
            assert await client.healthz() == {"status": "ok"}
        assert server.requests == [("GET", "/healthz")]


@pytest.mark.parametrize("kind", ["uds", "tcp"])
def test_a_listener_that_never_listens_is_tried_a_bounded_number_of_times(tmp_path: Path, kind: str) -> None:
    from jeeves_mcp.client import CONNECT_RETRIES

    failed: list[None] = []
    with counting_server(kind, tmp_path) as (_server, where), on_failed_connect(lambda: failed.append(None)):
        with ControlClient(**where, timeout=10) as client, pytest.raises(DaemonUnavailable):
            client.healthz()
    assert len(failed) == 1 + CONNECT_RETRIES


@pytest.mark.parametrize("kind", ["uds", "tcp"])
def test_a_request_that_reached_the_server_is_never_sent_again(tmp_path: Path, kind: str) -> None:
    """A failure after the connect (an error answer, a connection closed unanswered) may have
    done something: an acquire sent twice could start two children."""
    with counting_server(kind, tmp_path) as (server, where):
        server.listen()
        with ControlClient(**where, timeout=10) as client:
            with pytest.raises(ControlError) as failed:
                client.acquire("run", tmp_path)
            assert (failed.value.code, failed.value.status) == ("INTERNAL", 500)
            with pytest.raises(DaemonUnavailable):
                client.release("run")
        assert server.requests == [("POST", "/v1/slots"), ("DELETE", "/v1/slots/run")]


def test_a_connect_that_hangs_fails_as_unavailable_within_the_connect_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener whose queue is full drops the SYN: the connect hangs. The client gives up
    after its connect bound, per attempt, and says no daemon answers, instead of waiting
    the whole request timeout on each of its tries (4 x 120 s)."""
    from concurrent.futures import ThreadPoolExecutor

    import jeeves_mcp.client
    from jeeves_mcp.client import CONNECT_RETRIES

    monkeypatch.setattr(jeeves_mcp.client, "CONNECT_TIMEOUT_S", 0.5)  # the test's pace, not the rule
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = []
    try:
        for _ in range(2):  # backlog 0 queues one; the next handshake is never completed
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            queued.append(s)
        bound = (1 + CONNECT_RETRIES) * (0.5 + 1) + 1.5  # a try each, plus the backoff
        pool = ThreadPoolExecutor(1)
        with ControlClient(url=f"http://127.0.0.1:{port}", token="t") as client:
            attempt = pool.submit(client.healthz)
            try:
                with pytest.raises(DaemonUnavailable) as failed:
                    attempt.result(timeout=bound)
                # Something listens there: "start the daemon" would send the operator the wrong way.
                assert "accepts no connection" in failed.value.message
                assert "start it with" not in failed.value.message
            finally:  # a connect still hanging (the bug) is refused once the listener is gone
                listener.close()
                pool.shutdown(wait=True)
    finally:
        for s in queued:
            s.close()
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="binds the socket as another user: needs root")
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_socket_another_user_binds_between_two_tries_is_not_talked_to(
    tmp_path: Path, kind: str
) -> None:
    """The path was absent when the client was made, so its owner could not be checked; by
    the next try another user has bound it in the shared directory. The client checks again
    and refuses: the impostor would have received the request (a run's env) and answered."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    path = shared / "control.sock"
    received: list[bytes] = []
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def bind_as_another_user() -> None:
        if not received and not path.exists():
            impostor.bind(str(path))
            os.chown(path, 2002, 2002)
            impostor.listen(4)
            impostor.settimeout(5)

            def serve() -> None:
                with contextlib.suppress(OSError):
                    conn, _ = impostor.accept()
                    received.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}")
                    conn.close()

            threading.Thread(target=serve, daemon=True).start()

    try:
        with on_failed_connect(bind_as_another_user), pytest.raises(ControlError) as refused:
            if kind == "sync":
                with ControlClient(path, timeout=5) as client:
                    client.healthz()
            else:
                async with AsyncControlClient(path, timeout=5) as client:
                    await client.healthz()
        assert refused.value.code == "UNTRUSTED_SOCKET"
        assert received == []
    finally:
        impostor.close()
        gc.collect()  # the failed connect's socket, closed by the GC: here, under this module's filter
