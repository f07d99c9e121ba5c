"""How slots, events and logs look on a terminal, and the small parsers the slot
commands share: rich tables and panels, durations, masked secrets, option pairs."""

from __future__ import annotations

import contextlib
import datetime
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import typer

from jeeves_mcp.cli._common import json_text, print_table, visible, whole_when_piped

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

STATE_STYLES = {
    "running": "green",
    "starting": "cyan",
    "init": "cyan",
    "degraded": "yellow",
    "disabled": "yellow",
    "shutdown": "dim",
}


# -- helpers -------------------------------------------------------------------


def stdout_console() -> Console:
    """Stdout: as wide as the terminal, or unbounded on a pipe (whole cells, one row a line)."""
    from rich.console import Console

    return whole_when_piped(Console(highlight=False, soft_wrap=True))


def stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextlib.contextmanager
def spinner(console: Console, message: str) -> Iterator[None]:
    """A spinner while we wait, on a terminal only (piped output stays clean)."""
    if console.is_terminal:
        with console.status(message):
            yield
    else:
        yield


def print_json(payload: Any) -> None:
    typer.echo(json_text(payload, indent=2))


def parse_pairs(values: list[str] | None, option: str) -> dict[str, str] | None:
    """K=V options into a dict; a value without `=` is a usage error (exit 2)."""
    if not values:
        return None
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {value!r}", param_hint=option)
        pairs[key] = rest
    return pairs


def parse_time(value: str | None) -> datetime.datetime | None:
    if not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value)
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """3s, 4m05s, 2h07m, 3d04h."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def age(slot: dict[str, Any], now: datetime.datetime) -> str:
    started = parse_time(slot.get("started_at"))
    if started is None:
        return "—"
    end = parse_time(slot.get("ended_at")) or now
    return human_duration((end - started).total_seconds())


def expires(slot: dict[str, Any], now: datetime.datetime) -> str:
    moment = parse_time(slot.get("expires_at"))
    if moment is None:
        return "never"
    left = (moment - now).total_seconds()
    return f"in {human_duration(left)}" if left >= 0 else f"{human_duration(-left)} ago"


def state_text(state: str) -> Text:
    from rich.text import Text

    return Text(state, style=STATE_STYLES.get(state, ""))


def masked(slot: dict[str, Any]) -> dict[str, Any]:
    """The slot with its bearer token hidden, for human output."""
    mcp = slot.get("mcp")
    if not mcp:
        return slot
    headers = {k: ("Bearer ••••" if k.lower() == "authorization" else v) for k, v in mcp["headers"].items()}
    return {**slot, "mcp": {**mcp, "headers": headers}}


def render_slots(slots: list[dict[str, Any]], console: Console, now: datetime.datetime | None = None) -> None:
    """The `ls` table: run, state, pid, port, age, restarts, expires (nothing without slots)."""
    from rich.table import Table

    now = now or datetime.datetime.now(datetime.UTC)
    if not slots:
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    # Never cut nor wrapped, at any width (ids above all); "in 59m48s" may wrap.
    for column, justify in (("run", "left"), ("state", "left"), ("pid", "right"), ("port", "right"),
                            ("age", "right"), ("restarts", "right"), ("expires", "left")):
        table.add_column(column, justify=justify, no_wrap=column != "expires")  # type: ignore[arg-type]
    for slot in sorted(slots, key=lambda s: s.get("started_at") or ""):
        table.add_row(
            visible(slot["run_id"]),
            state_text(slot["state"]),
            str(slot["pid"]) if slot.get("pid") is not None else "—",
            str(slot["port"]) if slot.get("port") is not None else "—",
            age(slot, now),
            str(slot.get("restarts", 0)),
            expires(slot, now),
        )
    print_table(console, table)


def render_slot(slot: dict[str, Any], console: Console, now: datetime.datetime | None = None) -> None:
    """`show` and `acquire` without --json: one slot, token hidden."""
    from rich.table import Table

    now = now or datetime.datetime.now(datetime.UTC)
    slot = masked(slot)
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # a value too long for the terminal folds, never ends in "…"
    mcp = slot.get("mcp")
    rows: list[tuple[str, str | Text]] = [
        ("run", slot["run_id"]),
        ("state", state_text(slot["state"])),
        ("mcp url", mcp["url"] if mcp else "— (no endpoint: the run goes on with the agent's own tools)"),
    ]
    if mcp:
        rows.append(("headers", ", ".join(f"{k}: {v}" for k, v in mcp["headers"].items())
                     + "  (--json shows the token)"))
    rows += [
        ("pid", str(slot.get("pid") or "—")),
        ("port", str(slot.get("port") or "—")),
        ("root", str(slot.get("root") or "—")),
        ("restarts", str(slot.get("restarts", 0))),
        ("started", f"{slot.get('started_at') or '—'} ({age(slot, now)} ago)"),
        ("expires", f"{slot.get('expires_at')} ({expires(slot, now)})" if slot.get("expires_at") else "never"),
    ]
    if slot.get("ended_at"):
        rows.append(("ended", str(slot["ended_at"])))
    if slot.get("reason"):
        rows.append(("reason", str(slot["reason"])))
    if slot.get("labels"):
        rows.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(slot["labels"].items()))))
    for key, value in rows:
        table.add_row(key, visible(value) if isinstance(value, str) else value)
    print_table(console, table)


def format_event(event: dict[str, Any]) -> str:
    """One human line per event: time, name, run, then the other fields."""
    moment = datetime.datetime.fromtimestamp(event.get("ts", time.time())).strftime("%H:%M:%S.%f")[:-3]
    skip = {"seq", "id", "ts", "event", "run_id"}
    rest = " ".join(f"{k}={v}" for k, v in event.items() if k not in skip and v is not None)
    run = f" {event['run_id']}" if event.get("run_id") else ""
    return visible(f"{moment} {event.get('event', '?')}{run}" + (f" {rest}" if rest else ""))


def new_lines(previous: list[str], current: list[str]) -> list[str]:
    """Lines of `current` (a tail window of a growing log) not already in `previous`.

    Both are windows onto the same stream: `current` is `previous` minus some head
    lines, plus what was appended. The longest suffix of `previous` that is a
    prefix of `current` is the overlap. No overlap (rotation, or more appended
    than a window) means everything is new.
    """
    if not previous:
        return current
    for start in range(len(previous)):
        overlap = len(previous) - start
        if overlap <= len(current) and previous[start:] == current[:overlap]:
            return current[overlap:]
    return current
