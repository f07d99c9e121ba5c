"""Start a real supervisor daemon for a test, wait for its READY=1, clean up after."""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio

from jeeves_mcp.client import AsyncControlClient
from jeeves_mcp.supervisor.cgroups import SlotCgroups, cgroup_base
from tests._child import processes_whose
from tests._child import stop_process_group as stop_group

# Fast enough for tests, slow enough for a loaded 2-core machine.
TEST_ENV = {
    "JEEVES_MCP_HEALTH_INTERVAL_S": "0.3",
    "JEEVES_MCP_HEALTH_FAILURES": "2",
    "JEEVES_MCP_SHUTDOWN_TIMEOUT_MS": "1000",
}


@dataclass
class Daemon:
    process: trio.Process
    socket: Path
    state_dir: Path
    log_path: Path
    notifications: list[str] = field(default_factory=list)
    ready_count: int = 0
    notified: trio.Event = field(default_factory=trio.Event)
    # As systemd's file descriptor store: what FDSTORE=1 sent, by FDNAME, until FDSTOREREMOVE=1.
    fd_store: dict[str, socket.socket] = field(default_factory=dict)

    def client(self) -> AsyncControlClient:
        # The daemon may run as a service user: its state dir is its own.
        owner = self.state_dir.stat().st_uid if self.state_dir.exists() else None
        return AsyncControlClient(self.socket, daemon_uid=owner)

    def our_processes(self) -> list[int]:
        """Processes carrying our state dir: children, strays; not the running fork server."""
        found = processes_with_env(f"JEEVES_MCP_STATE_DIR={self.state_dir}")
        if self.process is not None and self.process.returncode is None:
            found = [pid for pid in found if pid not in self.fork_server_pids()]
        return found

    def fork_server_pids(self) -> set[int]:
        import json

        pids = set()
        for line in self.log_path.read_text().splitlines():
            if '"fork_server.ready"' in line:
                pids.add(json.loads(line)["pid"])
        return pids

    async def wait_ready(self, count: int) -> None:
        with trio.move_on_after(30):
            while self.ready_count < count:
                await self.notified.wait()
        if self.ready_count < count:  # the log is gone once the test's directory is
            tail = self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
            raise AssertionError(f"daemon not ready {count} time(s) in 30 s; its log ends:\n{tail}")


def processes_with_env(entry: str) -> list[int]:
    wanted = entry.encode()
    return processes_whose("environ", lambda data: wanted in data.split(b"\0"))


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", data[: len(data) - len(data) % 4]))
    return fds


def keep_fds(store: dict[str, socket.socket], lines: list[str], fds: list[int]) -> None:
    """sd_notify's FDSTORE=1 / FDSTOREREMOVE=1 with FDNAME=, as systemd handles them."""
    name = next((line[len("FDNAME="):] for line in lines if line.startswith("FDNAME=")), "stored")
    if "FDSTORE=1" in lines and fds:
        if name in store:
            store.pop(name).close()
        store[name] = socket.socket(fileno=fds.pop(0))
    if "FDSTOREREMOVE=1" in lines and name in store:
        store.pop(name).close()
    for fd in fds:  # sent with any other message: systemd closes them
        os.close(fd)


# `python -c PASS_FDS NAMES FD,FD,... ARGS...` execs `python ARGS...` with those descriptors
# from fd 3 on, named, as systemd passes a service its sockets and its fd store
# (sd_listen_fds_with_names(3)).
PASS_FDS = """import fcntl, os, sys
names, fds = sys.argv[1], [int(fd) for fd in sys.argv[2].split(",")]
above = max([*fds, 3 + len(fds)]) + 1
moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, above) for fd in fds]  # clear of 3.. and of each other
for fd in fds:
    os.close(fd)  # only 3.. go on, as from systemd
for i, fd in enumerate(moved):
    os.dup2(fd, 3 + i)
    os.close(fd)
os.environ.update(LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=names, LISTEN_PID=str(os.getpid()))
os.execv(sys.executable, [sys.executable, *sys.argv[3:]])
"""


