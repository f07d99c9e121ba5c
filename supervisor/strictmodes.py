"""StrictModes for the daemon's own files, as OpenSSH checks ~/.ssh before trusting it.

The state dir holds every run's token (SQLite) and the children's logs, which the
daemon's user appends to; the socket's dir holds the control socket. Another local
user who owns either, or may write in it (a run's command user, when the dir sits in
/tmp), reads the tokens, points those appends at a file of its choosing, or binds its
own server where the CLI will talk to it. Such a dir, or an entry in it another user
left or turned into a symlink, is refused with what to do, before anything is written.
So is a dir below one that another user owns or may write (not sticky, as /tmp is):
that user renames the daemon's dir away and puts one of its own in its place while the
daemon runs (attack re-check N3).

Before each child starts, the daemon checks what the child would otherwise find wrong
without a word the slot could show: a log it appends to, the config file it reads.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from jeeves_mcp.paths import lookups
from jeeves_mcp.settings import ConfigError, read_config_file, writable_by
from jeeves_mcp.supervisor.reserve import RESERVE_NAME
from jeeves_mcp.supervisor.unsaved import UNSAVED_NAME

__all__ = [
    "ancestor_problem", "dir_problem", "entry_problem", "root_problem", "spawn_problem", "state_dir_problem",
    "writable_by",
]

# What the daemon opens in its state dir at start (store.py, reserve.py, unsaved.py, child_start.py).
STATE_ENTRIES = ("daemon.lock", "slots.sqlite3", "slots.sqlite3-wal", "slots.sqlite3-shm", RESERVE_NAME, UNSAVED_NAME,
                 "logs")


def ancestor_problem(path: Path, what: str, option: str, owners: tuple[int, ...] = ()) -> str | None:
    """Why a dir on the way to `path` is not to be trusted, or None: as OpenSSH's StrictModes,
    every dir the kernel looks a name up in while resolving `path` (from `/`, through any
    symlink, up to but not including `path` itself) is root's, ours or one of `owners`', and
    writable by nobody else unless sticky; a symlink passed likewise. A part that does not
    exist ends the walk: `dir_problem` reports what is wrong with the dir itself."""
    euid = os.geteuid()
    trusted = (0, euid, *owners)
    checked: set[Path] = set()
    for look in lookups(path.absolute()):
        here = look.parent
        if here not in checked:
            checked.add(here)
            info = here.stat()
            mode = stat.S_IMODE(info.st_mode)
            if info.st_uid not in trusted:
                return (f"{what} {path} is below {here}, owned by uid {info.st_uid}, neither root nor uid {euid}: "
                        f"its owner could put a dir of its own in place of it; choose another {option}")
            if mode & (stat.S_IWGRP | stat.S_IWOTH) and not mode & stat.S_ISVTX:
                return (f"{what} {path} is below {here}, mode {mode:04o}, writable by {writable_by(mode)} "
                        f"and not sticky: they could put a dir of their own in place of it; choose another "
                        f"{option} (or chmod go-w {here})")
        link = look.info
        if link is not None and stat.S_ISLNK(link.st_mode) and link.st_uid not in trusted:
            if look.final:
                return None  # `path` itself: dir_problem names it
            return (f"{what} {path} passes through {look.step}, a symlink of uid {link.st_uid}, neither root nor "
                    f"uid {euid}, which could repoint it: choose another {option}")
    return None


def dir_problem(path: Path, what: str, option: str) -> str | None:
    """Why the existing dir `path`, or one on the way to it, is not the daemon's alone, or None."""
    if (problem := ancestor_problem(path, what, option)) is not None:
        return problem
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


def root_problem(root: Path) -> str | None:
    """Why a run root's path is not stable, or None: a user who may rename entries in a dir on
    the way to it (another run's, a group's) could put a dir of its choice in its place before
    a child starts: its own tree, or a root-owned one, whose commands run as the daemon's user."""
    try:
        owner = root.stat().st_uid
    except OSError as exc:
        return f"run root {root} cannot be used: {exc.strerror}"
    return ancestor_problem(root, "run root", "run root", owners=(owner,))


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


def spawn_problem(log_file: Path, env: Mapping[str, str], root: Path) -> str | None:
    """Why a child with the environment `env` is not to be started, or None: the log it appends
    to and rotates as the daemon's user, following symlinks, is a symlink or another user's
    (attack review F5); or the config file it reads (from `root`, its cwd) is one it would
    refuse (N4), in its words: refused there, they went to its stderr, which is nowhere; or its
    root's path could have been swapped (`root_problem`)."""
    if (problem := root_problem(root)) is not None:
        return problem
    for path in (log_file, log_file.with_name(log_file.name + ".1")):
        if (problem := entry_problem(path, f"log dir {path.parent} holds")) is not None:
            return problem
    if config := env.get("JEEVES_MCP_CONFIG"):
        try:
            read_config_file(root / config)
        except ConfigError as exc:
            return str(exc)
    return None
