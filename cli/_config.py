"""`jeeves-mcp config claude|codex|agent-sdk RUN_ID`: what each MCP client expects for a running slot.

Where the client can read the bearer token from the environment, the printed (or
written) configuration names a variable and never holds the token:

- Claude Code expands `${VAR}` in the `url` and `headers` of `.mcp.json` (and of
  `--mcp-config` files): `{"mcpServers": {NAME: {"type": "http", "url",
  "headers": {"Authorization": "Bearer ${VAR}"}}}}`.
- Codex reads `[mcp_servers.NAME]` with `url` and `bearer_token_env_var` (it
  refuses an inline `bearer_token` for streamable HTTP servers); `-c
  mcp_servers.NAME.url=...` overrides do the same for one run.
- The Claude Agent SDK takes `mcp_servers={NAME: {"type": "http", "url",
  "headers"}}` as given, with no variable expansion: the header is inline.

The `export VAR=...` line goes to stderr (or alone to stdout with --export).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shlex
import stat
import tempfile
import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

from jeeves_mcp.cli._common import EXIT_FAILURE, EXIT_USAGE, control_errors, fail, settings

DEFAULT_NAME = "jeeves"
DEFAULT_TOKEN_ENV = "JEEVES_MCP_TOKEN"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # a bare TOML key, and a valid mcp__NAME__tool prefix
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

config_app = typer.Typer(
    name="config",
    help="Print (or write) a client's MCP configuration for a running slot: Claude Code, Codex, the Agent SDK.",
    no_args_is_help=True,
)


# -- the shapes ----------------------------------------------------------------


def claude_config(url: str, name: str, token_env: str) -> dict[str, Any]:
    """Claude Code's `.mcp.json` (also `claude --mcp-config FILE --strict-mcp-config`)."""
    return {"mcpServers": {name: {"type": "http", "url": url,
                                  "headers": {"Authorization": f"Bearer ${{{token_env}}}"}}}}


def codex_table(url: str, name: str, token_env: str) -> str:
    """Codex's `[mcp_servers.NAME]` table for `config.toml` (streamable HTTP)."""
    return f"[mcp_servers.{name}]\nurl = {json.dumps(url)}\nbearer_token_env_var = {json.dumps(token_env)}\n"


def codex_overrides(url: str, name: str, token_env: str) -> list[str]:
    """The same as `-c` arguments for one `codex` run (values are TOML)."""
    return ["-c", f"mcp_servers.{name}.url={json.dumps(url)}",
            "-c", f"mcp_servers.{name}.bearer_token_env_var={json.dumps(token_env)}"]


def agent_sdk_config(url: str, token: str, name: str) -> dict[str, Any]:
    """`ClaudeAgentOptions(mcp_servers=...)`: no env expansion there, so the token is inline."""
    return {name: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}


def export_line(token_env: str, token: str) -> str:
    return f"export {token_env}={shlex.quote(token)}"


# -- writing files -------------------------------------------------------------


# A client's configuration file; more is not one, and reading it whole would be the writer's choice.
MAX_CONFIG_BYTES = 1024 * 1024


def read_existing(path: Path, command: str) -> tuple[str, os.stat_result] | None:
    """The text and status of the file --write names, or None when there is none.

    The directory may be a run's workspace, whose user could put anything there for an
    operator (often root) to read: a link is not followed, a FIFO not waited on, a device or a
    file over MAX_CONFIG_BYTES not read."""
    path = path.expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise fail(command, f"cannot write {path}: it is a symbolic link; name the file it "
                                "points to instead [USAGE]", EXIT_USAGE) from None
        raise fail(command, f"cannot read {path}: {exc.strerror or exc}", error="FAILED") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise fail(command, f"cannot write {path}: not a regular file [USAGE]", EXIT_USAGE)
        data = handle.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise fail(command, f"cannot write {path}: larger than {MAX_CONFIG_BYTES} bytes, "
                            "not a client's configuration [USAGE]", EXIT_USAGE)
    try:
        return data.decode("utf-8"), info
    except UnicodeDecodeError:
        raise fail(command, f"cannot write {path}: not UTF-8 text; fix or remove it [USAGE]", EXIT_USAGE) from None


