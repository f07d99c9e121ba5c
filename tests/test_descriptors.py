"""The daemon's own file descriptors (attack T1): a run floods the TCP control port.

A run's `bash` needs no token to open connections to the TCP control port. The daemon
running out of descriptors must not be taken for its children failing: no healthy child
of another run is restarted or degraded for the daemon's own EMFILE.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from tests._daemon import Daemon, EventLog, running_daemon, watch_events

TOKEN = "tcp-token-for-the-descriptor-tests-0123456789"
TCP_ENV = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": TOKEN}


def tcp_port(daemon: Daemon) -> int:
    ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines() if '"daemon.ready"' in line)
    return int(ready["tcp"].rsplit(":", 1)[1])


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def hold_half_sent(conn: trio.SocketStream) -> None:
    """Send a request that never ends, then wait until the daemon closes the connection."""
    try:
        await conn.send_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
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


def starve(pid: int) -> tuple[int, int]:
    """Leave the daemon no descriptor to open; its limits before."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (max(open_fds(pid) - 2, 8), hard))
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
        limits = starve(pid)
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
        limits = starve(pid)
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
    from jeeves_mcp.client import AsyncControlClient, ControlError, DaemonUnavailable

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
                    # Those past the cap are closed unread at once; the daemon holds the rest.
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
            # The flood over, a TCP request with the token is served.
            url = f"http://127.0.0.1:{port}"
            with trio.fail_after(30):
                while True:
                    try:
                        async with AsyncControlClient(url=url, token=TOKEN) as tcp:
                            listed = await tcp.list()
                        break
                    except (ControlError, DaemonUnavailable, httpx.TransportError):  # reset: still full
                        await trio.sleep(0.05)  # until the daemon has seen the flood's closes
            assert [view["run_id"] for view in listed["slots"]] == ["during"]
            await control.release("during")
