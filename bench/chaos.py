"""Chaos: slots under load while children and the daemon are SIGKILLed.

    python bench/chaos.py [--slots 50] [--child-kills 100] [--daemon-kills 3] [--interval 1.0]

A real daemon with `--slots` slots; `--slots // 2` clients call read/grep/bash
through the slots' MCP endpoints the whole time. Every `--interval` seconds a
random slot's child gets SIGKILL (often while it runs a long `bash` command,
whose process must die with it); `--daemon-kills` times the daemon itself is
SIGKILLed, a child is killed while it is down, and it is restarted and must
re-adopt. Events are recorded from /v1/events across the restarts.

Afterwards every slot must be `running` or `degraded`, its last recorded event
must say so, no slot record may be lost, each running slot must answer a call
with the token it got at acquire, and once all slots are released not one
process of ours may remain: counted by the state-dir marker, by the children's
tree marks (their commands), by process group/session of every child we saw,
and by the children of the daemon and of every pruner (a subreaper).
Exits 1 when a check fails. `tests/test_chaos.py` runs a small version.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jeeves_mcp.proc import proc_stat, process_alive
from jeeves_mcp.supervisor.child import tree_mark
from tests._daemon import Daemon, running_daemon, stop_group

EXPLAINS = {
    "running": {"mcp_pruner.ready", "mcp_pruner.restarted", "mcp_pruner.adopted"},
    "degraded": {"mcp_pruner.degraded"},
}
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": "hello.py"}),
    ("grep", {"pattern": "def ", "paths": ["."]}),
    ("bash", {"cmd": "echo hi; ls", "timeout_ms": 10000}),
    ("bash", {"cmd": "sleep 0.3; echo slept", "timeout_ms": 10000}),
]
# A command still running when its pruner dies: it must not outlive the slot.
LONG_CMD = {"cmd": "sleep 600", "timeout_ms": 900_000}
# A request id is the session's while the request is in flight: a request queued on a slot's
# port while its child restarts is served by the next child, and may still be running.
REQUEST_IDS = itertools.count(1)


@dataclass
class Figures:
    slots: int = 0
    child_kills: int = 0
    child_kills_while_down: int = 0
    kills_with_running_command: int = 0
    daemon_kills: int = 0
    events: int = 0
    restarts_observed: int = 0
    readoptions: int = 0
    running: int = 0
    degraded: int = 0
    calls_ok: int = 0
    calls_failed: int = 0
    recovery_s: list[float] = field(default_factory=list)
    not_recovered: int = 0
    daemon_recovery_s: list[float] = field(default_factory=list)
    left_released: dict[str, list[int]] = field(default_factory=dict)
    left_stopped: dict[str, list[int]] = field(default_factory=dict)
    explained_by_log_only: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    duration_s: float = 0.0


class EventRecorder:
    """Every event of /v1/events, reconnecting across daemon restarts."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.events: list[dict[str, Any]] = []
        self.connections = 0
        self.connected = trio.Event()

    async def run(self) -> None:
        while True:
            transport = httpx.AsyncHTTPTransport(uds=str(self.daemon.socket))
            try:
                async with httpx.AsyncClient(transport=transport, base_url="http://d", timeout=None) as http:
                    async with http.stream("GET", "/v1/events") as response:
                        async for line in response.aiter_lines():
                            if line == ": connected":
                                self.connections += 1
                                self.connected.set()
                            elif line.startswith("data: "):
                                event = json.loads(line[6:])
                                event["_connection"] = self.connections
                                self.events.append(event)
            except httpx.HTTPError:
                pass
            self.connected = trio.Event()
            await trio.sleep(0.01)

    def for_run(self, run_id: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("run_id") == run_id]


