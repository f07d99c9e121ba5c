"""A child starved of CPU by other processes is not declared dead (attack review 7, M1).

A run's commands spinning in sessions of their own (autogroup gives each an equal share)
starved the host: another owner's child answered its health pings too late, was declared
unreachable and restarted until degraded. A ping that failed while the child (or the
daemon) was waiting for a CPU, runnable, says nothing about its health: it does not
count. A child that does not run at all (stopped, deadlocked) still does
(`tests/test_daemon.py::test_a_hung_child_is_detected`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from tests._daemon import running_daemon, watch_events

SPINNERS = 3
HEALTH_EVENTS = ("mcp_pruner.health_starved", "mcp_pruner.health_failed")
SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


@contextmanager
def starved(pid: int) -> Iterator[None]:
    """`pid` and spinners on one CPU; the spinners each in a session of their own and the
    child's session niced to 19 (autogroup: sessions share a CPU by their nice, whatever
    their processes')."""
    cpu = min(os.sched_getaffinity(0))
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)], start_new_session=True)
                for _ in range(SPINNERS)]
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
            # Where sessions do not get a share each (autogroup off), the thread's own class does.
            os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
        if os.path.exists(f"/proc/{pid}/autogroup"):
            Path(f"/proc/{pid}/autogroup").write_text("19")
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


async def test_a_starved_child_is_not_restarted(tmp_path: Path, run_root: Path) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_HEALTH_TIMEOUT_S": "0.2"}) as daemon, \
            daemon.client() as control, watch_events(daemon) as log:
        slot = await control.acquire("starved", run_root)
        with starved(slot["pid"]):
            with trio.move_on_after(15):
                while not any(e["event"] in HEALTH_EVENTS for e in log.events):
                    await log.changed.wait()
            if not any(e["event"] in HEALTH_EVENTS for e in log.events):
                await control.release("starved")
                pytest.skip("no ping failed: the child could not be starved here (a cpu cgroup of its own?)")
            for _ in range(4):  # twice the failures that would count as a crash
                await log.wait_for("mcp_pruner.health_starved", "starved", after=len(log.events))
        failed = [e["event"] for e in log.events if e.get("run_id") == "starved" and e["event"] in (
            "mcp_pruner.health_failed", "mcp_pruner.unreachable", "mcp_pruner.restarting")]
        assert failed == []
        now = await control.get("starved")
        assert (now["pid"], now["restarts"], now["state"]) == (slot["pid"], 0, "running")
        await control.release("starved")
