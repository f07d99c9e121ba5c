"""The `jeeves-mcp` command line."""

from __future__ import annotations

from jeeves_mcp.cli._app import app, main

__all__ = ["app", "main"]
