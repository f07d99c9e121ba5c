"""Slots from the command line: acquire, release, renew, ls, show, logs, events.

Every command talks to the daemon through `jeeves_mcp.client`; errors become one
line on stderr and an exit code (see `_common.control_errors`). Spinners and
progress bars go to stderr and only on a terminal, so `--json` output piped to
a script is exactly the JSON.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from jeeves_mcp.cli._common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_NO_DAEMON,
    control_errors,
    fail,
    json_text,
    settings,
    visible,
)
from jeeves_mcp.cli._render import (
    format_event,
    new_lines,
    parse_pairs,
    print_json,
    render_slot,
    render_slots,
    spinner,
    stderr_console,
    stdout_console,
)
from jeeves_mcp.client import MAX_TTL_S
from jeeves_mcp.pruning.render import plural

if TYPE_CHECKING:

    from jeeves_mcp.client import AsyncControlClient

FOLLOW_INTERVAL_S = 0.5  # logs -f: the API has no log stream, so it polls the tail
FOLLOW_WINDOW = 2000  # lines fetched per poll of logs -f
RECONNECT_INTERVAL_S = 1.0  # events -f: how often to retry a daemon that went away

# -- commands ------------------------------------------------------------------


def acquire(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The agent run's id (1-128 of A-Z a-z 0-9 . _ : @ -).")],
    root: Annotated[Path, typer.Option(
        "--root", exists=True, file_okay=False, dir_okay=True,
        help="The run's workspace: read/grep/bash stay inside it. Sent as given (made absolute, "
             "links unresolved): the daemon refuses one through a link another user owns.")],
    ttl: Annotated[float | None, typer.Option(
        "--ttl", min=0.001, max=MAX_TTL_S, metavar="SECONDS",
        help="Lease: the slot is released unless renewed within this (default: the daemon's default_ttl_s).",
        show_default=False)] = None,
    env: Annotated[list[str] | None, typer.Option(
        "--env", metavar="K=V", help="Environment for the run's bash commands (repeatable).")] = None,
    label: Annotated[list[str] | None, typer.Option(
        "--label", metavar="K=V", help="Free-form labels shown by `show` (repeatable).")] = None,
    pruner_endpoint: Annotated[str | None, typer.Option(
        "--pruner-endpoint", metavar="URL",
        help="External SWE-Pruner service for this slot (default: the daemon's).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the slot JSON (what the runner needs).")] = False,
) -> None:
    """Start the run's pruner (or find it) and print its MCP endpoint.

    Waits until the child answers its health check. Acquiring the same RUN_ID
    again returns the same slot. A slot whose child cannot start comes back
    `disabled` with a reason (exit 0, a warning on stderr): the run goes on with
    the agent's own tools. --json prints the slot: run_id, state, mcp {url,
    headers}, pid, port, started_at, expires_at, ...
    """
    envs = parse_pairs(env, "--env")
    labels = parse_pairs(label, "--label")
    err = stderr_console()
    with control_errors(ctx, f"cannot acquire a slot for {run_id}"), settings(ctx).client() as control:
        with spinner(err, f"starting the pruner for {run_id}…"):
            slot = control.acquire(run_id, root, env=envs, ttl_s=ttl, labels=labels,
                                   pruner_endpoint=pruner_endpoint)
    if slot.get("state") != "running":
        typer.echo(f"jeeves-mcp acquire: warning: slot {run_id} is {slot.get('state')}"
                   f" ({slot.get('reason') or 'no reason given'}); the run goes on without pruning", err=True)
    if as_json:
        print_json(slot)
    else:
        render_slot(slot, stdout_console())


def release(
    ctx: typer.Context,
    run_ids: Annotated[list[str] | None, typer.Argument(metavar="RUN_ID...", help="Runs to release.",
                                                        show_default=False)] = None,
    release_all: Annotated[bool, typer.Option("--all", help="Release every live slot.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the final slot JSON.")] = False,
) -> None:
    """Stop the runs' pruners (SIGTERM, grace, SIGKILL of the tree) and print their final state.

    Releasing a slot released before answers its final state again. With one
    RUN_ID --json prints that slot; with several or --all it prints
    {"slots": [...], "errors": [{"run_id", "code", "message"}]}; slots are
    released concurrently and exit code 1 says at least one failed.
    """
    if release_all and run_ids:
        raise typer.BadParameter("give RUN_IDs or --all, not both", param_hint="--all")
    if not release_all and not run_ids:
        raise typer.BadParameter("give at least one RUN_ID, or --all", param_hint="RUN_ID")
    if not release_all and len(run_ids or []) == 1:
        run_id = (run_ids or [""])[0]
        with control_errors(ctx, f"cannot release {run_id}"), settings(ctx).client() as control:
            with spinner(stderr_console(), f"stopping the pruner of {run_id}…"):
                slot = control.release(run_id)
        if as_json:
            print_json(slot)
        else:
            typer.echo(f"{run_id}: {slot.get('state')}")
        return
    _release_many(ctx, run_ids or [], as_json)


def _release_many(ctx: typer.Context, run_ids: list[str], as_json: bool) -> None:
    import httpx
    import trio

    from jeeves_mcp.client import ControlError

    err = stderr_console()
    released: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []

    async def release_all(control: AsyncControlClient, ids: list[str]) -> None:
        from rich.progress import Progress

        progress = Progress(console=err, transient=True, disable=not err.is_terminal)
        limiter = trio.CapacityLimiter(8)
        with progress:
            task = progress.add_task("releasing", total=len(ids))

            async def one(run_id: str) -> None:
                async with limiter:
                    try:
                        released.append(await control.release(run_id))
                    except ControlError as exc:
                        errors.append({"run_id": run_id, "code": exc.code, "message": exc.message})
                    except httpx.HTTPError as exc:
                        errors.append({"run_id": run_id, "code": "HTTP_ERROR", "message": f"{type(exc).__name__}: {exc}"})
                progress.advance(task)

            async with trio.open_nursery() as nursery:
                for run_id in ids:
                    nursery.start_soon(one, run_id)

    async def main() -> None:
        async with settings(ctx).async_client() as control:
            ids = run_ids or [slot["run_id"] for slot in (await control.list())["slots"]]
            await release_all(control, ids)

    with control_errors(ctx, "cannot release slots"):
        trio.run(main)
    if any(e["code"] == "DAEMON_UNAVAILABLE" for e in errors):
        raise fail("release", f"cannot release slots: {errors[0]['message']}", EXIT_NO_DAEMON, error="DAEMON_UNAVAILABLE")
    if as_json:
        print_json({"slots": released, "errors": errors})
    else:
        for slot in released:
            typer.echo(f"{slot['run_id']}: {slot.get('state')}")
        if not released and not errors:
            typer.echo("no slots to release", err=True)  # a note: stdout holds one line per slot released
    for error in errors:
        typer.echo(f"jeeves-mcp release: cannot release {error['run_id']}: {error['message']} [{error['code']}]",
                   err=True)
    if errors:
        raise typer.Exit(EXIT_FAILURE)


def renew(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    ttl: Annotated[float | None, typer.Option(
        "--ttl", min=0.001, max=MAX_TTL_S, metavar="SECONDS",
        help="New lease from now (default: the slot's own ttl).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the slot JSON.")] = False,
) -> None:
    """Extend the run's lease; a slot not renewed in time is released."""
    with control_errors(ctx, f"cannot renew {run_id}"), settings(ctx).client() as control:
        slot = control.renew(run_id, ttl)
    if as_json:
        print_json(slot)
    else:
        typer.echo(f"{run_id}: lease until {slot.get('expires_at')}")


