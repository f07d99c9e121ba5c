"""Daemon configuration: defaults, then a TOML file, then `JEEVES_MCP_*` environment, then flags.

Every field is a top-level key of the TOML file and the variable `JEEVES_MCP_<FIELD>`
(`jeeves_mcp.settings`). The file's `[pruner]` table configures the children: it is checked
here, and every child is pointed at the file.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from jeeves_mcp.paths import default_socket, default_state_dir
from jeeves_mcp.pruner_config import OLD_ENV as CHILD_OLD_ENV
from jeeves_mcp.pruner_config import TOML_TABLE, PrunerConfig, load_config
from jeeves_mcp.settings import OldName, Settings, build, reference_table

# Shortest tcp_token accepted: what every run's commands may try against the port.
MIN_TOKEN_CHARS = 16
# And how random it must look, by a crude estimate of its bits: its length times log2 of
# its distinct characters ("a" * 16 is 0, a 16-character hex token about 55). The fewest
# distinct characters also refuses a long token of a few repeated ones ("ab" * 40 is 80).
MIN_TOKEN_BITS = 64
MIN_TOKEN_DISTINCT_CHARS = 8
MAKE_A_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
# How long a TCP control connection may go without a request in progress: what every run's
# commands can hold of the connection cap with half-sent requests (NF4).
TCP_HEADER_TIMEOUT_S = 1.0


def token_bits(token: str) -> float:
    """A crude estimate of a token's randomness: its length times log2 of its distinct characters."""
    return len(token) * math.log2(len(set(token))) if token else 0.0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class DaemonConfig(Settings):
    """Everything the supervisor daemon reads; one object passed to constructors."""

    state_dir: Path = Field(description="SQLite slot records and per-slot child logs.")
    socket: Path = Field(description="Control API Unix socket (created mode 0600).")
    tcp_host: str | None = Field(None, description="Also serve the control API on this loopback address.")
    tcp_port: int = Field(0, ge=0, le=65535, description="TCP port for the control API (0 = OS chooses).")
    tcp_token: str | None = Field(
        None, repr=False, description="Bearer token required on the TCP control API: 16 characters or more, 8 distinct, "
        "64 bits or more by length x log2(distinct).")
    tcp_max_connections: int = Field(
        256, ge=1, description="TCP control connections held at once; past that a new one resets the oldest not "
        "handling a request with the token, or is reset unread if all are (the Unix socket has no cap).")
    tcp_header_timeout_s: float = Field(
        TCP_HEADER_TIMEOUT_S, gt=0, description="A TCP control connection not handling a request with the token is "
        "closed after this (reset 0.5 s later if still open): a new one whose request headers are not complete, "
        "a kept-alive one waiting for its next.")
    body_timeout_s: float = Field(30.0, gt=0, description="A control request body slower than this gets 408.")
    pruner_enabled: bool = Field(True, description="False gives every new slot the disabled state, no child.")
    max_slots: int = Field(100, ge=1, description="Slots alive at once; more get 429 QUEUE_OVERLOADED.")
    startup_timeout_s: float = Field(20.0, gt=0, description="A child must be healthy within this.")
    shutdown_timeout_ms: int = Field(3000, ge=0, description="SIGTERM to SIGKILL grace when stopping a child.")
    health_interval_s: float = Field(5.0, gt=0, description="Seconds between MCP pings of a child.")
    health_timeout_s: float = Field(3.0, gt=0, description="One ping's timeout.")
    health_failures: int = Field(3, ge=1, description="Consecutive failed pings that count as a crash.")
    max_restarts: int = Field(2, ge=0, description="Restarts per slot before it is degraded for the run.")
    restart_backoff_s: float = Field(0.2, ge=0, description="First restart delay; doubles, with jitter.")
    restart_backoff_max_s: float = Field(5.0, ge=0, description="Cap of the restart delay.")
    default_ttl_s: float | None = Field(None, gt=0, description="Lease of slots acquired without ttl_s; none = no lease.")
    live_restore: bool = Field(False, description="On SIGTERM leave children running for the next daemon to re-adopt.")
    pruner_endpoint: str | None = Field(None, description="Default external SWE-Pruner for new slots.")
    child_env: dict[str, str] = Field(default_factory=dict, description="Extra environment for every child.")
    fork_server: bool = Field(True, description="Fork children from a pre-imported zygote (~10 ms) rather than start each cold (~0.3 s).")
    spawn_concurrency: int = Field(2, ge=1, description="Children started at once; more acquires wait their turn.")
    child_log_bytes: int = Field(1024 * 1024, ge=4096, description="Per-slot child log kept on disk (rotated once).")

    @model_validator(mode="after")
    def _tcp_is_loopback_with_a_token(self) -> DaemonConfig:
        # The control API starts children that run commands: it never answers the
        # network, and never answers TCP peers without a token.
        if self.tcp_host is None:
            return self
        if not _is_loopback(self.tcp_host):
            raise ValueError(f"tcp_host {self.tcp_host!r} is not a loopback address")
        if not self.tcp_token:
            raise ValueError("tcp_host needs tcp_token: the TCP control API is refused without one")
        if self.tcp_token != self.tcp_token.strip():  # headers are read stripped: it could never match
            raise ValueError("tcp_token starts or ends with whitespace, which no client can send: remove it")
        # Every run's commands can reach the port: a token they could guess is refused.
        random_one = f"every run's commands can reach the port, so use a random one, e.g. {MAKE_A_TOKEN}"
        if len(self.tcp_token) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"tcp_token has {len(self.tcp_token)} characters, fewer than {MIN_TOKEN_CHARS}: {random_one}")
        distinct, bits = len(set(self.tcp_token)), token_bits(self.tcp_token)
        if distinct < MIN_TOKEN_DISTINCT_CHARS or bits < MIN_TOKEN_BITS:
            raise ValueError(
                f"tcp_token looks guessable: {len(self.tcp_token)} characters, {distinct} distinct, about "
                f"{bits:.0f} bits by length x log2(distinct); it needs {MIN_TOKEN_DISTINCT_CHARS} distinct and "
                f"{MIN_TOKEN_BITS} bits: {random_one}")
        return self

    @property
    def db_path(self) -> Path:
        return self.state_dir / "slots.sqlite3"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    def log_path(self, run_id: str) -> Path:
        return self.log_dir / f"{run_id}.log"

    @property
    def health_dir(self) -> Path:
        return self.state_dir / "health"

    def health_socket(self, run_id: str) -> Path:
        """Where a run's child answers the daemon's health checks: below the state dir, which
        is the daemon's user's alone (0700), so no run's command can connect, let alone flood it."""
        return self.health_dir / f"{hashlib.sha256(run_id.encode()).hexdigest()[:16]}.sock"


