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
worker thread, the pid is known after, in the event loop) an exited child that started
since the spawn began is left alone, however long the spawn takes to return (an age
limit let a pass take the command's status after the loop was blocked that long):
`spawning()` notes when it began on the clock /proc/PID/stat's start times count on.
`sweep_zombies` (run by `kill_tree` after a command, in a thread) leaves those too. The
daemon's own spawns (a cold child, the fork server, the install check) say so as well, so
no age rule is needed: a child that exited, is no spawn's in flight and has no pidfd held
is nobody's, however young. A spawn that did not say so would lose its status to a pass
that ran before it returned. Both share `reap_zombies`.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Container, Iterator
from typing import Literal

import trio

from .procfs import list_pids, own_children, pidfd_pids, proc_stat

# Under a storm of exits, a pass at most this often: the storm costs the event loop
# a bounded share, and the zombies between two passes stay few.
MIN_INTERVAL_S = 0.05
# A pass that left a zombie (a spawn was in flight) looks again this soon,
# SIGCHLD or not.
RETRY_S = 0.5
# Zombies reaped by one pass at most: the event loop's, or kill_tree's sweep in a thread
# it cannot abandon.
MAX_PER_PASS = 4096

_TICKS = os.sysconf("SC_CLK_TCK")
# When each spawn in flight began (boot clock ticks), and a count of spawns begun or ended:
# a sweep in a thread reads the pidfds again once a spawn has returned (its pidfd open).
_spawns_lock = threading.Lock()
_spawns_began: list[int] = []
_spawns_changed = 0
# Pid -> how many commands wait for it (a pid trio has reaped may be a new command's
# before the first command's `awaiting` ends). Event loop only.
_awaited: dict[int, int] = {}


@contextlib.contextmanager
def spawning() -> Iterator[None]:
    """Around the spawn of a trio Process: its pid is not known until the spawn returns, so
    every exited child started since the spawn began is left alone until then."""
    began = _boot_ticks() - 1  # a tick early: both sides round down
    _note_spawn(began, begun=True)
    try:
        yield
    finally:
        _note_spawn(began, begun=False)


def _boot_ticks() -> int:
    """Now on the clock of /proc/PID/stat's start times (CLOCK_BOOTTIME, in clock ticks)."""
    try:
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME) * _TICKS // 1_000_000_000
    except OSError:  # unknown: every child counts as started since
        return 0


def _note_spawn(began: int, *, begun: bool) -> None:
    global _spawns_changed
    with _spawns_lock:
        if begun:
            _spawns_began.append(began)
        else:
            _spawns_began.remove(began)
        _spawns_changed += 1


def _spawns_now() -> tuple[int, int | None]:
    """How many spawns began or ended so far, and when the oldest in flight began (None: none)."""
    with _spawns_lock:
        return _spawns_changed, min(_spawns_began, default=None)


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
    left for a later pass (started since a spawn in flight began, or over MAX_PER_PASS)."""
    return reap_zombies(lambda: _awaited, most=MAX_PER_PASS)


def sweep_zombies() -> int:
    """Reap zombie children of ours that nobody waits for; returns how many.

    Orphans of finished commands reparent to the subreaper and become our
    zombies when they exit. A zombie child is left alone when this process
    holds a pidfd for it (trio's Process does, until it has reaped its child),
    or when it started since a spawn in flight began. Blocking: run in a thread.
    At most MAX_PER_PASS: what is left, `reap_orphans` is woken for, as by an exit.
    """
    reaped, left = reap_zombies(pidfd_pids, most=MAX_PER_PASS)
    if left:  # where nothing receives SIGCHLD its default is to ignore it
        os.kill(os.getpid(), signal.SIGCHLD)
    return reaped


def reap_zombies(held: Callable[[], Container[int]], *, most: int) -> tuple[int, bool]:
    """Reap exited children of ours whose status is nobody else's: how many, and whether
    some were left for a later pass (a spawn's in flight, or past the first `most`).

    `held()`, asked only when a child has exited, names the children to leave alone (their
    exit status is trio's to read). A child started since a spawn in flight began is left
    too: its pid is not known until the spawn returns.
    Exited children are peeked at (`WNOWAIT`) before any is reaped; the children are read
    from /proc/PID/task/*/children. Where the kernel has none, `waitid(P_ALL)` names them
    one at a time, so a pass costs what there is to reap rather than a look at every pid;
    /proc is listed only past a child to leave alone, which waitid would name again.
    """
    leave = _LeaveAlone(held)
    children = own_children()
    reaped = 0
    if children is None:
        for _ in range(most):
            pid = _first_exited()
            if pid is None:
                return reaped, False
            if leave.verdict(pid) != "reap":
                break
            reaped += _reap(pid)
        else:
            return reaped, _first_exited() is not None
        children = list_pids()
    exited = [pid for pid in children if _zombie_child(pid)]
    left = len(exited) > most - reaped
    for pid in exited[:most - reaped]:
        verdict = leave.verdict(pid)
        if verdict == "later":
            left = True
        elif verdict == "reap":
            reaped += _reap(pid)
    return reaped, left


class _LeaveAlone:
    """The exited children one pass leaves alone. `held()` is read when first needed, and again
    when a spawn began or ended since: a sweep in a thread runs beside the loop's spawns."""

    def __init__(self, held: Callable[[], Container[int]]) -> None:
        self._ask_held = held
        self._held: Container[int] = ()
        self._held_as_of: int | None = None  # _spawns_changed when `held()` was read

    def verdict(self, pid: int) -> Literal["reap", "held", "later"]:
        """What to do with exited child `pid`: "held" (its status is someone else's), "later"
        (it may be a spawn's in flight) or "reap". Called once `pid` is seen exited: a spawn
        that forked it has begun, and is in `_spawns_now()`."""
        changed, oldest = _spawns_now()
        if oldest is not None:
            stat = proc_stat(pid)
            if stat is None or _start_ticks(stat) >= oldest:
                return "later"
        if changed != self._held_as_of:  # read after the spawns: one returned has its pidfd open
            self._held, self._held_as_of = self._ask_held(), changed
        if pid in self._held:
            return "held"
        return "reap"


def _start_ticks(stat: list[str]) -> float:
    """When the process started, in clock ticks since boot (math.inf if unreadable)."""
    try:
        return int(stat[19])  # field 22 of stat: starttime
    except (IndexError, ValueError):
        return math.inf


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
