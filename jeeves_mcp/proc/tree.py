"""Run a command as a process tree that always dies (Linux).

A command runs in its own session and process group, with its environment
tagged `JEEVES_MCP_CALL=<random>`. When it ends, whichever way (normal exit,
timeout, cancellation), `kill_tree` kills what is left of it:

- the process group (`killpg`), which catches plain background jobs and fork
  bombs (a group kill is atomic with respect to fork);
- every process whose `/proc/PID/environ` carries the tag, which catches
  descendants that left the group with `setsid` or a double fork.

Signals go through pidfds (`pidfd_send_signal`), opened and then re-checked
against the tag, so a recycled pid is never signalled. The order is SIGTERM,
`kill_grace_s` for the tree to go (waiting on the pidfds, not polling), then
SIGKILL in rounds until a scan finds nothing. Killed processes that are our
children (the pruner is a subreaper, so orphans reparent to it) are reaped,
and a final sweep reaps orphaned zombies that exited on their own (run only
when a scan saw a zombie child of ours, or something was killed).

Scans: a subreaper's command tree never leaves its descendants (a process
that leaves the group, even by setsid and a double fork, reparents to us),
so the pruner walks its own descendants (`/proc/PID/task/*/children`) rather
than all of /proc. The walk is used only when the subreaper bit is set and no
`tree` is given (a dead pruner's commands are nobody's descendants of the
caller); when a process of the walk dies while it is read (its children may
be moving to an ancestor whose list was already read), that scan falls back
to listing /proc.

The tag of a process just started (a daemon the command left, say) can read
wrong for a moment: empty in the middle of an exec, where the kill waits for
the exec to end (`_EXEC_WAIT_S` in all, at most; one still unsure keeps it
scanning), and split at its `=` while bash imports it (matched so too).

What escapes a command: a descendant that both leaves the group and scrubs
the tag from its environment (`setsid env -i ...`) survives the command;
under a subreaper it stays our descendant, is reaped by a later sweep once it
exits, and is killed by `kill_descendants` when the pruner stops. Only a
pruner killed by SIGKILL leaves such a process behind (to PID 1).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Iterable

import trio

from .fuse import abort_stuck_fuse
from .procfs import (
    HAVE_CHILDREN,
    dead_process,
    descendants,
    descends_from,
    has_env_entry,
    is_subreaper,
    list_pids,
    proc_stat,
    reap_children,
)
from .reaper import sweep_zombies

TAG_VAR = "JEEVES_MCP_CALL"
# Set by whoever starts the pruner (the supervisor) in the pruner's own
# environment; every command inherits it, so `kill_tree(..., tree=...)` can
# find a dead pruner's commands although they run in sessions of their own.
TREE_VAR = "JEEVES_MCP_TREE"
# SIGKILL rounds: each kills every process a scan finds; a tree that keeps
# forking out of its group is caught by the next round.
_KILL_ROUNDS = 20
# After SIGKILL, how long to wait for the kernel to finish the processes.
KILL_WAIT_S = 2.0
# Pidfds waited on at once; a fork bomb beyond this is handled by the rounds.
_MAX_WAIT_FDS = 256
# How long a kill waits in all, at most, for processes in the middle of an exec to show
# their environment (an exec takes a millisecond or so; one may hang on a slow disk).
_EXEC_WAIT_S = 0.5


async def kill_tree(
    pgid: int | None,
    tag: str | None,
    *,
    grace_s: float,
    leader: trio.Process | None = None,
    tree: str | None = None,
) -> int:
    """SIGTERM, `grace_s`, SIGKILL: the group `pgid` and every process tagged `tag`
    (`JEEVES_MCP_CALL`, one command) or `tree` (`JEEVES_MCP_TREE`, one pruner).

    `leader` (the trio Process that leads the group) is waited on through trio,
    which reaps it. Returns how many processes were found besides the leader.
    Call it inside a shielded scope with a deadline when cleaning up.
    """
    me = os.getpid()
    tag_entries = tuple(
        f"{name}={value}".encode() for name, value in ((TAG_VAR, tag), (TREE_VAR, tree)) if value
    )
    seen: dict[int, int] = {}  # pid -> pidfd
    # Our own command's tree stays among our descendants when we are its
    # subreaper; a `tree` kill looks for processes that are not.
    walk = tree is None and HAVE_CHILDREN and is_subreaper()
    zombies = [False]  # set by a scan that saw a zombie child the sweep may reap
    budget = min(_EXEC_WAIT_S, trio.current_effective_deadline() - trio.current_time())
    exec_deadline = time.monotonic() + max(0.0, budget)
    try:
        # SIGTERM phase.
        group_alive = _signal_group(pgid, signal.SIGTERM)
        leader_alive = leader is not None and leader.returncode is None
        if leader is not None and leader_alive:
            with contextlib.suppress(ProcessLookupError):
                leader.send_signal(signal.SIGTERM)
        fresh, pending = await _scan_and_open(pgid, tag_entries, me, seen, walk, zombies, exec_deadline)
        if not (group_alive or leader_alive or fresh or pending):
            return 0  # the usual case after a normal exit: nothing is left
        _send(fresh, signal.SIGTERM)
        if grace_s > 0:
            with trio.move_on_after(grace_s):
                await _wait_gone(leader, seen.values())
        # SIGKILL rounds until a scan finds nothing new and alive. After the grace the
        # group may have emptied and its number gone to another run's command: signal it
        # only while a process known to be in it is still there.
        if _group_still_ours(pgid, leader, seen):
            _signal_group(pgid, signal.SIGKILL)
        if leader is not None and leader.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                leader.send_signal(signal.SIGKILL)
        _send(seen.items(), signal.SIGKILL)
        for _ in range(_KILL_ROUNDS):
            fresh, pending = await _scan_and_open(pgid, tag_entries, me, seen, walk, zombies, exec_deadline)
            if not (fresh or pending):
                break
            if _group_still_ours(pgid, leader, seen):
                _signal_group(pgid, signal.SIGKILL)
            _send(fresh, signal.SIGKILL)
        with trio.move_on_after(KILL_WAIT_S):
            await _wait_gone(leader, seen.values())
        _reap(seen)
        return len(seen)
    finally:
        for fd in seen.values():
            os.close(fd)
        # Something to reap: a killed process, or a zombie child a scan saw (an
        # orphan that exited on its own).
        if seen or (leader is not None and zombies[0]):
            await trio.to_thread.run_sync(sweep_zombies)


def _signal_group(pgid: int | None, sig: int) -> bool:
    """Signal the group; False when it has no member left.

    A group number is not reused while any member is alive, so this reaches
    our tree or nobody (the theoretical exception: the group emptied and a
    new process took the number as its own group within the same moment).
    """
    if pgid is None or pgid <= 1:
        return False
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _group_still_ours(pgid: int | None, leader: trio.Process | None, seen: dict[int, int]) -> bool:
    """Whether the group `pgid` is still the tree's: its leader is not reaped (its pid, the
    group's number, cannot be reused), or a process we hold a pidfd of is alive in it (a
    group's number is not reused while it has a member)."""
    if pgid is None:
        return False
    if leader is not None and leader.pid == pgid and leader.returncode is None:
        return True
    for pid, fd in seen.items():
        try:
            in_group = os.getpgid(pid) == pgid
        except ProcessLookupError:
            continue
        # Alive after the lookup (pidfd not readable): the answer was about our process.
        if in_group and not _exited(fd):
            return True
    return False


