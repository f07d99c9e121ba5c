"""Which runs' records never reached the database: a note written in place, on a full disk too.

When the reserve (reserve.py) is spent and the disk fills again, a record (a release) lives
only in the daemon's memory; a restart would believe the database and bring a released run
back. The store keeps, beside the database, a small file of NOTE_BYTES written with zeros
when it is made, so that it holds real blocks: it is later overwritten in place (pwrite
within its size, fsync), which takes no new space on a filesystem that is not
copy-on-write. Whenever the runs with unsaved records change, the note names them; the next
daemon restores those runs degraded instead of restarting their children, then clears it.

The note is the daemon's alone: opened without following a link, used only if it is a
regular file of the daemon's user of exactly NOTE_BYTES (the state dir is checked 0700 and
the name is among the entries strictmodes.py refuses when a symlink or another user's).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection
from pathlib import Path

UNSAVED_NAME = "unsaved.runs"
NOTE_BYTES = 4096  # one block: a run id is at most 128 bytes
HEADER = b"jeeves-mcp unsaved runs 1\n"
EVERY_RUN = "*"  # more runs than the note holds: each is taken as unsaved (no run id starts with '*')


class NoteRefused(OSError):
    """The note is not one the daemon made (another owner, a link, another size) or not its format."""


def encode(run_ids: Collection[str], size: int = NOTE_BYTES) -> bytes:
    """The note's whole content: the header, one run id a line (or EVERY_RUN), zeros to `size`."""
    body = HEADER + b"".join(f"{run_id}\n".encode() for run_id in sorted(run_ids))
    if len(body) > size:
        body = HEADER + f"{EVERY_RUN}\n".encode()
    return body.ljust(size, b"\0")


def decode(data: bytes) -> frozenset[str]:
    """The run ids a note's content names; a note made and never written names none."""
    text = data.split(b"\0", 1)[0]
    if not text:
        return frozenset()
    if not text.startswith(HEADER):
        raise NoteRefused("not a note of unsaved runs (unknown header)")
    try:
        lines = text[len(HEADER):].decode("ascii").splitlines()
    except UnicodeDecodeError as exc:
        raise NoteRefused("not a note of unsaved runs (not ASCII)") from exc
    return frozenset(line for line in lines if line)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory `path` durable (a file just created in it, say)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class UnsavedNote:
    """The note at `path`, `size` bytes, mode 0600."""

    def __init__(self, path: Path, size: int = NOTE_BYTES) -> None:
        self.path = path
        self.size = size
        try:
            info = path.lstat()
        except OSError:
            self.held = False
        else:
            self.held = stat.S_ISREG(info.st_mode) and info.st_size == size

    def _open(self, flags: int) -> int:
        """An fd on the note, checked through that fd: a regular file of ours, one link, `size` bytes."""
        fd = os.open(self.path, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_nlink != 1:
                raise NoteRefused(f"{self.path} is not a regular file of uid {os.geteuid()} with one link")
            if info.st_size != self.size and not flags & os.O_CREAT:
                raise NoteRefused(f"{self.path} has {info.st_size} bytes, not {self.size}")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def make(self) -> bool:
        """Create the note (zeros: it names no run) unless it is there already; whether it is held.
        Its directory is fsynced too: a power loss soon after must not take the note's entry."""
        if self.held:
            return True
        try:
            fd = self._open(os.O_RDWR | os.O_CREAT)
        except OSError:
            return False
        try:
            os.fchmod(fd, 0o600)
            if os.pwrite(fd, bytes(self.size), 0) != self.size:
                return False
            os.ftruncate(fd, self.size)
            os.fsync(fd)
            fsync_dir(self.path.parent)
        except OSError:
            return False
        finally:
            os.close(fd)
        self.held = True
        return True

    def read(self) -> frozenset[str]:
        """The runs the note names: none when there is no note; NoteRefused (or another OSError)
        when it is one not to trust or read."""
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            return frozenset()
        try:
            return decode(os.pread(fd, self.size, 0))
        finally:
            os.close(fd)

    def write(self, run_ids: Collection[str]) -> OSError | None:
        """Overwrite the note in place to name `run_ids`; None once it is on disk, else the error."""
        data = encode(run_ids, self.size)
        try:
            fd = self._open(os.O_WRONLY)
        except OSError as exc:  # gone, or not one to write: make() tries anew next time
            self.held = False
            return exc
        try:
            written = os.pwrite(fd, data, 0)
            if written != len(data):
                return OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        except OSError as exc:
            return exc
        finally:
            os.close(fd)
        return None
