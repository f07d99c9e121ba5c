"""Both configurations from the TOML file and from the environment (#14): every field of each
model, by its one name, a bad value named in one line, the older spellings still accepted."""

from __future__ import annotations

import json
import logging
import sys
import types
import typing
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomlkit
import trio
from pydantic.fields import FieldInfo

from jeeves_mcp.pruner_config import ConfigError, PrunerConfig, load_config
from jeeves_mcp.settings import Settings, env_name
from jeeves_mcp.supervisor.daemon_config import DaemonConfig, load_daemon_config
from tests._daemon import running_daemon

# Values a field cannot take without another one (the model says why).
COMPANIONS: dict[str, dict[str, Any]] = {"tcp_host": {"tcp_token": "sample-token-for-the-tests"}}


def sample(name: str, info: FieldInfo, tmp_path: Path) -> Any:
    """A valid value of the field other than its default, derived from its type and bounds:
    a new field of a plain type is covered without touching this test."""
    if name == "root":
        return tmp_path
    if name == "tcp_host":
        return "127.0.0.2"
    annotation = info.annotation
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = args[0]
    default = info.get_default(call_default_factory=True)
    if annotation is bool:
        return not default
    if annotation in (int, float):
        step = 1 if annotation is int else 0.5
        value = (default if default is not None else 2) + step
        highs = [m.le for m in info.metadata if hasattr(m, "le")]  # annotated_types.Le
        if highs and value > highs[0]:
            value = (default if default is not None else 2) - step
        return value
    if annotation is str:
        return f"sample-{name}"
    if annotation is Path:
        return tmp_path / f"sample-{name}"
    if typing.get_origin(annotation) is tuple:
        return ("SAMPLE_A", "SAMPLE_B")
    if typing.get_origin(annotation) is dict:
        return {"SAMPLE": "1"}
    raise AssertionError(f"no sample value for {name}: {info.annotation}; teach sample() this type")


def as_env(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list | dict):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return str(value)


def as_toml(values: dict[str, Any], table: str | None) -> str:
    plain = {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
             for k, v in values.items()}
    return tomlkit.dumps({table: plain} if table else plain)


def load(model: type[Settings], env: dict[str, str], config_file: Path | None = None) -> Any:
    if model is PrunerConfig:
        return load_config(env, config_file=config_file)
    return load_daemon_config(config_file, env)


FIELDS = [pytest.param(model, name, id=f"{model.__name__}.{name}")
          for model in (PrunerConfig, DaemonConfig) for name in model.model_fields]


@pytest.mark.parametrize(("model", "name"), FIELDS)
def test_every_field_round_trips_from_the_environment(model: type[Settings], name: str, tmp_path: Path) -> None:
    value = sample(name, model.model_fields[name], tmp_path)
    given = {name: value, **COMPANIONS.get(name, {})}
    config = load(model, {env_name(key): as_env(v) for key, v in given.items()})
    assert getattr(config, name) == value
    assert getattr(config, name) != getattr(load(model, {}), name)


@pytest.mark.parametrize(("model", "name"), FIELDS)
def test_every_field_round_trips_from_the_toml_file(model: type[Settings], name: str, tmp_path: Path) -> None:
    value = sample(name, model.model_fields[name], tmp_path)
    config_file = tmp_path / "jeeves.toml"
    table = "pruner" if model is PrunerConfig else None
    config_file.write_text(as_toml({name: value, **COMPANIONS.get(name, {})}, table))
    config_file.chmod(0o600)  # it may hold tcp_token: the daemon refuses it readable by others
    assert getattr(load(model, {}, config_file), name) == value


def test_flag_then_environment_then_file_then_default(tmp_path: Path) -> None:
    config_file = tmp_path / "jeeves.toml"
    config_file.write_text("max_slots = 7\nmax_restarts = 4\nhealth_failures = 5\n"
                           "[pruner]\nmax_sessions = 7\nkill_grace_ms = 4\ngrep_timeout_ms = 5\n")
    env = {"JEEVES_MCP_MAX_SLOTS": "9", "JEEVES_MCP_MAX_RESTARTS": "8",
           "JEEVES_MCP_MAX_SESSIONS": "9", "JEEVES_MCP_KILL_GRACE_MS": "8"}
    daemon = load_daemon_config(config_file, env, max_slots=10)
    assert (daemon.max_slots, daemon.max_restarts, daemon.health_failures, daemon.spawn_concurrency) == (10, 8, 5, 2)
    child = load_config({**env, "JEEVES_MCP_CONFIG": str(config_file)}, max_sessions=10)
    assert (child.max_sessions, child.kill_grace_ms, child.grep_timeout_ms, child.bash_timeout_ms) == (10, 8, 5, 120_000)


