"""The daemon's own file descriptors (attack T1): a run floods the TCP control port.

A run's `bash` needs no token to open connections to the TCP control port. The daemon
running out of descriptors must not be taken for its children failing: no healthy child
of another run is restarted or degraded for the daemon's own EMFILE.
"""

from __future__ import annotations

import json
import os
import resource
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.client import AsyncControlClient
from tests._daemon import Daemon, EventLog, running_daemon, watch_events
from tests._sockets import closed_by_the_server, h2_stalled_get, open_fds

TOKEN = "tcp-token-for-the-descriptor-tests-0123456789"
TCP_ENV = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": TOKEN}


def tcp_port(daemon: Daemon) -> int:
    ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines() if '"daemon.ready"' in line)
    return int(ready["tcp"].rsplit(":", 1)[1])


# A request whose headers never end: what every flood below holds.
HALF_SENT = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"


async def hold_half_sent(conn: trio.SocketStream) -> None:
    """Send a request that never ends, then wait until the daemon closes the connection."""
    try:
        await conn.send_all(HALF_SENT)
        while await conn.receive_some(4096):
            pass
    except trio.BrokenResourceError:
        pass


@asynccontextmanager
async def flood(port: int, connections: int) -> AsyncIterator[list[int]]:
    """Keep `connections` half-sent requests open to `port`, reopening those the daemon
    closes (as the attack's flood.py did); yields a one-item list counting the opens."""
    opened = [0]

    async def hold() -> None:
        while True:
            try:
                conn = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.05)
                continue
            opened[0] += 1
            try:
                await hold_half_sent(conn)
            finally:
                await conn.aclose()

    async with trio.open_nursery() as nursery:
        for _ in range(connections):
            nursery.start_soon(hold)
        try:
            yield opened
        finally:
            nursery.cancel_scope.cancel()


async def until(log: EventLog, check) -> None:  # type: ignore[no-untyped-def]
    """Until `check(events)` is true (it may raise to fail the test)."""
    while not check(log.events):
        await log.changed.wait()


async def test_the_daemons_own_emfile_is_not_held_against_a_healthy_child(tmp_path: Path, run_root: Path) -> None:
    async with running_daemon(tmp_path, {**TCP_ENV, "JEEVES_MCP_TCP_MAX_CONNECTIONS": "100000"}) as daemon:
        async with daemon.client() as control, watch_events(daemon) as log:
            for run_id in ("attacker", "victim"):
                await control.acquire(run_id, run_root)
            pid = daemon.process.pid
            # A few descriptors to spare, then a flood that takes them all and more.
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds(pid) + 16, hard))

            def starved_long_enough(events: list[dict]) -> bool:
                mine = [event for event in events if event.get("run_id") == "victim"]
                crashed = [event for event in mine if event["event"] in (
                    "mcp_pruner.unreachable", "mcp_pruner.restarting", "mcp_pruner.degraded")]
                assert not crashed, f"the daemon's EMFILE was held against a healthy child: {crashed}"
                # Several pings in a row failed for the daemon's want of descriptors: more
                # than health_failures (2 in the tests).
                return sum(event["event"] == "daemon.out_of_descriptors" for event in mine) >= 4

            with trio.fail_after(60):
                async with flood(tcp_port(daemon), 48):
                    await until(log, starved_long_enough)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
            views = {view["run_id"]: view for view in (await control.list())["slots"]}
            assert {run_id: (view["state"], view["restarts"]) for run_id, view in views.items()} == {
                "attacker": ("running", 0), "victim": ("running", 0)}
            for run_id in views:
                await control.release(run_id)


def not_crashed(events: list[dict]) -> bool:
    crashed = [event for event in events if "internal error" in event.get("error", "")]
    assert not crashed, f"a restart out of descriptors crashed the slot task: {crashed}"
    return True


# How long the daemon's descriptors must stay the same to be taken as long-lived: two health
# intervals of the tests (0.3 s), so a health ping's connection held at every look is not one.
SETTLED_S = 0.6


