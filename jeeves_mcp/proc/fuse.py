"""Abort the FUSE connections a slot's processes made for themselves.

A process that serves a FUSE mount and waits on it cannot be killed: SIGKILL leaves it waiting
for the answer that only its own /dev/fuse descriptor could give (attack review 9, H1). The
child hides /dev/fuse from its commands, but a command of an owner with processes outside the
run still reaches the host's through /proc/PID/root. Aborting the connection ends the wait.
Only mounts the host does not see are aborted: those the run made in namespaces of its own,
never a FUSE mount of the host's that propagated into them.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterable
from pathlib import Path

__all__ = ["abort_private_fuse", "fuse_devices"]

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


def abort_private_fuse(pids: Iterable[int]) -> list[int]:
    """Abort the connections of the FUSE mounts `pids` see and this process does not; the
    connection numbers aborted. fusectl is mounted where it is not (it needs CAP_SYS_ADMIN)."""
    try:
        own = fuse_devices(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return []
    theirs: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            theirs |= fuse_devices(Path(f"/proc/{pid}/mountinfo").read_text())
    minors = sorted({int(device.split(":")[1]) for device in theirs - own if device.startswith("0:")})
    if not minors:
        return []
    if CONNECTIONS.is_dir() and not any(CONNECTIONS.iterdir()):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount(b"fusectl", bytes(CONNECTIONS), b"fusectl", 0, None)
    aborted = []
    for minor in minors:
        try:
            (CONNECTIONS / str(minor) / "abort").write_text("1")
        except OSError:
            continue
        aborted.append(minor)
    return aborted
