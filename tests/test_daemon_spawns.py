"""The daemon's own spawns against its sweep (`sweep_zombies`, which kill_tree runs in a thread):
a cold pruner child, the fork server's zygote and the install check each keep their exit status
when they exit before their spawn has returned to the event loop, however long that takes (a
blocked loop delays it past any age). A child the zygote forks is the zygote's to reap, not the
daemon's: the daemon's sweep never sees it.

Each spawn here returns only once its process has exited, grown older than the age rule the
sweep once had (tests/_ages.py) and a sweep has run (in the spawn's worker thread, as
kill_tree's would beside it); the process is a stand-in that exits at once with a known status."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import trio

from jeeves_mcp.preflight import child_start_problem
from jeeves_mcp.proc.reaper import sweep_zombies
from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.forkserver import ForkServer
from tests._ages import until_started_ago

BROKEN = "ModuleNotFoundError: No module named 'jeeves_mcp.gone'"
STAND_INS = {
    # The pruner dies before its ready line (7: its status, in the slot's reason).
    "cold_child": "raise SystemExit(7)",
    # The zygote says it is ready, then dies (7: its status, in the fork_server.exited event).
    "zygote": "import socket, sys; socket.socket(fileno=int(sys.argv[1])).send(b'{\"ready\": true}'); sys.exit(7)",
    # The install check finds a module missing (1: the daemon refuses to start).
    "install_check": f"import sys; print({BROKEN!r}, file=sys.stderr); sys.exit(1)",
}


def until_old(pid: int) -> None:
    """Until `pid` has exited (not reaped) and started LATE_S ago."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # the stand-in exits at once
    until_started_ago(pid)


@pytest.fixture
def late_spawns(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[dict[str, str], list[int]]]:
    """Spawns that return late: the stand-in to run (set by the test), and the pids each
    sweep left unreaped (each must be the one spawned)."""
    stand_in: dict[str, str] = {}
    left: list[int] = []
    real_popen = subprocess.Popen

    class LatePopen(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, args: list[str], **kwargs: object) -> None:
            # In trio's worker thread: the daemon's argv, its last argument kept (the zygote's fd).
            super().__init__([sys.executable, "-I", "-c", stand_in["code"], args[-1]], **kwargs)
            until_old(self.pid)
            sweep_zombies()
            try:
                os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped: its status is lost
                return
            left.append(self.pid)

    monkeypatch.setattr(subprocess, "Popen", LatePopen)
    yield stand_in, left


async def test_a_cold_child_that_died_while_its_spawn_was_in_flight_keeps_its_status(late_spawns, tmp_path):
    stand_in, left = late_spawns
    stand_in["code"] = STAND_INS["cold_child"]
    with trio.fail_after(30), pytest.raises(children.SpawnError) as info:
        await children.spawn(
            root=tmp_path, token="t" * 32, port=0, log_file=tmp_path / "child.log", log_bytes=1 << 20,
            env=children.child_environment("t" * 32, {}, None), timeout_s=20,
        )
    assert str(info.value) == "child exited with status 7 before it was ready"
    assert len(left) == 1


async def test_a_zygote_that_died_while_its_spawn_was_in_flight_keeps_its_status(late_spawns):
    stand_in, left = late_spawns
    stand_in["code"] = STAND_INS["zygote"]
    events = EventBus()
    server = ForkServer(children.inherited_environment(), events)
    with trio.fail_after(30):
        async with events.subscribe() as received, trio.open_nursery() as nursery:
            nursery.start_soon(server.run)
            async for event in received:
                if event["event"] in ("fork_server.exited", "fork_server.start_failed"):
                    nursery.cancel_scope.cancel()  # before its restart
                    break
    assert event["event"] == "fork_server.exited" and event["status"] == 7
    assert len(left) == 1


async def test_an_install_check_that_died_while_its_spawn_was_in_flight_keeps_its_status(late_spawns):
    stand_in, left = late_spawns
    stand_in["code"] = STAND_INS["install_check"]
    with trio.fail_after(30):
        assert await child_start_problem() == BROKEN
    assert len(left) == 1
