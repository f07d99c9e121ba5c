"""Reaping what commands leave behind as soon as it exits (Linux).

The pruner is its commands' subreaper: a process a command leaves running reparents
to it and, once it exits, stays a zombie holding a pid until the pruner reaps it.
`kill_tree` reaps after each command, but a fork-and-exit loop left behind makes
thousands of zombies a second with no tool call to reap them, and fills the host's
pid table (attack review F3). `reap_orphans` runs for the child's life and reaps
them as SIGCHLD says they exit.

What it must not reap: a child a trio `Process` owns. trio waits for its children
through a pidfd it holds until it has reaped them, and subprocess takes a status
reaped under it for exit 0. So a zombie this process holds a pidfd for is left
alone; and while a spawn is in flight (`Popen` returns in a worker thread, the
pidfd is opened after, in the event loop) only zombies older than
`ZOMBIE_MIN_AGE_S` are reaped, as `sweep_zombies` does. Every spawn of the child
goes through `run_command`, which says so with `spawning()`.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
from collections.abc import Iterator

import trio

from .procfs import old_enough, own_children, pidfd_pids, proc_stat, uptime_ticks

# Under a storm of exits, a pass at most this often: the storm costs the event loop
# a bounded share, and the zombies between two passes stay few.
MIN_INTERVAL_S = 0.05
# A pass that left a young zombie (a spawn was in flight) looks again this soon,
# SIGCHLD or not.
RETRY_S = 0.5
# Zombies reaped by one pass at most (the event loop does it, without a thread).
MAX_PER_PASS = 4096

_spawns_in_flight = 0  # event loop only


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around the spawn of a trio Process: its pidfd is not open until the spawn returns."""
    global _spawns_in_flight
    _spawns_in_flight += 1
    try:
        yield
    finally:
        _spawns_in_flight -= 1


async def reap_orphans(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Reap exited children nobody waits for, woken by SIGCHLD, until cancelled."""
    with trio.open_signal_receiver(signal.SIGCHLD) as exits:
        task_status.started()
        retry = False
        while True:
            with trio.move_on_after(RETRY_S if retry else math.inf):
                await anext(exits)
            _reaped, retry = reap_once()
            await trio.sleep(MIN_INTERVAL_S)  # rate limit, not polling: SIGCHLD wakes us


def reap_once() -> tuple[int, bool]:
    """Reap exited children that no trio Process owns: how many, and whether some were
    left for a later pass (too young while a spawn was in flight, or over MAX_PER_PASS)."""
    children = own_children()
    if children is None:  # no /proc/PID/task/TID/children: one at a time
        return _reap_first()
    exited = [pid for pid in children if _exited(pid)]
    if not exited:
        return 0, False
    left = len(exited) > MAX_PER_PASS
    held = pidfd_pids()
    now_ticks = uptime_ticks() if _spawns_in_flight else None
    reaped = 0
    for pid in exited[:MAX_PER_PASS]:
        if pid in held:
            continue  # trio's own: it reaps it
        if _spawns_in_flight and not _old(pid, now_ticks):
            left = True
            continue
        reaped += _reap(pid)
    return reaped, left


def _reap_first() -> tuple[int, bool]:
    """Without children lists: reap the exited child waitid names first, until it is one
    to leave alone."""
    reaped = 0
    held: set[int] | None = None
    while reaped < MAX_PER_PASS:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped, False
        if info is None:
            return reaped, False
        held = pidfd_pids() if held is None else held
        if info.si_pid in held:
            return reaped, False  # trio reaps it, and SIGCHLD wakes us for the rest
        if _spawns_in_flight and not _old(info.si_pid, uptime_ticks()):
            return reaped, True
        reaped += _reap(info.si_pid)
    return reaped, True


def _exited(pid: int) -> bool:
    """A zombie child of ours, peeked at without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False


def _old(pid: int, now_ticks: float | None) -> bool:
    stat = proc_stat(pid)
    return stat is not None and old_enough(stat, now_ticks)


def _reap(pid: int) -> int:
    try:
        return 1 if os.waitpid(pid, os.WNOHANG)[0] == pid else 0
    except ChildProcessError:
        return 0
