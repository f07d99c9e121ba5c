"""What every command shares: exit codes, the `Settings` the root callback puts in
`ctx.obj`, one-line failures, and the translation of the client's errors into them."""

from __future__ import annotations

import json
import re
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

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
# The width of a console on a pipe: none to speak of (a path is at most 4,096 bytes).
UNBOUNDED_WIDTH = 1 << 15


def whole_when_piped(console: Console) -> Console:
    """`console`, unbounded when it is not a terminal: a pipe gets every cell whole and every
    row on one line (rich cut them to COLUMNS, or 80, with "…"), for awk and grep."""
    if not console.is_terminal:
        console.width = UNBOUNDED_WIDTH
    return console


def print_table(console: Console, table: Table) -> None:
    """A rich table without the spaces rich leaves at the end of its lines (they
    show up in copies, diffs and `grep ' $'`); styles are kept. Cells are the daemon's data
    (a root, a reason quoting "[pruner]"): never read as markup; style with Text.

    At a terminal too narrow for them, the cells that may not be cut (`no_wrap` columns:
    ids, pids, ports) and the longest word of the others keep their width: the line runs
    past the edge rather than end an id with "…"."""
    needed = _uncut_width(console, table)
    width = console.width
    with console.capture() as captured:
        console.width = max(width, needed)
        try:
            console.print(table, markup=False)
        finally:
            console.width = width
    lines = [_TRAILING_PAD.sub(r"\1", line) for line in captured.get().splitlines()]
    console.file.write("".join(line + "\n" for line in lines))
    console.file.flush()


def _uncut_width(console: Console, table: Table) -> int:
    """The narrowest `table` can be with no cell cut: `no_wrap` columns at their widest cell,
    the others at their longest word (rich's own minimum counts words in every column)."""
    from rich.measure import Measurement

    options = console.options.update(width=UNBOUNDED_WIDTH, markup=False)
    width = console.measure(table, options=options).minimum
    for column in table.columns:
        if column.no_wrap:
            cells = [column.header, *column.cells] if table.show_header else list(column.cells)
            sizes = [Measurement.get(console, options, cell) for cell in cells]
            width += max(size.maximum for size in sizes) - max(size.minimum for size in sizes)
    return width


# C0 but tab, DEL, C1 (U+009B is a CSI of its own), bidi embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """`text` with control characters spelled out ("\\x1b"): strings of runs, runners and
    services reach a terminal that would obey ESC, OSC 52 or a bidi override, and rich
    passes them through."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# What json.dumps leaves raw without ensure_ascii that a terminal obeys: DEL, C1, bidi controls
# and Unicode line breaks (it escapes C0 itself; its own newlines are indentation).
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def json_text(value: Any, **options: Any) -> str:
    """`value` as JSON for a terminal: readable non-ASCII text, those characters \\u-escaped."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False, **options))


def settings(ctx: typer.Context) -> Settings:
    """The root callback's settings (defaults when a command runs without it, as in tests)."""
    obj = ctx.find_root().obj
    return obj if isinstance(obj, Settings) else Settings()


def fail(
    command: str, message: str, code: int = EXIT_FAILURE, *, error: str | None = None, priority: str = ""
) -> typer.Exit:
    """One line on stderr, ending in `[error]` when given (as the API's errors end in their code)
    unless the message ends in a code already; `priority`: journald's prefix for the line.
    `raise fail(...)`."""
    tail = "" if error is None or _ENDS_IN_CODE.search(message) else f" [{error}]"
    typer.echo(priority + visible(f"jeeves-mcp {command}: {message}{tail}"), err=True)
    return typer.Exit(code)


_ENDS_IN_CODE = re.compile(r"\[[A-Z][A-Z0-9_]*\]$")


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
    INVALID_REQUEST -> 2, any other ControlError or a timeout -> 1. Every line ends with
    its [CODE]. With --debug the traceback is printed first.
    """
    import httpx

    from jeeves_mcp.client import ControlError, DaemonUnavailable

    command = ctx.command_path.removeprefix(ctx.find_root().info_name or "").strip() or "jeeves-mcp"
    try:
        yield
    except DaemonUnavailable as exc:
        _traceback(ctx)
        raise fail(command, f"{what}: {_describe(exc)}", EXIT_NO_DAEMON) from None
    except ControlError as exc:
        _traceback(ctx)
        code = EXIT_USAGE if exc.code == "INVALID_REQUEST" and exc.status == 400 else EXIT_FAILURE
        raise fail(command, f"{what}: {_describe(exc)}", code) from None
    except httpx.TimeoutException as exc:  # the client maps connection errors, not timeouts
        _traceback(ctx)
        raise fail(command, f"{what}: the daemon did not answer in time ({type(exc).__name__}); "
                   "see `journalctl -u jeeves-mcp` or the daemon's log", EXIT_FAILURE, error="TIMEOUT") from None
    except httpx.TransportError as exc:
        _traceback(ctx)
        raise fail(command, f"{what}: {type(exc).__name__}: {exc}", EXIT_FAILURE, error="HTTP_ERROR") from None


def _traceback(ctx: typer.Context) -> None:
    if settings(ctx).debug:
        traceback.print_exc(file=sys.stderr)
