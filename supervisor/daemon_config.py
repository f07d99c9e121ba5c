"""Daemon configuration: defaults, then a TOML file, then `JEEVES_*` environment, then flags."""

from __future__ import annotations

import ipaddress
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jeeves_mcp.paths import default_socket, default_state_dir
from jeeves_mcp.pruner_config import ConfigError, validation_problems


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class DaemonConfig(BaseModel):
    """Everything the supervisor daemon reads; one object passed to constructors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    state_dir: Path = Field(description="SQLite slot records and per-slot child logs.")
    socket: Path = Field(description="Control API Unix socket (created mode 0600).")
    tcp_host: str | None = Field(None, description="Also serve the control API on this loopback address.")
    tcp_port: int = Field(0, ge=0, le=65535, description="TCP port for the control API (0 = OS chooses).")
    tcp_token: str | None = Field(None, description="Bearer token required on the TCP control API.")
    body_timeout_s: float = Field(30.0, gt=0, description="A control request body slower than this gets 408.")
    enabled: bool = Field(True, description="False gives every new slot the disabled state, no child.")
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
        return self

    @property
    def db_path(self) -> Path:
        return self.state_dir / "slots.sqlite3"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"


ENV_FIELDS = {
    "JEEVES_MCP_PRUNER_ENABLED": "enabled",
    "JEEVES_MCP_BODY_TIMEOUT_S": "body_timeout_s",
    "JEEVES_MCP_MAX_SLOTS": "max_slots",
    "JEEVES_MCP_TCP_HOST": "tcp_host",
    "JEEVES_MCP_TCP_PORT": "tcp_port",
    "JEEVES_MCP_TCP_TOKEN": "tcp_token",
    "JEEVES_MCP_STARTUP_TIMEOUT_S": "startup_timeout_s",
    "JEEVES_MCP_SHUTDOWN_TIMEOUT_MS": "shutdown_timeout_ms",
    "JEEVES_MCP_HEALTH_INTERVAL_S": "health_interval_s",
    "JEEVES_MCP_HEALTH_FAILURES": "health_failures",
    "JEEVES_MCP_MAX_RESTARTS": "max_restarts",
    "JEEVES_MCP_LIVE_RESTORE": "live_restore",
    "JEEVES_MCP_FORK_SERVER": "fork_server",
    "JEEVES_MCP_SPAWN_CONCURRENCY": "spawn_concurrency",
    "JEEVES_PRUNER_ENDPOINT": "pruner_endpoint",
}


def load_daemon_config(
    config_file: Path | None = None, env: Mapping[str, str] | None = None, **flags: Any
) -> DaemonConfig:
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or (Path(env["JEEVES_MCP_CONFIG"]) if env.get("JEEVES_MCP_CONFIG") else None)
    if path is not None:
        try:
            with path.open("rb") as handle:
                values.update(tomllib.load(handle))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    for name, field in ENV_FIELDS.items():
        if env.get(name, "") != "":
            values[field] = env[name]
    values.update({k: v for k, v in flags.items() if v is not None})
    if "state_dir" not in values:
        values["state_dir"] = default_state_dir(env)
    if "socket" not in values:
        values["socket"] = default_socket(env, Path(values["state_dir"]))
    try:
        return DaemonConfig(**values)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from exc


def reference_markdown() -> str:
    """The configuration reference, generated from the models so it cannot drift from them."""
    from jeeves_mcp.pruner_config import ENV_FIELDS as CHILD_ENV_FIELDS
    from jeeves_mcp.pruner_config import PrunerConfig

    def table(model: type[BaseModel], env_fields: Mapping[str, str], toml: bool) -> list[str]:
        by_field: dict[str, list[str]] = {}
        for name, field_name in env_fields.items():
            by_field.setdefault(field_name, []).append(f"`{name}`")
        header = "| key | environment | default | meaning |" if toml else "| setting | environment | default | meaning |"
        rows = [header, "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            if info.is_required():
                default = "see below"
            elif info.default_factory is not None:
                default = "(computed)"
            else:
                default = f"`{json.dumps(info.default)}`" if info.default is not None else "unset"
            env = ", ".join(by_field.get(name, [])) or "-"
            rows.append(f"| `{name}` | {env} | {default} | {info.description or ''} |")
        return rows

    lines = [
        "Daemon (`jeeves-mcp daemon`): keys of the TOML file (`--config`, `JEEVES_MCP_CONFIG`), "
        "overridden by the environment, overridden by flags. `state_dir` defaults to `$STATE_DIRECTORY`, "
        "`/var/lib/jeeves-mcp` as root, else `~/.local/state/jeeves-mcp`; `socket` to `$JEEVES_MCP_SOCKET`, "
        "`$RUNTIME_DIRECTORY/control.sock`, `$XDG_RUNTIME_DIR/jeeves-mcp/control.sock`, else `<state_dir>/control.sock`.",
        "",
        *table(DaemonConfig, ENV_FIELDS, True),
        "",
        "Pruner child (`jeeves-mcp pruner`; the daemon sets these for the children it starts): "
        "the environment, overridden by flags.",
        "",
        *table(PrunerConfig, CHILD_ENV_FIELDS, False),
    ]
    return "\n".join(lines) + "\n"
