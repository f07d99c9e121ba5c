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

_inherited_soft: int | None = None  # the soft limit the daemon was started with


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
    1024): (soft before, soft now, hard). Linux's hard limit is never infinite."""
    global _inherited_soft
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if _inherited_soft is None:
        _inherited_soft = soft
    if hard <= soft:
        return soft, soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return soft, soft, hard
    return soft, hard, hard


def restore_for_child(pid: int) -> None:
    """Give a process the daemon started the soft limit the daemon was started with:
    programs its commands run may still use select(), which breaks past 1024."""
    if _inherited_soft is None:
        return
    try:
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        if soft > _inherited_soft:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (_inherited_soft, hard))
    except (OSError, ValueError):
        pass  # gone already, or not ours to change: it keeps the daemon's limit
