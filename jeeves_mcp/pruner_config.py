"""Configuration of one pruner child (`jeeves-mcp pruner`, or a child the daemon starts).

Every field is also the key of the `[pruner]` table of the TOML file (`--config`,
`JEEVES_MCP_CONFIG`) and the variable `JEEVES_MCP_<FIELD>`; flags win over the environment,
which wins over the file (`jeeves_mcp.settings`).
"""

from __future__ import annotations

import errno
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from jeeves_mcp import _log
from jeeves_mcp.paths import foreign_symlink
from jeeves_mcp.proc.runner import COMMAND_MAX_PROCESSES
from jeeves_mcp.settings import ConfigError, OldName, Settings, build

__all__ = [
    "OLD_ENV", "TOML_TABLE", "ConfigError", "PrunerConfig", "failed_line", "load_config", "mark_ready",
    "start_failure_line",
]

log = logging.getLogger("jeeves_mcp.config")

TOML_TABLE = "pruner"


class PrunerConfig(Settings):
    """Everything a pruner child needs; one object passed to constructors."""

    host: str = Field("127.0.0.1", description="Address to bind; loopback unless you mean it.")
    port: int = Field(0, ge=0, le=65535, description="TCP port; 0 lets the OS choose.")
    listen_fd: int | None = Field(
        None, ge=3, description="Serve on this inherited listening TCP socket instead of binding host:port (the "
        "supervisor holds each slot's port for the slot's whole life).")
    root: Path = Field(default_factory=Path.cwd, description="Run root: read/grep/bash cwd stay inside it.")
    allow_outside_root: bool = Field(False, description="Let read/grep/bash cwd leave the root.")
    token: str | None = Field(None, repr=False, description="Bearer token required on /mcp and /rpc when set.")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="Larger request bodies get 413.")
    body_timeout_s: float = Field(30.0, gt=0, description="A request body slower than this gets 408 (slowloris).")
    response_budget_bytes: int = Field(10 * 1024, ge=2048, description="A serialized tool result stays under this many bytes (seed 002).")
    max_concurrent_calls: int = Field(8, ge=1, description="Tool calls running at once; more get QUEUE_OVERLOADED.")
    max_sessions: int = Field(256, ge=1, description="Streamable HTTP sessions kept; the least recently used is dropped.")
    max_connections: int = Field(
        128, ge=1, description="HTTP connections held at once (any local user can reach the port); past that a new one "
        "resets the oldest not handling a request with the token, or is reset unread if all are.")
    health_socket: Path | None = Field(
        None, description="Also serve on this Unix socket (0600): the supervisor pings its children there, out of "
        "reach of other local users, who can flood the TCP port.")
    store_ttl_s: float = Field(3600.0, gt=0, description="Lifetime of a prune_id / output id in the recovery store.")
    store_max_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Total text kept by the recovery store (LRU).")
    max_prune_input_bytes: int = Field(2 * 1024 * 1024, ge=1, description="Larger outputs are not pruned (input_too_large).")
    prune_timeout_ms: int = Field(3000, ge=1, description="Soft deadline of one pruning.")
    pruner_endpoint: str | None = Field(None, description="External SWE-Pruner service; unset = built-in engine.")
    pruner_threshold: float = Field(0.5, ge=0, le=1, description="SWE-Pruner's `threshold` sent to the external service.")
    pruner_chunk_overlap_tokens: int = Field(50, ge=0, description="SWE-Pruner's `chunk_overlap_tokens` sent to the external service.")
    pruning_enabled: bool = Field(True, description="False answers every question with the raw output.")
    history_timeout_ms: int = Field(1000, ge=0, description="A focused read of code in a git workspace blames the file, and a pruned search or file listing reads HEAD's last 40 commits (git runs as the run's user), so that recently changed lines and files weigh more; 0 = never.")
    bash_timeout_ms: int = Field(120_000, ge=1, description="Default timeout of a bash command.")
    grep_timeout_ms: int = Field(30_000, ge=1, description="Default timeout of a grep.")
    kill_grace_ms: int = Field(2000, ge=0, description="SIGTERM to SIGKILL grace for tool processes.")
    max_output_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Output captured per command stream; the rest is drained and counted.")
    command_max_processes: int = Field(
        COMMAND_MAX_PROCESSES, ge=16, le=4_194_304, description="RLIMIT_NPROC of bash and grep commands run as the root's "
        "owner: processes and threads that user may have, its other runs' included. Runs of different owners share the "
        "daemon's TasksMax: size this so a few runs cannot take it all.")
    env_allow: tuple[str, ...] = Field(
        ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"),
        description="Environment variables a bash command inherits; the rest are dropped.",
    )

    @field_validator("root")
    @classmethod
    def _resolve_root(cls, value: Path) -> Path:
        absolute = value.expanduser().absolute()
        # A restarted child resolves its root again: not through a link a run could repoint.
        if (problem := foreign_symlink(absolute)) is not None:
            raise ValueError(f"root {problem}")
        resolved = absolute.resolve()
        if not resolved.is_dir():
            raise ValueError(f"root {value} is not a directory")
        return resolved


