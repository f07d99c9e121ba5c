"""StrictModes for the daemon's own files, as OpenSSH checks ~/.ssh before trusting it.

The state dir holds every run's token (SQLite) and the children's logs, which the
daemon's user appends to; the socket's dir holds the control socket. Another local
user who owns either, or may write in it (a run's command user, when the dir sits in
/tmp), reads the tokens, points those appends at a file of its choosing, or binds its
own server where the CLI will talk to it. Such a dir, or an entry in it another user
left or turned into a symlink, is refused with what to do, before anything is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jeeves_mcp.settings import writable_by

__all__ = ["dir_problem", "entry_problem", "state_dir_problem", "writable_by"]

# What the daemon opens in its state dir at start (store.py, lifecycle.py).
STATE_ENTRIES = ("daemon.lock", "slots.sqlite3", "slots.sqlite3-wal", "slots.sqlite3-shm", "logs")


def dir_problem(path: Path, what: str, option: str) -> str | None:
    """Why the existing dir `path` is not the daemon's alone, or None."""
    euid = os.geteuid()
    link = path.lstat()
    if stat.S_ISLNK(link.st_mode) and link.st_uid != euid:
        return f"{what} {path} is a symlink owned by uid {link.st_uid}, not {euid}: remove it or choose another {option}"
    info = path.stat()
    if not stat.S_ISDIR(info.st_mode):
        return f"{what} {path} is not a directory: choose another {option}"
    if info.st_uid != euid:
        return f"{what} {path} is owned by uid {info.st_uid}, not {euid}: remove it or choose another {option}"
    mode = stat.S_IMODE(info.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (f"{what} {path} is mode {mode:04o}, writable by {writable_by(mode)}: remove it or "
                f"choose another {option} (or chmod 700 it, once nothing inside is another user's)")
    return None


def entry_problem(path: Path, where: str) -> str | None:
    """Why the entry `path` (if any) is not the daemon's own: a symlink (never followed), or
    another user's. `where` names it in the message ("state dir X holds")."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    euid = os.geteuid()
    if stat.S_ISLNK(info.st_mode):
        return f"{where} {path.name} as a symlink: remove it"
    if info.st_uid != euid:
        return f"{where} {path.name} owned by uid {info.st_uid}, not {euid}: remove it"
    if stat.S_ISDIR(info.st_mode) and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{where} {path.name} writable by {writable_by(info.st_mode)}: remove it"
    return None


def state_dir_problem(state_dir: Path) -> str | None:
    """Why the existing `state_dir` or what the daemon opens in it is not the daemon's alone.

    An entry another user left while the dir was open to them (then chmod-ed 0700) would
    still give them the tokens (a database file they own: SQLite keeps its owner, and the
    -wal's) or the daemon's appends (a symlink).
    """
    problem = dir_problem(state_dir, "state dir", "--state-dir")
    for name in STATE_ENTRIES:
        if problem is None:
            problem = entry_problem(state_dir / name, f"state dir {state_dir} holds")
    return problem
