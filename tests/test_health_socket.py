"""The daemon's health checks of a child, from where another run sits (attack F5).

A child's TCP port is in `ps` for every local user, and a flood of plain connections keeps
its listen queue full: pings over it timed out on connect, two or three in a row restarted
the child, then degraded its slot. The daemon now pings over a Unix socket in its own state
dir, which a run's commands (another uid) cannot reach."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.client import AsyncControlClient
from tests._daemon import EventLog, running_daemon, watch_events
from tests.test_daemon import metric, read_through

FLOOD = Path(__file__).with_name("_flood.py")
PINGS = 10  # health checks that must pass under the flood (0.3 s apart in the tests)
FAILED = ("mcp_pruner.health_failed", "mcp_pruner.unreachable", "mcp_pruner.restarting")
RUNS = 4  # released under a flood, in the test of the counts
PROBE_S = 0.5  # a loopback connect completes at once, or its SYN was dropped: the retry comes after 1 s


async def connect_dropped(port: int) -> bool:
    """Whether a connect to `port` does not complete within PROBE_S: the kernel dropped its SYN,
    which it does for a listener whose accept queue is full. This port's own, unlike the
    host's ListenOverflows, which every other port's overflows count in."""
    probe = trio.socket.socket()
    try:
        with trio.move_on_after(PROBE_S):
            await probe.connect(("127.0.0.1", port))
            return False
        return True
    finally:
        probe.close()


async def passed_pings(control: AsyncControlClient) -> float:
    return metric(await control.metrics(), "jeeves_mcp_health_passes_total") or 0.0


async def pings_pass_under(log: EventLog, control: AsyncControlClient, run_id: str) -> None:
    """Until PINGS more health checks have passed; AssertionError at the first that fails."""
    target, since = await passed_pings(control) + PINGS, len(log.events)

    def check() -> None:
        failed = [e for e in log.events[since:] if e["event"] in FAILED and e.get("run_id") == run_id]
        assert not failed, failed

    with trio.fail_after(60):
        while await passed_pings(control) < target:
            check()
            with trio.move_on_after(0.3):  # one health interval: the counter has no event of its own
                await log.changed.wait()
    check()


@asynccontextmanager
async def flooding(port: int, *mode: str, processes: int = 1, blocked: bool = False) -> AsyncIterator[None]:
    """`_flood.py` on `port` while the block runs, as another run's `bash` can; if `blocked`,
    the block starts once a connect to `port` was dropped for its full listen queue."""
    floods: list[trio.Process] = []
    try:
        for _ in range(processes):
            floods.append(await trio.lowlevel.open_process(
                [sys.executable, "-I", str(FLOOD), str(port), *mode],
                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
            ))
        with trio.fail_after(20):
            for flood in floods:
                assert flood.stdout is not None
                assert await flood.stdout.receive_some(64) == b"flooding\n"
            while blocked and not await connect_dropped(port):
                pass
        yield
    finally:
        for flood in floods:
            flood.kill()
        with trio.CancelScope(shield=True):
            for flood in floods:
                await flood.wait()


async def test_a_flood_of_the_childs_port_does_not_fail_its_health_checks(daemon, run_root: Path) -> None:
    async with daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("victim", run_root)
        async with flooding(slot["port"]):
            await pings_pass_under(log, control, "victim")
        after = await control.get("victim")
        assert (after["state"], after["restarts"], after["pid"]) == ("running", 0, slot["pid"])
        await control.release("victim")


async def test_a_flood_of_the_childs_port_does_not_lose_its_counts_at_release(tmp_path: Path, run_root: Path) -> None:
    """A run's savings are fetched from its child at release; over its flooded TCP port they
    were lost. No health check comes before the releases (a long interval), so no refresh
    either: the fetch at release alone brings them. A connect to the flooded port is dropped
    most times, not always: RUNS releases, each under a flood of its own."""
    async with running_daemon(tmp_path, {"JEEVES_MCP_HEALTH_INTERVAL_S": "600"}) as daemon, \
            daemon.client() as control:
        for n in range(RUNS):
            slot = await control.acquire(f"counted-{n}", run_root)
            for _ in range(n + 1):
                assert (await read_through(slot))["path"] == "hello.py"
            async with httpx.AsyncClient(timeout=10) as http:  # what the child counted, before the flood
                response = await http.get(f"http://127.0.0.1:{slot['port']}/stats", headers=slot["mcp"]["headers"])
            real = response.raise_for_status().json()["tools"]
            assert real["read"]["calls"] == n + 1, real
            async with flooding(slot["port"], "churn", processes=2, blocked=True):
                await control.release(f"counted-{n}")
            recorded = (await control.stats(f"counted-{n}"))["runs"][f"counted-{n}"]["tools"]
            assert recorded == real, n


async def test_the_socket_is_the_daemons_alone_and_goes_with_the_slot(daemon, run_root: Path) -> None:
    """0600 in a 0700 dir of the daemon's; a killed child's socket is replaced by its restart's;
    none is left after the release."""
    async with daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("private", run_root)
        health_dir = daemon.state_dir / "health"
        sockets = list(health_dir.iterdir())
        assert len(sockets) == 1 and sockets[0].is_socket(), sockets
        modes = (stat.S_IMODE(health_dir.stat().st_mode), stat.S_IMODE(sockets[0].stat().st_mode))
        assert modes == (0o700, 0o600), [oct(mode) for mode in modes]
        os.kill(slot["pid"], signal.SIGKILL)  # it cannot remove its socket
        await log.wait_for("mcp_pruner.restarted", "private")
        assert (await control.get("private"))["state"] == "running"
        await pings_pass_under(log, control, "private")  # the new child answers where the old one did
        await control.release("private")
        assert list(health_dir.iterdir()) == []


async def test_a_degraded_slots_socket_goes_with_its_release(tmp_path: Path, run_root: Path) -> None:
    """Its last child SIGKILLed (it cannot remove its socket) and the slot degraded: no child is
    left to stop at the release, and the socket went all the same, not at the next start."""
    async with running_daemon(tmp_path, {"JEEVES_MCP_MAX_RESTARTS": "1"}) as daemon, \
            daemon.client() as control, watch_events(daemon) as log:
        await control.acquire("spent", run_root)
        health_dir = daemon.state_dir / "health"
        for event in ("mcp_pruner.restarted", "mcp_pruner.degraded"):
            seen = len(log.events)
            os.kill((await control.get("spent"))["pid"], signal.SIGKILL)
            await log.wait_for(event, "spent", after=seen)
        assert (await control.get("spent"))["state"] == "degraded"
        left = list(health_dir.iterdir())
        assert len(left) == 1 and left[0].is_socket(), left  # the last child's, stale
        assert (await control.release("spent"))["state"] == "shutdown"
        assert list(health_dir.iterdir()) == []


def test_a_socket_too_long_to_name_is_reached_through_its_directory(tmp_path: Path) -> None:
    # Imported here, not above: each test then fails on its own against code without them.
    from jeeves_mcp.capped_listener import unix_listening_socket
    from jeeves_mcp.paths import SUN_PATH_BYTES, unix_socket_name

    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    path = deep / "child.sock"
    assert len(os.fsencode(path)) > SUN_PATH_BYTES
    for _ in range(2):  # the second replaces the first's socket, as a restarted child does
        listener = unix_listening_socket(path, 8)
        try:
            assert path.is_socket() and stat.S_IMODE(path.stat().st_mode) == 0o600
            with socket.socket(socket.AF_UNIX) as client, unix_socket_name(path) as name:
                client.connect(name)
        finally:
            listener.close()
    path.unlink()
    path.write_text("not a socket")
    with pytest.raises(OSError):  # only a socket is taken for a killed child's
        unix_listening_socket(path, 8)
    assert path.read_text() == "not a socket"


async def test_a_restarted_daemon_sweeps_the_sockets_no_slot_owns(daemon, run_root: Path) -> None:
    """A socket whose slot record is gone (its child killed with a crashed daemon, say) is
    removed at the next start; a re-adopted child's is kept, and its checks still pass there."""
    from jeeves_mcp.paths import unix_socket_name

    async with daemon.client() as control:
        slot = await control.acquire("kept", run_root)
    health_dir = daemon.state_dir / "health"
    owned = sorted(path.name for path in health_dir.iterdir())
    assert len(owned) == 1, owned
    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()
    stray = health_dir / f"{'0' * 16}.sock"
    with socket.socket(socket.AF_UNIX) as listener, unix_socket_name(stray) as name:
        listener.bind(name)  # closed unremoved, as a SIGKILLed child's is
    daemon.process = await daemon.restart()  # type: ignore[attr-defined]
    await daemon.wait_ready(2)
    assert sorted(path.name for path in health_dir.iterdir()) == owned
    async with daemon.client() as control, watch_events(daemon) as log:
        await pings_pass_under(log, control, "kept")
        assert (await control.get("kept"))["pid"] == slot["pid"]
        await control.release("kept")
    assert list(health_dir.iterdir()) == []
