"""Abort the FUSE connections that hold a killed slot's processes.

A process that serves a FUSE mount and waits on it cannot be killed: SIGKILL leaves it waiting
for the answer that only its own /dev/fuse descriptor could give (attack review 9, H1). The
child hides /dev/fuse from its commands, but a command still gets one through another process
of its owner (/proc/PID/root) or a descriptor passed over a socket, and its mount need not be
in any mount table: one made with fsmount and never attached, or kept in a namespace no process
is in, is listed nowhere (review 10, F1). So the connections are found from their side: every
connection with a request waiting that no process outside the slot can see mounted (not the
host's, not another run's, not one in a namespace the slot's processes joined: review 10, F2).
A detached FUSE mount of someone else's, with a request in flight at that moment, would be
aborted too; nothing else makes one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["abort_stuck_fuse", "fuse_devices"]

CONNECTIONS = Path("/sys/fs/fuse/connections")


def fuse_devices(mountinfo: str) -> set[str]:
    """The `major:minor` of each FUSE mount in a mountinfo text (fuseblk has a real block
    device, and no connection of that number)."""
    found = set()
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, kind = head.split(), tail.split(" ", 1)[0]
        if sep and len(fields) > 2 and (kind == "fuse" or kind.startswith("fuse.")):
            found.add(fields[2])
    return found


def _waiting_connections() -> list[int]:
    """Connections with a request waiting for an answer; fusectl is mounted where it is not
    (it needs CAP_SYS_ADMIN)."""
    if CONNECTIONS.is_dir() and not any(CONNECTIONS.iterdir()):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount(b"fusectl", bytes(CONNECTIONS), b"fusectl", 0, None)
    waiting = []
    with contextlib.suppress(OSError):
        for entry in CONNECTIONS.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if entry.name.isdigit() and int((entry / "waiting").read_text()) > 0:
                    waiting.append(int(entry.name))
    return waiting


def _mounted_outside(members: set[int]) -> set[int]:
    """The connection numbers (device minors) of the FUSE mounts a process outside `members`
    sees: one mount table read per mount namespace."""
    namespaces: set[str] = set()
    minors: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in members:
            continue
        try:
            namespace = os.readlink(f"/proc/{name}/ns/mnt")
            if namespace in namespaces:
                continue
            devices = fuse_devices(Path(f"/proc/{name}/mountinfo").read_text())
        except OSError:
            continue
        namespaces.add(namespace)
        minors |= {int(device.split(":")[1]) for device in devices if device.startswith("0:")}
    return minors


def abort_stuck_fuse(members: Iterable[int]) -> list[int]:
    """Abort the connections with a request waiting that no process outside `members` (a killed
    slot's processes that stay) sees mounted; the connection numbers aborted."""
    waiting = _waiting_connections()
    if not waiting:
        return []
    theirs = sorted(set(waiting) - _mounted_outside(set(members)))
    aborted = []
    for minor in theirs:
        try:
            (CONNECTIONS / str(minor) / "abort").write_text("1")
        except OSError:
            continue
        aborted.append(minor)
    return aborted
