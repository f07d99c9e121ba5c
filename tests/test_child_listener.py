"""A pruner child's port, attacked from where another run sits (attack F3).

Every run's child listens on a loopback port that `ps` shows to every local user, and
`/health` needs no token. Another run's bash, a different user, no token: it must not be
able to take the child's descriptors, or keep connections the child cannot let go, so that
the daemon's health checks fail and the run's slot is restarted, then degraded.
"""

from __future__ import annotations

import resource
import socket
from pathlib import Path

import httpx
import trio

from jeeves_mcp.supervisor.child import PING, PING_HEADERS
from tests._child import Child, running_child
from tests._sockets import closed_by_the_server, h2_stalled_get, open_fds
from tests.test_descriptors import open_half_sent
from tests.test_http import open_session

CAP = 16  # the child's connections at once, for these tests (JEEVES_MCP_MAX_CONNECTIONS)
CONNECT_S = 5.0  # a connect the child's full listen queue leaves waiting longer is given up
STALLED_HEALTH = h2_stalled_get(b"/health")


async def pinged(child: Child) -> bool:
    """The daemon's health check: an MCP ping with the token, on a connection of its own."""
    no_pool = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=None, limits=no_pool) as http:
        response = await http.post(child.url, json=PING, headers={**PING_HEADERS, **child.headers()})
    return response.status_code == 200 and "result" in response.json()


async def open_stalled(port: int) -> socket.socket | None:
    """A connection asking /health over HTTP/2 with no window for the answer's body; None if
    it could not connect in time. A plain socket: see closed_by_the_server."""
    sock = socket.socket()
    sock.setblocking(False)
    with trio.move_on_after(CONNECT_S):
        try:
            await trio.socket.from_stdlib_socket(sock).connect(("127.0.0.1", port))
            sock.send(STALLED_HEALTH)
        except OSError:  # reset to make room before it could send: closed already, fine
            pass
        return sock
    sock.close()
    return None


async def test_tokenless_http2_requests_that_never_take_their_answer_leave_the_child_serving(
    run_root: Path, tmp_path: Path
) -> None:
    """F3: hypercorn's `serve` has no cap, and a tokenless HTTP/2 /health whose client grants
    no window stays unanswered for good: 1,100 of them used up a child's 1,024 descriptors,
    its health checks failed, and after three restarts its run's slot was degraded. Here the
    child has room for 40 connections and is sent 64 such requests."""
    flooding, room = 64, 40
    async with running_child(run_root, tmp_path, env={"JEEVES_MCP_MAX_CONNECTIONS": str(CAP)}) as child:
        pid = child.process.pid
        baseline = open_fds(pid)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (baseline + room, resource.prlimit(pid, resource.RLIMIT_NOFILE)[1]))
        flood: list[socket.socket] = []
        try:
            async with trio.open_nursery() as nursery:
                async def one() -> None:
                    sock = await open_stalled(child.port)
                    if sock is not None:
                        flood.append(sock)

                for _ in range(flooding):
                    nursery.start_soon(one)
            # Accepted after the whole flood (the listen queue is FIFO), while it is held.
            answered = False
            with trio.move_on_after(10):
                answered = await pinged(child)
            held = open_fds(pid) - baseline
            closed = 0
            with trio.move_on_after(10):  # each stalled answer is given a second
                for sock in flood:
                    await closed_by_the_server(sock)
                    closed += 1
            figures = {"connected": len(flood), "answered": answered, "held": held, "closed": closed}
            assert (answered, held <= CAP + 2, closed) == (True, True, len(flood)), figures
            assert await pinged(child)
        finally:
            for sock in flood:
                sock.close()


async def test_a_client_that_never_reads_tokenless_answers_does_not_keep_its_connection(
    run_root: Path, tmp_path: Path
) -> None:
    """HTTP/1.1 has its own way not to take an answer: pipeline tokenless requests (here
    unknown paths, each 404 echoing a long path) and never read. Once the socket buffers
    are full the child's send waits for good, its request in progress, never reset for room
    and out of the header deadline's reach. An answer nobody vouched for gets a second."""
    request = b"GET /" + b"x" * 12_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    async with running_child(run_root, tmp_path, env={"JEEVES_MCP_MAX_CONNECTIONS": str(CAP)}) as child:
        sock = trio.socket.socket()
        # A small receive window: the buffers fill before hypercorn's 1,000 requests per
        # connection, after which it would close the connection anyway.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stream = trio.SocketStream(sock)
        async with stream:
            await sock.connect(("127.0.0.1", child.port))
            sent, closed = 0, False
            with trio.move_on_after(20):
                try:
                    while True:
                        await stream.send_all(request)
                        sent += 1
                except trio.BrokenResourceError:
                    closed = True
        assert closed, f"{sent} requests sent, the connection still open"
        assert await pinged(child)


async def test_a_request_with_the_token_stays_in_progress_through_a_flood(run_root: Path, tmp_path: Path) -> None:
    """What the child vouches for (its token checked) is in progress however long it lasts,
    never reset for room nor held to an unvouched answer's second: a session's GET stream
    outlives three times the cap of half-sent connections and ends when its session does."""
    async with running_child(run_root, tmp_path, env={"JEEVES_MCP_MAX_CONNECTIONS": str(CAP)}) as child:
        async with httpx.AsyncClient(timeout=10) as http:
            session = await open_session(http, child)
            stream_headers = {**child.headers(), "Accept": "text/event-stream", "Mcp-Session-Id": session}
            async with http.stream("GET", child.url, headers=stream_headers) as stream:
                assert stream.status_code == 200
                flood = [await open_half_sent(child.port) for _ in range(3 * CAP)]
                try:
                    # Accepted after the flood: the stream was the oldest connection all along.
                    async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as other:
                        ended = await other.delete(child.url, headers={**child.headers(), "Mcp-Session-Id": session})
                    assert ended.status_code == 200
                    with trio.fail_after(5):
                        assert [chunk async for chunk in stream.aiter_bytes()] == []
                finally:
                    for sock in flood:
                        sock.close()
