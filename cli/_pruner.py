"""`jeeves-mcp pruner`: run one pruner child by hand (the daemon starts them for runs)."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import typer

from jeeves_mcp._log import LogLevel


def pruner(
    host: str = typer.Option(None, help="Address to bind (env JEEVES_MCP_HOST; default 127.0.0.1)."),
    port: int = typer.Option(None, help="TCP port, 0 = chosen by the OS (env JEEVES_MCP_PORT; default 0)."),
    root: Path = typer.Option(None, help="Run root that read/grep/bash stay inside (env JEEVES_MCP_ROOT; default cwd)."),
    token: str = typer.Option(
        None, envvar="JEEVES_MCP_TOKEN", show_envvar=True,
        help="Bearer token required on /mcp and /rpc (prefer the env var: argv is visible to other users).",
    ),
    config: Path = typer.Option(
        None, "--config", help="TOML file whose \\[pruner] table holds settings (env JEEVES_MCP_CONFIG)."
    ),
    stdio: bool = typer.Option(False, "--stdio", help="Speak MCP on stdin/stdout instead of HTTP."),
    pruner_endpoint: str = typer.Option(
        None, help="External SWE-Pruner service URL (env JEEVES_MCP_PRUNER_ENDPOINT; default built-in engine)."
    ),
    log_level: LogLevel = typer.Option(
        LogLevel.info, case_sensitive=False, help="Least level logged (JSON lines on stderr)."
    ),
    log_file: Path = typer.Option(None, help="Write the JSON log lines to this file instead of stderr."),
    log_file_bytes: int = typer.Option(1024 * 1024, help="Size bound of --log-file (rotated once)."),
) -> None:
    """Run a pruner child: an MCP server with read, bash, grep, prune_text and recover_text.

    Over HTTP it prints one ready line on stdout once listening,
    {"event": "ready", "url": ..., "port": ..., "pid": ...}, and logs JSON lines on stderr;
    with a bad configuration it prints {"event": "failed", "error": ...} there instead and exits 2.
    """
    import trio

    from jeeves_mcp import _log
    from jeeves_mcp.cli._common import EXIT_FAILURE, EXIT_USAGE, fail
    from jeeves_mcp.mcp.server import run_pruner
    from jeeves_mcp.pruner_config import ConfigError, failed_line, load_config, start_failure_line

    if token is None and os.environ.get("JEEVES_MCP_TOKEN_STDIN") == "1":
        # The supervisor hands the token over stdin, out of reach of /proc/PID/environ.
        token = sys.stdin.readline().strip() or None
    try:
        _log.configure(
            log_level.level,
            file=str(log_file) if log_file else None,
            file_bytes=log_file_bytes,
        )
        settings = load_config(
            os.environ, config_file=config, host=host, port=port, root=root, token=token,
            pruner_endpoint=pruner_endpoint,
        )
        trio.run(lambda: run_pruner(settings, stdio=stdio))
    except ConfigError as exc:
        if not stdio:  # stdout is where the daemon waits for the ready line: say why instead
            print(failed_line(exc, log_it=log_file is not None), flush=True)
        raise fail("pruner", f"bad configuration: {exc}", EXIT_USAGE, error="USAGE") from exc
    except BaseException as exc:
        line = start_failure_line(exc)
        if line is None:
            raise
        if not stdio:  # an OS error before the ready line: where the daemon waits for it
            print(line, flush=True)
        # Said as what it is, not as 'internal error: ExceptionGroup' (the review of 2026-11-29).
        failed = json.loads(line)
        code = errno.errorcode.get(failed.get("errno") or 0, "FAILED")  # ENOSPC, EMFILE, ...
        raise fail("pruner", failed["error"], EXIT_FAILURE, error=code) from exc

