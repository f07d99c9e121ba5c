"""jeeves-mcp: per-run context-pruning MCP servers for coding agents.

The pruner child (this package) serves `read`, `bash` and `grep` whose output
can be pruned to a `context_focus_question`; the supervisor daemon
(`jeeves_mcp.supervisor`) runs one child per agent run.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
