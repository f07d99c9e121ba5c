"""The official MCP Python SDK client is the peer: both eras, HTTP and stdio."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests._child import Child, pruner_argv, with_cmdline


def payload(result: Any) -> dict[str, Any]:
    """The JSON a tool returned, once, in content[0].text (no structuredContent)."""
    assert result.structured_content is None
    text: dict[str, Any] = json.loads(result.content[0].text)
    return text


processes_with = with_cmdline  # what the tests below call it


async def wait_gone(marker: str, timeout_s: float = 10) -> list[int]:
    """Wait (bounded) until no process carries `marker`; returns what is left."""
    with trio.move_on_after(timeout_s):
        # No event tells us a process we did not spawn has exited: poll /proc, bounded.
        while processes_with(marker):  # noqa: ASYNC110
            await trio.sleep(0.05)
    return processes_with(marker)


@asynccontextmanager
async def http_client(
    child: Child, mode: str = "auto", headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=headers or child.headers()) as http:
        transport = streamable_http_client(child.url, http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_client_over_http(child: Child, mode: str) -> None:
    async with http_client(child, mode) as client:
        expected = "2026-07-28" if mode == "auto" else "2025-11-25"
        assert client.protocol_version == expected
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert names == ["read", "bash", "grep", "prune_text", "recover_text", "health"]
        for tool in listed.tools:
            assert tool.input_schema["additionalProperties"] is False
            assert tool.meta == {"schemaVersion": 1}

        read = await client.call_tool("read", {"path": "src/app.py"})
        assert not read.is_error
        body = payload(read)
        assert "def greet(name):" in body["content"]
        assert body["pruning"] == {
            "attempted": False, "applied": False, "fallback": False, "reason": "no_question",
        }
        assert body["summary"].startswith("read src/app.py: 9 lines")

        grep = await client.call_tool("grep", {"pattern": "def \\w+", "paths": ["src"]})
        assert payload(grep)["match_count"] == 2

        updates: list[tuple[float, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            updates.append((progress, message))

        bash = await client.call_tool(
            "bash",
            {"cmd": "for i in 1 2 3; do echo line $i; sleep 0.3; done"},
            progress_callback=on_progress,
        )
        assert not bash.is_error
        assert payload(bash)["stdout"].split("\n")[:3] == ["line 1", "line 2", "line 3"]
        assert updates, "a bash call with a progress token reports progress"
        assert [p for p, _ in updates] == sorted(p for p, _ in updates)

        failing = await client.call_tool("bash", {"cmd": "echo oops >&2; exit 3"})
        assert failing.is_error
        assert payload(failing)["code"] == "COMMAND_FAILED"
        assert payload(failing)["exit_code"] == 3


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_sdk_cancellation_kills_the_command(child: Child, mode: str) -> None:
    marker = f"31{os.getpid() % 1000:03d}{len(mode)}7"
    async with http_client(child, mode) as client:
        with trio.move_on_after(1.5) as scope:
            await client.call_tool("bash", {"cmd": f"sleep {marker}"})
        assert scope.cancelled_caught
        assert await wait_gone(f"sleep {marker}") == []
        # The server still answers after the cancellation.
        assert not (await client.call_tool("read", {"path": "notes.md"})).is_error


async def test_sdk_client_over_stdio(workspace: Path) -> None:
    argv = pruner_argv(workspace, "--stdio")
    env = {k: v for k, v in os.environ.items() if k != "JEEVES_MCP_TOKEN"}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(workspace))
    async with Client(params) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "read" in names
        result = await client.call_tool("read", {"path": "notes.md"})
        assert payload(result)["content"] == "# Notes\n\nSome text."
        bad = await client.call_tool("read", {"path": "../outside.txt"})
        assert bad.is_error and payload(bad)["code"] == "FORBIDDEN"


async def test_wrong_token_is_refused_by_sdk_client(child: Child) -> None:
    with pytest.raises(Exception) as raised:
        async with http_client(child, headers={"Authorization": "Bearer wrong"}) as client:
            await client.list_tools()
    assert "MCPError" in repr(raised.value)
    assert not [e for e in child.log_events() if e["event"].startswith("tool.")]