def descriptors(pid: int) -> dict[int, str]:
    """The descriptors `pid` holds, by number: what each refers to."""
    held = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            held[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except FileNotFoundError:  # closed between the listing and the look
            pass
    return held


def control_connections(daemon: Daemon, held: dict[int, str]) -> int:
    """How many connections to its control socket the daemon holds (accepted, any state)."""
    inodes = {target[len("socket:["):-1] for target in held.values() if target.startswith("socket:[")}
    return sum(
        1 for line in Path("/proc/net/unix").read_text().splitlines()[1:]
        # Num RefCount Protocol Flags Type St Inode Path: St 03 is connected (the listener is 01)
        if len(fields := line.split()) == 8 and fields[5] == "03" and fields[6] in inodes
        and fields[7] == str(daemon.socket)
    )


async def starve(daemon: Daemon) -> tuple[int, int]:
    """Leave the daemon no descriptor to open; its limits before.

    RLIMIT_NOFILE bounds descriptor numbers, not their count: a new one takes the lowest free
    number and fails only if that is at or past the limit. So the limit is the lowest free
    number, once every number below it is held by something that stays: the daemon's
    descriptors the same for SETTLED_S (no health ping's connection among them), and no
    connection of the test's but the event stream (the client keeps none, but the daemon
    holds a request's connection a while after it). A descriptor below the limit that closed
    later would leave a hole the daemon could open one in."""
    pid = daemon.process.pid
    with trio.fail_after(30):
        settled, since = descriptors(pid), trio.current_time()
        while True:
            await trio.sleep(0.01)
            held = descriptors(pid)
            if held != settled or control_connections(daemon, held) != 1:  # the event stream's alone
                settled, since = held, trio.current_time()
            elif trio.current_time() - since >= SETTLED_S:
                break
    lowest_free = min(set(range(len(held) + 1)) - set(held))
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, hard))
    return soft, hard


async def test_a_restart_out_of_descriptors_is_retried_then_degrades_with_its_reason(
    tmp_path: Path, run_root: Path
) -> None:
    env = {"JEEVES_MCP_MAX_RESTARTS": "6"}  # the fork server on: its pipe() raised EMFILE
    async with running_daemon(tmp_path, env) as daemon, daemon.client() as control, watch_events(daemon) as log:
        pid = daemon.process.pid
        # Retried: the restart that found no descriptor is an attempt like any other, and
        # the next one, with descriptors again, brings the child back.
        slot = await control.acquire("retried", run_root)
        limits = await starve(daemon)
        os.kill(slot["pid"], 9)
        with trio.fail_after(60):
            await until(log, lambda events: not_crashed(events) and any(
                event["event"] == "mcp_pruner.restarting" and event.get("attempt", 0) >= 2
                and "file" in event.get("error", "") for event in events))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        restarted = await log.wait_for("mcp_pruner.restarted", "retried", timeout_s=60)
        assert restarted["state"] == "running"
        assert not [event for event in log.events if event["event"] == "mcp_pruner.degraded"], log.events
        await control.release("retried")
        # Degraded, with the reason, once the restarts run out: not an internal error.
        slot = await control.acquire("spent", run_root)
        after = len(log.events)
        limits = await starve(daemon)
        os.kill(slot["pid"], 9)
        degraded = await log.wait_for("mcp_pruner.degraded", "spent", after=after, timeout_s=120)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        assert degraded["error"].startswith("restart failed: "), degraded
        assert "internal error" not in degraded["error"] and "file" in degraded["error"], degraded
        assert degraded["restarts"] == 6
        await control.release("spent")



def nofile(pid: int) -> tuple[int, int]:
    return resource.prlimit(pid, resource.RLIMIT_NOFILE)


async def test_the_daemon_raises_its_soft_open_files_limit_and_its_children_keep_theirs(
    tmp_path: Path, run_root: Path
) -> None:
    import sys

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard <= 256 or hard == resource.RLIM_INFINITY:
        pytest.skip(f"the hard open-files limit is {hard}: nothing to raise")
    python = tmp_path / "python-nofile-256"
    python.write_text(f'#!/bin/sh\nulimit -Sn 256 && exec {sys.executable} "$@"\n')  # systemd's 1024, smaller
    python.chmod(0o755)
    async with running_daemon(tmp_path, python=str(python)) as daemon, daemon.client() as control:
        assert nofile(daemon.process.pid) == (hard, hard)
        logged = next(json.loads(line) for line in daemon.log_path.read_text().splitlines()
                      if '"daemon.open_files_limit"' in line)
        assert (logged["was"], logged["soft"], logged["hard"]) == (256, hard, hard)
        # What the daemon starts gets the limit it was started with (select() breaks past 1024).
        zygote = (await control.healthz())["fork_server"]["pid"]
        forked = await control.acquire("forked", run_root)
        cold = await control.acquire("cold", run_root, env={f"V{n}": "y" * (100 * 1024) for n in range(6)})
        assert [nofile(pid) for pid in (zygote, forked["pid"], cold["pid"])] == [(256, hard)] * 3
        for run_id in ("forked", "cold"):
            await control.release(run_id)


