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

What escapes a command: a descendant that both leaves the group and scrubs
the tag from its environment (`setsid env -i ...`) survives the command;
under a subreaper it stays our descendant, is reaped by a later sweep once it
exits, and is killed by `kill_descendants` when the pruner stops. Only a
pruner killed by SIGKILL leaves such a process behind (to PID 1).

Output: each stream keeps at most `max_output_bytes`: the first half and the
last half, joined by an omission marker line when bytes were dropped, so
both a command's start and its final summary survive. Everything is counted
(`stdout_bytes`); nothing beyond the cap is held in memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets
import signal
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp.errors import ToolError

TAG_VAR = "JEEVES_MCP_CALL"
# Set by whoever starts the pruner (the supervisor) in the pruner's own
# environment; every command inherits it, so `kill_tree(..., tree=...)` can
# find a dead pruner's commands although they run in sessions of their own.
TREE_VAR = "JEEVES_MCP_TREE"
_PR_SET_DUMPABLE = 4
_PR_SET_NAME = 15
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_READ_CHUNK = 64 * 1024
# SIGKILL rounds: each kills every process a scan finds; a tree that keeps
# forking out of its group is caught by the next round.
_KILL_ROUNDS = 20
# After SIGKILL, how long to wait for the kernel to finish the processes.
_KILL_WAIT_S = 2.0
# After the command's leader exited and its tree was killed, how long the
# readers may still drain pipes (held open only by a tag-scrubbed escapee).
_DRAIN_AFTER_EXIT_S = 1.0
# Pidfds waited on at once; a fork bomb beyond this is handled by the rounds.
_MAX_WAIT_FDS = 256
# Zombie children younger than this are left to a later sweep: one may be a
# child trio spawned a moment ago whose pidfd is not open yet.
_ZOMBIE_MIN_AGE_S = 1.0


@dataclass
class CommandResult:
    stdout: bytes  # head + marker + tail when more than max_output_bytes came
    stderr: bytes
    stdout_bytes: int  # total produced
    stderr_bytes: int
    exit_code: int | None  # None when killed by a signal
    signal: int | None
    duration_ms: int

    @property
    def truncated(self) -> bool:
        return self.stdout_bytes > len(self.stdout) or self.stderr_bytes > len(self.stderr)


