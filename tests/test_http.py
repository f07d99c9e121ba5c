"""Raw HTTP against a real child: each MUST of the transport, by status code."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests._child import Child, pruner_argv, running_child, tool_json

JSON_AND_SSE = "application/json, text/event-stream"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


def headers(child: Child, **extra: str) -> dict[str, str]:
    return {"Accept": JSON_AND_SSE, "Content-Type": "application/json", **child.headers(), **extra}


async def open_session(http: httpx.AsyncClient, child: Child, version: str = "2025-06-18") -> str:
    init = {**INIT, "params": {**INIT["params"], "protocolVersion": version}}
    response = await http.post(child.url, json=init, headers=headers(child))
    assert response.status_code == 200
    assert response.json()["result"]["protocolVersion"] == version
    return response.headers["mcp-session-id"]


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 2) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


# A connection per request where requests carry no valid token: the listener's header deadline
# runs from the accept until a vouched request, and a loaded machine can reach it between two.
NO_REUSE = httpx.Limits(max_keepalive_connections=0)


async def test_token_is_required_and_checked(child: Child) -> None:
    async with httpx.AsyncClient(limits=NO_REUSE) as http:
        missing = await http.post(child.url, json=INIT, headers={"Accept": JSON_AND_SSE})
        wrong = await http.post(
            child.url, json=INIT, headers=headers(child, Authorization="Bearer nope")
        )
        legacy = await http.post(f"{child.base}/rpc", json=rpc("tools/list"))
        health = await http.get(f"{child.base}/health")
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401
    assert legacy.status_code == 401
    assert health.status_code == 200 and health.json()["status"] == "healthy"


async def test_foreign_origin_and_host_are_refused(child: Child) -> None:
    async with httpx.AsyncClient(limits=NO_REUSE) as http:
        evil_origin = await http.post(
            child.url, json=INIT, headers=headers(child, Origin="http://evil.example")
        )
        evil_host = await http.post(child.url, json=INIT, headers=headers(child, Host="evil.example"))
        local = await http.post(
            child.url, json=INIT, headers=headers(child, Origin=f"http://localhost:{child.port}")
        )
    assert evil_origin.status_code == 403
    assert evil_host.status_code == 421
    assert local.status_code == 200


async def test_session_lifecycle(child: Child) -> None:
    async with httpx.AsyncClient() as http:
        session = await open_session(http, child)
        with_session = headers(child, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"})
        note = await http.post(child.url, json=rpc("notifications/initialized", request_id=None),
                               headers=with_session)
        assert note.status_code == 202 and note.content == b""
        listed = await http.post(child.url, json=rpc("tools/list"), headers=with_session)
        assert listed.status_code == 200
        assert {t["name"] for t in listed.json()["result"]["tools"]} >= {"read", "bash", "grep"}

        no_session = await http.post(child.url, json=rpc("tools/list"), headers=headers(child))
        assert no_session.status_code == 400
        unknown = await http.post(child.url, json=rpc("tools/list"),
                                  headers=headers(child, **{"Mcp-Session-Id": "nope"}))
        assert unknown.status_code == 404
        bad_version = await http.post(child.url, json=rpc("tools/list"),
                                      headers={**with_session, "MCP-Protocol-Version": "1999-01-01"})
        assert bad_version.status_code == 400
        older = await http.post(child.url, json=rpc("ping"),
                                headers={**with_session, "MCP-Protocol-Version": "2025-03-26"})
        assert older.status_code == 200 and older.json()["result"] == {}

        closed = await http.delete(child.url, headers=with_session)
        assert closed.status_code == 200
        after = await http.post(child.url, json=rpc("tools/list"), headers=with_session)
        assert after.status_code == 404


async def test_get_stream_needs_a_session_and_event_stream(child: Child) -> None:
    async with httpx.AsyncClient() as http:
        session = await open_session(http, child)
        plain = await http.get(child.url, headers={**child.headers(), "Accept": "application/json"})
        assert plain.status_code == 405
        stream_headers = {**child.headers(), "Accept": "text/event-stream", "Mcp-Session-Id": session}
        async with http.stream("GET", child.url, headers=stream_headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"] == "text/event-stream"
            # Ending the session ends its stream.
            await http.delete(child.url, headers={**child.headers(), "Mcp-Session-Id": session})
            with trio.fail_after(5):
                assert [chunk async for chunk in stream.aiter_bytes()] == []


async def test_body_limit_content_type_and_parse_errors(workspace: Path, tmp_path: Path) -> None:
    env = {"JEEVES_MCP_MAX_BODY_BYTES": "2048"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient() as http:
        big = await http.post(child.url, content=b'{"x": "' + b"a" * 5000 + b'"}', headers=headers(child))
        assert big.status_code == 413
        form = await http.post(child.url, content=b"{}",
                               headers=headers(child, **{"Content-Type": "text/plain"}))
        assert form.status_code == 415
        broken = await http.post(child.url, content=b"{not json", headers=headers(child))
        assert broken.status_code == 400
        assert broken.json()["error"]["code"] == -32700
        # The child still serves after all of that.
        assert (await http.post(child.url, json=INIT, headers=headers(child))).status_code == 200


async def test_modern_requests_check_headers_and_version(child: Child) -> None:
    def modern(method: str, version: str = "2026-07-28", **params: Any) -> dict[str, Any]:
        return rpc(method, {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": version}})

    base = headers(child, **{"MCP-Protocol-Version": "2026-07-28"})
    async with httpx.AsyncClient() as http:
        discover = await http.post(child.url, json=modern("server/discover"),
                                   headers={**base, "Mcp-Method": "server/discover"})
        assert discover.status_code == 200
        result = discover.json()["result"]
        assert "2026-07-28" in result["supportedVersions"]
        assert result["resultType"] == "complete" and result["cacheScope"] == "private"

        mismatch = await http.post(child.url, json=modern("tools/list"),
                                   headers={**base, "Mcp-Method": "tools/call"})
        assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020

        unsupported = await http.post(child.url, json=modern("tools/list", version="2099-01-01"),
                                      headers={**base, "MCP-Protocol-Version": "2099-01-01"})
        assert unsupported.status_code == 400
        assert unsupported.json()["error"]["code"] == -32022
        assert "2026-07-28" in unsupported.json()["error"]["data"]["supported"]

        name_mismatch = await http.post(
            child.url, json=modern("tools/call", name="read", arguments={"path": "notes.md"}),
            headers={**base, "Mcp-Method": "tools/call", "Mcp-Name": "grep"},
        )
        assert name_mismatch.json()["error"]["code"] == -32020

        get = await http.get(child.url, headers={**base, "Accept": "text/event-stream"})
        assert get.status_code == 405


async def test_legacy_rpc_endpoint(child: Child) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        listed = await http.post(f"{child.base}/rpc", json=rpc("tools/list", request_id=1))
        assert listed.status_code == 200
        assert len(listed.json()["result"]["tools"]) == 6
        health = await http.post(f"{child.base}/rpc", json=rpc("health", request_id=2))
        assert health.json()["result"]["status"] == "healthy"
        for method in ("resources/list", "resources/templates/list", "prompts/list"):
            reply = (await http.post(f"{child.base}/rpc", json=rpc(method, request_id=3))).json()
            assert list(reply["result"].values()) == [[]]
        missing = (await http.post(f"{child.base}/rpc", json=rpc("nope/nope", request_id=4))).json()
        assert missing["error"]["code"] == -32601
        batch = await http.post(
            f"{child.base}/rpc", json=[rpc("ping", request_id="a"), rpc("ping", request_id=7)]
        )
        assert sorted(str(r["id"]) for r in batch.json()) == ["7", "a"]
        get = await http.get(f"{child.base}/rpc")
        assert get.status_code == 405


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"path": "notes.md", "colour": "red"}, "colour: unknown argument"),
        ({}, "path: required"),
        ({"path": 3}, "path: expected string, got number"),
        ({"path": "notes.md", "offset": 0}, "offset: must be >= 1"),
    ],
)
async def test_bad_arguments_are_invalid_params(child: Child, arguments: dict, problem: str) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        reply = (
            await http.post(f"{child.base}/rpc", json=rpc("tools/call", {"name": "read", "arguments": arguments}))
        ).json()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["code"] == "INVALID_REQUEST"
    assert problem in reply["error"]["data"]["errors"]


async def call(http: httpx.AsyncClient, child: Child, name: str, arguments: dict, request_id: Any = 9) -> dict:
    reply = (
        await http.post(f"{child.base}/rpc", json=rpc("tools/call", {"name": name, "arguments": arguments}, request_id))
    ).json()
    result = reply["result"]
    tool_json(result)  # the JSON once, in content[0].text
    return result


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("read", {"path": "missing.py"}, "NOT_FOUND"),
        ("read", {"path": "../../etc/passwd"}, "FORBIDDEN"),
        ("read", {"path": "/etc/passwd"}, "FORBIDDEN"),
        ("read", {"path": "src"}, "INVALID_REQUEST"),
        ("grep", {"pattern": "("}, "INVALID_REQUEST"),
        ("no_such_tool", {}, "INVALID_REQUEST"),
    ],
)
async def test_tool_errors_carry_their_code(child: Child, tool: str, arguments: dict, code: str) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = await call(http, child, tool, arguments)
    assert result["isError"] is True
    assert tool_json(result)["code"] == code
    assert tool_json(result)["message"]


async def test_symlink_out_of_root_is_refused(child: Child, workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    (workspace / "link.txt").symlink_to(secret)
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = await call(http, child, "read", {"path": "link.txt"})
    assert tool_json(result)["code"] == "FORBIDDEN"
    assert "s3cret" not in json.dumps(result)


async def test_a_batch_of_malformed_items_gets_its_errors(child: Child) -> None:
    async with httpx.AsyncClient() as http:
        session = await open_session(http, child, "2025-03-26")  # the one revision with batches
        reply = await http.post(child.url, json=[5, {"jsonrpc": "1.0", "method": "x"}],
                                headers=headers(child, **{"Mcp-Session-Id": session}))
    assert reply.status_code == 400
    assert [error["error"]["code"] for error in reply.json()] == [-32600, -32600]


async def test_batches_only_where_the_revision_has_them(child: Child) -> None:
    pings = [rpc("ping", request_id=1), rpc("ping", request_id=2)]
    async with httpx.AsyncClient() as http:
        for version, allowed in [("2024-11-05", False), ("2025-03-26", True), ("2025-06-18", False),
                                 ("2025-11-25", False)]:
            session = await open_session(http, child, version)
            reply = await http.post(child.url, json=pings, headers=headers(
                child, **{"Mcp-Session-Id": session, "MCP-Protocol-Version": version}))
            if allowed:
                assert reply.status_code == 200 and sorted(r["id"] for r in reply.json()) == [1, 2]
            else:
                assert reply.status_code == 400, version
                assert reply.json()["error"]["code"] == -32600
                assert version in reply.json()["error"]["message"]
        # initialize never rides in a batch (2025-03-26 says so; later revisions have none).
        init = await http.post(child.url, json=[{**INIT, "params": {**INIT["params"], "protocolVersion": "2025-03-26"}}],
                               headers=headers(child))
        assert init.status_code == 400 and "mcp-session-id" not in init.headers
        # The legacy /rpc endpoint negotiates nothing: plain JSON-RPC 2.0 keeps its batches.
        legacy = await http.post(f"{child.base}/rpc", json=pings, headers=child.headers())
        assert legacy.status_code == 200 and len(legacy.json()) == 2


async def test_stdio_refuses_a_batch_after_a_revision_without_them(workspace: Path) -> None:
    init = {**INIT, "params": {**INIT["params"], "protocolVersion": "2025-11-25"}}
    process = await trio.lowlevel.open_process(
        pruner_argv(workspace, "--stdio"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env={k: v for k, v in os.environ.items() if k != "JEEVES_MCP_TOKEN"},
    )
    assert process.stdin is not None and process.stdout is not None
    replies = process.stdout

    async def exchange(message: Any) -> dict[str, Any]:
        await process.stdin.send_all(json.dumps(message).encode() + b"\n")
        line = b""
        while not line.endswith(b"\n"):
            chunk = await replies.receive_some(65536)
            assert chunk, "the child closed stdout"
            line += chunk
        return json.loads(line)

    try:
        with trio.fail_after(20):
            # The lifecycle: the batch is sent once initialize has been answered.
            assert (await exchange(init))["result"]["protocolVersion"] == "2025-11-25"
            refused = await exchange([rpc("ping", request_id=5)])
            assert refused["id"] is None and refused["error"]["code"] == -32600
            assert (await exchange(rpc("ping", request_id=6)))["result"] == {}
    finally:
        await process.stdin.aclose()
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_stdio_answers_an_empty_batch_and_keeps_going(workspace: Path) -> None:
    lines = b'[]\n{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n'
    done = await trio.run_process(
        pruner_argv(workspace, "--stdio"), stdin=lines, capture_stdout=True, capture_stderr=True,
        env={k: v for k, v in os.environ.items() if k != "JEEVES_MCP_TOKEN"},
    )
    # Lines are answered concurrently: match replies by id, not by order.
    replies = {json.dumps(r.get("id")): r for r in map(json.loads, done.stdout.splitlines())}
    assert replies["null"]["error"]["code"] == -32600
    assert replies["1"] == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_read_refuses_a_fifo_instead_of_hanging(child: Child, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    async with httpx.AsyncClient(headers=child.headers()) as http:
        with trio.fail_after(10):
            result = await call(http, child, "read", {"path": "pipe"})
    assert result["isError"] and tool_json(result)["code"] == "INVALID_REQUEST"
    assert "not a regular file" in tool_json(result)["message"]


async def test_event_streams_end_with_their_clients_and_one_a_session(workspace: Path, tmp_path: Path) -> None:
    """GET streams whose clients were killed stayed until their session ended, each one of
    max_connections: 128 of them reset every later connection to the port while the slot still
    looked healthy (the attack review of 2026-11-29)."""
    env = {"JEEVES_MCP_MAX_CONNECTIONS": "6"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient() as http:
        session = await open_session(http, child)
        request = (f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{child.port}\r\nAuthorization: Bearer {child.token}\r\n"
                   f"Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\r\n").encode()
        for _ in range(10):  # each client reads its stream's head, then dies
            with trio.fail_after(10):
                stream = await trio.open_tcp_stream("127.0.0.1", child.port)
                await stream.send_all(request)
                head = await stream.receive_some(4096)
                assert head.startswith(b"HTTP/1.1 200") and b"text/event-stream" in head, head
                await stream.aclose()
        with trio.fail_after(10):
            listed = await http.post(child.url, json=rpc("tools/list"), headers=headers(child, **{"Mcp-Session-Id": session}))
        assert listed.status_code == 200 and listed.json()["result"]["tools"]
        # A session's second stream ends its first: the client came back for it.
        stream_headers = {**child.headers(), "Accept": "text/event-stream", "Mcp-Session-Id": session}
        async with httpx.AsyncClient() as first_client, \
                first_client.stream("GET", child.url, headers=stream_headers) as first:
            assert first.status_code == 200
            async with httpx.AsyncClient() as second_client, \
                    second_client.stream("GET", child.url, headers=stream_headers) as second:
                assert second.status_code == 200
                with trio.fail_after(5):
                    assert [chunk async for chunk in first.aiter_bytes()] == []