def ls(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help='Print {"slots": [...]} as the API returns it.')] = False,
) -> None:
    """List the live slots: run, state, pid, port, age, restarts, expires.

    The table alone goes to stdout; notes (no slots, the fork server) go to stderr.
    """
    with control_errors(ctx, "cannot list slots"), settings(ctx).client() as control:
        listed = control.list()
        fork = control.healthz().get("fork_server")
    if as_json:
        print_json(listed)
        return
    render_slots(listed["slots"], stdout_console())
    # Notes for the operator, not rows: on stderr, so `ls | awk` reads the table alone.
    notes = stderr_console()
    if not listed["slots"]:
        notes.print("no slots (acquire one with `jeeves-mcp acquire RUN_ID --root DIR`)", markup=False)
    if fork is None:
        notes.print("[dim]fork server disabled: children start cold[/dim]")
    else:
        state = f"up (pid {fork['pid']})" if fork["up"] else "down: children start cold"
        notes.print(f"[dim]fork server {state}, {plural(fork['spawns'], 'child', 'children')} forked[/dim]")


def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the slot JSON (with its token).")] = False,
) -> None:
    """Show one live slot (the token is hidden unless --json).

    A released run is NOT_FOUND (exit 1) with when it was released; its logs and
    stats are kept: `jeeves-mcp logs RUN_ID`, `jeeves-mcp stats RUN_ID`.
    """
    from jeeves_mcp.client import ControlError

    with control_errors(ctx, f"cannot show {run_id}"), settings(ctx).client() as control:
        try:
            slot = control.get(run_id)
        except ControlError as exc:
            if exc.code == "NOT_FOUND" and isinstance(exc.detail, dict) and "ended_at" in exc.detail:
                exc.message += f"; its history: `jeeves-mcp logs {run_id}`, `jeeves-mcp stats {run_id}`"
            raise
    if as_json:
        print_json(slot)
    else:
        render_slot(slot, stdout_console())


