"""An acquire when no loopback port is free: the daemon is full, not the run broken.

A run's bash can bind every ephemeral port on 127.0.0.1 (28k of them); the next acquire then
failed as `degraded: internal error: OSError: [Errno 98]` with a traceback in the log, and held
a slot until released. The daemon runs here in a network namespace of its own whose
ephemeral range is one port, so the second acquire finds none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jeeves_mcp.client import ControlError
from tests._daemon import running_daemon

PORT = 40_000


def python_in_a_namespace_with_one_port(tmp_path: Path) -> str:
    """An interpreter wrapper: a new network namespace whose ephemeral range is PORT alone."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    narrowed = subprocess.run(  # a container may refuse a network namespace
        ["unshare", "--net", "sh", "-c", f"echo '{PORT} {PORT}' > /proc/sys/net/ipv4/ip_local_port_range"],
        capture_output=True, check=False,
    )
    if narrowed.returncode != 0:
        pytest.skip(f"no network namespace here: {narrowed.stderr.decode().strip()[:200]}")
    wrapper = tmp_path / "python-one-port"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec unshare --net sh -c 'echo \"{PORT} {PORT}\" > /proc/sys/net/ipv4/ip_local_port_range "
        f"&& exec \"$0\" \"$@\"' {sys.executable} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return str(wrapper)


async def test_an_acquire_with_no_free_loopback_port_is_refused_as_overloaded(tmp_path: Path, run_root: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a network namespace of its own needs root")
    python = python_in_a_namespace_with_one_port(tmp_path)
    async with running_daemon(tmp_path, python=python) as daemon, daemon.client() as control:
        first = await control.acquire("first", run_root)
        assert first["state"] == "running" and first["port"] == PORT, first
        with pytest.raises(ControlError) as refused:
            await control.acquire("second", run_root)
        assert refused.value.status == 429 and refused.value.code == "QUEUE_OVERLOADED", refused.value
        assert "no free port on 127.0.0.1" in refused.value.message, refused.value.message
        listed = await control.list()
        assert [slot["run_id"] for slot in listed["slots"]] == ["first"], listed  # no place held
        await control.release("first")
        again = await control.acquire("second", run_root)  # the port is free again
        assert again["state"] == "running" and again["port"] == PORT, again
        await control.release("second")