def write_atomically(
    path: Path, text: str, *, private: bool = False, command: str = "config",
    existing: tuple[str, os.stat_result] | None = None,
) -> None:
    """Replace `path` in one step. The file it replaces (`existing`, from `read_existing`)
    lends its mode only if the caller owns it; new private files are 0600.

    A missing directory is an error, not created: a typo in --write should not
    leave a tree of directories behind."""
    path = path.expanduser()
    if not path.parent.is_dir():
        raise fail(command, f"cannot write {path}: no directory {path.parent} (create it first) [USAGE]",
                   EXIT_USAGE)
    if existing is not None and existing[1].st_uid == os.geteuid():
        mode = existing[1].st_mode & 0o777
    else:
        mode = 0o600 if private else 0o666 & ~_umask()
    if private:
        mode &= 0o600
    try:
        _replace(path, text, mode)
    except OSError as exc:
        raise fail(command, f"cannot write {path}: {exc.strerror or exc}", error="FAILED") from None


def _replace(path: Path, text: str, mode: int) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            # By descriptor: in a directory others may write, the name may be a link by now.
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def merge_json(path: Path, existing: tuple[str, os.stat_result] | None, key_path: list[str],
               value: dict[str, Any]) -> str:
    """The JSON file at `path` (its text in `existing`) with `value` set under `key_path`
    (other servers kept)."""
    document: dict[str, Any] = {}
    if existing is not None:
        try:
            document = json.loads(existing[0] or "{}")
        except ValueError as exc:
            raise fail("config", f"{path} is not valid JSON ({exc}); fix or remove it", error="FAILED") from None
        if not isinstance(document, dict):
            raise fail("config", f"{path} does not hold a JSON object; fix or remove it", error="FAILED")
    node = document
    for key in key_path:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node.update(value)
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def merge_codex_toml(existing: str, name: str, table: str) -> str:
    """`existing` config.toml with the server `name` replaced by `table` (`[mcp_servers.NAME]`).

    tomlkit finds the server however the file spells it (a table and its sub-tables, dotted
    keys, an inline table) and keeps the rest, comments and layout included; the new table
    goes at the end. A regex over `[...]` headers missed the other spellings.
    """
    import tomlkit
    from tomlkit.items import InlineTable

    document = tomlkit.parse(existing)
    servers = document.get("mcp_servers")
    if isinstance(servers, InlineTable):  # `mcp_servers = {...}` is closed: the server goes inside
        servers.pop(name, None)
        entry = tomlkit.inline_table()
        entry.update(tomllib.loads(table)["mcp_servers"][name])
        servers[name] = entry
        return tomlkit.dumps(document)
    if servers is not None and name in servers:
        del servers[name]
    text = tomlkit.dumps(document).rstrip("\n")
    return (text + "\n\n" if text else "") + table


# -- commands ------------------------------------------------------------------


def slot_endpoint(ctx: typer.Context, run_id: str) -> tuple[str, str]:
    """The running slot's MCP url and token; exit 1 when it has no endpoint."""
    with control_errors(ctx, f"cannot read slot {run_id}"), settings(ctx).client() as control:
        slot = control.get(run_id)
    mcp = slot.get("mcp")
    if not mcp:
        raise fail(
            ctx.command_path.split(" ", 1)[-1],
            f"slot {run_id} is {slot.get('state')}"
            + (f" ({slot['reason']})" if slot.get("reason") else "")
            + ": it has no MCP endpoint to configure; the run goes on with the agent's own tools",
            EXIT_FAILURE, error="NO_ENDPOINT",
        )
    token = mcp["headers"].get("Authorization", "").removeprefix("Bearer ").strip()
    return mcp["url"], token


def _check_name(name: str) -> str:
    if not NAME.match(name):
        raise typer.BadParameter("1-64 of A-Z a-z 0-9 _ -", param_hint="--name")
    return name


def _check_env(var: str) -> str:
    if not ENV_NAME.match(var):
        raise typer.BadParameter("an environment variable name (A-Z a-z 0-9 _, not starting with a digit)",
                                 param_hint="--token-env")
    return var


RunId = Annotated[str, typer.Argument(metavar="RUN_ID", help="A running slot.")]
Write = Annotated[Path | None, typer.Option(
    "--write", metavar="PATH", dir_okay=False,
    help="Write (merge) into this file instead of printing.", show_default=False)]
Name = Annotated[str, typer.Option("--name", callback=_check_name, help="The server's name in the client.")]
TokenEnv = Annotated[str, typer.Option(
    "--token-env", metavar="VAR", callback=_check_env,
    help="Environment variable the client reads the bearer token from.")]
Export = Annotated[bool, typer.Option(
    "--export", help="Print only the `export VAR=TOKEN` line (for eval), nothing else.")]


