"""An IPC namespace and a /dev/shm of the child's own: what its commands share dies with it.

SysV shared memory, semaphores and message queues, POSIX message queues and files in
/dev/shm live until removed, not until their maker exits: a run could leave gigabytes of
touched shared memory (no swap reclaims it, no OOM kill frees it) past its release
(attack review 7, M2). The child unshares its IPC namespace and mounts a tmpfs of its own
on /dev/shm before it starts any command; its commands share both with each other, and
the kernel frees both when the last process in them exits. Needs CAP_SYS_ADMIN (a root
daemon); elsewhere the child runs on with the host's, and says so.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

__all__ = ["private_ipc"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_REC = 16384
_MS_SLAVE = 1 << 19
SHM = "/dev/shm"


def private_ipc(in_use: Iterable[str | os.PathLike[str]] = ()) -> str | None:
    """Give this process, and every process it starts from now on, IPC objects and a /dev/shm
    of its own; None when done, else what could not be made private and why. `in_use`: paths
    this process must go on reaching (its root, health socket, log file); /dev/shm stays the
    host's when one is below it.

    Call it from the thread that starts commands, before it starts any: namespaces are a
    thread's, and are inherited at fork and thread creation."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError as exc:
        return f"no libc: {exc}"
    if libc.unshare(_CLONE_NEWIPC) != 0:
        return f"IPC namespace: {os.strerror(ctypes.get_errno())}"
    if not os.path.isdir(SHM):
        return None
    below = [str(path) for path in in_use if os.path.realpath(path).startswith(SHM + "/")]
    if below:
        return f"{SHM} left the host's: {below[0]} is below it"
    try:
        shm = os.statvfs(SHM)
    except OSError as exc:
        return f"{SHM}: {exc.strerror}"
    if libc.unshare(_CLONE_NEWNS) != 0:
        return f"mount namespace: {os.strerror(ctypes.get_errno())}"
    # Our mounts must not reach the host's (a shared / would carry the tmpfs there); the
    # host's still reach us.
    if libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
        return f"mount namespace: {os.strerror(ctypes.get_errno())}"
    # The same bounds as the host's /dev/shm, so what fits there fits here.
    options = f"mode=1777,size={shm.f_blocks * shm.f_frsize},nr_inodes={shm.f_files}"
    if libc.mount(b"tmpfs", SHM.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) != 0:
        return f"{SHM}: {os.strerror(ctypes.get_errno())}"
    return None
