"""Load: one child under many concurrent MCP clients; the daemon acquiring and
releasing among 100 slots while tool calls run.

    python bench/load.py [--clients 50] [--seconds 60] [--slots 100] [--cycles 200]

(1) `--clients` clients, one connection each, call read/grep/bash (a mix) on
one child's /mcp for `--seconds`: p50/p99 latency, calls/s, errors (by kind).
(2) A daemon holding `--slots` slots while 20 clients call tools through them:
`--cycles` acquire+release pairs by 10 concurrent workers; p50/p99 of each and
errors. Loopback only, stops by itself.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests._child import running_child
from tests._daemon import running_daemon

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read", {"path": "module.py"}),
    ("read", {"path": "module.py", "offset": 100, "limit": 50}),
    ("grep", {"pattern": "def function_1", "paths": ["."]}),
    ("bash", {"cmd": "echo hello; wc -l module.py"}),
]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def body(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": name, "arguments": arguments,
                       "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}


async def one_call(http: httpx.AsyncClient, url: str, headers: dict[str, str], n: int,
                   errors: Counter[str], rng: random.Random) -> float | None:
    name, arguments = rng.choice(CALLS)
    started = time.perf_counter()
    try:
        response = await http.post(url, headers={**headers, **HEADERS, "Mcp-Name": name}, json=body(n, name, arguments))
    except httpx.HTTPError as exc:
        errors[type(exc).__name__] += 1
        return None
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        errors[f"http {response.status_code}"] += 1
        return None
    try:
        result = response.json()["result"]
    except (ValueError, KeyError):
        errors[f"no result: {response.text[:80]}"] += 1
        return None
    if result.get("isError"):
        errors[f"tool error {json.loads(result['content'][0]['text']).get('code')}"] += 1
        return None
    return elapsed


async def child_under_load(clients: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        (root / "module.py").write_text("".join(f"def function_{n}(v):\n    return v * {n}\n\n" for n in range(400)))
        env = {"JEEVES_MCP_MAX_CONCURRENT_CALLS": str(clients)}
        async with running_child(root, Path(tmp), env=env) as child:
            latencies: list[float] = []
            errors: Counter[str] = Counter()
            deadline = trio.current_time() + seconds

            async def client(index: int) -> None:
                rng = random.Random(index)
                limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
                async with httpx.AsyncClient(limits=limits, timeout=30) as http:
                    n = 0
                    while trio.current_time() < deadline:
                        n += 1
                        latency = await one_call(http, child.url, child.headers(), n, errors, rng)
                        if latency is not None:
                            latencies.append(latency)

            started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for index in range(clients):
                    nursery.start_soon(client, index)
            elapsed = time.perf_counter() - started
    print(f"(1) one child, {clients} concurrent clients (one connection each), {seconds:g} s, read/grep/bash mix:")
    print(f"    {len(latencies)} calls ok, {len(latencies) / elapsed:.0f} calls/s, p50 {pct(latencies, .5):.1f} ms, "
          f"p99 {pct(latencies, .99):.1f} ms, max {max(latencies, default=float('nan')):.0f} ms; "
          f"errors {sum(errors.values())} {dict(errors)}")


async def daemon_under_load(slots: int, cycles: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        (root / "module.py").write_text("".join(f"def function_{n}(v):\n    return v * {n}\n\n" for n in range(400)))
        env = {"JEEVES_MCP_MAX_SLOTS": str(slots + 20), "JEEVES_MCP_HEALTH_INTERVAL_S": "2"}
        async with running_daemon(Path(tmp), env) as daemon, daemon.client() as control:
            held: list[dict[str, Any]] = []
            async with trio.open_nursery() as nursery:
                for n in range(slots):
                    async def acquire(run_id: str = f"held-{n}") -> None:
                        held.append(await control.acquire(run_id, root))
                    nursery.start_soon(acquire)
            acquire_ms: list[float] = []
            release_ms: list[float] = []
            control_errors: Counter[str] = Counter()
            call_errors: Counter[str] = Counter()
            calls: list[float] = []
            done = trio.Event()

            async def caller(index: int) -> None:
                rng = random.Random(index)
                async with httpx.AsyncClient(timeout=30) as http:
                    n = 0
                    while not done.is_set():
                        slot = rng.choice(held)
                        n += 1
                        latency = await one_call(http, slot["mcp"]["url"], slot["mcp"]["headers"], n, call_errors, rng)
                        if latency is not None:
                            calls.append(latency)

            queue = list(range(cycles))

            async def cycler() -> None:
                from jeeves_mcp.client import ControlError

                async with daemon.client() as own:
                    while queue:
                        run_id = f"cycle-{queue.pop()}"
                        try:
                            started = time.perf_counter()
                            slot = await own.acquire(run_id, root)
                            acquire_ms.append((time.perf_counter() - started) * 1000)
                            if slot["state"] != "running":
                                control_errors[f"acquired {slot['state']}"] += 1
                            started = time.perf_counter()
                            await own.release(run_id)
                            release_ms.append((time.perf_counter() - started) * 1000)
                        except ControlError as exc:
                            control_errors[exc.code] += 1

            async with trio.open_nursery() as nursery:
                for index in range(20):
                    nursery.start_soon(caller, index)
                async with trio.open_nursery() as cycling:
                    for _ in range(10):
                        cycling.start_soon(cycler)
                done.set()
            async with trio.open_nursery() as nursery:
                for slot in held:
                    nursery.start_soon(control.release, slot["run_id"])
            left = len(daemon.our_processes())
    print(f"(2) daemon holding {slots} slots, 20 clients calling tools through them, "
          f"{cycles} acquire+release cycles by 10 workers:")
    print(f"    acquire p50 {pct(acquire_ms, .5):.0f} ms, p99 {pct(acquire_ms, .99):.0f} ms; "
          f"release p50 {pct(release_ms, .5):.0f} ms, p99 {pct(release_ms, .99):.0f} ms; "
          f"control errors {sum(control_errors.values())} {dict(control_errors)}")
    print(f"    tool calls meanwhile: {len(calls)} ok, p50 {pct(calls, .5):.1f} ms, p99 {pct(calls, .99):.1f} ms, "
          f"errors {sum(call_errors.values())} {dict(call_errors)}; processes left: {left}")


async def main(args: argparse.Namespace) -> None:
    await child_under_load(args.clients, args.seconds)
    await daemon_under_load(args.slots, args.cycles)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--slots", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=200)
    trio.run(main, parser.parse_args())