async def test_tcp_control_connections_are_capped_and_the_daemon_keeps_serving(
    tmp_path: Path, run_root: Path
) -> None:
    cap, flooding = 8, 64
    async with running_daemon(tmp_path, {**TCP_ENV, "JEEVES_MCP_TCP_MAX_CONNECTIONS": str(cap)}) as daemon:
        port, pid = tcp_port(daemon), daemon.process.pid
        async with daemon.client() as control:
            await control.healthz()
            baseline = open_fds(pid)
            held: list[trio.SocketStream] = []
            closed = [0]

            async def half_sent() -> None:
                try:
                    conn = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:  # reset before the connect returned
                    closed[0] += 1
                    return
                held.append(conn)
                await hold_half_sent(conn)
                closed[0] += 1

            most = 0
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for _ in range(flooding):
                        nursery.start_soon(half_sent)
                    # One reset for each past the cap (the oldest); the daemon holds the rest.
                    while closed[0] < flooding - cap:
                        most = max(most, open_fds(pid))
                        await trio.sleep(0.02)
                    most = max(most, open_fds(pid))
                    # The Unix socket is not capped: the API answers, a child starts.
                    slot = await control.acquire("during", run_root)
                    assert slot["state"] == "running"
                    nursery.cancel_scope.cancel()
            for conn in held:
                await conn.aclose()
            assert most <= baseline + cap + 12, (baseline, most)
            # A TCP request with the token is served at once: it would make room if the
            # daemon had not yet seen the flood's closes.
            async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
                listed = await tcp.list()
            assert [view["run_id"] for view in listed["slots"]] == ["during"]
            await control.release("during")


def capped(cap: int) -> dict[str, str]:
    """A daemon's env with a TCP cap of `cap` and no connection closed for being slow, only
    to make room."""
    return {**TCP_ENV, "JEEVES_MCP_TCP_MAX_CONNECTIONS": str(cap), "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": "120"}


async def open_half_sent(port: int) -> socket.socket:
    """A connection to `port` holding HALF_SENT; a plain socket, so that whether the daemon
    has closed it can be asked without waiting (`still_open`)."""
    sock = socket.socket()
    try:
        sock.setblocking(False)
        await trio.socket.from_stdlib_socket(sock).connect(("127.0.0.1", port))
        sock.send(HALF_SENT)
    except BaseException:
        sock.close()
        raise
    return sock


def still_open(sock: socket.socket) -> bool:
    """False once the daemon has closed `sock` (a FIN or a reset); never waits."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False


@asynccontextmanager
async def tcp_events(port: int) -> AsyncIterator[AsyncIterator[str]]:
    """The event stream over TCP, with the token: a request in progress while it is open."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=auth, timeout=None) as http:
        async with http.stream("GET", "/v1/events") as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            with trio.fail_after(10):
                assert (await lines.__anext__()) == ": connected"
            try:
                yield lines
            finally:
                await lines.aclose()


async def still_streams(events: AsyncIterator[str], control: AsyncControlClient, run_root: Path, run_id: str) -> None:
    """The TCP event stream still carries what the daemon does now (a disabled slot, no child)."""
    await control.acquire(run_id, run_root, enabled=False)
    with trio.fail_after(30):
        async for line in events:
            if line.startswith("data: ") and json.loads(line[6:]).get("run_id") == run_id:
                break
    await control.release(run_id)


