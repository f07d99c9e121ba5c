"""Run a command as a process tree that always dies, its output bounded.

A command runs in its own session and process group, its environment tagged
`JEEVES_MCP_CALL=<random>`; when it ends, whichever way (exit, timeout,
cancellation), `kill_tree` kills what is left of it (see `tree`).

Output: each stream keeps at most `max_output_bytes`: the first half and the
last half, joined by an omission marker line when bytes were dropped, so
both a command's start and its final summary survive. Everything is counted
(`stdout_bytes`); nothing beyond the cap is held in memory.
"""

from __future__ import annotations

import errno
import os
import resource
import secrets
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp.mcp.errors import ToolError

from .procfs import can_switch_users, own_group
from .reaper import awaiting, spawning
from .tree import KILL_WAIT_S, TAG_VAR, TREE_VAR, kill_tree

_READ_CHUNK = 64 * 1024
# Commands start in "/" and enter their directory themselves, as their own user: subprocess
# changes directory before it switches users, as the pruner (root), so a cwd swapped for a
# symlink took a command where its user may not go (attack review F4). The directory is an
# argument, never part of the script. Until the exec, stdin is a status pipe: `cd` writes there
# why it failed, which tells that apart from the command's own failure.
# It first makes the command the kernel's first to kill when memory runs out (FIRST_TO_KILL), then
# lowers RLIMIT_NPROC ($1; bash spells it -u, dash -p), soft and hard.
# oom_score_adj of a command (written by its wrapper, as any process may raise its own): the kernel
# kills commands before the daemon, a pruner or any other process when memory runs out (one run's
# processes took down the daemon and every run's child first). A command may lower it again, to
# the pruner's: making that the least it may set takes CAP_SYS_RESOURCE (the unit does not give
# it) and a wrapper that waits for the pruner's write before it runs anything.
FIRST_TO_KILL = 1000
_SH = "/bin/sh"
_ENTER = (
    f"{{ echo {FIRST_TO_KILL} >/proc/self/oom_score_adj; }} 2>/dev/null; "
    '[ -z "$1" ] || { ulimit -u "$1" || ulimit -p "$1"; } 2>/dev/null '
    '|| { echo "cannot set RLIMIT_NPROC" >&0; exit 125; }; '
    'cd -- "$2" 2>&0 || { echo >&0; exit 125; }; exec </dev/null; shift 2; exec "$@"'
)
# Processes (threads included) a command run as another user may have: RLIMIT_NPROC, which
# counts every process of that uid, the run's and any other. Without it a run could fill the
# host's pid table (attack review F3). The default of PrunerConfig.command_max_processes.
COMMAND_MAX_PROCESSES = 4096
# After the command's leader exited and its tree was killed, how long the
# readers may still drain pipes (held open only by a tag-scrubbed escapee).
_DRAIN_AFTER_EXIT_S = 1.0


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


@dataclass(frozen=True)
class _RootPin:
    """The run root as first seen: its identity and whom its commands run as. `fd` (O_PATH) is
    kept open so the inode number cannot be reused by another directory while we compare."""

    fd: int | None
    device: int
    inode: int
    user: tuple[int, int] | None
    error: str | None = None


# One pin per root path for the life of the process (a child serves one root; in-process
# servers in tests may serve several). Decided once: re-reading the owner from the path on each
# call let a run swap its root for a symlink to a root-owned directory and get a root shell.
_pins: dict[Path, _RootPin] = {}
_pins_lock = threading.Lock()


def _open_pin(root: Path) -> _RootPin:
    try:
        fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return _RootPin(None, -1, -1, None, error=exc.strerror or str(exc))
    info = os.fstat(fd)
    user = None
    if can_switch_users() and info.st_uid not in (0, os.geteuid()):
        # Never the directory's group: `install -d -o USER`, run by root, leaves it root's.
        user = (info.st_uid, own_group(info.st_uid))
    return _RootPin(fd, info.st_dev, info.st_ino, user)


