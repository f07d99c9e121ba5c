"""Claude Code itself connects to a slot through `jeeves-mcp config claude` (skipped without `claude`).

Install it with `npm install -g @anthropic-ai/claude-code` (or point CLAUDE_BIN at its
binary). `claude mcp list` needs no login and no network: it only connects to the
configured servers. It lists a project's .mcp.json servers once the project approved
them, which a fresh HOME's ~/.claude.json does here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from tests._daemon import Daemon, running_daemon

CLAUDE = os.environ.get("CLAUDE_BIN") or shutil.which("claude")
pytestmark = pytest.mark.skipif(CLAUDE is None, reason="Claude Code (claude) is not installed")


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Daemon]:
    async with running_daemon(tmp_path) as started:
        yield started


async def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return await trio.run_process(args, env=env, cwd=cwd, capture_stdout=True, capture_stderr=True,
                                  check=False, stdin=subprocess.DEVNULL)


async def test_claude_mcp_list_reports_the_slot_connected(daemon: Daemon, tmp_path: Path) -> None:
    assert CLAUDE is not None
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    # A fresh Claude Code home that trusts the project and approved its "jeeves" server.
    (home / ".claude.json").write_text(json.dumps({"projects": {str(project): {
        "hasTrustDialogAccepted": True, "enabledMcpjsonServers": ["jeeves"]}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JEEVES_", "ANTHROPIC_", "CLAUDE"))}
    env.update(JEEVES_MCP_SOCKET=str(daemon.socket), HOME=str(home), DISABLE_TELEMETRY="1",
               CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    jeeves = [sys.executable, "-m", "jeeves_mcp"]

    acquired = await run([*jeeves, "acquire", "run-cc", "--root", str(project), "--json"], env, project)
    assert acquired.returncode == 0, acquired.stderr.decode()
    url = json.loads(acquired.stdout)["mcp"]["url"]
    written = await run([*jeeves, "config", "claude", "run-cc", "--write", ".mcp.json"], env, project)
    assert written.returncode == 0, written.stderr.decode()
    export = await run([*jeeves, "config", "claude", "run-cc", "--export"], env, project)
    name, _, token = export.stdout.decode().strip().removeprefix("export ").partition("=")
    assert name == "JEEVES_MCP_TOKEN" and token

    listed = await run([CLAUDE, "mcp", "list"], {**env, name: token}, project)
    output = listed.stdout.decode()
    assert listed.returncode == 0, listed.stderr.decode()
    line = next(line for line in output.splitlines() if line.startswith("jeeves:"))
    assert url in line and "Connected" in line and "Failed" not in line, output

    # The token really comes from the environment: a wrong one fails.
    refused = await run([CLAUDE, "mcp", "list"], {**env, name: "wrong"}, project)
    line = next(line for line in refused.stdout.decode().splitlines() if line.startswith("jeeves:"))
    assert "Failed to connect" in line
