"""Hostile `bash` commands through a real child: each tree dies on timeout, exit or
release, and output is capped without the child's memory growing (bench/process_trees.py)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from bench.process_trees import cases, kill_all, probed, run_case, setpriv_works, vm_hwm_mib
from tests._child import Child, running_child
from tests._daemon import running_daemon

MEMORY_BOUND_MIB = 200  # a memory bound, not a timing one


@pytest.fixture
async def child(tmp_path: Path) -> AsyncIterator[Child]:
    root = tmp_path / "ws"
    root.mkdir()
    async with running_child(root, tmp_path) as started:
        yield started


@pytest.mark.parametrize("case", cases(1.0), ids=lambda case: case.name)
async def test_hostile_command_leaves_nothing_and_memory_stays_bounded(child: Child, case) -> None:
    if case.needs_setpriv and not setpriv_works():
        pytest.skip("RLIMIT_NPROC binds only an unprivileged user: needs root and setpriv to drop to another uid")
    async with httpx.AsyncClient() as http:
        with trio.fail_after(case.timeout_ms / 1000 + 60):
            outcome = await run_case(http, child.base, child.headers(), case)
    assert outcome["left"] == []
    assert outcome["code"] == case.expect
    if "GB" in case.name:
        assert outcome["stdout_bytes"] == 1_000_000_000
        assert outcome["response_bytes"] < 1_000_000  # capped, then within the response budget
    assert vm_hwm_mib(child.process.pid) < MEMORY_BOUND_MIB


async def test_releasing_the_slot_kills_a_running_command_tree(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    probe = secrets.token_hex(6)
    async with running_daemon(tmp_path) as daemon, daemon.client() as control, trio.open_nursery() as nursery:
        slot = await control.acquire("hostile", root)

        async def command() -> None:
            async with httpx.AsyncClient(timeout=60) as http:
                try:
                    await http.post(
                        slot["mcp"]["url"].removesuffix("/mcp") + "/rpc", headers=slot["mcp"]["headers"],
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "bash", "arguments": {
                            "cmd": "trap '' TERM; (setsid sleep 600 &); sleep 600", "timeout_ms": 600_000,
                            "env": {"JEEVES_PROBE": probe}}}},
                    )
                except httpx.HTTPError:
                    pass  # the child goes away under it

        nursery.start_soon(command)
        try:
            with trio.fail_after(10):
                while len(probed(probe)) < 2:  # noqa: ASYNC110 - a /proc scan
                    await trio.sleep(0.05)
            await control.release("hostile")
            assert probed(probe) == []
            assert daemon.our_processes() == []
        finally:
            kill_all(probed(probe))
