"""Configuration of one pruner child: defaults, then environment, then flags."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ConfigError(ValueError):
    """A configuration value is missing or malformed."""


class PrunerConfig(BaseModel):
    """Everything a pruner child needs; one object passed to constructors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field("127.0.0.1", description="Address to bind; loopback unless you mean it.")
    port: int = Field(0, ge=0, le=65535, description="TCP port; 0 lets the OS choose.")
    root: Path = Field(default_factory=Path.cwd, description="Run root: read/grep/bash cwd stay inside it.")
    allow_outside_root: bool = Field(False, description="Let read/grep/bash cwd leave the root.")
    token: str | None = Field(None, description="Bearer token required on /mcp and /rpc when set.")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="Larger request bodies get 413.")
    body_timeout_s: float = Field(30.0, gt=0, description="A request body slower than this gets 408 (slowloris).")
    response_budget_bytes: int = Field(10 * 1024, ge=2048, description="A serialized tool result stays under this many bytes (seed 002).")
    max_concurrent_calls: int = Field(8, ge=1, description="Tool calls running at once; more get QUEUE_OVERLOADED.")
    max_sessions: int = Field(256, ge=1, description="Streamable HTTP sessions kept; the least recently used is dropped.")
    store_ttl_s: float = Field(3600.0, gt=0, description="Lifetime of a prune_id / output id in the recovery store.")
    store_max_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Total text kept by the recovery store (LRU).")
    max_prune_input_bytes: int = Field(2 * 1024 * 1024, ge=1, description="Larger outputs are not pruned (input_too_large).")
    prune_timeout_ms: int = Field(3000, ge=1, description="Soft deadline of one pruning.")
    pruner_endpoint: str | None = Field(None, description="External SWE-Pruner service; unset = built-in engine.")
    pruner_threshold: float = Field(0.5, ge=0, le=1, description="SWE-Pruner's `threshold` sent to the external service.")
    pruner_chunk_overlap_tokens: int = Field(50, ge=0, description="SWE-Pruner's `chunk_overlap_tokens` sent to the external service.")
    pruning_enabled: bool = Field(True, description="False answers every question with the raw output.")
    bash_timeout_ms: int = Field(120_000, ge=1, description="Default timeout of a bash command.")
    grep_timeout_ms: int = Field(30_000, ge=1, description="Default timeout of a grep.")
    kill_grace_ms: int = Field(2000, ge=0, description="SIGTERM to SIGKILL grace for tool processes.")
    max_output_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Output captured per command stream; the rest is drained and counted.")
    env_allow: tuple[str, ...] = Field(
        ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"),
        description="Environment variables a bash command inherits; the rest are dropped.",
    )

    @field_validator("root")
    @classmethod
    def _resolve_root(cls, value: Path) -> Path:
        resolved = value.expanduser().resolve()
        if not resolved.is_dir():
            raise ValueError(f"root {value} is not a directory")
        return resolved


# Environment variable -> field. Seed 001's MCP_PRUNER_* and seed 000's JEEVES_* names.
ENV_FIELDS: dict[str, str] = {
    "MCP_PRUNER_HOST": "host",
    "MCP_PRUNER_PORT": "port",
    "MCP_PRUNER_MAX_INPUT_CHARS": "max_prune_input_bytes",
    "MCP_PRUNER_PRUNE_ID_TTL_S": "store_ttl_s",
    "JEEVES_MCP_TOKEN": "token",
    "JEEVES_MCP_ROOT": "root",
    "JEEVES_PRUNER_ENDPOINT": "pruner_endpoint",
    "JEEVES_PRUNER_ENABLED": "pruning_enabled",
    "JEEVES_PRUNER_THRESHOLD": "pruner_threshold",
    "JEEVES_PRUNER_CHUNK_OVERLAP_TOKENS": "pruner_chunk_overlap_tokens",
    "JEEVES_MCP_MAX_PRUNE_INPUT_BYTES": "max_prune_input_bytes",
    "JEEVES_MCP_RESPONSE_BUDGET_BYTES": "response_budget_bytes",
    "JEEVES_MCP_MAX_CONCURRENT_CALLS": "max_concurrent_calls",
    "JEEVES_MCP_MAX_BODY_BYTES": "max_body_bytes",
    "JEEVES_MCP_BODY_TIMEOUT_S": "body_timeout_s",
    "JEEVES_MCP_BASH_TIMEOUT_MS": "bash_timeout_ms",
    "JEEVES_MCP_PRUNE_TIMEOUT_MS": "prune_timeout_ms",
    "JEEVES_MCP_ALLOW_OUTSIDE_ROOT": "allow_outside_root",
}


def load_config(env: Mapping[str, str] | None = None, **flags: Any) -> PrunerConfig:
    """Build the config from `env` (default `os.environ`) overlaid by non-None `flags`."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    for name, field in ENV_FIELDS.items():
        if env.get(name, "") != "":
            values[field] = env[name]
    values.update({k: v for k, v in flags.items() if v is not None})
    # Variables the supervisor put in this child's environment for the run's commands.
    passed = [name for name in env.get("JEEVES_MCP_ENV_PASS", "").split(",") if name]
    if passed:
        values["env_allow"] = (*PrunerConfig.model_fields["env_allow"].default, *passed)
    try:
        return PrunerConfig(**values)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from exc


def validation_problems(exc: ValidationError) -> str:
    """One line naming each bad setting, for an operator."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
