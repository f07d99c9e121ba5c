"""A cgroup v2 per slot, where the daemon may make them: what a run leaves behind dies with it.

The pruner child is its commands' subreaper and kills them when it stops; a child
killed outright (SIGKILL, OOM) cannot. A slot's child goes into its own cgroup
under the daemon's (`<daemon's cgroup>/jeeves-<state dir hash>/slot-<run id>`),
and everything it starts stays in it: when the child dies or the slot ends,
`cgroup.kill` takes all of it at once. Under systemd this needs `Delegate=yes`;
as root it works anywhere cgroup v2 is mounted. Where the daemon may not write
its cgroup (or the kernel has no `cgroup.kill`, before 5.14) slots get none and
the subreaper is the only guard.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import signal
from pathlib import Path

import trio

from jeeves_mcp.proc.fuse import abort_stuck_fuse

log = logging.getLogger(__name__)

__all__ = ["SlotCgroups", "cgroup_base", "own_cgroup"]

# How long a killed cgroup may take to empty before it is left for the next kill.
EMPTY_WAIT_S = 2.0
# Polls (10 ms each) between signals to each process still in a killed cgroup.
MEMBER_KILL_EVERY = 5
MEMBER_BATCH = 256  # pidfds open at once while doing so


def own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, from /proc/self/cgroup and the cgroup2 mount."""
    try:
        entry = next((line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                      if line.startswith("0::")), None)
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    if entry is None:
        return None
    for line in mounts:
        fields = line.split()
        if " - cgroup2 " in line and len(fields) > 4:
            return Path(fields[4]) / entry.lstrip("/")
    return None


def cgroup_base(state_dir: Path) -> Path | None:
    """Where the daemon of `state_dir` keeps its slots' cgroups (whether made or not)."""
    own = own_cgroup()
    if own is None:
        return None
    return own / f"jeeves-{hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]}"


class SlotCgroups:
    """Per-slot cgroups under `base`, or nothing at all when `base` is None."""

    def __init__(self, base: Path | None) -> None:
        self.base = base

    @classmethod
    def for_state_dir(cls, state_dir: Path) -> SlotCgroups:
        """Slots' cgroups for the daemon of `state_dir`, if this process may create them;
        the name stays the same across restarts, so a restarted daemon finds them."""
        base = cgroup_base(state_dir)
        if base is None or not os.access(base.parent, os.W_OK):
            return cls(None)
        try:
            base.mkdir(exist_ok=True)
        except OSError as exc:
            log.warning("cgroups.unavailable", extra={"path": str(base), "error": str(exc)})
            return cls(None)
        if not (base / "cgroup.kill").exists():  # (the root cgroup has none of its own)
            with contextlib.suppress(OSError):
                base.rmdir()
            return cls(None)
        return cls(base)

    def path(self, run_id: str) -> Path | None:
        return None if self.base is None else self.base / f"slot-{run_id}"

    def place(self, run_id: str, pid: int) -> bool:
        """Move a slot's child into the slot's cgroup; False if there is none."""
        path = self.path(run_id)
        if path is None:
            return False
        try:
            path.mkdir(exist_ok=True)
            (path / "cgroup.procs").write_text(str(pid))
        except OSError as exc:
            log.warning("cgroups.place_failed", extra={"run_id": run_id, "pid": pid, "error": str(exc)})
            return False
        return True

    async def kill(self, run_id: str, *, remove: bool = True) -> None:
        """SIGKILL everything left in a slot's cgroup and wait until it is empty; then remove
        the cgroup (or keep it for the slot's next child)."""
        path = self.path(run_id)
        if path is None or not path.exists():
            return
        try:
            (path / "cgroup.kill").write_text("1")
        except OSError as exc:
            log.warning("cgroups.kill_failed", extra={"run_id": run_id, "error": str(exc)})
            return
        await _emptied(path)
        if _populated(path):
            # Waiting on a FUSE mount of its own (attack reviews 9 and 10): abort it, and it dies.
            # In a thread: it reads the host's mount tables. Never at the cost of the slot.
            try:
                aborted = await trio.to_thread.run_sync(abort_stuck_fuse, _members(path))
            except Exception as exc:
                log.warning("cgroups.fuse_abort_failed", extra={"run_id": run_id, "error": repr(exc)})
                aborted = []
            if aborted:
                log.warning("cgroups.fuse_aborted", extra={"run_id": run_id, "connections": aborted})
                await _emptied(path)
        if _populated(path):
            log.warning("cgroups.not_empty", extra={"run_id": run_id, "pids": _members(path)[:20]})
        if remove:
            try:
                path.rmdir()
            except OSError as exc:
                log.warning("cgroups.remove_failed", extra={"run_id": run_id, "error": str(exc)})

    def close(self) -> None:
        """Remove the daemon's own cgroup directory if no slot is left in it."""
        if self.base is not None:
            with contextlib.suppress(OSError):
                self.base.rmdir()


async def _emptied(path: Path) -> None:
    """Wait up to EMPTY_WAIT_S for a killed cgroup to empty, signalling what stays in it."""
    with trio.move_on_after(EMPTY_WAIT_S):
        for round_ in itertools.count():
            if not _populated(path):
                return
            if round_ % MEMBER_KILL_EVERY == MEMBER_KILL_EVERY - 1:
                _kill_members(path)
            await trio.sleep(0.01)


def _members(path: Path) -> list[int]:
    try:
        return [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _kill_members(path: Path) -> None:
    """SIGKILL each process still in the cgroup through a pidfd. `cgroup.kill` signals a
    process through its main thread, and the signal is lost when that thread has ended alone
    (raw SYS_exit) while others run on (attack review 7, H1); a pidfd's signal reaches the
    whole process."""
    members = _members(path)
    for start in range(0, len(members), MEMBER_BATCH):  # a fork bomb's thousands: few fds at once
        opened = {}
        for pid in members[start : start + MEMBER_BATCH]:
            with contextlib.suppress(OSError):
                opened[pid] = os.pidfd_open(pid)
        still_in = set(_members(path))  # not a pid recycled between the first read and the open
        for pid, fd in opened.items():
            try:
                if pid in still_in:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)


def _populated(path: Path) -> bool:
    try:
        for line in (path / "cgroup.events").read_text().splitlines():
            if line.startswith("populated "):
                return line.split()[1] != "0"
    except OSError:
        return False
    return False
