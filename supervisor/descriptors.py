"""The daemon's own file descriptors.

Running out of them (EMFILE, ENFILE) is the daemon's fault, not a child's: a health ping
that could not even open its socket says nothing about the child it was meant for
(attack T1: a run flooded the TCP control port and another run's healthy child was
restarted, then its slot degraded). The daemon raises its soft limit to the hard one at
start, and gives the processes it starts the soft limit it was started with.
"""

from __future__ import annotations

import errno
import resource

DESCRIPTOR_ERRNOS = (errno.EMFILE, errno.ENFILE)
NR_OPEN = "/proc/sys/fs/nr_open"

_inherited: tuple[int, int] | None = None  # (soft, hard) as the daemon was started


def out_of_descriptors(exc: BaseException) -> OSError | None:
    """The EMFILE/ENFILE behind `exc`: itself, its causes, an exception group's members."""
    stack: list[BaseException] = [exc]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DESCRIPTOR_ERRNOS:
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def raise_soft_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one (systemd's default soft limit is
    1024): (soft before, soft now, hard)."""
    global _inherited
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _inherited is None:
        _inherited = (soft, hard)
    target = hard
    if hard == resource.RLIM_INFINITY:  # the kernel caps an open file table at nr_open
        try:
            with open(NR_OPEN) as handle:
                target = int(handle.read())
        except (OSError, ValueError):
            target = soft
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            target = soft
    return soft, max(target, soft), hard


def restore_for_child(pid: int) -> None:
    """Give a process the daemon started the soft limit the daemon was started with:
    programs its commands run may still use select(), which breaks past 1024."""
    if _inherited is None:
        return
    try:
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        if soft > _inherited[0]:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (_inherited[0], hard))
    except (OSError, ValueError):
        pass  # gone already, or not ours to change: it keeps the daemon's limit
