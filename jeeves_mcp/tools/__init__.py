"""The tools a pruner child serves."""

from __future__ import annotations

from jeeves_mcp.tools.base import CallContext, TextOutput, Tool, ToolOutput
from jeeves_mcp.tools.bash import TOOL as BASH
from jeeves_mcp.tools.grep import TOOL as GREP
from jeeves_mcp.tools.prune import HEALTH, PRUNE_TEXT, RECOVER_RANGE, RECOVER_TEXT
from jeeves_mcp.tools.read import TOOL as READ

__all__ = ["ALIASES", "DEFAULT_TOOLS", "CallContext", "TextOutput", "Tool", "ToolOutput"]

DEFAULT_TOOLS: list[Tool] = [READ, BASH, GREP, PRUNE_TEXT, RECOVER_TEXT, HEALTH]
# Accepted by tools/call, not listed: seed 001's compatibility alias.
ALIASES: list[Tool] = [RECOVER_RANGE]
