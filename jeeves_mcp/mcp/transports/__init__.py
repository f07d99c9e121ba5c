"""Transports of the pruner child: Streamable HTTP (+ legacy /rpc) and stdio."""