async def start_daemon_process(
    daemon: Daemon, env: dict[str, str], notify_path: Path, python: str = sys.executable,
    stored: bool = False,
) -> trio.Process:
    """`stored`: hand it back what the previous daemon put in the fd store, as systemd does on
    a restart (NOTIFY_SOCKET is set: the test plays systemd)."""
    child_env = {**os.environ, **TEST_ENV, **env, "NOTIFY_SOCKET": str(notify_path)}
    child_env.pop("JEEVES_MCP_SOCKET", None)
    daemon_args = ["--state-dir", str(daemon.state_dir), "--socket", str(daemon.socket)]
    argv = [python, "-m", "jeeves_mcp", "daemon", *daemon_args]
    pass_fds: tuple[int, ...] = ()
    if stored and daemon.fd_store:
        pass_fds = tuple(sock.fileno() for sock in daemon.fd_store.values())
        argv = [python, "-c", PASS_FDS, ":".join(daemon.fd_store), ",".join(map(str, pass_fds)),
                "-m", "jeeves_mcp", "daemon", *daemon_args]
    with daemon.log_path.open("ab") as log:
        return await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=child_env, start_new_session=True,
            cwd=daemon.state_dir.parent,  # not the source tree: `-m` puts the cwd first on sys.path
            pass_fds=pass_fds,
        )


@asynccontextmanager
async def running_daemon(
    tmp: Path, env: dict[str, str] | None = None, python: str = sys.executable
) -> AsyncIterator[Daemon]:
    env = env or {}
    notify_path = tmp / "notify.sock"
    receiver = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await receiver.bind(str(notify_path))
    notify_path.chmod(0o666)  # a daemon run as another user (test_isolation) notifies too
    daemon = Daemon(process=None, socket=tmp / "control.sock", state_dir=tmp / "state",  # type: ignore[arg-type]
                    log_path=tmp / "daemon.log")

    async def listen() -> None:
        while True:
            data, ancillary, _, _ = await receiver.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
            keep_fds(daemon.fd_store, data.decode().splitlines(), received_fds(ancillary))
            for line in data.decode().splitlines():
                daemon.notifications.append(line)
                if line == "READY=1":
                    daemon.ready_count += 1
            daemon.notified.set()
            daemon.notified = trio.Event()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            daemon.process = await start_daemon_process(daemon, env, notify_path, python)
            try:
                await daemon.wait_ready(1)
                daemon.restart = lambda extra=None, stored=True: start_daemon_process(  # type: ignore[attr-defined]
                    daemon, {**env, **(extra or {})}, notify_path, stored=stored)
                yield daemon
            finally:
                with trio.CancelScope(shield=True):
                    await stop_group(daemon.process)
                    for pid in daemon.our_processes():  # whatever a failing test left behind
                        try:
                            os.killpg(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
                    nursery.cancel_scope.cancel()
                    remove_cgroups(daemon.state_dir)
    finally:
        receiver.close()  # also when the test failed: a leaked socket fails a later test
        for stored in daemon.fd_store.values():
            stored.close()


class EventLog:
    """Every daemon event from the moment `watch_events` returns, for tests to wait on."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.changed = trio.Event()

    async def wait_for(self, name: str, run_id: str | None = None, *, after: int = 0, timeout_s: float = 30) -> dict:
        """The first matching event at index >= `after`."""
        with trio.fail_after(timeout_s):
            while True:
                for event in self.events[after:]:
                    if event["event"] == name and (run_id is None or event.get("run_id") == run_id):
                        return event
                await self.changed.wait()


@asynccontextmanager
async def watch_events(daemon: Daemon) -> AsyncIterator[EventLog]:
    import json

    import httpx

    log = EventLog()
    transport = httpx.AsyncHTTPTransport(uds=str(daemon.socket))
    async with httpx.AsyncClient(transport=transport, base_url="http://d", timeout=None) as http:
        async with http.stream("GET", "/v1/events") as response:
            lines = response.aiter_lines()
            with trio.fail_after(10):
                assert (await lines.__anext__()) == ": connected"  # subscribed from here on

            async def pump() -> None:
                async for line in lines:
                    if line.startswith("data: "):
                        log.events.append(json.loads(line[6:]))
                        log.changed.set()
                        log.changed = trio.Event()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump)
                try:
                    yield log
                finally:
                    nursery.cancel_scope.cancel()
            await lines.aclose()


def remove_cgroups(state_dir: Path) -> None:
    """The slots' cgroups a daemon killed mid-test could not remove (empty by now)."""
    base = cgroup_base(state_dir)
    if base is not None and base.exists():
        for slot in base.glob("slot-*"):
            with contextlib.suppress(OSError):
                slot.rmdir()
        with contextlib.suppress(OSError):
            base.rmdir()


def skip_without_slot_cgroups(tmp_path: Path) -> Path:
    """Skip a test that needs the daemon to give each slot a cgroup it can kill; else where a
    daemon of a state dir under `tmp_path` keeps them (made and removed again)."""
    probe = SlotCgroups.for_state_dir(tmp_path / "probe")
    probe.close()
    if probe.base is None:
        pytest.skip("no writable cgroup v2 with cgroup.kill (Linux 5.14+) here")
    return probe.base
