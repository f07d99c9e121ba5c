"""Reaping what commands leave behind as soon as it exits (Linux).

The pruner is its commands' subreaper: a process a command leaves running reparents
to it and, once it exits, stays a zombie holding a pid until the pruner reaps it.
`kill_tree` reaps after each command, but a fork-and-exit loop left behind makes
thousands of zombies a second with no tool call to reap them, and fills the host's
pid table (attack review F3). `reap_orphans` runs for the child's life and reaps
them as SIGCHLD says they exit.

What it must not reap: a child a trio `Process` owns. trio waits for its children
through a pidfd, and subprocess takes a status reaped under it for exit 0. Every spawn
of the child goes through `run_command`, which says so: `spawning()` around the spawn
and `awaiting(pid)` until the command's status is read. Those pids are kept here in
memory, so a pass reads no /proc/self/fdinfo on every command's exit (`sweep_zombies`,
for any process, asks the pidfds). While a spawn is in flight (`Popen` returns in a
worker thread, the pid is known after, in the event loop) only zombies older than
`ZOMBIE_MIN_AGE_S` are reaped, as `sweep_zombies` does always. Both share
`tree.reap_zombies`.
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Iterator

import trio

from .tree import reap_zombies

# Under a storm of exits, a pass at most this often: the storm costs the event loop
# a bounded share, and the zombies between two passes stay few.
MIN_INTERVAL_S = 0.05
# A pass that left a young zombie (a spawn was in flight) looks again this soon,
# SIGCHLD or not.
RETRY_S = 0.5
# Zombies reaped by one pass at most (the event loop does it, without a thread).
MAX_PER_PASS = 4096

_spawns_in_flight = 0  # event loop only
# Pid -> how many commands wait for it (a pid trio has reaped may be a new command's
# before the first command's `awaiting` ends). Event loop only.
_awaited: dict[int, int] = {}


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around the spawn of a trio Process: its pid is not known until the spawn returns."""
    global _spawns_in_flight
    _spawns_in_flight += 1
    try:
        yield
    finally:
        _spawns_in_flight -= 1


@contextlib.contextmanager
def awaiting(pid: int) -> Iterator[None]:
    """While trio is to read `pid`'s exit status: the reaper leaves its zombie alone.
    Enter it as soon as the spawn returns, with no checkpoint between: the reaper runs
    in the same event loop, and `spawning()` has covered the spawn itself."""
    _awaited[pid] = _awaited.get(pid, 0) + 1
    try:
        yield
    finally:
        if _awaited[pid] == 1:
            del _awaited[pid]
        else:
            _awaited[pid] -= 1


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
    return reap_zombies(lambda: _awaited, young_too=not _spawns_in_flight, most=MAX_PER_PASS)
