"""The daemon's own file descriptors.

Running out of them (EMFILE, ENFILE) is the daemon's fault, not a child's: a health ping
that could not even open its socket says nothing about the child it was meant for
(attack T1: a run flooded the TCP control port and another run's healthy child was
restarted, then its slot degraded).
"""

from __future__ import annotations

import errno

DESCRIPTOR_ERRNOS = (errno.EMFILE, errno.ENFILE)


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