async def test_at_the_cap_a_new_tcp_connection_resets_the_oldest_one_without_a_request(
    tmp_path: Path, run_root: Path
) -> None:
    """NF4: more half-sent connections than the cap kept every other TCP client out, since the
    newest connection was the one refused. Now the newest is served: the oldest connection that
    has not sent a complete request makes room, and one with a request in progress never does."""
    cap, flooding = 16, 40
    async with running_daemon(tmp_path, capped(cap)) as daemon, daemon.client() as control:
        port = tcp_port(daemon)
        flood: list[socket.socket] = []
        try:
            async with tcp_events(port) as events:  # the oldest connection, its request in progress
                with trio.fail_after(30):
                    for _ in range(flooding):
                        flood.append(await open_half_sent(port))
                    # Accepted after the whole flood (the listen queue is FIFO), while it is held.
                    async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
                        assert (await tcp.list())["slots"] == []
                    # One reset for each connection past the cap, the flood's and the request's
                    # own, the oldest first; the newest are held, unanswered.
                    dropped = flooding + 1 - (cap - 1)
                    for sock in flood[:dropped]:
                        await closed_by_the_server(sock)
                assert [still_open(sock) for sock in flood] == [False] * dropped + [True] * (flooding - dropped)
                # The event stream, older than them all, was not taken for room.
                await still_streams(events, control, run_root, "during")
        finally:
            for sock in flood:
                sock.close()


async def test_a_tcp_connection_is_closed_when_its_request_headers_are_not_complete_in_time(
    tmp_path: Path, run_root: Path
) -> None:
    """NF4: a connection has tcp_header_timeout_s (1 s) after it is accepted to deliver its
    request's headers, however it trickles them; hypercorn's keep-alive timer closed such a
    connection only after 5 s. A connection with a request in progress is not closed for it."""
    async with running_daemon(tmp_path, TCP_ENV) as daemon, daemon.client() as control:
        port = tcp_port(daemon)
        async with tcp_events(port) as events:
            silent = await open_half_sent(port)
            trickling = await open_half_sent(port)
            try:

                async def trickle() -> None:
                    # One byte of a header line at a time, never the blank line that ends them.
                    while True:
                        for byte in b"X-Slow: a\r\n":
                            await trio.sleep(0.1)
                            try:
                                trickling.send(bytes([byte]))
                            except OSError:  # closed by the daemon
                                return

                with trio.fail_after(4):  # well before the 5 s that closed them before
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(trickle)
                        await closed_by_the_server(silent)
                        await closed_by_the_server(trickling)
                        nursery.cancel_scope.cancel()
            finally:
                silent.close()
                trickling.close()
            # The event stream was accepted before both: its first second is over too.
            await still_streams(events, control, run_root, "after")


async def test_a_tcp_request_without_the_token_is_answered_before_its_body(
    tmp_path: Path, run_root: Path
) -> None:
    """A request with complete headers counts as in progress, so it is never reset for room:
    one without the token that trickled its body held its connection for body_timeout_s (30 s),
    and a few of them kept every other TCP client out. It is refused before its body is read,
    and its connection closed."""
    cap = 4
    async with running_daemon(tmp_path, capped(cap)) as daemon:
        port = tcp_port(daemon)
        slow: list[socket.socket] = []
        try:
            with trio.fail_after(10):  # body_timeout_s is 30 s
                for _ in range(cap):
                    slow.append(await open_posting(port, {"Content-Length": "100"}))
                for sock in slow:
                    answer = await answer_then_close(sock)
                    assert answer.startswith(b"HTTP/1.1 401"), answer
                async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
                    assert (await tcp.list())["slots"] == []
        finally:
            for sock in slow:
                sock.close()


async def open_posting(port: int, headers: dict[str, str]) -> socket.socket:
    """A connection to `port` that has sent a POST's complete headers and one byte of its body."""
    head = "POST /v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock = socket.socket()
    try:
        sock.setblocking(False)
        await trio.socket.from_stdlib_socket(sock).connect(("127.0.0.1", port))
        sock.send(head.encode() + b"{")
    except BaseException:
        sock.close()
        raise
    return sock


