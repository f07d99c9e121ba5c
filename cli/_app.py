"""Root Typer app; each command group lives in its own module."""

from __future__ import annotations

import typer

from jeeves_mcp import __version__

app = typer.Typer(
    name="jeeves-mcp",
    help="Per-run context-pruning MCP servers for coding agents, and their supervisor daemon.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


def _register() -> None:
    from jeeves_mcp.cli import _daemon, _prune, _pruner

    _daemon.register(app)
    _pruner.register(app)
    _prune.register(app)


def main() -> None:
    _register()
    app()
