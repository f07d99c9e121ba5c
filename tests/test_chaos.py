"""Chaos, small: slots under load while children and the daemon are SIGKILLed
(the long run is `make chaos`, bench/chaos.py), and the bugs it found."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from bench.chaos import chaos, environ, report
from jeeves_mcp.proc import become_subreaper, proc_stat, process_alive
from jeeves_mcp.supervisor.child import tree_mark
from tests._daemon import Daemon, running_daemon, watch_events


def _ppid(pid: int) -> int | None:
    fields = proc_stat(pid)
    return int(fields[1]) if fields is not None else None


def tree_pids(slot: dict[str, Any]) -> list[int]:
    """Live processes carrying the slot child's tree mark, but for the child: its bash commands."""
    mark = f"JEEVES_MCP_TREE={tree_mark(slot['mcp']['headers']['Authorization'][7:])}".encode()
    found = [int(p) for p in os.listdir("/proc") if p.isdigit() and mark in environ(int(p)) and process_alive(int(p))]
    return [pid for pid in found if pid != slot["pid"]]


async def call(slot: dict[str, Any], name: str, arguments: dict[str, Any], timeout_s: float = 10) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        response = await http.post(
            slot["mcp"]["url"].removesuffix("/mcp") + "/rpc", headers=slot["mcp"]["headers"],
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
        )
    response.raise_for_status()
    return response.json()["result"]


async def crash_daemon(daemon: Daemon) -> None:
    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()


async def test_chaos_smoke(tmp_path: Path) -> None:
    with trio.fail_after(60):
        figures = await chaos(tmp_path, slots=5, child_kills=10, daemon_kills=1, interval_s=0.4, seed=6)
    print(report(figures))
    assert figures.problems == []
    assert (figures.child_kills, figures.daemon_kills) == (10, 1)
    assert figures.running + figures.degraded == 5
    assert figures.left_released == {} and figures.left_stopped == {}


@pytest.fixture
def reaper():
    """This test process is a subreaper, as an init that reaps orphans is in production."""
    assert become_subreaper(True)
    yield
    become_subreaper(False)


def kill_and_reap(pid: int) -> None:
    """SIGKILL an orphaned child (now ours) and reap it, as init would."""
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


async def test_a_child_that_died_while_the_daemon_was_down_is_restarted_not_dropped(tmp_path: Path, reaper: None) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "hello.py").write_text("print('hi')\n")
    async with running_daemon(tmp_path) as daemon:
        async with daemon.client() as control:
            slot = await control.acquire("orphan", root)
        await crash_daemon(daemon)
        with trio.fail_after(10):
            while _ppid(slot["pid"]) != os.getpid():  # noqa: ASYNC110 - the zygote exits on EOF
                await trio.sleep(0.02)
        kill_and_reap(slot["pid"])
        daemon.process = await daemon.restart()  # type: ignore[attr-defined]
        await daemon.wait_ready(2)
        async with daemon.client() as control, watch_events(daemon) as log:
            now = await control.get("orphan")
            if now["state"] != "running":
                await log.wait_for("mcp_pruner.restarted", "orphan")
                now = await control.get("orphan")
            assert (now["state"], now["mcp"], now["restarts"]) == ("running", slot["mcp"], 1)
            assert (await call(now, "read", {"path": "hello.py"}))["isError"] is False
            await control.release("orphan")
        assert daemon.our_processes() == []


async def test_the_commands_of_a_killed_child_die_with_it_also_when_the_slot_degrades(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    env = {"JEEVES_MCP_MAX_RESTARTS": "0", "JEEVES_MCP_FORK_SERVER": "false"}  # the daemon reaps the child
    async with running_daemon(tmp_path, env) as daemon, trio.open_nursery() as nursery:
        async with daemon.client() as control, watch_events(daemon) as log:
            slot = await control.acquire("busy", root)

            async def long_command() -> None:
                with trio.move_on_after(30):
                    try:
                        await call(slot, "bash", {"cmd": "sleep 600", "timeout_ms": 600_000}, timeout_s=30)
                    except httpx.HTTPError:
                        pass  # the child dies under it

            nursery.start_soon(long_command)
            try:
                with trio.fail_after(10):
                    while not (commands := tree_pids(slot)):  # noqa: ASYNC110 - a /proc scan
                        await trio.sleep(0.05)
                os.kill(slot["pid"], signal.SIGKILL)
                await log.wait_for("mcp_pruner.degraded", "busy")
                assert [pid for pid in commands if process_alive(pid)] == []
                await control.release("busy")
                assert tree_pids(slot) == []
            finally:
                for pid in tree_pids(slot):  # never leak, even when an assertion failed
                    os.kill(pid, signal.SIGKILL)
