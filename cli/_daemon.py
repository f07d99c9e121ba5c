"""`jeeves-mcp daemon`: the supervisor that runs one pruner child per agent run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jeeves_mcp._log import LogLevel


def daemon(
    socket: Annotated[Path | None, typer.Option(
        help="Control API socket (env JEEVES_MCP_SOCKET; default $XDG_RUNTIME_DIR/jeeves-mcp/control.sock, "
        "else under the state dir).")] = None,
    state_dir: Annotated[Path | None, typer.Option(
        help="Slot records (SQLite) and child logs (default $STATE_DIRECTORY, /var/lib/jeeves-mcp as root, "
        "else ~/.local/state/jeeves-mcp).")] = None,
    config: Annotated[Path | None, typer.Option(
        help="TOML configuration file (env JEEVES_MCP_CONFIG). Keys: `jeeves-mcp daemon --config-reference`.")] = None,
    live_restore: Annotated[bool | None, typer.Option(
        "--live-restore/--no-live-restore",
        help="On SIGTERM, leave children running for the next daemon to re-adopt.")] = None,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False, help="Least level logged.")] = LogLevel.info,
    config_reference: Annotated[bool, typer.Option(
        "--config-reference", help="Print every configuration key (TOML, environment) as Markdown and exit.")] = False,
) -> None:
    """Run the supervisor daemon (systemd runs it as a notify service).

    It serves the control API on a Unix socket (mode 0600): POST /v1/slots acquires a slot for a run
    and answers once its pruner child is healthy; DELETE /v1/slots/RUN releases it. Children are
    health-checked, restarted, degraded and torn down; their records survive daemon restarts.
    """
    import logging

    import trio

    from jeeves_mcp import _log
    from jeeves_mcp.cli._common import EXIT_FAILURE, EXIT_USAGE, fail
    from jeeves_mcp.pruner_config import ConfigError
    from jeeves_mcp.supervisor.daemon import DaemonError, run_daemon
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    if config_reference:
        from jeeves_mcp.supervisor.daemon_config import reference_markdown

        typer.echo(reference_markdown(), nl=False)
        return
    _log.configure(log_level.level)
    # Under journald the one line that says why the daemon stopped is an error, not info.
    error = _log.priority_prefix(logging.ERROR) if _log.to_journal() else ""
    try:
        settings = load_daemon_config(config, socket=socket, state_dir=state_dir, live_restore=live_restore)
    except ConfigError as exc:
        raise fail("daemon", f"bad configuration: {exc}", EXIT_USAGE, error="USAGE", priority=error) from exc
    try:
        trio.run(run_daemon, settings)
    except DaemonError as exc:
        raise fail("daemon", str(exc), EXIT_FAILURE, error="FAILED", priority=error) from exc
    except KeyboardInterrupt:
        raise typer.Exit(130) from None