@config_app.command("claude")
def claude(
    ctx: typer.Context,
    run_id: RunId,
    write: Write = None,
    name: Name = DEFAULT_NAME,
    token_env: TokenEnv = DEFAULT_TOKEN_ENV,
    export: Export = False,
) -> None:
    """Claude Code's .mcp.json for the slot; the token comes from $VAR via ${VAR} expansion.

    Use it as the project's .mcp.json, or for one session with
    `claude --mcp-config FILE --strict-mcp-config`. --write merges the server
    into an existing file and keeps the others. The export line goes to stderr.
    """
    url, token = slot_endpoint(ctx, run_id)
    if export:
        typer.echo(export_line(token_env, token))
        return
    config = claude_config(url, name, token_env)
    if write is not None:
        existing = read_existing(write, "config claude")
        write_atomically(write, merge_json(write, existing, ["mcpServers"], config["mcpServers"]),
                         command="config claude", existing=existing)
        typer.echo(f"# wrote server {name!r} into {write} (no token in it); "
                   f"start Claude Code with {token_env} set:", err=True)
    else:
        typer.echo(json.dumps(config, indent=2))
        typer.echo(f"# Claude Code expands ${{{token_env}}} from its environment; set it first:", err=True)
    typer.echo(export_line(token_env, token), err=True)


@config_app.command("codex")
def codex(
    ctx: typer.Context,
    run_id: RunId,
    write: Write = None,
    name: Name = DEFAULT_NAME,
    token_env: TokenEnv = DEFAULT_TOKEN_ENV,
    export: Export = False,
    overrides: Annotated[bool, typer.Option(
        "--overrides", help="Print only the `-c` arguments for one codex run, shell-quoted on one line.")] = False,
) -> None:
    """Codex's mcp_servers.NAME table (url + bearer_token_env_var) for the slot.

    Append it to ~/.codex/config.toml (or a trusted project's .codex/config.toml),
    or pass the `-c` overrides shown in the comment to one `codex` run. --write
    replaces the server's table in an existing file and keeps everything else.
    Codex refuses an inline bearer_token: the token stays in $VAR (stderr).
    """
    url, token = slot_endpoint(ctx, run_id)
    if export:
        typer.echo(export_line(token_env, token))
        return
    args = codex_overrides(url, name, token_env)
    if overrides:
        typer.echo(shlex.join(args))
        return
    table = codex_table(url, name, token_env)
    if write is not None:
        found = read_existing(write, "config codex")
        existing = found[0] if found else ""
        try:
            servers = tomllib.loads(existing).get("mcp_servers", {})
        except tomllib.TOMLDecodeError as exc:
            raise fail("config codex", f"{write} is not valid TOML ({exc}); fix it first", error="FAILED") from None
        if not isinstance(servers, dict):  # `mcp_servers = 3` crashed the merge (TypeError)
            raise fail("config codex", f"{write}: mcp_servers is a {type(servers).__name__}, not a table of "
                       "servers, so Codex would not read one there; fix it first", error="FAILED")
        merged = merge_codex_toml(existing, name, table)
        parsed = tomllib.loads(merged)  # never write a file Codex cannot read
        assert parsed["mcp_servers"][name] == {"url": url, "bearer_token_env_var": token_env}
        write_atomically(write, merged, command="config codex", existing=found)
        typer.echo(f"# wrote [mcp_servers.{name}] into {write} (no token in it); "
                   f"start codex with {token_env} set:", err=True)
    else:
        typer.echo(f"# jeeves-mcp slot {run_id}. For one run without editing config.toml:\n"
                   f"#   codex {shlex.join(args)}\n" + table, nl=False)
        typer.echo(f"# Codex reads the bearer token from ${token_env}; set it first:", err=True)
    typer.echo(export_line(token_env, token), err=True)


@config_app.command("agent-sdk")
def agent_sdk(
    ctx: typer.Context,
    run_id: RunId,
    write: Write = None,
    name: Name = DEFAULT_NAME,
) -> None:
    """The Claude Agent SDK's mcp_servers dict for the slot, as JSON (token inline).

    Pass it as ClaudeAgentOptions(mcp_servers=json.load(...)) (Python) or
    options.mcpServers (TypeScript). The SDK takes the dict as given, without
    ${VAR} expansion, so the Authorization header holds the token: --write
    creates the file 0600. A runner already holding the slot JSON can use
    slot["mcp"]["url"] and slot["mcp"]["headers"] directly.
    """
    url, token = slot_endpoint(ctx, run_id)
    config = agent_sdk_config(url, token, name)
    if write is not None:
        existing = read_existing(write, "config agent-sdk")
        write_atomically(write, merge_json(write, existing, [], config), private=True,
                         command="config agent-sdk", existing=existing)
        typer.echo(f"# wrote server {name!r} into {write} (mode 0600: it holds the slot's token)", err=True)
    else:
        typer.echo(json.dumps(config, indent=2))

