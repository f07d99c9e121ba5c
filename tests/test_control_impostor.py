"""The control client sends nothing to a listener another user holds in the daemon's place:
a loopback TCP port squatted while the daemon is down (attack-seventh C1), a Unix socket
path bound after the client was made (L3). Real processes, real sockets."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from jeeves_mcp.client import AsyncControlClient, ControlClient, ControlError

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="binds a listener as another user (uid 2002): needs root"),
    # httpcore's blocking backend leaves a failed connect's socket to the GC.
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <socket.socket fd=\d+:pytest.PytestUnraisableExceptionWarning"
    ),
]

OTHER_UID = 2002
TOKEN = "the-daemons-tcp-token-not-for-impostors"

# Binds 127.0.0.1 (an ephemeral port), says which, answers each request as a daemon would
# and reports what it received, until stopped.
IMPOSTOR = r"""import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    conn, _ = s.accept()
    conn.settimeout(5)
    data = conn.recv(65536)
    print("RECEIVED", data.decode(errors="replace").replace("\r\n", " | "), flush=True)
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"status":"ok"}')
    conn.close()
"""


@contextlib.contextmanager
def impostor_on_loopback() -> Iterator[tuple[int, list[str]]]:
    """A real listener on 127.0.0.1 whose socket uid 2002 made; yields its port and, once
    the block ends, every line it printed (what it received)."""
    process = subprocess.Popen(
        ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
         sys.executable, "-I", "-c", IMPOSTOR],
        stdout=subprocess.PIPE, text=True, cwd="/", start_new_session=True,
    )
    output: list[str] = []
    try:
        port_line = process.stdout.readline()  # type: ignore[union-attr]
        assert port_line.strip().isdigit(), f"the impostor did not start: {port_line!r}"
        yield int(port_line), output
    finally:
        process.kill()  # the only process this test starts
        rest, _ = process.communicate(timeout=10)
        output.extend(rest.splitlines())


def test_a_loopback_port_another_user_listens_on_gets_nothing_blocking() -> None:
    with impostor_on_loopback() as (port, received):
        with ControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN, timeout=5) as client, \
                pytest.raises(ControlError) as refused:
            client.list()
    assert refused.value.code == "UNTRUSTED_LISTENER"
    assert f"uid {OTHER_UID}" in refused.value.message
    assert received == []  # not the request, not the token


async def test_a_loopback_port_another_user_listens_on_gets_nothing_async() -> None:
    with impostor_on_loopback() as (port, received):
        async with AsyncControlClient(url=f"http://localhost:{port}", token=TOKEN, timeout=5) as client:
            with pytest.raises(ControlError) as refused:
                await client.list()
            assert refused.value.code == "UNTRUSTED_LISTENER"
            with pytest.raises(ControlError) as streamed:  # the event stream is a request too
                async for _ in client.events():
                    pass
            assert streamed.value.code == "UNTRUSTED_LISTENER"
    assert received == []


def test_a_loopback_listener_of_the_daemons_user_is_talked_to() -> None:
    """daemon_uid names the service user the daemon runs as: its listener is trusted."""
    with impostor_on_loopback() as (port, received):
        with ControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN, timeout=5, daemon_uid=OTHER_UID) as client:
            assert client.healthz() == {"status": "ok"}
    assert len(received) == 1 and TOKEN in received[0]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_socket_bound_by_another_user_after_the_client_was_made_gets_nothing(
    tmp_path: Path, kind: str
) -> None:
    """L3: the path was absent when the client was made (nothing to check then); another
    user binds it in the shared directory before the client's first request."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    path = shared / "control.sock"
    received: list[bytes] = []
    impostor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = impostor.accept()
            received.append(conn.recv(65536))
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{"status":"ok"}')
            conn.close()

    try:
        if kind == "sync":
            client: ControlClient | AsyncControlClient = ControlClient(path, timeout=5)
        else:
            client = AsyncControlClient(path, timeout=5)
        impostor.bind(str(path))
        os.chown(path, OTHER_UID, OTHER_UID)
        impostor.listen(4)
        impostor.settimeout(5)
        threading.Thread(target=serve, daemon=True).start()
        with pytest.raises(ControlError) as refused:
            if isinstance(client, ControlClient):
                with client:
                    client.healthz()
            else:
                async with client:
                    await client.healthz()
        assert refused.value.code == "UNTRUSTED_SOCKET"
        assert received == []
    finally:
        impostor.close()
