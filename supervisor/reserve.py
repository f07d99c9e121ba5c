"""Room kept for the slot records: a preallocated file in the state dir, given back when
the disk is full.

A run whose root shares a filesystem with the state dir can fill it; the daemon's next
record (a release, an acquire) would then exist only in its memory, and a restart would
believe the file: a released run back, an acquired one killed as a stray. The store
deletes this file on its first write that fails for lack of space and writes again at
once, and makes the file anew once there is room for it and HEADROOM more.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from jeeves_mcp.supervisor.unsaved import fsync_dir

RESERVE_NAME = "space.reserve"
RESERVE_BYTES = 4 * 1024 * 1024
# A failure that names no cause (SQLite's "disk I/O error") counts as lack of space when
# the filesystem has less than this left.
_NEARLY_FULL = 1024 * 1024
# Left free when the reserve is made: its space must not be what the next write needs.
HEADROOM = 1024 * 1024


def free_bytes(directory: Path) -> int | None:
    """What an unprivileged writer may still use on `directory`'s filesystem."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def out_of_space(exc: BaseException, directory: Path) -> bool:
    """Whether a failed write failed for lack of space (or quota) under `directory`."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_FULL:
        return True
    if "disk is full" in str(exc):
        return True
    free = free_bytes(directory)
    return free is not None and free < _NEARLY_FULL


class SpaceReserve:
    """The reserve file at `path`, `size` bytes allocated, mode 0600, never followed as a link."""

    def __init__(self, path: Path, size: int = RESERVE_BYTES) -> None:
        self.path = path
        self.size = size
        self.held = self._complete()

    def _complete(self) -> bool:
        try:
            info = self.path.lstat()
        except OSError:
            return False
        return info.st_size >= self.size and info.st_blocks * 512 >= self.size

    def make(self) -> bool:
        """Allocate the reserve if the filesystem has room for it and HEADROOM more;
        whether it is held. The file's blocks and then its directory entry are fsynced:
        after a crash, a reserve absent or short frees less than the store counts on."""
        if self.held:
            return True
        free = free_bytes(self.path.parent)
        if free is None or free < self.size + HEADROOM:
            return False
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            return False
        try:
            os.fchmod(fd, 0o600)
            os.posix_fallocate(fd, 0, self.size)
            os.fsync(fd)
            fsync_dir(self.path.parent)
        except OSError:
            os.close(fd)
            self.give_back()
            return False
        os.close(fd)
        self.held = True
        return True

    def give_back(self) -> bool:
        """Delete the reserve; whether there was one (its space is free again)."""
        self.held = False
        try:
            self.path.unlink()
        except OSError:  # none there (or not ours to delete)
            return False
        return True
