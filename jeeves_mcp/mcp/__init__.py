"""MCP: the JSON-RPC dispatcher and its errors, progress, tool schemas, transports, and the
child's server assembly (`server`: the tool runner and pruner behind HTTP or stdio)."""
