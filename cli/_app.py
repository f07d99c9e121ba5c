"""Root Typer app; each command group lives in its own module.

The root callback puts a `Settings` into `ctx.obj`: where the daemon answers
(`--socket`, or `--url` for its loopback TCP API) and whether to show
tracebacks (`--debug`). Commands that talk to the daemon get their client from
`Settings.client()` and translate its errors with `control_errors`, once, into
one line on stderr and one of the exit codes below.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer

from jeeves_mcp import __version__
from jeeves_mcp.cli import _config, _daemon, _doctor, _prune, _pruner, _slots, _stats, _systemd
from jeeves_mcp.cli._common import (
    EXIT_CODES,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Settings,
)

app = typer.Typer(
    name="jeeves-mcp",
    help="Per-run context-pruning MCP servers for coding agents, and their supervisor daemon.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _debug_requested(argv: list[str]) -> bool:
    return "--debug" in argv or os.environ.get("JEEVES_MCP_DEBUG", "") not in ("", "0", "false")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback(epilog=EXIT_CODES)
def root(
    ctx: typer.Context,
    socket: Annotated[Path | None, typer.Option(
        "--socket", envvar="JEEVES_MCP_SOCKET", show_envvar=True, metavar="PATH",
        readable=False,  # a socket is connected to, not read: the connect says why it cannot
        help="Control socket of the daemon (default: $XDG_RUNTIME_DIR/jeeves-mcp/control.sock, "
        "/run/jeeves-mcp/control.sock under systemd, else under the state dir).",
        show_default=False)] = None,
    url: Annotated[str | None, typer.Option(
        "--url", envvar="JEEVES_MCP_URL", show_envvar=True, metavar="URL",
        help="Use the daemon's loopback TCP API instead of the socket (token from JEEVES_MCP_TCP_TOKEN).",
        show_default=False)] = None,
    debug: Annotated[bool, typer.Option(
        "--debug", envvar="JEEVES_MCP_DEBUG", help="Show tracebacks on errors.")] = False,
    show_version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False,
) -> None:
    """Per-run context-pruning MCP servers for coding agents, and their supervisor daemon."""
    if url is not None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise typer.BadParameter(f"{url[:200]!r} is no http:// URL (http://127.0.0.1:PORT)", param_hint="--url")
    token = os.environ.get("JEEVES_MCP_TCP_TOKEN") or None
    ctx.obj = Settings(socket=socket, url=url, token=token if url else None, debug=debug)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


app.command()(_daemon.daemon)
app.command()(_pruner.pruner)
app.command()(_prune.prune)
app.command()(_slots.acquire)
app.command()(_slots.release)
app.command()(_slots.renew)
app.command("ls")(_slots.ls)
app.command()(_slots.show)
app.command()(_slots.logs)
app.command()(_slots.events)
app.add_typer(_config.config_app)
app.command()(_doctor.doctor)
app.command()(_stats.stats)
app.command("systemd-units")(_systemd.systemd_units)


def _is(exc: BaseException, kind: str) -> bool:
    """By class name: typer releases that vendor click raise their own copies of click's
    exceptions, older ones click's (which is not our dependency to import)."""
    return any(cls.__name__ == kind for cls in type(exc).__mro__)


def _command_of(ctx: Any) -> str:
    if ctx is None:
        return "jeeves-mcp"
    command = ctx.command_path.removeprefix(ctx.find_root().info_name or "").strip()
    return f"jeeves-mcp {command}".rstrip()


def _is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", None) == "option"


def _param_name(param: Any) -> str:
    if param is None:
        return "an argument"
    opts = [opt for opt in param.opts if opt.startswith("--")] or param.opts
    return opts[0] if _is_option(param) and opts else (param.name or "").upper()


def _bounds(param: Any) -> str | None:
    """"at least 1", "from 0 to 10000": a range in our words (typer's are pydantic's)."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    above = "more than 0" if low is not None and 0 < low < 0.01 else f"at least {low}"  # a tiny min is "> 0"
    if low is not None and high is not None:
        return f"{above} and at most {high:,}" if above == "more than 0" else f"from {low} to {high}"
    if low is not None:
        return above
    if high is not None:
        return f"at most {high}"
    return None


def _given(param: Any) -> str | None:
    """The value the command line gave option `param` (the error does not keep it)."""
    if not _is_option(param):
        return None
    args = sys.argv[1:]
    for index, arg in enumerate(args):
        for opt in param.opts:
            if arg == opt and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(opt + "="):
                return arg.split("=", 1)[1]
    return None


def usage_line(exc: Exception) -> str:
    """A usage error as the README's one line: `jeeves-mcp COMMAND: what failed: why [USAGE]`."""
    command = _command_of(getattr(exc, "ctx", None))
    param = getattr(exc, "param", None)
    message = str(getattr(exc, "message", exc)).rstrip(".")
    if _is(exc, "MissingParameter"):
        why = f"{_param_name(param)} is required"
    elif _is(exc, "NoSuchOption"):
        why = f"unknown option {getattr(exc, 'option_name', '')}"
        possibilities = getattr(exc, "possibilities", None)
        if possibilities:
            why += f" (did you mean {', '.join(sorted(possibilities))}?)"
    elif _is(exc, "BadParameter"):
        bounds, value = _bounds(param), _given(param)
        if bounds is not None and "should be" in message:
            why = f"{_param_name(param)} must be {bounds}" + (f", not {value}" if value else "")
        else:
            # A command's own check names what it refused by param_hint (no param object).
            hint = getattr(exc, "param_hint", None)
            name = hint if param is None and isinstance(hint, str) else _param_name(param)
            why = f"{name}: {message}".replace("dir '", "directory '")
    else:
        why = message[:1].lower() + message[1:]
    what = "bad usage" if _is(exc, "UsageError") else "failed"
    return f"{command}: {what}: {why} (see `{command} --help`) [USAGE]"


def main() -> None:
    try:
        # Not standalone: click's usage errors come here to be printed as one line
        # in our words, not as a box in typer's (and pydantic's).
        code = app(standalone_mode=False, prog_name="jeeves-mcp")
    except typer.Abort:
        typer.echo("jeeves-mcp: aborted [INTERRUPTED]", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if _is(exc, "ClickException"):  # bad usage: our one line
            typer.echo(usage_line(exc), err=True)
            raise SystemExit(EXIT_USAGE if _is(exc, "UsageError") else EXIT_FAILURE) from None
        # A bug: one line unless --debug.
        if _debug_requested(sys.argv[1:]):
            raise
        typer.echo(f"jeeves-mcp: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the "
                   "traceback) [INTERNAL]", err=True)
        raise SystemExit(EXIT_FAILURE) from None
    raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else EXIT_OK)