# Other spellings: seed 000's endpoint variable (quietly), and the TOML key `enabled` that
# `pruner_enabled` replaced (with a deprecation log line).
OLD_ENV: dict[str, OldName] = {"JEEVES_PRUNER_ENDPOINT": OldName("pruner_endpoint", "seed 000")}
OLD_KEYS: dict[str, str] = {"enabled": "pruner_enabled"}


def load_daemon_config(
    config_file: Path | None = None, env: Mapping[str, str] | None = None, **flags: Any
) -> DaemonConfig:
    env = os.environ if env is None else env
    path = config_file or (Path(env["JEEVES_MCP_CONFIG"]) if env.get("JEEVES_MCP_CONFIG") else None)

    def complete(values: dict[str, Any]) -> None:
        if "state_dir" not in values:
            values["state_dir"] = default_state_dir(env)
        if "socket" not in values:
            values["socket"] = default_socket(env, Path(values["state_dir"]))

    config = build(
        DaemonConfig, env, toml_file=path, toml_skip=(TOML_TABLE,), old_env=OLD_ENV,
        old_keys=OLD_KEYS, flags=flags, complete=complete,
    )
    if path is None:
        return config
    # build() checked the file's owner and mode as it parsed it (settings.config_file_problem);
    # a child checks it again each time it reads it.
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    if TOML_TABLE in data:
        # Checked now rather than at every child's start; children read the same file.
        load_config({}, config_file=path)
        child_env = {**config.child_env, "JEEVES_MCP_CONFIG": str(path.resolve())}
        config = config.model_copy(update={"child_env": child_env})
    return config


def reference_markdown() -> str:
    """The configuration reference, generated from the models so it cannot drift from them."""
    lines = [
        "Every setting is a key of the TOML file (`--config`, `JEEVES_MCP_CONFIG`) and an environment "
        "variable; a flag, where there is one, overrides the environment, which overrides the file, "
        "which overrides the default. An empty variable counts as unset; lists and tables are JSON in "
        "the environment. Older names still work: a seed's quietly, a deprecated one with a "
        "`config.deprecated_name` log line.",
        "",
        "Daemon (`jeeves-mcp daemon`): the file's top-level keys. `state_dir` defaults to `$STATE_DIRECTORY`, "
        "`/var/lib/jeeves-mcp` as root, else `~/.local/state/jeeves-mcp`; `socket` to "
        "`$RUNTIME_DIRECTORY/control.sock`, `$XDG_RUNTIME_DIR/jeeves-mcp/control.sock`, else `<state_dir>/control.sock`.",
        "",
        *reference_table(DaemonConfig, OLD_ENV, OLD_KEYS),
        "",
        f"Pruner child (`jeeves-mcp pruner`): the file's `[{TOML_TABLE}]` table. A daemon whose file has "
        "that table checks it at start and points every child at the file; it passes the rest "
        "through the environment (`child_env`, the slot's endpoint, token and root).",
        "",
        *reference_table(PrunerConfig, CHILD_OLD_ENV),
    ]
    return "\n".join(lines) + "\n"