@pytest.mark.parametrize(
    ("model", "env", "message"),
    [
        (PrunerConfig, {"JEEVES_MCP_MAX_SESSIONS": "lots"}, "JEEVES_MCP_MAX_SESSIONS: Input should be a valid integer"),
        (PrunerConfig, {"JEEVES_MCP_ENV_ALLOW": "PATH,HOME"}, "JEEVES_MCP_ENV_ALLOW: not valid JSON for env_allow"),
        (PrunerConfig, {"JEEVES_PRUNER_THRESHOLD": "2"}, "JEEVES_PRUNER_THRESHOLD: Input should be less than or equal to 1"),
        (DaemonConfig, {"JEEVES_MCP_PRUNER_ENABLED": "perhaps"}, "JEEVES_MCP_PRUNER_ENABLED: Input should be a valid boolean"),
        (DaemonConfig, {"JEEVES_MCP_CHILD_ENV": "[1]"}, "JEEVES_MCP_CHILD_ENV: Input should be a valid dictionary"),
    ],
)
def test_a_bad_environment_value_is_one_line_naming_the_variable(
    model: type[Settings], env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(model, env)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_bad_file_value_names_the_key_and_the_file(tmp_path: Path) -> None:
    config_file = tmp_path / "jeeves.toml"
    config_file.write_text("[pruner]\nmax_sessions = 'lots'\n")
    with pytest.raises(ConfigError, match=r"^\[pruner\] max_sessions in .*jeeves.toml: Input should be"):
        load_config({}, config_file=config_file)
    # The daemon checks its children's table when it starts, not when a child does.
    with pytest.raises(ConfigError, match=r"^\[pruner\] max_sessions"):
        load_daemon_config(config_file, {})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config({}, config_file=tmp_path / "missing.toml")


def test_old_spellings_still_work(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    caplog.set_level(logging.WARNING, "jeeves_mcp.settings")
    deprecated = {"JEEVES_PRUNER_ENABLED": "false", "JEEVES_PRUNER_THRESHOLD": "0.25",
                  "JEEVES_PRUNER_CHUNK_OVERLAP_TOKENS": "7"}
    child = load_config(deprecated)
    assert (child.pruning_enabled, child.pruner_threshold, child.pruner_chunk_overlap_tokens) == (False, 0.25, 7)
    logged = {(r.getMessage(), r.old, r.use) for r in caplog.records}  # type: ignore[attr-defined]
    assert logged == {
        ("config.deprecated_name", "JEEVES_PRUNER_ENABLED", "JEEVES_MCP_PRUNING_ENABLED"),
        ("config.deprecated_name", "JEEVES_PRUNER_THRESHOLD", "JEEVES_MCP_PRUNER_THRESHOLD"),
        ("config.deprecated_name", "JEEVES_PRUNER_CHUNK_OVERLAP_TOKENS", "JEEVES_MCP_PRUNER_CHUNK_OVERLAP_TOKENS"),
    }
    caplog.clear()
    # The seeds' own names are accepted quietly; the canonical name wins over any other.
    seeds = {"MCP_PRUNER_PORT": "7001", "MCP_PRUNER_PRUNE_ID_TTL_S": "60", "JEEVES_PRUNER_ENDPOINT": "http://127.0.0.1:9",
             "MCP_PRUNER_HOST": "127.0.0.3", "JEEVES_MCP_HOST": "127.0.0.4"}
    child = load_config(seeds)
    assert (child.port, child.store_ttl_s, child.pruner_endpoint, child.host) == (7001, 60, "http://127.0.0.1:9", "127.0.0.4")
    assert load_daemon_config(None, {"JEEVES_PRUNER_ENDPOINT": "http://127.0.0.1:9"}).pruner_endpoint == "http://127.0.0.1:9"
    assert caplog.records == []
    # The daemon's TOML key `enabled` became `pruner_enabled`.
    config_file = tmp_path / "jeeves.toml"
    config_file.write_text("enabled = false\n")
    assert load_daemon_config(config_file, {}).pruner_enabled is False
    assert [(r.getMessage(), r.use) for r in caplog.records] == [("config.deprecated_name", "pruner_enabled")]  # type: ignore[attr-defined]


async def test_a_bad_variable_stops_the_commands_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JEEVES_MCP_MAX_SESSIONS": "lots",
           "JEEVES_MCP_HEALTH_TIMEOUT_S": "soon"}
    commands = {
        "JEEVES_MCP_MAX_SESSIONS": ["pruner"],
        "JEEVES_MCP_HEALTH_TIMEOUT_S": ["daemon", "--state-dir", str(tmp_path / "state")],
    }
    for variable, args in commands.items():
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "jeeves_mcp", *args], env=env, cwd=tmp_path,
                capture_stdout=True, capture_stderr=True, check=False,
            )
        lines = done.stderr.decode().splitlines()
        assert done.returncode == 2, lines
        prefix = f"jeeves-mcp {args[0]}: bad configuration: {variable}: Input should be a valid"
        assert [line for line in lines if variable in line] == [lines[-1]]
        assert lines[-1].startswith(prefix) and lines[-1].endswith("[USAGE]"), lines


async def test_the_daemons_pruner_table_configures_its_children(tmp_path: Path, run_root: Path) -> None:
    """A real daemon started with a file whose [pruner] table lowers the children's body bound."""
    config_file = tmp_path / "jeeves.toml"
    config_file.write_text("[pruner]\nmax_body_bytes = 2048\n")
    async with running_daemon(tmp_path, {"JEEVES_MCP_CONFIG": str(config_file)}) as daemon:
        async with daemon.client() as control:
            slot = await control.acquire("run-cfg", run_root)
            try:
                url = slot["mcp"]["url"].removesuffix("/mcp") + "/rpc"
                call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
                async with httpx.AsyncClient(timeout=10, headers=slot["mcp"]["headers"]) as http:
                    small = await http.post(url, json=call)
                    big = await http.post(url, json={**call, "pad": "x" * 4000})
            finally:
                await control.release("run-cfg")
    assert (small.status_code, big.status_code) == (200, 413)
