"""Where the daemon keeps its state and listens, by default: the daemon and its clients
(the CLI, the Jeeves runner) both resolve them, so they live below both."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

__all__ = ["default_socket", "default_state_dir", "foreign_symlink", "unix_socket_name"]

MAX_SYMLINKS = 40  # the kernel's limit on links followed in one lookup
SUN_PATH_BYTES = 107  # a Unix socket's name, its NUL left out


def default_state_dir(env: Mapping[str, str]) -> Path:
    if env.get("STATE_DIRECTORY"):  # systemd's StateDirectory=
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    if os.geteuid() == 0:
        return Path("/var/lib/jeeves-mcp")
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "jeeves-mcp"


def default_socket(env: Mapping[str, str], state_dir: Path) -> Path:
    if env.get("JEEVES_MCP_SOCKET"):
        return Path(env["JEEVES_MCP_SOCKET"])
    if env.get("RUNTIME_DIRECTORY"):  # systemd's RuntimeDirectory=
        return Path(env["RUNTIME_DIRECTORY"].split(":")[0]) / "control.sock"
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "jeeves-mcp" / "control.sock"
    return state_dir / "control.sock"


class Lookup(NamedTuple):
    """One name looked up while resolving a path: in the dir `parent`, the entry `step`, its
    lstat (None: it does not exist, and the walk ends); `final`: the path's own last
    component, reached through no symlink."""

    parent: Path
    step: Path
    info: os.stat_result | None
    final: bool


def lookups(path: Path) -> Iterator[Lookup]:
    """Every name the kernel looks up to resolve the absolute `path`, in order: a symlink's
    target is spliced in where it stands, `..` goes up from where the walk is. Ends at a
    name that does not exist, or after MAX_SYMLINKS links (a loop: resolving it fails)."""
    todo = list(reversed(path.parts[1:]))  # components left, next one last
    here = Path("/")
    links = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            here = here.parent
            continue
        step = here / part
        try:
            info: os.stat_result | None = os.lstat(step)
        except OSError:
            info = None
        yield Lookup(here, step, info, not todo and not links)
        if info is None:
            return
        if not stat.S_ISLNK(info.st_mode):
            here = step
            continue
        links += 1
        if links > MAX_SYMLINKS:
            return
        target = os.readlink(step)
        if target.startswith("/"):
            here = Path("/")
        todo.extend(reversed(Path(target).parts[1:] if target.startswith("/") else Path(target).parts))


def foreign_symlink(path: Path) -> str | None:
    """Why `path` (absolute) may not be a run root, or None: it passes through a symlink that
    neither root nor this process's user owns. Whoever owns such a link can repoint it, and
    the run's user owns the links in its own workspace: a run swapped its root for a link to
    /etc, and the next acquire or restart of the child pinned /etc, whose commands run as root
    (attack review N1). An absent part or a loop is for the caller's own check to report."""
    trusted = (0, os.geteuid())
    for look in lookups(path):
        if look.info is not None and stat.S_ISLNK(look.info.st_mode) and look.info.st_uid not in trusted:
            return (f"{path} passes through {look.step}, a symlink of uid {look.info.st_uid} (neither root "
                    f"nor uid {os.geteuid()}), which could repoint it: give a path without it")
    return None


@contextlib.contextmanager
def unix_socket_name(path: Path) -> Iterator[str]:
    """A name to bind or connect `path` by while the block runs: `path` itself, or, when it
    is too long for a socket's name (a deep state dir), the same file reached through a
    descriptor of its directory (`/proc/self/fd/N/NAME`)."""
    if len(os.fsencode(path)) <= SUN_PATH_BYTES:
        yield str(path)
        return
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)
