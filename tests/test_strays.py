"""The stray kill at daemon start: only children of ours, and all at once.

The marker (`JEEVES_MCP_STATE_DIR=<state dir>`) is public: `ps` shows the daemon's state dir, so any
local user can start processes that carry it. Those must cost the daemon nothing; a real stray
(a child no record names) must still be stopped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from jeeves_mcp.proc.procfs import process_alive
from tests._daemon import running_daemon

OTHER_UID = 2002
PLANTED = 30


@contextlib.contextmanager
def planted(state_dir: Path, count: int, uid: int | None) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` sleeps marked with `state_dir`, of `uid` (None: ours), none leading a process group
    (they stay in ours): killed, and reaped, however the test ends."""
    user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    argv = [*user, "env", f"JEEVES_MCP_STATE_DIR={state_dir}", "sleep", "300"]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            processes.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL))
        yield processes
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()


def marked(pid: int, state_dir: Path) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return f"JEEVES_MCP_STATE_DIR={state_dir}".encode() in handle.read().split(b"\0")
    except OSError:
        return False


async def wait_marked(processes: list[subprocess.Popen[bytes]], state_dir: Path) -> None:
    """Until each has exec'd its sleep with the marker (setpriv and env come first)."""
    with trio.fail_after(10):
        while not all(marked(process.pid, state_dir) for process in processes):  # noqa: ASYNC110 - a /proc poll
            await trio.sleep(0.05)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="planting another user's processes needs root and setpriv")
async def test_another_users_marked_processes_neither_delay_the_start_nor_are_signalled(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    with planted(state_dir, PLANTED, OTHER_UID) as sleepers:
        await wait_marked(sleepers, state_dir)
        began = trio.current_time()
        # 3 s a process, one after another, was 90 s here (the attack's setting).
        async with running_daemon(tmp_path, {"JEEVES_MCP_SHUTDOWN_TIMEOUT_MS": "3000"}) as daemon:
            took = trio.current_time() - began
            assert took < 15, f"ready after {took:.1f} s"
            async with daemon.client() as control:
                assert (await control.list())["slots"] == []
            # sleep dies of any SIGTERM or SIGKILL: alive means never signalled.
            assert all(process.poll() is None for process in sleepers)
        log = daemon.log_path.read_text()
        assert "mcp_pruner.stray_killed" not in log
        skipped = [line for line in log.splitlines() if "mcp_pruner.strays_skipped" in line]
        assert len(skipped) == 1 and f'"count": {PLANTED}' in skipped[0], skipped  # once, not per process
        assert all(process.poll() is None for process in sleepers)


async def test_a_child_no_record_names_and_our_marked_processes_are_stopped_at_start(
    tmp_path: Path, run_root: Path
) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_SHUTDOWN_TIMEOUT_MS": "3000"}) as daemon:
        state_dir = daemon.state_dir
        async with daemon.client() as control:
            slot = await control.acquire("orphan", run_root)
        child = slot["pid"]
        try:
            os.kill(daemon.process.pid, signal.SIGKILL)
            await daemon.process.wait()
            with sqlite3.connect(state_dir / "slots.sqlite3") as db:
                db.execute("delete from slots where run_id = 'orphan'")  # the record is gone
            # Ours (our uid) and leading no group: a group signal alone never reached them.
            with planted(state_dir, 5, None) as ours:
                await wait_marked(ours, state_dir)
                began = trio.current_time()
                daemon.process = await daemon.restart()  # type: ignore[attr-defined]
                await daemon.wait_ready(2)
                took = trio.current_time() - began
                assert not process_alive(child)
                assert all(process.poll() is not None for process in ours)
                assert took < 15, f"ready after {took:.1f} s"  # one grace for all, not 3 s each
            log = daemon.log_path.read_text()
            killed = [line for line in log.splitlines() if "mcp_pruner.stray_killed" in line]
            assert len(killed) == 1 and str(child) in killed[0], killed
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