def _exited(pidfd: int) -> bool:
    """Whether the process is gone (its pidfd readable); poll, not select, which fails on
    descriptors past 1024 and the daemon raises its limit beyond that."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _send(targets: Iterable[tuple[int, int]], sig: int) -> None:
    for _pid, fd in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(fd, sig)


async def _wait_gone(leader: trio.Process | None, fds: Iterable[int]) -> None:
    """Until the leader and every pidfd'd process has exited (pidfd readable)."""
    async with trio.open_nursery() as nursery:
        if leader is not None:
            nursery.start_soon(leader.wait)
        for fd in list(fds)[:_MAX_WAIT_FDS]:
            nursery.start_soon(trio.lowlevel.wait_readable, fd)


async def _scan_and_open(
    pgid: int | None,
    tag_entries: tuple[bytes, ...],
    me: int,
    seen: dict[int, int],
    walk: bool = False,
    zombies: list[bool] | None = None,
    exec_deadline: float = 0.0,
) -> tuple[list[tuple[int, int]], bool]:
    """New processes of the tree (see `_scan_and_open_sync`), and whether a process the scan
    could not tell was still in the middle of an exec (a later scan may)."""
    found, zombie_seen, pending = await trio.to_thread.run_sync(
        _scan_and_open_sync, pgid, tag_entries, me, set(seen), walk, exec_deadline
    )
    seen.update(found)
    if zombie_seen and zombies is not None:
        zombies[0] = True
    return found, pending