# Other spellings: seed 001's MCP_PRUNER_* and seed 000's endpoint, accepted quietly; the
# JEEVES_PRUNER_* names this project used before, accepted with a deprecation log line.
OLD_ENV: dict[str, OldName] = {
    "MCP_PRUNER_HOST": OldName("host", "seed 001"),
    "MCP_PRUNER_PORT": OldName("port", "seed 001"),
    "MCP_PRUNER_MAX_INPUT_CHARS": OldName("max_prune_input_bytes", "seed 001"),
    "MCP_PRUNER_PRUNE_ID_TTL_S": OldName("store_ttl_s", "seed 001"),
    "JEEVES_PRUNER_ENDPOINT": OldName("pruner_endpoint", "seed 000"),
    "JEEVES_PRUNER_ENABLED": OldName("pruning_enabled"),
    "JEEVES_PRUNER_THRESHOLD": OldName("pruner_threshold"),
    "JEEVES_PRUNER_CHUNK_OVERLAP_TOKENS": OldName("pruner_chunk_overlap_tokens"),
}


def load_config(
    env: Mapping[str, str] | None = None, *, config_file: Path | None = None, **flags: Any
) -> PrunerConfig:
    """The config from non-None `flags`, then `env` (default `os.environ`), then the `[pruner]`
    table of `config_file` (default `$JEEVES_MCP_CONFIG`), then the defaults."""
    import os

    env = os.environ if env is None else env
    if config_file is None and env.get("JEEVES_MCP_CONFIG"):
        config_file = Path(env["JEEVES_MCP_CONFIG"])
    config = build(
        PrunerConfig, env, toml_file=config_file, toml_table=TOML_TABLE, old_env=OLD_ENV, flags=flags
    )
    # Variables the supervisor put in this child's environment for the run's commands.
    passed = [name for name in env.get("JEEVES_MCP_ENV_PASS", "").split(",") if name]
    if passed:
        config = config.model_copy(update={"env_allow": (*config.env_allow, *passed)})
    return config


def failed_line(exc: ConfigError, *, log_it: bool) -> str:
    """The line a child that cannot start prints on stdout, where the daemon waits for its
    ready line, so that the slot's reason says why; `log_it`: also into its log file."""
    if log_it:
        _log.event(log, "pruner.bad_config", logging.ERROR, error=str(exc))
    return json.dumps({"event": "failed", "error": str(exc)})


# A child that cannot make its files for these is the host's shortage, not its run's fault.
SHORT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT)

# Whether this process printed its ready line: past it, stdout is no longer where the daemon waits.
_ready_sent = False


def mark_ready() -> None:
    """The ready line is out: a later failure is no start failure."""
    global _ready_sent
    _ready_sent = True


def start_failure_line(exc: BaseException) -> str | None:
    """The failed line for an OS error that stopped a child before its ready line (no space,
    no inode, no permission in the state dir), so that the slot's reason names it instead of
    "child exited before it was ready"; None once ready, or when `exc` holds no OSError."""
    if _ready_sent:
        return None
    pending = [exc]
    while pending:  # trio raises what failed inside a nursery as a group
        found = pending.pop(0)
        if isinstance(found, OSError):
            short = " (no space or no inode left there)" if found.errno in SHORT_OF_SPACE else ""
            return json.dumps({"event": "failed", "error": f"cannot start: {found}{short}", "errno": found.errno})
        if isinstance(found, BaseExceptionGroup):
            pending.extend(found.exceptions)
        elif found.__cause__ is not None:
            pending.append(found.__cause__)
    return None
