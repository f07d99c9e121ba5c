"""A child names its run in ps: /proc/PID/cmdline of a real child of a real daemon, forked from
the fork server or started cold, says which run it serves (not `python -m jeeves_mcp.zygote 14`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_mcp.proc import processes_with_env
from tests._daemon import running_daemon


def cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().replace(b"\0", b" ").decode().strip()


def comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as handle:
        return handle.read().strip()


@pytest.mark.parametrize("fork_server", ["true", "false"])
async def test_a_child_names_its_run_in_its_command_line(tmp_path: Path, run_root: Path, fork_server: str) -> None:
    async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon, \
            daemon.client() as control:
        slot = await control.acquire("title-run-7", run_root)
        pid = slot["pid"]
        title = cmdline(pid)
        name = comm(pid)
        # The daemon still finds its children by their environment (stray kill, re-adoption):
        # the title must not overwrite /proc/PID/environ.
        ours = processes_with_env(f"JEEVES_MCP_STATE_DIR={daemon.state_dir}".encode())
        await control.release("title-run-7")
    assert title.startswith(f"jeeves-pruner title-run-7 port={slot['port']}"), title
    assert "zygote" not in title
    assert name == "jeeves-pruner"
    assert pid in ours