def _pin(root: Path) -> _RootPin:
    with _pins_lock:
        pin = _pins.get(root)
        if pin is None:
            pin = _pins[root] = _open_pin(root)
    return pin


def pin_root(root: Path) -> str | None:
    """Decide, once, whom `root`'s commands run as (see `command_user`), from a handle on the
    directory itself. The child calls it as it starts; `command_user` pins a root it has not
    seen on first use. Returns why the root cannot be used, or None."""
    return _pin(root).error


def pinned_root(root: Path) -> int | None:
    """The O_PATH descriptor `root` was pinned with (None if it could not be opened): files are
    opened beneath it, not beneath the path, which a run may have moved since."""
    return _pin(root).fd


def command_user(root: Path) -> tuple[int, int] | None:
    """(uid, gid) to run a root's commands as, or None for the pruner's own user.

    A pruner that may switch users (root, or a service user with CAP_SETUID and
    CAP_SETGID) runs commands as the owner of the run root, in that owner's own group
    (`own_group`, never the directory's) and no other, when that owner is
    neither root nor the pruner's own user: they can then read and write the
    workspace but neither the daemon's state dir (0700, tokens) nor another run's
    child (other uid, non-dumpable). A root-owned workspace, or a pruner that may
    not switch users, runs them as the pruner's user: see the README's isolation section.

    The owner is read once, when the root is pinned (`pin_root`). Every call then checks that
    the path still names that same directory (not a symlink, same device and inode) and
    raises FORBIDDEN otherwise: it never falls back to the pruner's user.
    """
    pin = _pin(root)
    if pin.error is not None:
        raise ToolError("FORBIDDEN", f"the run root {root} could not be opened ({pin.error}): commands are refused")
    try:
        now = os.stat(root, follow_symlinks=False)
    except OSError as exc:
        raise ToolError(
            "FORBIDDEN", f"the run root {root} is gone ({exc.strerror}): commands are refused"
        ) from exc
    if not stat.S_ISDIR(now.st_mode) or (now.st_dev, now.st_ino) != (pin.device, pin.inode):
        raise ToolError(
            "FORBIDDEN",
            f"the run root {root} is no longer the directory this run started with "
            "(moved, replaced or a symlink): commands are refused",
            hint="put the run root back, or start the run again",
        )
    return pin.user


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


# Starting a command failed for want of what the machine shares (another run may hold the
# system's file table, its processes or its memory): not a bug, worth a retry.
_NOT_NOW = {errno.EMFILE: "file descriptors", errno.ENFILE: "file descriptors", errno.EAGAIN: "processes",
            errno.ENOMEM: "memory"}


