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
`ZOMBIE_MIN_AGE_S` are reaped, as `sweep_zombies` (run by `kill_tree` after a
command) does always. Both share `reap_zombies`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
from collections.abc import Callable, Container, Iterator

import trio

from .procfs import list_pids, old_enough, own_children, pidfd_pids, proc_stat, uptime_ticks

# Under a storm of exits, a pass at most this often: the storm costs the event loop
# a bounded share, and the zombies between two passes stay few.
MIN_INTERVAL_S = 0.05
# A pass that left a young zombie (a spawn was in flight) looks again this soon,
# SIGCHLD or not.
RETRY_S = 0.5
# Zombies reaped by one pass at most: the event loop's, or kill_tree's sweep in a thread
# it cannot abandon.
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


def sweep_zombies() -> int:
    """Reap zombie children of ours that nobody waits for; returns how many.

    Orphans of finished commands reparent to the subreaper and become our
    zombies when they exit. A zombie child is left alone when this process
    holds a pidfd for it (trio's Process does, until it has reaped its child)
    or when it is younger than `ZOMBIE_MIN_AGE_S`. Blocking: run in a thread.
    At most MAX_PER_PASS: what is left, `reap_orphans` is woken for, as by an exit.
    """
    reaped, left = reap_zombies(pidfd_pids, young_too=False, most=MAX_PER_PASS)
    if left:  # where nothing receives SIGCHLD its default is to ignore it
        os.kill(os.getpid(), signal.SIGCHLD)
    return reaped


def reap_zombies(
    held: Callable[[], Container[int]], *, young_too: bool, most: int
) -> tuple[int, bool]:
    """Reap exited children of ours whose status is nobody else's: how many, and whether
    some were left for a later pass (too young, or past the first `most`).

    `held()`, asked only when a child has exited, names the children to leave alone (their
    exit status is trio's to read). Unless `young_too`, a child started less than
    `ZOMBIE_MIN_AGE_S` ago is left too: it may be a spawn whose pidfd is not open yet.
    Exited children are peeked at (`WNOWAIT`) before any is reaped; the children are read
    from /proc/PID/task/*/children. Where the kernel has none, `waitid(P_ALL)` names them
    one at a time, so a pass costs what there is to reap rather than a look at every pid;
    /proc is listed only past a child to leave alone, which waitid would name again.
    """
    leave = _LeaveAlone(held, young_too)
    children = own_children()
    reaped = 0
    if children is None:
        for _ in range(most):
            pid = _first_exited()
            if pid is None:
                return reaped, False
            if leave.held(pid) or leave.young(pid):
                break
            reaped += _reap(pid)
        else:
            return reaped, _first_exited() is not None
        children = list_pids()
    exited = [pid for pid in children if _zombie_child(pid)]
    left = len(exited) > most - reaped
    for pid in exited[:most - reaped]:
        if leave.held(pid):
            continue
        if leave.young(pid):
            left = True
            continue
        reaped += _reap(pid)
    return reaped, left


class _LeaveAlone:
    """The exited children one pass leaves alone; `held()` and the clock read once, when needed."""

    def __init__(self, held: Callable[[], Container[int]], young_too: bool) -> None:
        self._ask_held = held
        self._young_too = young_too

    @functools.cached_property
    def _held(self) -> Container[int]:
        return self._ask_held()

    @functools.cached_property
    def _now_ticks(self) -> float | None:
        return uptime_ticks()

    def held(self, pid: int) -> bool:
        return pid in self._held

    def young(self, pid: int) -> bool:
        if self._young_too:
            return False
        stat = proc_stat(pid)
        return stat is None or not old_enough(stat, self._now_ticks)


def _first_exited() -> int | None:
    """The exited child `waitid` names first, peeked at without reaping it."""
    try:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # no child at all
        return None
    return None if info is None else info.si_pid


def _zombie_child(pid: int) -> bool:
    """An exited child of ours, peeked at without reaping it (False for anyone else's)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False


def _reap(pid: int) -> int:
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return 1
    return 0
