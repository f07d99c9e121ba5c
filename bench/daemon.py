"""Benchmark: the supervisor daemon's acquire/release latency and memory, cold vs forked.

    python bench/daemon.py [--slots 50] [--concurrent 100] [--burst 50]

For each spawn mode (cold interpreter per child, fork server) on a fresh
daemon: N sequential acquires (each answers once its child is healthy), then
N sequential releases; p50/p99 of both, RSS/USS of the daemon and of the
children, processes left. Then, with the fork server: `--concurrent` slots
held at once, while `--burst` of them are acquired concurrently and /healthz
is polled, with the /healthz p99 during the burst.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests._daemon import running_daemon


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, USS) in KiB; USS = private clean + private dirty."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0])
    return fields["Rss"], fields["Private_Clean"] + fields["Private_Dirty"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sequential(count: int, fork: bool) -> dict[str, float]:
    env = {"JEEVES_MCP_MAX_SLOTS": str(count + 1), "JEEVES_MCP_FORK_SERVER": str(fork).lower()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        async with running_daemon(Path(tmp), env) as daemon, daemon.client() as control:
            acquire, release, pids = [], [], []
            for n in range(count):
                started = time.perf_counter()
                slot = await control.acquire(f"bench-{n}", root)
                acquire.append((time.perf_counter() - started) * 1000)
                assert slot["state"] == "running", slot
                pids.append(slot["pid"])
            daemon_rss, daemon_uss = memory_kib(daemon.process.pid)
            children = [memory_kib(pid) for pid in pids]
            for n in range(count):
                started = time.perf_counter()
                await control.release(f"bench-{n}")
                release.append((time.perf_counter() - started) * 1000)
            left = len(daemon.our_processes())
    return {
        "acquire p50": pct(acquire, 0.5), "acquire p99": pct(acquire, 0.99),
        "release p50": pct(release, 0.5), "release p99": pct(release, 0.99),
        "child RSS": statistics.fmean(m[0] for m in children) / 1024,
        "child USS": statistics.fmean(m[1] for m in children) / 1024,
        "daemon RSS": daemon_rss / 1024, "daemon USS": daemon_uss / 1024,
        "left": left,
    }


async def scale(total: int, burst: int) -> None:
    env = {"JEEVES_MCP_MAX_SLOTS": str(total + 1)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        async with running_daemon(Path(tmp), env) as daemon, daemon.client() as control:
            for n in range(total - burst):
                await control.acquire(f"held-{n}", root)
            health: list[float] = []
            burst_done = trio.Event()

            async def poll_health() -> None:
                async with daemon.client() as probe:
                    while not burst_done.is_set():
                        started = time.perf_counter()
                        await probe.healthz()
                        health.append((time.perf_counter() - started) * 1000)
                        await trio.sleep(0.005)

            states: list[str] = []
            started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll_health)
                async with trio.open_nursery() as acquires:
                    for n in range(burst):
                        async def one(run_id: str = f"burst-{n}") -> None:
                            states.append((await control.acquire(run_id, root))["state"])
                        acquires.start_soon(one)
                burst_done.set()
            burst_s = time.perf_counter() - started
            running = sum(1 for s in (await control.list())["slots"] if s["state"] == "running")
            pids = [s["pid"] for s in (await control.list())["slots"]]
            uss = sum(memory_kib(pid)[1] for pid in pids) / 1024
            rss = sum(memory_kib(pid)[0] for pid in pids) / 1024
            release_started = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for slot in (await control.list())["slots"]:
                    nursery.start_soon(control.release, slot["run_id"])
            release_s = time.perf_counter() - release_started
            left = len(daemon.our_processes())
    print(f"\n{total} slots at once (fork server): {running} running; burst of {burst} concurrent acquires "
          f"took {burst_s * 1000:.0f} ms")
    print(f"  /healthz during the burst: {len(health)} calls, p50 {pct(health, 0.5):.1f} ms, "
          f"p99 {pct(health, 0.99):.1f} ms, max {max(health):.1f} ms")
    print(f"  children together: RSS {rss:.0f} MiB, USS {uss:.0f} MiB; "
          f"releasing all {total} concurrently took {release_s * 1000:.0f} ms; processes left: {left}")


async def main(count: int, total: int, burst: int) -> None:
    cold = await sequential(count, fork=False)
    forked = await sequential(count, fork=True)
    print(f"{count} sequential acquires then releases, each on a fresh daemon")
    print(f"{'':14s}{'cold':>10s}{'forked':>10s}{'ratio':>8s}")
    for key, unit in (("acquire p50", "ms"), ("acquire p99", "ms"), ("release p50", "ms"), ("release p99", "ms"),
                      ("child RSS", "MiB"), ("child USS", "MiB"), ("daemon RSS", "MiB"), ("daemon USS", "MiB"),
                      ("left", "")):
        ratio = cold[key] / forked[key] if forked[key] else float("nan")
        ratio_text = f"{ratio:7.1f}x" if key != "left" else ""
        print(f"{key + (' ' + unit if unit else ''):14s}{cold[key]:10.1f}{forked[key]:10.1f}{ratio_text:>8s}")
    if total:
        await scale(total, burst)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=50)
    parser.add_argument("--concurrent", type=int, default=100)
    parser.add_argument("--burst", type=int, default=50)
    args = parser.parse_args()
    trio.run(main, args.slots, args.concurrent, args.burst)