def _not_now(exc: OSError) -> ToolError:
    short = _NOT_NOW.get(exc.errno or 0, "resources")
    return ToolError("QUEUE_OVERLOADED", f"cannot start the command: out of {short} ({exc.strerror})",
                     hint="retry later: the machine's limits are shared with other runs")


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
    max_processes: int = COMMAND_MAX_PROCESSES,
) -> CommandResult:
    """Run `argv`, capture its output, and leave no process of it behind.

    Raises TOOL_TIMEOUT (with the partial stdout/stderr) after `timeout_s`;
    on cancellation kills the tree inside a shielded, bounded scope and
    re-raises. A missing executable raises NOT_FOUND. `keep_tail=False` keeps
    only the head of each stream (no omission marker). `user`: (uid, gid) to run
    it as, with no supplementary groups (see `command_user`) and RLIMIT_NPROC at most
    `max_processes`. Commands as the pruner's own user get no such limit: it would count
    the daemon's and every child's threads, and root is not bound by it anyway.
    """
    tag = new_tag()
    as_user: dict[str, Any] = {}
    if user is not None:
        as_user = {"user": user[0], "group": user[1], "extra_groups": []}
    command_env = _command_env(env, tag)
    _check_executable(argv[0], command_env)
    started = trio.current_time()
    nproc = "" if user is None else str(_process_limit(max_processes))
    try:
        status_read, status_write = os.pipe()
    except OSError as exc:
        if exc.errno in _NOT_NOW:
            raise _not_now(exc) from exc
        raise
    proc: trio.Process | None = None
    try:
        with spawning():
            proc = await trio.lowlevel.open_process(
                [_SH, "-c", _ENTER, "jeeves-mcp", nproc, str(cwd), *argv],
                cwd="/",
                env=command_env,
                stdin=status_write,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                **as_user,
            )
    except FileNotFoundError as exc:
        raise ToolError("NOT_FOUND", f"cannot run {argv[0]!r}: {exc.strerror}") from exc
    except PermissionError as exc:
        raise ToolError("FORBIDDEN", f"cannot run {argv[0]!r}: {exc.strerror}") from exc
    except OSError as exc:
        if exc.errno in _NOT_NOW:
            raise _not_now(exc) from exc
        if exc.errno != errno.E2BIG:
            raise
        raise ToolError("INVALID_REQUEST", "the command's arguments and environment are too long "
                        f"together: the kernel takes {os.sysconf('SC_ARG_MAX'):,} bytes") from exc
    finally:
        os.close(status_write)
        if proc is None:
            os.close(status_read)
    assert proc is not None and proc.stdout is not None and proc.stderr is not None
    # Until trio has read its status, the orphan reaper leaves it alone.
    with awaiting(proc.pid):
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
            not_entered = _status(status_read)
        except BaseException:
            # Cancelled (or anything else): trio's _run_process pattern.
            with trio.CancelScope(shield=True, deadline=_kill_deadline(kill_grace_s)):
                await kill_tree(proc.pid, tag, grace_s=kill_grace_s, leader=proc)
            raise
        finally:
            os.close(status_read)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(proc.stdout)
                await trio.aclose_forcefully(proc.stderr)
    duration_ms = int((trio.current_time() - started) * 1000)
    if not_entered is not None:
        raise _not_entered(cwd, not_entered)
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


def _check_executable(name: str, env: dict[str, str]) -> None:
    """NOT_FOUND (or FORBIDDEN) for what the wrapper's `exec` would fail to run, as
    subprocess raised before commands started through `_ENTER`."""
    if shutil.which(name, path=env.get("PATH", os.defpath)) is not None:
        return
    if "/" in name and os.path.isfile(name):
        raise ToolError("FORBIDDEN", f"cannot run {name!r}: Permission denied")
    raise ToolError("NOT_FOUND", f"cannot run {name!r}: No such file or directory")


def _status(status_read: int) -> str | None:
    """Why the wrapper could not enter the directory (what it wrote on the status pipe), or
    None when it wrote nothing: it entered, closed the pipe and ran the command."""
    os.set_blocking(status_read, False)
    try:
        said = os.read(status_read, 4096)
    except BlockingIOError:  # still open: the wrapper has not failed
        return None
    return said.decode("utf-8", "replace").strip() if said else None


def _process_limit(wanted: int) -> int:
    """`wanted`, or the hard limit we have if lower: the command may only lower its own."""
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def _not_entered(cwd: Path, why: str) -> ToolError:
    if why == "cannot set RLIMIT_NPROC":
        return ToolError("INTERNAL", "could not limit the command's processes (RLIMIT_NPROC)")
    if not cwd.is_dir():
        return ToolError("NOT_FOUND", f"cannot enter {cwd}: no such directory", detail=why)
    return ToolError("FORBIDDEN", f"cannot enter {cwd}: the command's user may not", detail=why)


def _command_env(env: dict[str, str], tag: str) -> dict[str, str]:
    tagged = {**env, TAG_VAR: tag}
    tree = os.environ.get(TREE_VAR)
    if tree:
        tagged[TREE_VAR] = tree
    return tagged


def _kill_deadline(grace_s: float) -> float:
    return trio.current_time() + grace_s + KILL_WAIT_S + 3.0
