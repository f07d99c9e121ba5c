"""A daemon whose TCP control port is taken (another user squatting it during a restart,
attack-seventh C1) stops its start with a clear error before it touches any child: a
live-restore restart keeps every run's child and record for the next daemon. Real daemon,
real children, real sockets."""

from __future__ import annotations

import socket
from pathlib import Path

import trio

from jeeves_mcp.proc import process_alive
from tests._daemon import running_daemon, stop_group


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_taken_tcp_port_ends_the_start_clearly_and_keeps_the_live_children(
    tmp_path: Path, run_root: Path
) -> None:
    port = free_port()
    env = {"JEEVES_MCP_LIVE_RESTORE": "true", "JEEVES_MCP_TCP_HOST": "127.0.0.1",
           "JEEVES_MCP_TCP_PORT": str(port), "JEEVES_MCP_TCP_TOKEN": "tcp-secret-for-the-tests"}
    async with running_daemon(tmp_path, env) as daemon:
        async with daemon.client() as control:
            slot = await control.acquire("kept", run_root)
        await stop_group(daemon.process)  # live restore: the child stays
        assert process_alive(slot["pid"])
        holder = socket.socket()  # whoever took the port while the daemon was down
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen(1)
            logged = daemon.log_path.stat().st_size
            daemon.process = await daemon.restart()  # type: ignore[attr-defined]
            with trio.fail_after(30):
                returncode = await daemon.process.wait()
            output = daemon.log_path.read_bytes()[logged:].decode(errors="replace")
            assert returncode == 1, output
            assert f"127.0.0.1:{port}" in output and "EADDRINUSE" in output, output
            assert "internal error" not in output, output
            assert not daemon.socket.exists()  # its control socket is put away too
            assert process_alive(slot["pid"]), output  # not stopped by the failed start
        finally:
            holder.close()
        # The next daemon finds the slot as the first left it: running, the same child.
        daemon.process = await daemon.restart()  # type: ignore[attr-defined]
        await daemon.wait_ready(2)
        async with daemon.client() as control:
            kept = await control.get("kept")
            assert (kept["state"], kept["pid"], kept["mcp"]) == ("running", slot["pid"], slot["mcp"])
            await control.release("kept")
        assert not process_alive(slot["pid"])
