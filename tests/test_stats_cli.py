"""`jeeves-mcp stats` against a real daemon, and its rendering."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import trio
from rich.console import Console

from jeeves_mcp.cli._stats import render, saved_bar
from tests._daemon import running_daemon


def test_saved_bar_fills_in_proportion() -> None:
    assert saved_bar(0.0, 10) == "░" * 10
    assert saved_bar(0.5, 10) == "█" * 5 + "░" * 5
    assert saved_bar(1.7, 10) == "█" * 10


def test_render_shows_each_tool_and_the_total() -> None:
    counts = {"calls": 4, "raw_bytes": 40000, "raw_tokens": 10000, "returned_bytes": 8000,
              "returned_tokens": 2000, "prunings": 3, "fallbacks": {"timeout": 1}}
    summary = {"calls": 4, "raw_tokens": 10000, "returned_tokens": 2000, "saved_tokens": 8000,
               "saved_share": 0.8, "prunings": 3}
    report = {"runs": {"r1": {"tools": {"read": counts}, "summary": summary}},
              "total": {"tools": {"read": counts}, "summary": summary}}
    out = io.StringIO()
    render(report, Console(file=out, width=120, color_system=None), None)
    text = out.getvalue()
    assert "read" in text and "80%" in text and "timeout 1" in text
    assert "8,000 of 10,000" in text


async def test_stats_command_against_a_daemon(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    (root / "big.log").write_text("".join(f"INFO step {n} ok\n" for n in range(400)) + "ERROR disk full\n")
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        slot = await control.acquire("stats-run", root)
        async with httpx.AsyncClient(timeout=10) as http:
            await http.post(
                slot["mcp"]["url"].removesuffix("/mcp") + "/rpc", headers=slot["mcp"]["headers"],
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "read", "arguments": {"path": "big.log", "context_focus_question": "what failed?"}}},
            )
        env = {**os.environ, "JEEVES_MCP_SOCKET": str(daemon.socket)}
        argv = [sys.executable, "-m", "jeeves_mcp", "stats", "stats-run", "--json"]
        done = await trio.run_process(argv, env=env, capture_stdout=True, capture_stderr=True,
                                      stdin=subprocess.DEVNULL)
        report = json.loads(done.stdout)
        assert report["tools"]["read"]["prunings"] == 1
        assert report["summary"]["saved_share"] > 0.5
        pretty = await trio.run_process([sys.executable, "-m", "jeeves_mcp", "stats"], env=env,
                                        capture_stdout=True, stdin=subprocess.DEVNULL)
        assert "what pruning saved" in pretty.stdout.decode()
        missing = await trio.run_process([sys.executable, "-m", "jeeves_mcp", "stats", "nope"], env=env,
                                         capture_stderr=True, check=False, stdin=subprocess.DEVNULL)
        assert missing.returncode == 1 and b"NOT_FOUND" in missing.stderr
