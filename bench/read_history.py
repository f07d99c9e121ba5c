"""Benchmark: what the history prior costs a focused `read`, through a real child.

    python bench/read_history.py [--repo DIR] [--files 40]

Two children on the same git working tree (default: this project's own), one with
`history_timeout_ms` 1000 (the default) and one with 0 (history off), read the `--files`
largest tracked .py files with a context_focus_question, twice each. Prints p50/p95 of
the call's wall time without history, with history on a file's first read (git rev-list
and git blame run), and on its second read (the blame is cached), and how many reads
got a prior (the view then differs from the one without history).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests._child import running_child, tool_json  # noqa: E402
from tests.test_http import call  # noqa: E402

QUESTION = "where are errors handled and reported?"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def largest_python_files(repo: Path, count: int) -> list[str]:
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "*.py"], capture_output=True,
                            text=True, check=True).stdout.split()
    sized = [(repo.joinpath(p).stat().st_size, p) for p in listed if repo.joinpath(p).is_file()]
    return [p for _, p in sorted(sized, reverse=True)[:count]]


async def timed_reads(repo: Path, files: list[str], history_ms: int) -> tuple[list[float], list[float], list[str]]:
    """Wall ms of each file's first and second focused read, and the first views."""
    first, second, views = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        env = {"JEEVES_MCP_HISTORY_TIMEOUT_MS": str(history_ms)}
        async with running_child(repo, Path(tmp), env=env) as child, httpx.AsyncClient(
            headers=child.headers(), timeout=60
        ) as http:
            await call(http, child, "read", {"path": files[0]})  # warm-up: imports, engine
            for path in files:
                for times in (first, second):
                    t0 = time.perf_counter()
                    result = await call(http, child, "read", {"path": path, "context_focus_question": QUESTION})
                    times.append((time.perf_counter() - t0) * 1000)
                    if times is first:
                        views.append(json.dumps(tool_json(result)["content"]))
    return first, second, views


async def main(repo: Path, count: int) -> None:
    files = largest_python_files(repo, count)
    off_first, off_second, off_views = await timed_reads(repo, files, 0)
    on_first, on_second, on_views = await timed_reads(repo, files, 1000)
    differ = sum(a != b for a, b in zip(off_views, on_views, strict=True))
    print(f"{len(files)} largest .py files of {repo}, focused read twice each")
    for label, values in (("history off", off_first + off_second), ("history on, first read", on_first),
                          ("history on, second read (cached)", on_second)):
        print(f"  {label:34} p50 {percentile(values, 0.5):6.1f} ms  p95 {percentile(values, 0.95):6.1f} ms")
    print(f"  views that the history prior changed: {differ} of {len(files)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, default=ROOT, help="a git working tree (default: this project)")
    parser.add_argument("--files", type=int, default=40, help="how many of its largest .py files to read")
    args = parser.parse_args()
    trio.run(main, args.repo.resolve(), args.files)
