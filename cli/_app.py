"""Root Typer app; each command group lives in its own module.

The root callback puts a `Settings` into `ctx.obj`: where the daemon answers
(`--socket`, or `--url` for its loopback TCP API) and whether to show
tracebacks (`--debug`). Commands that talk to the daemon get their client from
`Settings.client()` and translate its errors with `control_errors`, once, into
one line on stderr and one of the exit codes below.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jeeves_mcp import __version__

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from jeeves_mcp.client import AsyncControlClient, ControlClient

EXIT_OK = 0
EXIT_FAILURE = 1  # the daemon refused or failed a request, a check failed
EXIT_USAGE = 2  # bad arguments or configuration (also click's own usage errors)
EXIT_NO_DAEMON = 3  # nothing answers on the control socket
EXIT_INTERRUPTED = 130

# Where jeeves-mcp.socket puts the control socket of the system service (%t = /run).

EXIT_CODES = (
    "Exit codes: 0 ok; 1 the daemon refused or failed the request (or a doctor check failed); "
    "2 bad usage or configuration; 3 the daemon is not running (start it with `jeeves-mcp daemon` "
    "or `systemctl start jeeves-mcp`); 130 interrupted."
    "\n\n"
    "Environment: JEEVES_MCP_SOCKET (control socket), JEEVES_MCP_URL and JEEVES_MCP_TCP_TOKEN "
    "(control API over loopback TCP), JEEVES_MCP_DEBUG=1 (tracebacks)."
)

app = typer.Typer(
    name="jeeves-mcp",
    help="Per-run context-pruning MCP servers for coding agents, and their supervisor daemon.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass(frozen=True)
class Settings:
    """What every command that talks to the daemon needs; lives in `ctx.obj`."""

    socket: Path | None = None
    url: str | None = None
    token: str | None = None
    debug: bool = False

    def control_socket(self) -> Path:
        """--socket, else the client's default (which knows the system service's socket)."""
        from jeeves_mcp.client import default_socket

        return self.socket or default_socket()

    def client(self, timeout: float = 120.0) -> ControlClient:
        from jeeves_mcp.client import ControlClient

        socket = None if self.url else self.control_socket()
        return ControlClient(socket, url=self.url, token=self.token, timeout=timeout)

    def async_client(self, timeout: float = 120.0) -> AsyncControlClient:
        from jeeves_mcp.client import AsyncControlClient

        socket = None if self.url else self.control_socket()
        return AsyncControlClient(socket, url=self.url, token=self.token, timeout=timeout)

    def where(self) -> str:
        return self.url or str(self.control_socket())


# Spaces rich pads a table's last column with, before any closing style codes.
_TRAILING_PAD = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


def print_table(console: Console, table: Table) -> None:
    """A rich table without the spaces rich leaves at the end of its lines (they
    show up in copies, diffs and `grep ' $'`); styles are kept."""
    with console.capture() as captured:
        console.print(table)
    lines = [_TRAILING_PAD.sub(r"\1", line) for line in captured.get().splitlines()]
    console.file.write("".join(line + "\n" for line in lines))
    console.file.flush()


def settings(ctx: typer.Context) -> Settings:
    """The root callback's settings (defaults when a command runs without it, as in tests)."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings()


def fail(command: str, message: str, code: int = EXIT_FAILURE) -> typer.Exit:
    """One line on stderr; `raise fail(...)`."""
    typer.echo(f"jeeves-mcp {command}: {message}", err=True)
    return typer.Exit(code)


def _describe(exc: Exception) -> str:
    from jeeves_mcp.client import ControlError

    if not isinstance(exc, ControlError):
        return f"{type(exc).__name__}: {exc}"
    message = exc.message
    fields = exc.detail.get("fields") if isinstance(exc.detail, dict) else None
    if fields:
        message += ": " + "; ".join(f"{f.get('field')}: {f.get('message')}" for f in fields)
    return f"{message} [{exc.code}]"


@contextmanager
def control_errors(ctx: typer.Context, what: str) -> Iterator[None]:
    """Translate the client's errors into one stderr line and an exit code.

    DaemonUnavailable -> 3 (its message says how to start the daemon), a 400
    INVALID_REQUEST -> 2, any other ControlError or a timeout -> 1. With --debug
    the traceback is printed first.
    """
    import httpx

    from jeeves_mcp.client import ControlError, DaemonUnavailable

    command = ctx.command_path.removeprefix(ctx.find_root().info_name or "").strip() or "jeeves-mcp"
    try:
        yield
    except DaemonUnavailable as exc:
        _traceback(ctx)
        raise fail(command, f"{what}: {exc.message}", EXIT_NO_DAEMON) from None
    except ControlError as exc:
        _traceback(ctx)
        code = EXIT_USAGE if exc.code == "INVALID_REQUEST" and exc.status == 400 else EXIT_FAILURE
        raise fail(command, f"{what}: {_describe(exc)}", code) from None
    except httpx.TimeoutException as exc:  # the client maps connection errors, not timeouts
        _traceback(ctx)
        raise fail(command, f"{what}: the daemon did not answer in time ({type(exc).__name__}); "
                   "see `journalctl -u jeeves-mcp` or the daemon's log", EXIT_FAILURE) from None
    except httpx.TransportError as exc:
        _traceback(ctx)
        raise fail(command, f"{what}: {type(exc).__name__}: {exc}", EXIT_FAILURE) from None


def _traceback(ctx: typer.Context) -> None:
    if settings(ctx).debug:
        traceback.print_exc(file=sys.stderr)


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
    token = os.environ.get("JEEVES_MCP_TCP_TOKEN") or None
    ctx.obj = Settings(socket=socket, url=url, token=token if url else None, debug=debug)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def _register() -> None:
    from jeeves_mcp.cli import _config, _daemon, _doctor, _prune, _pruner, _slots, _stats

    _daemon.register(app)
    _pruner.register(app)
    _prune.register(app)
    _slots.register(app)
    _config.register(app)
    _doctor.register(app)
    _stats.register(app)


_registered = False


def get_app() -> typer.Typer:
    """The app with every command registered (for tests with typer's CliRunner)."""
    global _registered
    if not _registered:
        _register()
        _registered = True
    return app


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
    if low is not None and high is not None:
        return f"from {low} to {high}"
    if low is not None:
        return "more than 0" if 0 < low < 0.01 else f"at least {low}"
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
            why = f"{_param_name(param)}: {message}".replace("dir '", "directory '")
    else:
        why = message[:1].lower() + message[1:]
    what = "bad usage" if _is(exc, "UsageError") else "failed"
    return f"{command}: {what}: {why} (see `{command} --help`) [USAGE]"


def main() -> None:
    get_app()
    try:
        # Not standalone: click's usage errors come here to be printed as one line
        # in our words, not as a box in typer's (and pydantic's).
        code = app(standalone_mode=False, prog_name="jeeves-mcp")
    except typer.Abort:
        typer.echo("jeeves-mcp: aborted", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if _is(exc, "ClickException"):  # bad usage: our one line
            typer.echo(usage_line(exc), err=True)
            raise SystemExit(EXIT_USAGE if _is(exc, "UsageError") else EXIT_FAILURE) from None
        # A bug: one line unless --debug.
        if _debug_requested(sys.argv[1:]):
            raise
        typer.echo(f"jeeves-mcp: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
                   err=True)
        raise SystemExit(EXIT_FAILURE) from None
    raise SystemExit(code if isinstance(code, int) and not isinstance(code, bool) else EXIT_OK)
