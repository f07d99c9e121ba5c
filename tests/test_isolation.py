"""What a run's own commands can do to other runs and to the daemon.

The attacker here is an agent: it controls the `bash` command of its run,
sent to its child with its run's token over loopback, and nothing else.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests._child import kill_all, stop_process_group, tool_json, with_cmdline
from tests._daemon import running_daemon

NOBODY = 65534


async def bash(slot: dict[str, Any], cmd: str, timeout_ms: int = 30_000) -> dict[str, Any]:
    base = slot["mcp"]["url"].removesuffix("/mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"cmd": cmd, "timeout_ms": timeout_ms}}}
    async with httpx.AsyncClient(timeout=60) as http:
        reply = (await http.post(f"{base}/rpc", json=body, headers=slot["mcp"]["headers"])).json()
    return tool_json(reply["result"])


def escapes(marker: str) -> str:
    """Descendants that leave the command's group, session and environment, then outlive it:
    one in a new session, two more double-forked out of it. Each has escaped before the
    command ends (the parent waits on a pipe), so the test does not race the command's own
    cleanup, which rightly kills what has not escaped yet."""
    script = (
        "import os\n"
        "for i in (1, 2, 3):\n"
        "    r, w = os.pipe()\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if i > 1 and os.fork() > 0:\n"
        "            os._exit(0)\n"
        "        null = os.open(os.devnull, os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        "        os.write(w, b\"x\")\n"
        f"        os.execve(\"/bin/sleep\", [\"/bin/sleep\", \"{marker}\" + str(i)], {{}})\n"
        "    os.read(r, 1)\n"
    )
    return f"python3 -c '{script}'; echo started"


# -- #2: every descendant dies with its slot -------------------------------------------


@pytest.mark.parametrize("fork_server", ["true", "false"], ids=["forked", "cold"])
@pytest.mark.parametrize("ending", ["release", "sigterm"])
async def test_escaped_descendants_die_with_the_slot(tmp_path: Path, run_root: Path, fork_server: str,
                                                     ending: str) -> None:
    marker = f"70{secrets.randbelow(10**6):06d}.{secrets.randbelow(10**6):06d}"
    env = {"JEEVES_MCP_FORK_SERVER": fork_server}
    try:
        async with running_daemon(tmp_path, env) as daemon, daemon.client() as control:
            slot = await control.acquire("escaper", run_root)
            ran = await bash(slot, escapes(marker))
            assert ran["stdout"] == "started\n", ran
            with trio.fail_after(10):  # the backgrounded ones get going
                while len(with_cmdline(marker)) < 3:  # noqa: ASYNC110 - a /proc scan
                    await trio.sleep(0.05)
            if ending == "release":
                await control.release("escaper")
            else:
                await stop_process_group(daemon.process)
            assert with_cmdline(marker) == []
    finally:
        kill_all(with_cmdline(marker))


# -- #1: a run's commands cannot read the daemon's state or another run's child ---------------


@pytest.fixture
def owned_root() -> Iterator[Path]:
    """A run root owned by an unprivileged user (nobody), outside the 0700 pytest dirs."""
    if os.geteuid() != 0:
        pytest.skip("switching users needs a daemon running as root")
    root = Path(tempfile.mkdtemp(prefix="jeeves-run-"))
    root.chmod(0o755)
    os.chown(root, NOBODY, NOBODY)
    (root / "hello.py").write_text("x = 1\n")
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_commands_run_as_the_roots_owner_and_reach_no_token(tmp_path: Path, owned_root: Path) -> None:
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        mine = await control.acquire("attacker", owned_root)
        other = await control.acquire("victim", owned_root)
        token = other["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
        state, pid = daemon.state_dir, other["pid"]
        probe = (f"id -u; cat {state}/slots.sqlite3 > /dev/null 2>&1 && echo DB_READ; "
                 f"grep -rl {token} {state} 2>/dev/null && echo TOKEN_FOUND; "
                 f"head -c1 /proc/{pid}/environ > /dev/null 2>&1 && echo ENVIRON_READ; "
                 f"exec 3< /proc/{pid}/mem && echo MEM_OPENED; "
                 f"grep -c {token} /proc/{pid}/cmdline 2>/dev/null; echo done")
        ran = await bash(mine, probe)
        lines = ran["stdout"].split()
        assert lines[0] == str(NOBODY), ran
        assert lines[-1] == "done" and not {"DB_READ", "TOKEN_FOUND", "ENVIRON_READ", "MEM_OPENED"} & set(lines), ran
        wrote = await bash(mine, "echo made > made.txt && stat -c %u made.txt")
        assert wrote["stdout"] == f"{NOBODY}\n"  # the workspace stays the owner's to write
        await control.release("attacker")
        await control.release("victim")


async def test_commands_get_the_dumpable_bit_the_pruner_gave_up(tmp_path: Path, run_root: Path) -> None:
    """The pruner is non-dumpable (its memory holds its token); execve gives its commands
    theirs back, so a command's core dumps and debuggers work as usual. (That the
    pruner's own /proc/PID/mem is closed to its user needs a non-root daemon to see.)"""
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        slot = await control.acquire("dump", run_root)
        ran = await bash(slot, "python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'")
        assert ran["stdout"] == "1\n", ran
        await control.release("dump")
