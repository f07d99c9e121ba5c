"""Every protocol revision we accept, checked against the official `mcp-types` models.

A real child answers raw JSON-RPC over /mcp at each revision; every result is
validated with `mcp_types.methods` (the models the SDK itself checks results with),
and what a revision does not define is not sent to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import mcp.client.session
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types.methods import SERVER_RESULTS, serialize_server_result, validate_server_result

from tests._child import Child

HANDSHAKE = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
READ_ONLY_TOOLS = {"read", "grep", "prune_text", "recover_text", "health"}
OPTIONS = {"max_prune_ratio": 0.9, "min_keep_lines": 1, "timeout_ms": 5000,
           "annotate_lines": False, "include_markers": True}
LONG_TEXT = "\n".join(f"def handler_{i}(request):\n    return respond({i})\n" for i in range(60))


class Peer:
    """Raw JSON-RPC over /mcp at one revision: a session, or stateless requests."""

    def __init__(self, http: httpx.AsyncClient, child: Child, version: str) -> None:
        self.http, self.child, self.version = http, child, version
        self.session: str | None = None
        self.next_id = 0

    def headers(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", **self.child.headers(),
                   "MCP-Protocol-Version": self.version}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        if self.version == MODERN:
            headers["Mcp-Method"] = method
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        return headers

    async def post(self, message: Any, method: str = "", params: dict[str, Any] | None = None) -> httpx.Response:
        return await self.http.post(self.child.url, json=message, headers=self.headers(method, params or {}))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = dict(params or {})
        if self.version == MODERN:
            params["_meta"] = {META_VERSION: MODERN}
        self.next_id += 1
        response = await self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params},
                                   method, params)
        reply = response.json()
        assert response.status_code == 200 and "result" in reply, (method, response.status_code, reply)
        if method == "initialize":
            self.session = response.headers["mcp-session-id"]
        return reply["result"]

    async def open(self) -> dict[str, Any]:
        if self.version == MODERN:
            return await self.request("server/discover")
        result = await self.request("initialize", {
            "protocolVersion": self.version, "capabilities": {},
            "clientInfo": {"name": "revisions", "version": "0"},
        })
        initialized = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert initialized.status_code == 202
        return result


def checked(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    """Validate `result` against the revision's official model; returns it."""
    assert (method, version) in SERVER_RESULTS, f"{method} is not a {version} method"
    validate_server_result(method, version, result)
    return result


def body(result: dict[str, Any]) -> dict[str, Any]:
    return json.loads(result["content"][0]["text"])


@pytest.mark.parametrize("version", [*HANDSHAKE, MODERN])
async def test_every_response_fits_the_revision(child: Child, workspace: Path, version: str) -> None:
    (workspace / "big.py").write_text(LONG_TEXT)
    async with httpx.AsyncClient(timeout=30) as http:
        peer = Peer(http, child, version)
        opened = await peer.open()
        if version == MODERN:
            checked("server/discover", version, opened)
            assert set(opened["supportedVersions"]) == {*HANDSHAKE, MODERN}
        else:
            checked("initialize", version, opened)
            assert opened["protocolVersion"] == version
        # Only what is served is advertised: no empty resources/prompts.
        assert opened["capabilities"] == {"tools": {"listChanged": False}}

        listed = checked("tools/list", version, await peer.request("tools/list"))
        tools = {tool["name"]: tool for tool in listed["tools"]}
        assert set(tools) == READ_ONLY_TOOLS | {"bash"}
        for name, tool in tools.items():
            # Fields a revision does not define are not sent to it.
            assert ("annotations" in tool) == (version >= "2025-03-26"), tool
            assert ("title" in tool) == (version >= "2025-06-18"), tool
            assert ("_meta" in tool) == (version >= "2025-06-18"), tool
            if "annotations" in tool:
                hints = tool["annotations"]
                if name in READ_ONLY_TOOLS:
                    assert hints == {"readOnlyHint": True}
                else:
                    assert hints == {"destructiveHint": True} and not hints.get("readOnlyHint")
        if version != MODERN:
            # Nothing outside the 2025-11-25-era model: its dump keeps every field we sent.
            assert serialize_server_result("tools/list", version, listed) == listed

        calls = [
            ("read", {"path": "src/app.py"}),
            ("read", {"path": "big.py", "context_focus_question": "what does handler_7 return?"}),
            ("read", {"path": "missing.py"}),
            ("bash", {"cmd": "echo out; echo err >&2"}),
            ("bash", {"cmd": "exit 3"}),
            ("grep", {"pattern": "def \\w+", "paths": ["src"]}),
            ("prune_text", {"text": LONG_TEXT, "goal_hint": "handler_7", "source_type": "code",
                            "options": OPTIONS}),
            ("health", {}),
            ("no_such_tool", {}),
        ]
        results = {}
        for name, arguments in calls:
            result = checked("tools/call", version, await peer.request(
                "tools/call", {"name": name, "arguments": arguments}))
            assert "structuredContent" not in result, result  # the JSON once, in content
            if version != MODERN:
                assert serialize_server_result("tools/call", version, result) == result
            results.setdefault(name, body(result))
        assert results["bash"]["stdout"].startswith("out")
        prune_id = results["prune_text"]["prune_id"]
        recovered = checked("tools/call", version, await peer.request("tools/call", {
            "name": "recover_text",
            "arguments": {"prune_id": prune_id, "ranges": [{"start_line": 1, "end_line": 2}],
                          "include_line_numbers": False},
        }))
        assert body(recovered)["raw_text"].startswith("def handler_0")

        for method, params in [("resources/list", {}), ("resources/templates/list", {}), ("prompts/list", {}),
                               ("ping", {}), ("logging/setLevel", {"level": "info"})]:
            if (method, version) in SERVER_RESULTS:  # 2026-07-28 has no ping nor logging
                checked(method, version, await peer.request(method, params))


@pytest.mark.parametrize("version", HANDSHAKE)
async def test_the_sdk_client_speaks_each_handshake_revision(
    child: Child, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The official client, offering `version`, checks every result against that revision itself."""
    # The SDK always offers its newest handshake revision; make it offer an older one.
    monkeypatch.setattr(mcp.client.session, "LATEST_HANDSHAKE_VERSION", version)
    async with create_mcp_http_client(headers=child.headers()) as http:
        transport = streamable_http_client(child.url, http_client=http)
        async with Client(transport, mode="legacy") as client:
            assert client.protocol_version == version
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            if version >= "2025-03-26":
                assert tools["read"].annotations is not None and tools["read"].annotations.read_only_hint
                assert tools["bash"].annotations is not None and tools["bash"].annotations.destructive_hint
            read = await client.call_tool("read", {"path": "notes.md"})
            assert not read.is_error and "Some text." in read.content[0].text
            failed = await client.call_tool("bash", {"cmd": "exit 4"})
            assert failed.is_error
