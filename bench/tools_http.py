"""Benchmark: tools/list size and `read` round-trip over HTTP against a real child.

    python bench/tools_http.py [--calls 2000]

Prints the minified tools/list size, and for one client on one keep-alive
connection: p50/p99 latency of `read` on a 10 KB file and calls per second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests._child import running_child


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        body = "".join(f"def function_{n}(value):\n    return value * {n}\n\n" for n in range(300))
        (root / "module.py").write_text(body[:10_240])
        async with running_child(root, Path(tmp)) as child, httpx.AsyncClient(
            headers={**child.headers(), "Accept": "application/json, text/event-stream",
                     "Content-Type": "application/json"},
        ) as http:
            init = await http.post(child.url, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "0"}}})
            session = {"Mcp-Session-Id": init.headers["mcp-session-id"],
                       "MCP-Protocol-Version": "2025-11-25"}
            listed = await http.post(child.url, headers=session,
                                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            tools = listed.json()["result"]
            size = len(json.dumps(tools, separators=(",", ":"), ensure_ascii=False).encode())
            request = {"jsonrpc": "2.0", "method": "tools/call",
                       "params": {"name": "read", "arguments": {"path": "module.py"}}}
            latencies = []
            for n in range(50):  # warm-up
                await http.post(child.url, headers=session, json={**request, "id": f"w{n}"})
            started = time.perf_counter()
            for n in range(calls):
                t0 = time.perf_counter()
                reply = await http.post(child.url, headers=session, json={**request, "id": n})
                latencies.append((time.perf_counter() - t0) * 1000)
                assert reply.status_code == 200 and not reply.json()["result"]["isError"]
            elapsed = time.perf_counter() - started
    print(f"tools/list result: {size} bytes minified ({len(tools['tools'])} tools)")
    print(f"read of a 10 KB file over /mcp, one client, {calls} calls:")
    print(f"  p50 {percentile(latencies, 0.50):.2f} ms  p99 {percentile(latencies, 0.99):.2f} ms"
          f"  mean {statistics.fmean(latencies):.2f} ms  {calls / elapsed:.0f} calls/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    trio.run(main, parser.parse_args().calls)
