"""How long ago a process started, on the clock of /proc/PID/stat's start times (CLOCK_BOOTTIME,
in clock ticks): for the tests where a spawn returns late, as to an event loop blocked that long."""

from __future__ import annotations

import os
import time

from jeeves_mcp.proc import proc_stat

TICKS = os.sysconf("SC_CLK_TCK")
# How late: the age past which a sweep once reaped an exited child without a pidfd (its
# ZOMBIE_MIN_AGE_S), taking the status of a spawn that had not returned yet.
LATE_S = 1.0


def boot_ticks() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) * TICKS // 1_000_000_000


def until_started_ago(pid: int, seconds: float = LATE_S) -> None:
    """Until `pid` (running or exited, not reaped) started `seconds` ago."""
    started = int((proc_stat(pid) or [])[19])
    deadline = time.monotonic() + seconds + 10
    while boot_ticks() - started < seconds * TICKS:
        assert time.monotonic() < deadline
        time.sleep(0.02)