def become_subreaper(enable: bool = True) -> bool:
    """Make this process the subreaper of its descendants (prctl); False if refused."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(enable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (prctl PR_GET_CHILD_SUBREAPER)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        value = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    return value.value != 0


def set_dumpable(enable: bool) -> bool:
    """prctl(PR_SET_DUMPABLE): when off, processes of the same user (a run's commands
    when they run as the pruner's user) cannot open our /proc/PID/mem or environ;
    root still can. Reset to on by execve, so commands are unaffected."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, int(enable), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def command_user(root: Path) -> tuple[int, int] | None:
    """(uid, gid) to run a root's commands as, or None for the pruner's own user.

    A pruner running as root runs commands as the owner of the run root when
    that owner is not root: they can then read and write the workspace but
    neither the daemon's state dir (0700, tokens) nor another run's child
    (other uid, non-dumpable). A root-owned workspace, or a pruner that is not
    root, runs them as the pruner's user: see the README's isolation section.
    """
    if os.geteuid() != 0:
        return None
    try:
        info = root.stat()
    except OSError:
        return None
    return None if info.st_uid == 0 else (info.st_uid, info.st_gid)


def set_process_name(name: str) -> None:
    """Name this process in ps/top/pkill (prctl PR_SET_NAME, 15 bytes at most)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def new_tag() -> str:
    return secrets.token_hex(12)


class _Capture:
    """Keeps the first and last `cap // 2` bytes of a stream (or only the first
    `cap` without `keep_tail`) and counts all of it."""

    def __init__(self, cap: int, keep_tail: bool = True) -> None:
        self._tail_cap = cap // 2 if keep_tail else 0
        self._head_cap = cap - self._tail_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_cap:
            self.tail += chunk[-self._tail_cap :]
            # Trim in batches so appending stays amortised O(1).
            if len(self.tail) > 2 * self._tail_cap:
                del self.tail[: len(self.tail) - self._tail_cap]

    def data(self) -> bytes:
        tail = bytes(self.tail[-self._tail_cap :]) if self._tail_cap else b""
        dropped = self.total - len(self.head) - len(tail)
        if dropped <= 0 or not self._tail_cap:
            return bytes(self.head) + tail
        marker = f"\n[... {dropped} bytes omitted ...]\n".encode()
        return bytes(self.head) + marker + tail


async def _drain(
    stream: trio.abc.ReceiveStream,
    capture: _Capture,
    on_output: Callable[[str], None] | None,
    done: trio.Event,
) -> None:
    try:
        while chunk := await stream.receive_some(_READ_CHUNK):
            capture.add(bytes(chunk))
            if on_output is not None:
                lines = chunk[-400:].decode("utf-8", "replace").strip().splitlines()
                if lines:
                    on_output(lines[-1])
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        pass
    finally:
        done.set()


def _decode_trim(data: bytes, limit: int = 4000) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else "…" + text[-limit:]


async def run_command(
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    timeout_s: float,
    max_output_bytes: int,
    kill_grace_s: float,
    on_output: Callable[[str], None] | None = None,
    keep_tail: bool = True,
    user: tuple[int, int] | None = None,
) -> CommandResult:
    """Run `argv`, capture its output, and leave no process of it behind.

    Raises TOOL_TIMEOUT (with the partial stdout/stderr) after `timeout_s`;
    on cancellation kills the tree inside a shielded, bounded scope and
    re-raises. A missing executable raises NOT_FOUND. `keep_tail=False` keeps
    only the head of each stream (no omission marker). `user`: (uid, gid) to run
    it as, with no supplementary groups (see `command_user`).
    """
    tag = new_tag()
    as_user: dict[str, Any] = {}
    if user is not None:
        as_user = {"user": user[0], "group": user[1], "extra_groups": []}
    started = trio.current_time()
    try:
        proc = await trio.lowlevel.open_process(
            argv,
            cwd=str(cwd),
            env=_command_env(env, tag),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **as_user,
        )
    except FileNotFoundError as exc:
        raise ToolError("NOT_FOUND", f"cannot run {argv[0]!r}: {exc.strerror}") from exc
    except PermissionError as exc:
        raise ToolError("FORBIDDEN", f"cannot run {argv[0]!r}: {exc.strerror}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    out = _Capture(max_output_bytes, keep_tail)
    err = _Capture(max_output_bytes, keep_tail)
    out_done, err_done = trio.Event(), trio.Event()
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, proc.stdout, out, on_output, out_done)
            nursery.start_soon(_drain, proc.stderr, err, on_output, err_done)
            with trio.move_on_after(timeout_s) as timeout_scope:
                await proc.wait()
            timed_out = timeout_scope.cancelled_caught
            # Normal exit or timeout: what is left of the tree goes now.
            # Shielded so that a cancel arriving mid-kill still finishes it.
            with trio.CancelScope(shield=True, deadline=_kill_deadline(kill_grace_s)):
                await kill_tree(proc.pid, tag, grace_s=kill_grace_s, leader=proc)
            with trio.move_on_after(_DRAIN_AFTER_EXIT_S):
                await out_done.wait()
                await err_done.wait()
            nursery.cancel_scope.cancel()
    except BaseException:
        # Cancelled (or anything else): trio's _run_process pattern.
        with trio.CancelScope(shield=True, deadline=_kill_deadline(kill_grace_s)):
            await kill_tree(proc.pid, tag, grace_s=kill_grace_s, leader=proc)
        raise
    finally:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(proc.stdout)
            await trio.aclose_forcefully(proc.stderr)
    duration_ms = int((trio.current_time() - started) * 1000)
    if timed_out:
        raise ToolError(
            "TOOL_TIMEOUT",
            f"command timed out after {timeout_s:g} s; its process tree was killed",
            timeoutMs=round(timeout_s * 1000),
            stdout=_decode_trim(out.data()),
            stderr=_decode_trim(err.data()),
        )
    code = proc.returncode
    assert code is not None
    return CommandResult(
        stdout=out.data(),
        stderr=err.data(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        duration_ms=duration_ms,
    )


def _command_env(env: dict[str, str], tag: str) -> dict[str, str]:
    tagged = {**env, TAG_VAR: tag}
    tree = os.environ.get(TREE_VAR)
    if tree:
        tagged[TREE_VAR] = tree
    return tagged


def _kill_deadline(grace_s: float) -> float:
    return trio.current_time() + grace_s + _KILL_WAIT_S + 3.0


# ---------------------------------------------------------------- tree kill


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
    walk = tree is None and _HAVE_CHILDREN and is_subreaper()
    zombies = [False]  # set by a scan that saw a zombie child the sweep would reap
    try:
        # SIGTERM phase.
        group_alive = _signal_group(pgid, signal.SIGTERM)
        leader_alive = leader is not None and leader.returncode is None
        if leader is not None and leader_alive:
            with contextlib.suppress(ProcessLookupError):
                leader.send_signal(signal.SIGTERM)
        fresh = await _scan_and_open(pgid, tag_entries, me, seen, walk, zombies)
        if not (group_alive or leader_alive or fresh):
            return 0  # the usual case after a normal exit: nothing is left
        _send(fresh, signal.SIGTERM)
        if grace_s > 0:
            with trio.move_on_after(grace_s):
                await _wait_gone(leader, seen.values())
        # SIGKILL rounds until a scan finds nothing new and alive.
        _signal_group(pgid, signal.SIGKILL)
        if leader is not None and leader.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                leader.send_signal(signal.SIGKILL)
        _send(seen.items(), signal.SIGKILL)
        for _ in range(_KILL_ROUNDS):
            fresh = await _scan_and_open(pgid, tag_entries, me, seen, walk, zombies)
            if not fresh:
                break
            _signal_group(pgid, signal.SIGKILL)
            _send(fresh, signal.SIGKILL)
        with trio.move_on_after(_KILL_WAIT_S):
            await _wait_gone(leader, seen.values())
        _reap(seen)
        return len(seen)
    finally:
        for fd in seen.values():
            os.close(fd)
        # Something to reap: a killed process, or a zombie child old enough for
        # the sweep that a scan saw (an orphan that exited on its own).
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
) -> list[tuple[int, int]]:
    found, zombie_seen = await trio.to_thread.run_sync(
        _scan_and_open_sync, pgid, tag_entries, me, set(seen), walk
    )
    seen.update(found)
    if zombie_seen and zombies is not None:
        zombies[0] = True
    return found


def _scan_and_open_sync(
    pgid: int | None,
    tag_entries: tuple[bytes, ...],
    me: int,
    known: set[int],
    walk: bool = False,
) -> tuple[list[tuple[int, int]], bool]:
    """Pids of the tree not in `known`, each with a pidfd opened and re-verified,
    and whether a zombie child of ours old enough for the sweep was seen.
    `walk`: only our descendants are candidates (we are the tree's subreaper),
    else every pid of /proc."""
    found = []
    zombie_seen = False
    now_ticks = _uptime_ticks()
    candidates = _descendants(me) if walk else None
    if candidates is None:
        candidates = _list_pids()
    for pid in candidates:
        if pid == me or pid in known:
            continue
        stat = proc_stat(pid)
        if stat is None:
            continue
        if stat[0] == "Z":
            if stat[1] == str(me) and _old_enough(stat, now_ticks):
                zombie_seen = True  # one the sweep would reap
            # A member of the group that died before we saw it alive (the
            # group signal got it) and reparented to us: reap it now. Never
            # the leader, which its trio Process reaps.
            if pgid is not None and stat[2] == str(pgid) and pid != pgid and stat[1] == str(me):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            continue
        if not _belongs(pid, pgid, tag_entries):
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        # Re-check once the pidfd is open: if the pid was recycled between
        # the check and the open, the new process fails the check. If ours
        # died in between, it is kept to be reaped when it is our child.
        recheck = proc_stat(pid)
        if recheck is not None and recheck[0] == "Z":
            keep = recheck[1] == str(me)
        else:
            keep = _belongs(pid, pgid, tag_entries)
        if keep:
            found.append((pid, fd))
        else:
            os.close(fd)
    return found, zombie_seen


def _list_pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    return [int(n) for n in names if n.isdigit()]


_HAVE_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
# Re-reads of our own children lists before a walk gives up for a /proc scan.
_WALK_PASSES = 3


def _task_children(pid: int) -> tuple[list[int], bool]:
    """Children of every thread of `pid`, and False if a thread was gone or dead
    once its list was read (its children may have moved to another list)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return [], False
    children: list[int] = []
    ok = True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                children.extend(int(c) for c in f.read().split())
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            ok = False
            continue
        if raw[raw.rfind(b")") + 2 : raw.rfind(b")") + 3] in (b"Z", b"X"):
            ok = False
    return children, ok


def _dead_process(pid: int) -> bool:
    """Every thread of `pid` is gone or dead (its children went to its reaper)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    if tids != [str(pid)]:
        return False
    stat = proc_stat(pid)
    return stat is None or stat[0] in ("Z", "X")


def _descendants(me: int) -> list[int] | None:
    """Every descendant of this process, or None when the walk may have missed
    one (a process died while read and its children moved under an ancestor
    already read, other than us).

    A process that dies reparents its children to another of its threads or
    to its nearest subreaper ancestor. When that is one of our direct
    children, the orphans land on our own lists, which are read again until
    they show nothing new; anywhere else deeper, the walk gives up.
    """
    found: set[int] = set()
    for _ in range(_WALK_PASSES):
        top, ok = _task_children(me)
        if not ok:
            return None
        stack = [pid for pid in top if pid not in found]
        if not stack and found:
            return list(found)
        direct = set(top)
        while stack:
            pid = stack.pop()
            if pid in found:
                continue
            found.add(pid)
            children, ok = _task_children(pid)
            if not ok and not (pid in direct and _dead_process(pid)):
                return None
            stack.extend(children)
        if not found:
            return []
    return None


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
    for _ in range(_KILL_ROUNDS):
        found = _descendants(me)
        if found is None:
            found = [pid for pid in _list_pids() if _descends_from(pid, me)]
        alive = [pid for pid in found if (stat := proc_stat(pid)) is not None and stat[0] not in ("Z", "X")]
        if not alive:
            break
        for pid in alive:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if _descends_from(pid, me):  # not a pid recycled since the walk
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
            finally:
                os.close(fd)
        if reap:
            _reap_children()
    if reap:
        _reap_children()
    return len(killed)


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):  # deeper trees are walked by _descendants
        stat = proc_stat(pid)
        if stat is None:
            return False
        parent = int(stat[1])
        if parent == ancestor:
            return True
        if parent <= 1:
            return False
        pid = parent
    return False


def _reap_children() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _own_children() -> list[int] | None:
    """Children of this process (every thread's), or None when unsupported."""
    if not _HAVE_CHILDREN:
        return None
    children, _ok = _task_children(os.getpid())
    return children


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ...

    (field 0 is the state, 1 the ppid, 19 the start time in clock ticks); None
    when the process is gone.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()


def process_alive(pid: int) -> bool:
    """Running: not gone, and not a zombie waiting for its parent to reap it."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _has_tag(pid: int, tag_entries: tuple[bytes, ...]) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read()
    except OSError:
        return False
    environ = b"\0" + environ + b"\0"
    return any(b"\0" + entry + b"\0" in environ for entry in tag_entries)


def _belongs(pid: int, pgid: int | None, tag_entries: tuple[bytes, ...]) -> bool:
    stat = proc_stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    if pgid is not None and stat[2] == str(pgid):
        return True
    return bool(tag_entries) and _has_tag(pid, tag_entries)


def _reap(seen: dict[int, int]) -> None:
    """Reap killed processes that reparented to us (we are a subreaper)."""
    for pid in seen:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _pidfd_pids() -> set[int]:
    """Pids this process holds a pidfd for (trio holds one per unreaped child)."""
    held: set[int] = set()
    try:
        fds = os.listdir("/proc/self/fdinfo")
    except OSError:
        return held
    for fd in fds:
        try:
            with open(f"/proc/self/fdinfo/{fd}", "rb") as f:
                info = f.read()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith(b"Pid:"):
                held.add(int(line.split()[1]))
    return held


def sweep_zombies() -> int:
    """Reap zombie children of ours that nobody waits for; returns how many.

    Orphans of finished commands reparent to the subreaper and become our
    zombies when they exit. A zombie child is left alone when this process
    holds a pidfd for it (trio's Process does, until it has reaped its child)
    or when it is younger than `_ZOMBIE_MIN_AGE_S`. Blocking: run in a thread.
    """
    me = str(os.getpid())
    zombies = []
    candidates = _own_children()
    for pid in _list_pids() if candidates is None else candidates:
        stat = proc_stat(pid)
        if stat and stat[0] == "Z" and stat[1] == me:
            zombies.append((pid, stat))
    if not zombies:
        return 0
    held = _pidfd_pids()
    now_ticks = _uptime_ticks()
    reaped = 0
    for pid, stat in zombies:
        if pid in held:
            continue
        if not _old_enough(stat, now_ticks):
            continue
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
        except ChildProcessError:
            pass
        except OSError as exc:  # pragma: no cover - defensive
            if exc.errno != errno.ECHILD:
                raise
    return reaped


_TICKS = os.sysconf("SC_CLK_TCK")


def _old_enough(stat: list[str], now_ticks: float | None) -> bool:
    """Started at least `_ZOMBIE_MIN_AGE_S` ago (`stat` as `_stat` returns it)."""
    try:
        start_ticks = int(stat[19])  # field 22 of stat: starttime in clock ticks
    except (IndexError, ValueError):
        return False
    return now_ticks is not None and now_ticks - start_ticks >= _ZOMBIE_MIN_AGE_S * _TICKS


def _uptime_ticks() -> float | None:
    try:
        with open("/proc/uptime", "rb") as f:
            return float(f.read().split()[0]) * _TICKS
    except (OSError, ValueError, IndexError):
        return None
