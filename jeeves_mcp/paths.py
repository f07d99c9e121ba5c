"""Where the daemon keeps its state and listens, by default: the daemon and its clients
(the CLI, the Jeeves runner) both resolve them, so they live below both."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_socket", "default_state_dir", "foreign_symlink"]

_MAX_SYMLINKS = 40  # the kernel's limit on links followed in one lookup


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


def foreign_symlink(path: Path) -> str | None:
    """Why `path` (absolute) may not be a run root, or None: it passes through a symlink that
    neither root nor this process's user owns. Whoever owns such a link can repoint it, and
    the run's user owns the links in its own workspace: a run swapped its root for a link to
    /etc, and the next acquire or restart of the child pinned /etc, whose commands run as root
    (attack review N1)."""
    trusted = (0, os.geteuid())
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
            info = os.lstat(step)
        except OSError:
            return None  # absent: the caller's own check says so
        if not stat.S_ISLNK(info.st_mode):
            here = step
            continue
        if info.st_uid not in trusted:
            return (f"{path} passes through {step}, a symlink of uid {info.st_uid} (neither root "
                    f"nor uid {os.geteuid()}), which could repoint it: give a path without it")
        links += 1
        if links > _MAX_SYMLINKS:
            return None  # a loop: resolving it fails where the caller resolves
        target = os.readlink(step)
        if target.startswith("/"):
            here = Path("/")
        todo.extend(reversed(Path(target).parts[1:] if target.startswith("/") else Path(target).parts))
    return None