async def answer_then_close(sock: socket.socket) -> bytes:
    """What the daemon sends on `sock` until it closes it."""
    answer = b""
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            chunk = sock.recv(4096, socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        except ConnectionResetError:
            return answer
        if not chunk:
            return answer
        answer += chunk


async def answer_to_a_post(port: int, content_length: int) -> bytes:
    """What the daemon sends, until it closes the connection, to a POST with the token that
    announces `content_length` bytes of body and sends one."""
    sock = await open_posting(port, {"Authorization": f"Bearer {TOKEN}", "Content-Length": str(content_length)})
    try:
        with trio.fail_after(10):
            return await answer_then_close(sock)
    finally:
        sock.close()


async def test_a_body_refused_before_it_is_read_closes_its_connection(
    tmp_path: Path, run_root: Path
) -> None:
    """A body over the limit is answered 413 before it is read, and the rest of it cannot be
    told from a next request: the connection must close. It stayed open, out of the TCP
    cap's reach (a request in progress), until the client went away."""
    env = {**TCP_ENV, "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": "120"}
    async with running_daemon(tmp_path, env) as daemon:
        answer = await answer_to_a_post(tcp_port(daemon), 2 * 1024 * 1024)
        assert answer.startswith(b"HTTP/1.1 413"), answer
        assert b'"INVALID_REQUEST"' in answer


async def test_a_body_slower_than_the_body_timeout_closes_its_connection(
    tmp_path: Path, run_root: Path
) -> None:
    """A body slower than body_timeout_s is answered 408 with the rest of it still to come on
    the connection, which can serve no other request: the daemon closes it, as after a 413."""
    env = {**TCP_ENV, "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": "120", "JEEVES_MCP_BODY_TIMEOUT_S": "1"}
    async with running_daemon(tmp_path, env) as daemon:
        answer = await answer_to_a_post(tcp_port(daemon), 100)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"connection: close" in answer.lower() and b'"REQUEST_TIMEOUT"' in answer


async def test_making_room_skips_a_connection_whose_socket_is_already_closed() -> None:
    """A connection its handler is closing was still held, and looked idle, while trio's
    aclose checkpointed after closing the socket; the accept loop's reset then met EBADF,
    which stopped the daemon."""
    from jeeves_mcp.capped_listener import _Connection

    ours, theirs = socket.socketpair()
    theirs.close()
    held: dict[_Connection, None] = {}
    connection = _Connection(trio.socket.from_stdlib_socket(ours), held, 30.0)
    connection.socket.close()
    connection.reset()
    assert held == {}


async def test_connections_closed_by_the_header_deadline_while_others_arrive_at_the_cap(
    tmp_path: Path, run_root: Path
) -> None:
    """A run's bash, no token needed: half-sent connections reach the header deadline while
    new ones arrive at the cap, so a connection being closed is chosen to make room."""
    cap, deadline_s = 16, 0.2
    env = {**TCP_ENV, "JEEVES_MCP_TCP_MAX_CONNECTIONS": str(cap),
           "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": str(deadline_s)}

    async def half_sent(port: int, hold_s: float) -> None:
        sock = trio.socket.socket()
        with sock:
            try:
                await sock.connect(("127.0.0.1", port))
                await sock.send(HALF_SENT)
                with trio.move_on_after(hold_s):
                    while await sock.recv(4096):
                        pass
            except OSError:  # reset to make room
                pass

    async with running_daemon(tmp_path, env) as daemon:
        port = tcp_port(daemon)
        with trio.move_on_after(6):  # it stopped the daemon within 2 s
            while daemon.process.returncode is None:
                async with trio.open_nursery() as nursery:
                    for _ in range(cap):
                        nursery.start_soon(half_sent, port, 3.0)
                    await trio.sleep(deadline_s * 0.9)
                    for _ in range(40):  # arriving around the deadline
                        nursery.start_soon(half_sent, port, 0.05)
                        await trio.sleep(deadline_s * 0.005)
        assert daemon.process.returncode is None, daemon.log_path.read_text()[-2000:]
        async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
            assert (await tcp.list())["slots"] == []


async def test_a_client_that_never_reads_its_answer_does_not_hold_the_listener_once_cancelled() -> None:
    """hypercorn shields its socket writes, so a cancelled listener waited on a client that
    never read a large answer, and with it the daemon's shutdown, forever."""
    from hypercorn.config import Config

    from jeeves_mcp.capped_listener import listening_socket, serve_capped

    big = b"x" * (64 << 20)  # more than loopback's socket buffers hold
    writing = trio.Event()

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(big)).encode())]})
        writing.set()
        await send({"type": "http.response.body", "body": big, "more_body": False})

    listener = listening_socket("127.0.0.1", 0, 16)
    port = listener.getsockname()[1]
    returned = trio.Event()
    client = trio.socket.socket()
    with client:
        async with trio.open_nursery() as nursery:
            cancel = trio.CancelScope()

            async def listen(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                with cancel:
                    try:
                        await serve_capped(app, Config(), listener, 8, 30.0, trio.Event(), events="test.",
                                           task_status=task_status)
                    finally:
                        returned.set()

            await nursery.start(listen)
            await client.connect(("127.0.0.1", port))
            await client.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            await writing.wait()
            cancel.cancel()
            with trio.move_on_after(5):
                await returned.wait()
            came_back = returned.is_set()
            client.close()  # what ended the write before
    assert came_back


H2_STALLED_REFUSAL = h2_stalled_get(b"/healthz")  # no token: a 401 whose body cannot be sent


async def test_refusals_a_client_will_not_receive_do_not_hold_the_tcp_cap(tmp_path: Path, run_root: Path) -> None:
    """A tokenless HTTP/2 request whose client grants no window for the 401's body stayed a
    request in progress for good, never reset for room: cap - 1 of them, no token needed,
    left one connection to everyone. A refused request is not in progress, and a refusal
    the client does not take in time closes its connection."""
    cap = 4
    async with running_daemon(tmp_path, capped(cap)) as daemon:
        port = tcp_port(daemon)
        stalled: list[trio.SocketStream] = []
        try:
            with trio.fail_after(20):
                for _ in range(cap):
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                    stalled.append(stream)
                    await stream.send_all(H2_STALLED_REFUSAL)
                    await stream.receive_some(4096)  # the server's settings: the request is read
                async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
                    assert (await tcp.list())["slots"] == []
        finally:
            for stream in stalled:
                await stream.aclose()


@pytest.mark.parametrize("listener", ["tcp", "unix"])
async def test_a_websocket_upgrade_is_refused_before_any_route(tmp_path: Path, run_root: Path, listener: str) -> None:
    """The control API has no WebSocket route: an upgrade, with no token, went past the token
    check (HTTP only) to quart's 404 handler, which failed: a 500 and a traceback in the log,
    unthrottled, for each request. On the Unix socket, or with no TCP token, it still did."""
    async with running_daemon(tmp_path, TCP_ENV if listener == "tcp" else {}) as daemon:
        if listener == "tcp":
            stream = await trio.open_tcp_stream("127.0.0.1", tcp_port(daemon))
        else:
            stream = await trio.open_unix_socket(str(daemon.socket))
        async with stream:
            await stream.send_all(
                b"GET /v1/slots HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            answer = b""
            with trio.fail_after(10):
                while b"\r\n" not in answer:
                    answer += await stream.receive_some(4096)
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert "api.internal_error" not in daemon.log_path.read_text()


def _connections_to(port: int) -> int:
    """Established TCP connections to `port` on this host, seen from the connecting side."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            count += int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01"
    return count


async def test_a_client_never_sends_on_a_connection_the_daemon_is_closing(tmp_path: Path, run_root: Path) -> None:
    """The daemon closes a TCP connection idle for tcp_header_timeout_s; a client keeping it
    alive sent its next request on it as it closed, and got "no daemon answers" from a
    healthy daemon. The client keeps no connection once answered, and requests spaced around
    that deadline all succeed. (The deadline was 50 ms, to meet the race: a loaded machine
    then also let a new connection's request come later than that.)"""
    deadline_s = 0.25
    env = {**TCP_ENV, "JEEVES_MCP_TCP_HEADER_TIMEOUT_S": str(deadline_s)}
    async with running_daemon(tmp_path, env) as daemon:
        port = tcp_port(daemon)
        async with AsyncControlClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
            for step in range(33):
                assert (await tcp.list())["slots"] == []
                assert _connections_to(port) == 0
                await trio.sleep(deadline_s * (0.8 + 0.4 * (step % 11) / 10))  # around the deadline
