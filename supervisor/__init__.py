"""The supervisor daemon: one pruner child per agent run (installed as `jeeves_mcp.supervisor`)."""
