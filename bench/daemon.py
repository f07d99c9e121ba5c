"""Benchmark: acquire/release latency of the supervisor daemon, and memory per process.

    python bench/daemon.py [--slots 50]

Starts a real daemon, acquires N slots one after another (each answers once
its child is healthy), releases them one after another, and prints p50/p99
of both, the RSS/USS of the daemon and of the children, and how many
processes of the daemon's are left after the releases.
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
from tests._daemon import running_daemon  # noqa: E402


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, USS) in KiB; USS = private clean + private dirty."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if rest.strip().endswith("kB"):
                fields[name] = int(rest.split()[0])
    return fields["Rss"], fields["Private_Clean"] + fields["Private_Dirty"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(name: str, values: list[float]) -> str:
    return (f"{name:8s} p50 {percentile(values, 0.5):7.1f} ms  p99 {percentile(values, 0.99):7.1f} ms"
            f"  mean {statistics.fmean(values):7.1f} ms")


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        root.mkdir()
        async with running_daemon(Path(tmp), {"JEEVES_MCP_MAX_SLOTS": str(count + 1)}) as daemon:
            async with daemon.client() as control:
                acquire, release, pids = [], [], []
                for n in range(count):
                    started = time.perf_counter()
                    slot = await control.acquire(f"bench-{n}", root)
                    acquire.append((time.perf_counter() - started) * 1000)
                    assert slot["state"] == "running", slot
                    pids.append(slot["pid"])
                daemon_rss, daemon_uss = memory_kib(daemon.process.pid)
                child_memory = [memory_kib(pid) for pid in pids]
                for n in range(count):
                    started = time.perf_counter()
                    await control.release(f"bench-{n}")
                    release.append((time.perf_counter() - started) * 1000)
                left = daemon.our_processes()
    rss = [m[0] / 1024 for m in child_memory]
    uss = [m[1] / 1024 for m in child_memory]
    print(f"{count} slots, sequential, cold children (each acquire waits for a healthy child)")
    print(line("acquire", acquire))
    print(line("release", release))
    print(f"daemon   RSS {daemon_rss / 1024:.1f} MiB  USS {daemon_uss / 1024:.1f} MiB (with {count} slots)")
    print(f"child    RSS mean {statistics.fmean(rss):.1f} MiB  USS mean {statistics.fmean(uss):.1f} MiB"
          f"  (max RSS {max(rss):.1f} MiB)")
    print(f"processes left after releasing all: {len(left)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=50)
    trio.run(main, parser.parse_args().slots)