def logs(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(metavar="RUN_ID")],
    tail: Annotated[int, typer.Option("--tail", "-n", min=0, max=10_000, help="Lines to show.")] = 200,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep printing new lines until the slot is released (or Ctrl-C).")] = False,
) -> None:
    """Print the last log lines of the run's pruner child (JSON lines, as it wrote them).

    Logs outlive the slot: a released run's logs stay readable. With -f the
    command polls the daemon every half second and exits once the slot is gone.
    """
    from jeeves_mcp.client import ControlError

    with control_errors(ctx, f"cannot read the logs of {run_id}"), settings(ctx).client() as control:
        lines = control.logs(run_id, tail)["lines"]
        for line in lines:
            typer.echo(visible(line))
        if not follow:
            return
        window = lines
        try:
            while True:
                time.sleep(FOLLOW_INTERVAL_S)
                try:
                    live = control.get(run_id)["state"] != "shutdown"
                except ControlError as exc:
                    if exc.code != "NOT_FOUND":
                        raise
                    live = False
                current = control.logs(run_id, FOLLOW_WINDOW)["lines"]
                for line in new_lines(window, current):
                    typer.echo(visible(line))
                window = current
                if not live:
                    return
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None


def events(
    ctx: typer.Context,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f",
        help="Survive daemon restarts: wait for the daemon and reconnect instead of exiting.")] = False,
    count: Annotated[int | None, typer.Option(
        "--count", "-c", min=1, help="Exit after this many events.", show_default=False)] = None,
    run_id: Annotated[str | None, typer.Option(
        "--run", metavar="RUN_ID", help="Only this run's events.", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Print slot transitions as they happen.

    Without -f: from now until Ctrl-C, --count events, or the daemon stops (exit
    0); no daemon is exit 3. With -f: also across daemon restarts (upgrades,
    live restore), waiting for a daemon that is not there yet; after a reconnect
    the daemon replays what was missed (its recent events are kept).
    """
    import trio

    from jeeves_mcp.client import RUN_ID, RUN_ID_RULE, DaemonUnavailable

    if run_id is not None and not RUN_ID.match(run_id):  # no event could ever match it
        raise typer.BadParameter(f"{run_id!r} is no run id: {RUN_ID_RULE}", param_hint="--run")
    err = stderr_console()
    seen = 0
    last_id: str | None = None  # resume point after a reconnect: nothing is missed

    def emit(event: dict[str, Any]) -> bool:
        nonlocal seen, last_id
        last_id = event.get("id", last_id)
        if run_id is not None and event.get("run_id") != run_id:
            return False
        typer.echo(json_text(event) if as_json else format_event(event))
        seen += 1
        return count is not None and seen >= count

    async def stream_once() -> bool:
        """Print one connection's events; True once --count is reached."""
        import httpx

        async with settings(ctx).async_client() as control:
            stream = control.events(since=last_id)
            try:
                async for event in stream:
                    if emit(event):
                        return True
            except (httpx.RemoteProtocolError, httpx.ReadError):
                pass  # the daemon went away mid-stream
            finally:
                await stream.aclose()  # type: ignore[attr-defined]  # an async generator
        return False

    async def main() -> None:
        waiting = False
        while True:
            try:
                if await stream_once():
                    return
                waiting = False
            except DaemonUnavailable:
                if not follow:
                    raise
                if not waiting:
                    err.print(f"[dim]waiting for the daemon on {settings(ctx).where()}…[/]")
                    waiting = True
            if not follow:
                return
            await trio.sleep(RECONNECT_INTERVAL_S)

    with control_errors(ctx, "cannot watch events"):
        try:
            trio.run(main)
        except KeyboardInterrupt:
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None



__all__ = [
    "EXIT_NO_DAEMON",
    "format_event",
    "new_lines",
    "render_slot",
    "render_slots",
]
