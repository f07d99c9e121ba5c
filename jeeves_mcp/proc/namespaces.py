"""An IPC namespace and a /dev/shm of the child's own: what its commands share dies with it.

SysV shared memory, semaphores and message queues, POSIX message queues and files in
/dev/shm live until removed, not until their maker exits: a run could leave gigabytes of
touched shared memory (no swap reclaims it, no OOM kill frees it) past its release
(attack review 7, M2). The child unshares its IPC namespace and mounts a tmpfs of its own
on /dev/shm before it starts any command; its commands share both with each other, and
the kernel frees both when the last process in them exits. The host's /dev/mqueue shows the
host's POSIX queues whatever the namespace: a fresh one is mounted there (review 9, M1).
/dev/fuse is covered by /dev/null in the same mount namespace: a process that serves its own
FUSE mount and waits on it cannot be killed, and would hold its slot and this namespace past
the release (review 9, H1). /proc is mounted anew with `hidepid=invisible`: a command sees its
own user's processes only. Needs CAP_SYS_ADMIN (a root daemon); elsewhere the child runs on
with the host's, and says so.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

__all__ = ["private_ipc_and_devices"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_SLAVE = 1 << 19
SHM = "/dev/shm"
MQUEUE = "/dev/mqueue"
FUSE = "/dev/fuse"
PROC = "/proc"


def private_ipc_and_devices(in_use: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Give this process, and every process it starts from now on, IPC objects, a /dev/shm and
    a /dev/mqueue of its own, and no /dev/fuse; None when done, else what could not be made
    private and why. `in_use`: paths this process must go on reaching (its root, health
    socket, log file); /dev/shm stays the host's when one is below it.

    Call it from the thread that starts commands, before it starts any: namespaces are a
    thread's, and are inherited at fork and thread creation."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        return f"no libc: {exc}"
    if libc.unshare(_CLONE_NEWIPC) != 0:
        return f"IPC namespace: {os.strerror(ctypes.get_errno())}"
    if libc.unshare(_CLONE_NEWNS) != 0:
        return f"mount namespace: {os.strerror(ctypes.get_errno())}"
    # Our mounts must not reach the host's (a shared / would carry the tmpfs there); the
    # host's still reach us.
    if libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
        return f"mount namespace: {os.strerror(ctypes.get_errno())}"
    # First: what no failure below may leave uncovered (review 9, H1).
    if os.path.exists(FUSE) and not _covered_by_null(libc, FUSE):
        return f"{FUSE}: {os.strerror(ctypes.get_errno())}"
    shared = None
    if os.path.isdir(SHM):
        below = [str(path) for path in in_use if os.path.realpath(path).startswith(SHM + "/")]
        if below:
            shared = f"{SHM} left the host's: {below[0]} is below it"
        else:
            try:
                shm = os.statvfs(SHM)
            except OSError as exc:
                return f"{SHM}: {exc.strerror}"
            # The same bounds as the host's /dev/shm, so what fits there fits here.
            options = f"mode=1777,size={shm.f_blocks * shm.f_frsize},nr_inodes={shm.f_files}"
            if libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) != 0:
                return f"{SHM}: {os.strerror(ctypes.get_errno())}"
    # An mqueue mount shows the queues of the IPC namespace it was made in.
    if os.path.isdir(MQUEUE) and libc.mount(
        b"mqueue", MQUEUE.encode(), b"mqueue", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None
    ) != 0:
        return f"{MQUEUE}: {os.strerror(ctypes.get_errno())}"
    # Other users' processes are not the run's to see: their command lines hold what agents put
    # in them (another run's `bash -c ...`; the cross-run review of 2026-11-29). A proc mount of
    # our own, each one its own instance since Linux 5.8 (older kernels refuse `invisible`); our
    # group sees every process, so that we still see the commands we must kill without
    # CAP_SYS_PTRACE (a service user).
    options = f"hidepid=invisible,gid={os.getegid()}"
    if libc.mount(b"proc", PROC.encode(), b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options.encode()) != 0:
        return f"{PROC}: {os.strerror(ctypes.get_errno())}"
    return shared


def _covered_by_null(libc: ctypes.CDLL, path: str) -> bool:
    """Bind /dev/null, read-only, over `path`. A user namespace made below cannot uncover it:
    the mounts it inherits are locked together."""
    if libc.mount(b"/dev/null", path.encode(), None, _MS_BIND, None) != 0:
        return False
    flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NOEXEC
    return libc.mount(None, path.encode(), None, flags, None) == 0
