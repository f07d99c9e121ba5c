"""Hostile `bash` commands through a real pruner child: all must die, memory stays bounded.

    python bench/process_trees.py [--gigabytes 1]

Each case runs through the child's /rpc endpoint with a probe variable in its
`env` (inherited by every descendant): a fork bomb bounded by RLIMIT_NPROC (as
an unprivileged uid of its own via setpriv, since root ignores the limit), a
double-forked `setsid` daemon, a command ignoring SIGTERM, and one writing
`--gigabytes` GB to stdout. Printed: how the call ended, its duration, the
processes left with the probe (or run as the bomb's uid), and the pruner child's peak
RSS (VmHWM) after each case. `tests/test_process_trees.py` asserts the same.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import secrets
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from jeeves_mcp.proc import process_alive
from tests._child import kill_all, running_child

NPROC_LIMIT = 64


def unused_uid() -> int:
    """A uid no process runs as and no passwd entry names: RLIMIT_NPROC counts every process
    of a uid on the machine, so the bomb must not share one with another run's commands."""
    busy = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                busy.add(os.stat(f"/proc/{name}").st_uid)
            except OSError:
                continue
    while True:
        uid = secrets.randbelow(100_000) + 200_000
        try:
            pwd.getpwuid(uid)
        except KeyError:
            if uid not in busy:
                return uid


BOMB_UID = unused_uid()


@dataclass
class Case:
    name: str
    cmd: str
    timeout_ms: int
    expect: str  # the error code the call ends with, "" for success
    needs_setpriv: bool = False


def cases(gigabytes: float = 1.0) -> list[Case]:
    size = int(gigabytes * 1_000_000_000)
    return [
        Case("fork bomb (RLIMIT_NPROC)",
             f"setpriv --reuid={BOMB_UID} --regid={BOMB_UID} --clear-groups "
             f"bash -c 'ulimit -u {NPROC_LIMIT}; b() {{ b | b & }}; b; sleep 600' 2>/dev/null",
             2000, "TOOL_TIMEOUT", needs_setpriv=True),
        Case("double-forked setsid daemon",
             "(setsid bash -c 'sleep 600 & sleep 600' &); (setsid sleep 600 &); echo started", 10_000, ""),
        Case("ignores SIGTERM", "trap '' TERM; bash -c \"trap '' TERM; sleep 600\" & sleep 600", 1000,
             "TOOL_TIMEOUT"),
        Case(f"{gigabytes:g} GB to stdout", f"head -c {size} /dev/zero | tr '\\0' 'x'", 120_000, ""),
    ]


def setpriv_works() -> bool:
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


def vm_hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise ValueError("no VmHWM")


def probed(probe: str) -> list[int]:
    """Live processes carrying the probe, or run as the fork bomb's uid."""
    wanted = f"JEEVES_PROBE={probe}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if not process_alive(pid):
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                env = handle.read().split(b"\0")
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            continue
        if wanted in env or uid == BOMB_UID:
            found.append(pid)
    return found


async def run_case(http: httpx.AsyncClient, base: str, headers: dict[str, str], case: Case) -> dict[str, Any]:
    probe = secrets.token_hex(6)
    started = time.monotonic()
    response = await http.post(
        base + "/rpc", headers=headers, timeout=case.timeout_ms / 1000 + 60,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "bash", "arguments": {
            "cmd": case.cmd, "timeout_ms": case.timeout_ms, "env": {"JEEVES_PROBE": probe}}}},
    )
    duration = time.monotonic() - started
    result = response.json()["result"]
    data = json.loads(result["content"][0]["text"])
    left = probed(probe)
    kill_all(left)  # counted, never leaked
    return {
        "code": data.get("code", "") if result["isError"] else "",
        "duration_s": duration,
        "left": left,
        "stdout_bytes": data.get("stdout_bytes"),
        "response_bytes": len(response.content),
    }


async def main(gigabytes: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        async with running_child(root, Path(tmp)) as child, httpx.AsyncClient() as http:
            base, pid = child.base, child.process.pid
            print(f"pruner child peak RSS at start: {vm_hwm_mib(pid):.0f} MiB")
            for case in cases(gigabytes):
                if case.needs_setpriv and not setpriv_works():
                    print(f"{case.name:32s} skipped (needs root and setpriv)")
                    continue
                outcome = await run_case(http, base, child.headers(), case)
                print(f"{case.name:32s} {outcome['code'] or 'ok':13s} {outcome['duration_s']:6.2f} s  "
                      f"left {len(outcome['left'])}  peak RSS {vm_hwm_mib(pid):5.0f} MiB  "
                      f"stdout {outcome['stdout_bytes']} B counted, response {outcome['response_bytes']} B")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gigabytes", type=float, default=1.0)
    trio.run(main, parser.parse_args().gigabytes)
