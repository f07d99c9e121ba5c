"""How both configurations are built: pydantic-settings sources derived from the models.

`jeeves_mcp.pruner_config.PrunerConfig` (a pruner child) and
`jeeves_mcp.supervisor.daemon_config.DaemonConfig` (the daemon) are `Settings` models. A field
`max_sessions` is, with no table to keep up to date:

- the key `max_sessions` of the TOML file (the daemon's top level; a child's `[pruner]` table);
- the environment variable `JEEVES_MCP_MAX_SESSIONS` (lists and tables as JSON);
- a flag, where the command has one.

Precedence: flag > environment > TOML file > default. An empty variable counts as unset.
Older spellings still work: a seed's own name (`MCP_PRUNER_PORT`, `JEEVES_PRUNER_ENDPOINT`) is
accepted quietly, a name of ours that was replaced logs `config.deprecated_name` once per load.
A bad value is one `ConfigError` line naming where it came from: the variable, the file's key
or the flag.

Building a model directly (`PrunerConfig(root=...)`) reads nothing but its arguments; only
`build` consults the environment and the file.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from jeeves_mcp import _log

__all__ = [
    "ENV_PREFIX", "ConfigError", "OldName", "Settings", "build", "config_file_problem", "env_name",
    "read_config_file", "reference_table", "writable_by",
]

log = logging.getLogger("jeeves_mcp.settings")

ENV_PREFIX = "JEEVES_MCP_"


class ConfigError(ValueError):
    """A configuration value is missing or malformed; the message is one line for an operator."""


@dataclass(frozen=True)
class OldName:
    """Another spelling of a setting: a seed's (`seed` says which; accepted quietly) or one of
    ours that was replaced (`seed` None; still accepted, with a deprecation log line)."""

    field: str
    seed: str | None = None


class Settings(BaseSettings):
    """A configuration model. Constructed directly it reads only its arguments: `build`
    is where the environment and the TOML file come in."""

    model_config = SettingsConfigDict(
        extra="forbid", frozen=True, env_prefix=ENV_PREFIX, env_ignore_empty=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def env_name(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _deprecated(old: str, new: str) -> None:
    _log.event(log, "config.deprecated_name", logging.WARNING, old=old, use=new)


class _Environment(EnvSettingsSource):
    """The environment source over a given mapping (a child's, a test's) rather than
    `os.environ`, with the old spellings folded onto the canonical names."""

    def __init__(
        self, settings_cls: type[BaseSettings], environ: Mapping[str, str], old: Mapping[str, OldName]
    ) -> None:
        self._environ = environ
        self._old = old
        self.origin: dict[str, str] = {}  # field -> the variable its value came from
        self.failed: str | None = None  # the field whose value could not be parsed
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        found: dict[str, str | None] = {}
        for field in self.settings_cls.model_fields:
            name = env_name(field)
            if self._environ.get(name, "") != "":
                found[name.lower()] = self._environ[name]
                self.origin[field] = name
        for name, old in self._old.items():
            if self._environ.get(name, "") == "" or old.field in self.origin:
                continue
            found[env_name(old.field).lower()] = self._environ[name]
            self.origin[old.field] = name
            if old.seed is None:
                _deprecated(name, env_name(old.field))
        return found

    def prepare_field_value(self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool) -> Any:
        try:
            return super().prepare_field_value(field_name, field, value, value_is_complex)
        except ValueError:
            self.failed = field_name
            raise


class _TomlFile(TomlConfigSettingsSource):
    """The TOML source: the top level of `path` (leaving out `skip` tables) or its `table`;
    an unreadable or invalid file is a ConfigError, old keys are renamed with a log line."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        path: Path | None,
        *,
        table: str | None = None,
        skip: tuple[str, ...] = (),
        old_keys: Mapping[str, str] | None = None,
    ) -> None:
        self._path, self._table, self._skip, self._old_keys = path, table, skip, old_keys or {}
        super().__init__(settings_cls, toml_file=path)

    def _read_files(self, files: Any, deep_merge: bool = False) -> dict[str, Any]:
        # pydantic-settings skips a path that is not a regular file, a missing one too: ours are refused.
        return {} if self._path is None else self._read_file(self._path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        # The daemon and every child it points at the file read it here: each checks what it parsed.
        data = read_config_file(file_path)
        if self._table is not None:
            data = data.get(self._table, {})
            if not isinstance(data, dict):
                raise ConfigError(f"config file {file_path}: {self._table} must be a table")
        else:
            data = {key: value for key, value in data.items() if key not in self._skip}
        for old, new in self._old_keys.items():
            if old in data:
                value = data.pop(old)
                data.setdefault(new, value)
                _deprecated(f"{old} (config file)", new)
        return data

    def where(self, field: str) -> str:
        table = f"[{self._table}] " if self._table else ""
        return f"{table}{field} in {self._path}"


# Keys whose value is a secret, as (key,) at the top level or (table, key).
SECRET_KEYS: tuple[tuple[str, ...], ...] = (("tcp_token",), ("pruner", "token"))


def writable_by(mode: int) -> str:
    """'group', 'others' or 'group and others': who besides the owner may write."""
    who = [name for bit, name in ((stat.S_IWGRP, "group"), (stat.S_IWOTH, "others")) if mode & bit]
    return " and ".join(who)


def config_file_problem(path: Path, info: os.stat_result, data: dict[str, Any]) -> str | None:
    """Why a config file must not be trusted, or None (attack review F6; a child's re-read, N4).

    As ssh treats a private key: whoever may write the file sets what the daemon and the
    children run with, so it is the reader's user's or root's and nobody else may write it;
    a file that holds a token is readable by its owner alone, except that a root-owned one
    may be read by the group of a reader that is not root (root:jeeves-mcp 0640 under
    systemd, as PostgreSQL accepts its key). Children run as the daemon's user, so both
    come to the same answer.
    """
    euid = os.geteuid()
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (euid, 0):
        return (f"config file {path} is owned by uid {info.st_uid}, not {euid}: its owner would configure "
                f"the daemon; chown it to uid {euid} or root")
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"config file {path} is mode {mode:04o}, writable by {writable_by(mode)}: chmod go-w {path}"
    secrets = [key[-1] if len(key) == 1 else f"[{key[0]}] {key[1]}" for key in SECRET_KEYS if _holds(data, key)]
    group_may_read = info.st_uid == 0 and euid != 0
    readers = mode & (stat.S_IROTH if group_may_read else stat.S_IRGRP | stat.S_IROTH)
    if not (secrets and readers):
        return None
    who = " and ".join(name for bit, name in ((stat.S_IRGRP, "group"), (stat.S_IROTH, "others")) if readers & bit)
    fix = f"chmod 640 {path} (its group the daemon's)" if group_may_read else f"chmod 600 {path}"
    return f"config file {path} holds {secrets[0]} and is mode {mode:04o}, readable by {who}: {fix}, and change the token"


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML file `path` once `config_file_problem` found nothing wrong with what was read;
    else a ConfigError saying what, the words a child refusing the file would use (the daemon
    checks it with this before each start: a child's stderr goes nowhere)."""
    info, text = _config_file_bytes(path)
    try:
        data = tomllib.loads(text.decode())
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
    if (problem := config_file_problem(path, info, data)) is not None:
        raise ConfigError(problem)
    return data


CONFIG_FILE_MAX_BYTES = 1 << 20

_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _config_file_bytes(path: Path) -> tuple[os.stat_result, bytes]:
    """What `path` holds, with the fstat of what was read: a regular file of at most
    CONFIG_FILE_MAX_BYTES, else a ConfigError. The daemon reads it in its event loop, from a
    dir a run's user may write: a FIFO put there would block the open (and the daemon with
    it), /dev/zero would never end. A symlink is followed (an operator's /etc link)."""
    try:
        # O_PATH opens no device and waits for no FIFO writer: the kind is known before a real open.
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "something else")
            raise ConfigError(f"config file {path} is {kind}, not a regular file: replace it with a regular file")
        if info.st_size > CONFIG_FILE_MAX_BYTES:
            raise ConfigError(_too_large(path))
        # The same inode again, readable: the path may name something else by now.
        reader = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    finally:
        os.close(handle)
    try:
        with open(reader, "rb") as stream:
            text = stream.read(CONFIG_FILE_MAX_BYTES + 1)  # a file grown since the fstat stops here
            info = os.fstat(stream.fileno())  # owner and mode as of the read, for config_file_problem
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    if len(text) > CONFIG_FILE_MAX_BYTES:
        raise ConfigError(_too_large(path))
    return info, text


def _too_large(path: Path) -> str:
    return f"config file {path} is larger than {CONFIG_FILE_MAX_BYTES >> 20} MiB: not a config file, check the path"


def _holds(data: Any, key: tuple[str, ...]) -> bool:
    for part in key:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


S = TypeVar("S", bound=Settings)


def build(
    model: type[S],
    environ: Mapping[str, str],
    *,
    toml_file: Path | None = None,
    toml_table: str | None = None,
    toml_skip: tuple[str, ...] = (),
    old_env: Mapping[str, OldName] | None = None,
    old_keys: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    complete: Callable[[dict[str, Any]], None] | None = None,
) -> S:
    """`model` from flags (non-None), then `environ`, then the TOML file, then the model's
    defaults; `complete` may fill in defaults computed from the other values first."""
    given = {name: value for name, value in (flags or {}).items() if value is not None}
    toml = _TomlFile(model, toml_file, table=toml_table, skip=toml_skip, old_keys=old_keys)
    env = _Environment(model, environ, old_env or {})
    try:
        layers = [toml(), env(), given]
    except SettingsError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        field = env.failed or "?"
        raise ConfigError(
            f"{env.origin.get(field, field)}: not valid JSON for {field}: {exc.__cause__}"
        ) from exc
    values: dict[str, Any] = {}
    for layer in layers:
        values.update(layer)  # a table (child_env) is replaced whole, never merged
    if complete is not None:
        complete(values)
    try:
        return model(**values)
    except ValidationError as exc:
        def origin(field: str) -> str:
            if field in given:
                return "--" + field.replace("_", "-")
            if field in env.origin:
                return env.origin[field]
            if toml_file is not None and field in layers[0]:
                return toml.where(field)
            return field

        raise ConfigError(_problems(exc, origin)) from exc


def _problems(exc: ValidationError, origin: Any) -> str:
    """One line naming each bad setting by where it was set."""
    parts = []
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        where = origin(str(loc[0])) if loc else "config"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def reference_table(
    model: type[Settings],
    old_env: Mapping[str, OldName] | None = None,
    old_keys: Mapping[str, str] | None = None,
) -> list[str]:
    """The README's rows for `model`: TOML key, variable (and older spellings), default, meaning."""
    older: dict[str, list[str]] = {}
    for name, old in (old_env or {}).items():
        older.setdefault(old.field, []).append(f"`{name}` ({old.seed or 'deprecated'})")
    was = {new: old for old, new in (old_keys or {}).items()}
    rows = ["| key | environment | default | meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        if info.is_required():
            default = "see above"
        elif info.default_factory is not None:
            default = "(computed)"
        else:
            default = f"`{json.dumps(info.default)}`" if info.default is not None else "unset"
        key = f"`{name}`" + (f" (was `{was[name]}`, deprecated)" if name in was else "")
        env = ", ".join([f"`{env_name(name)}`", *older.get(name, [])])
        rows.append(f"| {key} | {env} | {default} | {info.description or ''} |")
    return rows