def environ(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


class Ours:
    """What identifies a process of this run: markers, groups and parents seen so far."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.marker = f"JEEVES_MCP_STATE_DIR={daemon.state_dir}".encode()
        self.trees: set[bytes] = set()
        self.pids: set[int] = set()  # children and daemons seen: their groups/sessions are ours

    def add_token(self, token: str) -> None:
        self.trees.add(f"JEEVES_MCP_TREE={tree_mark(token)}".encode())

    def note(self) -> None:
        """Remember the pids of everything carrying our marks now (children, zygotes)."""
        for pid in all_pids():
            env = environ(pid)
            if self.marker in env or self.trees.intersection(env):
                self.pids.add(pid)
        if self.daemon.process is not None:
            self.pids.add(self.daemon.process.pid)

    def left(self, exclude: set[int]) -> dict[str, list[int]]:
        """Live processes of ours, by how they were found (`exclude`: the daemon, its zygote)."""
        found: dict[str, list[int]] = {"marker": [], "tree": [], "group": [], "parent": []}
        me = os.getpid()
        for pid in all_pids():
            if pid in exclude or pid == me or not process_alive(pid):
                continue
            env = environ(pid)
            fields = proc_stat(pid)
            if self.marker in env:
                found["marker"].append(pid)
            if self.trees.intersection(env):
                found["tree"].append(pid)
            if fields is not None:
                ppid, pgrp, session = (int(x) for x in fields[1:4])
                if {pgrp, session} & self.pids:
                    found["group"].append(pid)
                if ppid in self.pids:
                    found["parent"].append(pid)
        return {how: pids for how, pids in found.items() if pids}


def zygote_pids(daemon: Daemon) -> set[int]:
    return {pid for pid in daemon.fork_server_pids() if process_alive(pid)}


async def tool_call(http: httpx.AsyncClient, slot: dict[str, Any], name: str, arguments: dict[str, Any],
                    timeout: float = 10) -> bool:  # noqa: ASYNC109 - httpx's own timeout
    try:
        response = await http.post(
            slot["mcp"]["url"].removesuffix("/mcp") + "/rpc", headers=slot["mcp"]["headers"], timeout=timeout,
            json={"jsonrpc": "2.0", "id": next(REQUEST_IDS), "method": "tools/call",
                  "params": {"name": name, "arguments": arguments}},
        )
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return False
    return response.status_code == 200 and isinstance(body.get("result"), dict) and not body["result"].get("isError")


async def control_call(daemon: Daemon, method: str, *args: Any, timeout: float = 30) -> Any:  # noqa: ASYNC109
    """A control request, retried while the daemon is down or restarting."""
    from jeeves_mcp.client import ControlError, DaemonUnavailable

    with trio.fail_after(timeout):
        while True:
            try:
                async with daemon.client() as control:
                    return await getattr(control, method)(*args)
            except DaemonUnavailable:
                await trio.sleep(0.05)
            except ControlError as exc:
                if exc.status is None or exc.status >= 500:
                    await trio.sleep(0.05)
                    continue
                raise


async def chaos(tmp: Path, *, slots: int, child_kills: int, daemon_kills: int, interval_s: float,
                clients: int | None = None, env: dict[str, str] | None = None, seed: int | None = None) -> Figures:
    rng = random.Random(seed)
    figures = Figures(slots=slots)
    root = tmp / "run"
    root.mkdir()
    (root / "hello.py").write_text("def hello():\n    return 'hi'\n" * 20)
    daemon_env = {"JEEVES_MCP_MAX_SLOTS": str(slots + 5), **(env or {})}
    started_at = time.monotonic()
    async with running_daemon(tmp, daemon_env) as daemon, trio.open_nursery() as nursery:
        ours = Ours(daemon)
        recorder = EventRecorder(daemon)
        nursery.start_soon(recorder.run)
        with trio.fail_after(10):
            await recorder.connected.wait()
        acquired: dict[str, dict[str, Any]] = {}
        async with daemon.client() as control, trio.open_nursery() as acquiring:
            for n in range(slots):
                async def acquire(run_id: str = f"chaos-{n}") -> None:
                    acquired[run_id] = await control.acquire(run_id, root)
                acquiring.start_soon(acquire)
        for run_id, slot in acquired.items():
            if slot["state"] != "running":
                figures.problems.append(f"{run_id} acquired {slot['state']}: {slot.get('reason')}")
            ours.add_token(slot["mcp"]["headers"]["Authorization"].removeprefix("Bearer "))
        ours.note()
        pids = {run_id: slot["pid"] for run_id, slot in acquired.items()}
        run_ids = sorted(acquired)
        daemon_up = True

        stop_load = trio.Event()

        async def load_client() -> None:
            async with httpx.AsyncClient(limits=httpx.Limits(max_connections=1)) as http:
                while not stop_load.is_set():
                    slot = acquired[rng.choice(run_ids)]
                    name, arguments = rng.choice(CALLS)
                    if await tool_call(http, slot, name, arguments):
                        figures.calls_ok += 1
                    else:
                        figures.calls_failed += 1
                        await trio.sleep(0.05)  # a dead endpoint refuses at once: do not spin

        async def long_command(slot: dict[str, Any], running: trio.Event) -> None:
            async with httpx.AsyncClient() as http:
                nursery.start_soon(_set_when_sleeping, slot, running)
                await tool_call(http, slot, "bash", LONG_CMD, timeout=900)

        async def _set_when_sleeping(slot: dict[str, Any], running: trio.Event) -> None:
            mark = f"JEEVES_MCP_TREE={tree_mark(slot['mcp']['headers']['Authorization'][7:])}".encode()
            with trio.move_on_after(3):
                while True:  # nothing to wait on but /proc
                    if any(mark in environ(pid) and b"sleep" in _cmdline(pid) for pid in all_pids()):
                        running.set()
                        return
                    await trio.sleep(0.05)

        async def recovery(run_id: str, killed_at: float, after: int) -> None:
            slot = acquired[run_id]
            base = slot["mcp"]["url"].removesuffix("/mcp")
            async with httpx.AsyncClient(timeout=2) as http:
                with trio.move_on_after(60):
                    while True:
                        if any(e["event"] == "mcp_pruner.degraded" for e in recorder.for_run(run_id)[after:]):
                            return  # no recovery to expect
                        try:
                            if (await http.get(base + "/health")).status_code == 200 and _pid_changed(run_id):
                                figures.recovery_s.append(time.monotonic() - killed_at)
                                return
                        except httpx.HTTPError:
                            pass
                        await trio.sleep(0.02)
            figures.not_recovered += 1

        def child_of(run_id: str) -> int | None:
            """The run's child as the daemon last recorded it (its store outlives it)."""
            with contextlib.closing(sqlite3.connect(f"file:{daemon.state_dir / 'slots.sqlite3'}?mode=ro",
                                                    uri=True, timeout=1)) as db:
                row = db.execute("SELECT pid FROM slots WHERE run_id = ? AND state = 'running'",
                                 (run_id,)).fetchone()
            return None if row is None or row[0] is None else int(row[0])

        def _pid_changed(run_id: str) -> bool:
            old = pids[run_id]
            return not process_alive(old)

        async def kill_a_child(while_down: bool) -> None:
            nonlocal pids
            for _ in range(20):
                run_id = rng.choice(run_ids)
                if daemon_up:
                    try:
                        current = await control_call(daemon, "get", run_id)
                    except Exception:  # a slot gone is checked at the end
                        continue
                    if current["state"] != "running" or current["pid"] is None:
                        continue
                    pids[run_id] = current["pid"]
                else:
                    # No daemon to ask: the run's child may have been restarted since its pid
                    # was last noted (a stale pid made every pick fail now and then).
                    found = child_of(run_id)
                    if found is None:
                        continue
                    pids[run_id] = found
                pid = pids[run_id]
                if not process_alive(pid) or ours.marker not in environ(pid):
                    continue
                ours.note()
                running = trio.Event()
                if rng.random() < 0.5:
                    nursery.start_soon(long_command, acquired[run_id], running)
                    with trio.move_on_after(3.5):
                        await running.wait()
                after = len(recorder.for_run(run_id))
                os.kill(pid, signal.SIGKILL)
                figures.child_kills += 1
                figures.child_kills_while_down += while_down
                figures.kills_with_running_command += running.is_set()
                nursery.start_soon(recovery, run_id, time.monotonic(), after)
                return

        load = trio.open_nursery()
        async with load as load_nursery:
            for _ in range(clients or max(1, slots // 2)):
                load_nursery.start_soon(load_client)
            daemon_kill_at = {round((i + 1) * child_kills / (daemon_kills + 1)) for i in range(daemon_kills)}
            for n in range(child_kills):
                await trio.sleep(interval_s)
                if n in daemon_kill_at:
                    ours.note()
                    os.kill(daemon.process.pid, signal.SIGKILL)
                    killed_at = time.monotonic()
                    await daemon.process.wait()
                    daemon_up = False
                    figures.daemon_kills += 1
                    await kill_a_child(while_down=True)
                    daemon.process = await daemon.restart()  # type: ignore[attr-defined]
                    await daemon.wait_ready(figures.daemon_kills + 1)
                    figures.daemon_recovery_s.append(time.monotonic() - killed_at)
                    daemon_up = True
                    ours.note()
                else:
                    await kill_a_child(while_down=False)
            stop_load.set()

        # Let the restarts settle: no slot starting any more.
        listed: list[dict[str, Any]] = []
        with trio.move_on_after(60):
            while True:
                listed = (await control_call(daemon, "list"))["slots"]
                if not any(slot["state"] == "starting" for slot in listed):
                    break
                await trio.sleep(0.2)
        await trio.sleep(0.5)  # events of the last transitions reach the recorder
        ours.note()
        check_slots(figures, acquired, listed, recorder, daemon_log_events(daemon))
        async with httpx.AsyncClient() as http:
            for slot in listed:
                if slot["state"] == "running":
                    same = slot["mcp"] == acquired[slot["run_id"]]["mcp"]
                    if not same or not await tool_call(http, acquired[slot["run_id"]], "read", {"path": "hello.py"}):
                        figures.problems.append(f"{slot['run_id']}: running but a call with its token fails")

        async with daemon.client() as control, trio.open_nursery() as releasing:
            for slot in listed:
                releasing.start_soon(control.release, slot["run_id"])
        remaining = (await control_call(daemon, "list"))["slots"]
        if remaining:
            figures.problems.append(f"slots left after releasing all: {[s['run_id'] for s in remaining]}")
        await trio.sleep(0.2)
        exclude = {daemon.process.pid, *zygote_pids(daemon)}
        figures.left_released = ours.left(exclude)
        await stop_group(daemon.process)
        figures.left_stopped = ours.left(set())
        for when, left in (("after release", figures.left_released), ("after daemon stop", figures.left_stopped)):
            if left:
                figures.problems.append(f"processes left {when}: {left} {describe(left)}")
        for pid in {pid for found in figures.left_stopped.values() for pid in found}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # counted as a problem; never leak them past the run
        figures.events = len(recorder.events)
        figures.restarts_observed = sum(e["event"] == "mcp_pruner.restarted" for e in recorder.events)
        figures.readoptions = _readoptions(daemon)
        nursery.cancel_scope.cancel()
    figures.duration_s = time.monotonic() - started_at
    return figures


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def describe(left: dict[str, list[int]]) -> str:
    pids = sorted({pid for found in left.values() for pid in found})
    lines = [(pid, _cmdline(pid).replace(b"\0", b" ").decode(errors="replace")[:80]) for pid in pids]
    return "; ".join(f"{pid}: {cmd}" for pid, cmd in lines)


def _readoptions(daemon: Daemon) -> int:
    return sum('"mcp_pruner.adopted"' in line for line in daemon.log_path.read_text().splitlines())


def check_slots(figures: Figures, acquired: dict[str, dict[str, Any]], listed: list[dict[str, Any]],
                recorder: EventRecorder, logged: list[dict[str, Any]]) -> None:
    by_id = {slot["run_id"]: slot for slot in listed}
    lost = sorted(set(acquired) - set(by_id))
    if lost:
        figures.problems.append(f"slot records lost: {lost}")
    for run_id, slot in by_id.items():
        state = slot["state"]
        figures.running += state == "running"
        figures.degraded += state == "degraded"
        if state not in EXPLAINS:
            figures.problems.append(f"{run_id} is {state} ({slot.get('reason')})")
            continue
        if explained(recorder.for_run(run_id), state):
            continue
        # /v1/events has no replay: what a restarted daemon publishes while it
        # reconciles, before its API serves, reaches no subscriber. Its log has it.
        if explained([e for e in logged if e.get("run_id") == run_id], state):
            figures.explained_by_log_only.append(run_id)
            continue
        last = [e["event"] for e in recorder.for_run(run_id) if "state" in e][-1:]
        figures.problems.append(f"{run_id} is {state} but its last event is {last}")


def explained(events: list[dict[str, Any]], state: str) -> bool:
    stateful = [e for e in events if "state" in e]
    return bool(stateful) and stateful[-1]["state"] == state and stateful[-1]["event"] in EXPLAINS[state]


def daemon_log_events(daemon: Daemon) -> list[dict[str, Any]]:
    events = []
    for line in daemon.log_path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(figures: Figures) -> str:
    left = lambda found: sum(len(set(p)) for p in found.values())  # noqa: E731
    return "\n".join([
        f"chaos: {figures.slots} slots, {figures.duration_s:.0f} s",
        f"  child SIGKILLs: {figures.child_kills} ({figures.child_kills_while_down} while the daemon was down, "
        f"{figures.kills_with_running_command} during a running bash command)",
        f"  daemon SIGKILLs: {figures.daemon_kills}; back (READY=1) after p50 {pct(figures.daemon_recovery_s, .5):.2f} s, "
        f"max {max(figures.daemon_recovery_s, default=float('nan')):.2f} s; re-adoptions {figures.readoptions}",
        f"  events recorded: {figures.events}; restarts observed: {figures.restarts_observed}",
        f"  child recovery (kill to healthy on the same port): n={len(figures.recovery_s)} "
        f"p50 {pct(figures.recovery_s, .5):.2f} s, p99 {pct(figures.recovery_s, .99):.2f} s, "
        f"max {max(figures.recovery_s, default=float('nan')):.2f} s; not recovered (degraded or lost): "
        f"{figures.not_recovered}",
        f"  final: {figures.running} running, {figures.degraded} degraded; final state explained by the "
        f"daemon log but by no /v1/events event (published before the API served): "
        f"{len(figures.explained_by_log_only)}",
        f"  tool calls during chaos: {figures.calls_ok} ok, {figures.calls_failed} failed",
        f"  processes left after releasing all: {left(figures.left_released)}; "
        f"after stopping the daemon: {left(figures.left_stopped)}",
        *(f"  PROBLEM: {problem}" for problem in figures.problems),
    ])


async def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="jeeves-chaos-") as tmp:
        figures = await chaos(
            Path(tmp), slots=args.slots, child_kills=args.child_kills, daemon_kills=args.daemon_kills,
            interval_s=args.interval, seed=args.seed,
            env={"JEEVES_MCP_HEALTH_INTERVAL_S": "1.0", "JEEVES_MCP_HEALTH_FAILURES": "3"},
        )
    print(report(figures))
    return 1 if figures.problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--child-kills", type=int, default=100)
    parser.add_argument("--daemon-kills", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    sys.exit(trio.run(main, parser.parse_args()))