def _scan_and_open_sync(
    pgid: int | None,
    tag_entries: tuple[bytes, ...],
    me: int,
    known: set[int],
    walk: bool = False,
    exec_deadline: float = 0.0,
) -> tuple[list[tuple[int, int]], bool, bool]:
    """Pids of the tree not in `known`, each with a pidfd opened and re-verified,
    whether a zombie child of ours was seen (one the sweep may reap), and whether
    a process was still in the middle of an exec at `exec_deadline` (time.monotonic();
    its tag unknown).
    `walk`: only our descendants are candidates (we are the tree's subreaper),
    else every pid of /proc."""
    found = []
    zombie_seen = pending = False
    candidates = descendants(me) if walk else None
    if candidates is None:
        candidates = list_pids()
    for pid in candidates:
        if pid == me or pid in known:
            continue
        stat = proc_stat(pid)
        if stat is None:
            continue
        if stat[0] == "Z" and dead_process(pid):  # (not a main thread that ended alone)
            if stat[1] == str(me):
                zombie_seen = True  # the sweep reaps it unless it is held or a spawn's in flight
            # A member of the group that died before we saw it alive (the
            # group signal got it) and reparented to us: reap it now. Never
            # the leader, which its trio Process reaps.
            if pgid is not None and stat[2] == str(pgid) and pid != pgid and stat[1] == str(me):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            continue
        belongs = _belongs(pid, pgid, tag_entries, exec_deadline)
        if not belongs:
            pending = pending or belongs is None
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        # Re-check once the pidfd is open: if the pid was recycled between
        # the check and the open, the new process fails the check. If ours
        # died in between, it is kept to be reaped when it is our child.
        recheck = proc_stat(pid)
        keep: bool | None
        if recheck is not None and recheck[0] == "Z" and dead_process(pid):
            keep = recheck[1] == str(me)
        else:
            keep = _belongs(pid, pgid, tag_entries, exec_deadline)
            pending = pending or keep is None
        if keep:
            found.append((pid, fd))
        else:
            os.close(fd)
    return found, zombie_seen, pending


def _belongs(pid: int, pgid: int | None, tag_entries: tuple[bytes, ...], deadline: float = 0.0) -> bool | None:
    """In the group or tagged; None when its tag cannot be read before `deadline`
    (time.monotonic()) because it is in the middle of an exec."""
    stat = proc_stat(pid)
    if stat is None or (stat[0] in ("Z", "X") and dead_process(pid)):
        return False
    if pgid is not None and stat[2] == str(pgid):
        return True
    return bool(tag_entries) and has_env_entry(pid, tag_entries, deadline)


def _reap(seen: dict[int, int]) -> None:
    """Reap killed processes that reparented to us (we are a subreaper)."""
    for pid in seen:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def kill_descendants(*, reap: bool = True) -> int:
    """SIGKILL every living descendant of this process and reap its children; how many.

    The pruner's last duty as a subreaper, when it stops: a command's
    descendant that left its group and scrubbed its environment (`setsid env
    -i ...`) is beyond `kill_tree`'s group and tag, but it is still below us.
    Rounds repeat until a walk finds nobody alive (a process forking as it
    dies adds children a later walk sees). Blocking and quick; for a process
    about to exit, whose own commands are done or abandoned. `reap=False`
    while trio may still wait for children of its own (their statuses are its).
    """
    me = os.getpid()
    killed: set[int] = set()
    alive: list[int] = []
    for _ in range(_KILL_ROUNDS):
        found = descendants(me)
        if found is None:
            found = [pid for pid in list_pids() if descends_from(pid, me)]
        # Not proc_stat's state alone: a process whose main thread ended with SYS_exit shows Z
        # while its other threads run (attack review 7, H1).
        alive = [pid for pid in found if not dead_process(pid)]
        if not alive:
            break
        for pid in alive:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if descends_from(pid, me):  # not a pid recycled since the walk
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
            finally:
                os.close(fd)
        if reap:
            reap_children()
    if alive:  # killed yet alive: waiting on a FUSE mount of their own (attack reviews 9, 10)
        with contextlib.suppress(Exception):  # the pruner is on its way out: nothing may stop it
            abort_stuck_fuse(alive)
    if reap:
        reap_children()
    return len(killed)
