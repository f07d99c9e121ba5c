"""Abort the FUSE connections that hold a killed slot's processes.

A process that serves a FUSE mount and waits on it cannot be killed: SIGKILL leaves it waiting
for the answer that only its own /dev/fuse descriptor could give (attack review 9, H1). The
child hides /dev/fuse from its commands, but a command still gets one through another process
of its owner (/proc/PID/root) or a descriptor passed over a socket, and its mount need not be
in any mount table: one made with fsmount and never attached, or kept in a namespace no process
is in, is listed nowhere (review 10, F1). So the connections are found from their side: every
connection with a request waiting that no process outside the slot can see mounted (not the
host's, not another run's, not one in a namespace the slot's processes joined: review 10, F2).
Someone else's FUSE mount that is not attached anywhere (lazily unmounted, or being mounted)
and has a request in flight at that moment would be aborted too. A scan that takes too long
aborts nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["abort_stuck_fuse", "fuse_devices", "mounted_outside"]

CONNECTIONS = Path("/sys/fs/fuse/connections")
# The longest the mount tables of the host may take to read (an owner can make many
# namespaces of many mounts); past it, nothing is aborted.
SCAN_S = 5.0


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
    if CONNECTIONS.is_dir() and not os.path.ismount(CONNECTIONS):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount(b"fusectl", bytes(CONNECTIONS), b"fusectl", 0, None)
    waiting = []
    with contextlib.suppress(OSError):
        for entry in CONNECTIONS.iterdir():
            with contextlib.suppress(OSError, ValueError):
                if entry.name.isdigit() and int((entry / "waiting").read_text()) > 0:
                    waiting.append(int(entry.name))
    return waiting


def mounted_outside(members: set[int], waiting: set[int], deadline: float) -> set[int] | None:
    """Of the `waiting` connection numbers (device minors), those mounted where a process
    outside `members` sees them: one mount table read per mount namespace and root (a chrooted
    process sees part of its namespace's table). None when that took past `deadline`."""
    seen: set[tuple[str, str]] = set()
    minors: set[int] = set()
    for name in os.listdir("/proc"):
        if minors >= waiting:
            break
        if time.monotonic() > deadline:
            return None
        if not name.isdigit() or int(name) in members:
            continue
        try:
            where = (os.readlink(f"/proc/{name}/ns/mnt"), os.readlink(f"/proc/{name}/root"))
            if where in seen:
                continue
            # Mount points are bytes: a name that is no UTF-8 must not stop the scan.
            with open(f"/proc/{name}/mountinfo", encoding="utf-8", errors="surrogateescape") as table:
                devices = fuse_devices(table.read())
        except OSError:
            continue
        seen.add(where)
        minors |= {int(device.split(":")[1]) for device in devices if device.startswith("0:")}
    return minors


def abort_stuck_fuse(members: Iterable[int], scan_s: float = SCAN_S) -> list[int]:
    """Abort the connections with a request waiting that no process outside `members` (a killed
    slot's processes that stay) sees mounted; the connection numbers aborted. Blocking: reads a
    mount table per mount namespace of the host, for at most `scan_s`."""
    waiting = set(_waiting_connections())
    if not waiting:
        return []
    outside = mounted_outside(set(members), waiting, time.monotonic() + scan_s)
    if outside is None:
        return []
    aborted = []
    for minor in sorted(waiting - outside):
        try:
            (CONNECTIONS / str(minor) / "abort").write_text("1")
        except OSError:
            continue
        aborted.append(minor)
    return aborted
