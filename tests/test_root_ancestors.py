"""A run root whose path another user could swap is refused, at acquire and at every start.

The attacker is run A's `bash`, able to rename entries in the dir holding the run roots (a
group-writable, not sticky /srv/runs): it renames run B's root away and moves a dir of its
choice into its name. Only the child running when the swap happens noticed (its pin); the next
child of B, after a crash or a daemon restart, or A's own next acquire, started in the dir put
there: A's tree (B's agent working in it as A), or a root-owned one (commands as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests._daemon import running_daemon
from tests.test_isolation import NOBODY, bash

RUNS_GROUP = 64_000


@pytest.fixture
def runs_dir() -> Iterator[Path]:
    """A dir for run roots, root's and 0755; removed after."""
    if os.geteuid() != 0:
        pytest.skip("giving run roots to other users needs root")
    path = Path(tempfile.mkdtemp(prefix="jeeves-runs-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run_root(runs: Path, name: str, uid: int) -> Path:
    root = runs / name
    root.mkdir()
    os.chown(root, uid, uid)
    return root


async def test_a_root_below_a_dir_a_group_may_write_is_refused_at_acquire(tmp_path: Path, runs_dir: Path) -> None:
    os.chown(runs_dir, 0, RUNS_GROUP)
    os.chmod(runs_dir, 0o2775)  # setgid, group-writable, not sticky
    root = run_root(runs_dir, "run-b", NOBODY)
    async with running_daemon(tmp_path) as daemon:
        transport = httpx.AsyncHTTPTransport(uds=str(daemon.socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://d") as http:
            refused = await http.post("/v1/slots", json={"run_id": "run-b", "root": str(root)})
            os.chmod(runs_dir, 0o3775)  # sticky: only an entry's owner may rename it
            accepted = await http.post("/v1/slots", json={"run_id": "run-b", "root": str(root)})
            await http.delete("/v1/slots/run-b")
    assert refused.status_code == 400, refused.text
    assert f"below {runs_dir}, mode 2775, writable by group and not sticky" in refused.text
    assert accepted.status_code == 201, accepted.text


async def slot_after_restart(control: Any, run_id: str, old_pid: int) -> dict[str, Any]:
    """The slot once its killed child has been replaced or given up on."""
    with trio.fail_after(60):
        while True:
            slot = await control.get(run_id)
            if slot["state"] not in ("running", "starting") or (
                slot["state"] == "running" and slot["pid"] != old_pid
            ):
                return slot
            await trio.sleep(0.1)


async def test_a_restarted_child_does_not_start_in_a_root_swapped_by_another_run(
    tmp_path: Path, runs_dir: Path
) -> None:
    victims = run_root(runs_dir, "run-b", NOBODY)
    (victims / "who").write_text("run b\n")
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        slot = await control.acquire("run-b", victims)
        # Opened to a group later (as an operator might); the run's commands swap the root.
        os.chown(runs_dir, 0, RUNS_GROUP)
        os.chmod(runs_dir, 0o2775)
        victims.rename(runs_dir / ".run-b-hidden")
        planted = runs_dir / "run-b"
        planted.mkdir()  # root's: commands in it would run as the daemon's user
        (planted / "who").write_text("planted\n")
        os.kill(slot["pid"], signal.SIGKILL)  # a crash, an OOM kill
        after = await slot_after_restart(control, "run-b", slot["pid"])
        if after["state"] == "running":
            ran = await bash(after, "id -u; cat who")
            pytest.fail(f"restarted in the swapped root: {ran['stdout']!r}")
        assert "writable by group and not sticky" in (after.get("reason") or ""), after
        await control.release("run-b")
