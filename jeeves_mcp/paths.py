"""Where the daemon keeps its state and listens, by default: the daemon and its clients
(the CLI, the Jeeves runner) both resolve them, so they live below both."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_socket", "default_state_dir"]


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
