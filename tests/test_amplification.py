"""A small request must not make a large reply or a large log, through a live child.

The attacker is anyone holding the token (the run itself): each reply and each log line a
request makes stays bounded whatever the request holds, and the child goes on serving.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import trio

from tests._child import Child, pruner_argv, running_child
from tests.test_http import headers, open_session, rpc

BOUND_S = 60  # far above what each request costs; a request past it has no bound


async def post(http: httpx.AsyncClient, child: Child, message: Any) -> httpx.Response:
    body = json.dumps(message, separators=(",", ":"))
    with trio.fail_after(BOUND_S):
        return await http.post(f"{child.base}/rpc", content=body,
                               headers={**child.headers(), "Content-Type": "application/json"})


def log_size(child: Child) -> int:
    return child.stderr_path.stat().st_size


async def test_a_call_with_half_a_million_invalid_items_gets_ten_of_them(workspace: Path, tmp_path: Path) -> None:
    count = 500_000
    arguments = {"pattern": "x", "paths": [0] * count}
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        before = log_size(child)
        reply = await post(http, child, rpc("tools/call", {"name": "grep", "arguments": arguments}))
        grew = log_size(child) - before
        error = reply.json()["error"]
        assert error["code"] == -32602 and error["data"]["code"] == "INVALID_REQUEST", error
        assert error["data"]["errors"] == [f"paths[{i}]: expected string, got number" for i in range(10)]
        assert error["data"]["errors_omitted"] == count - 10, error["data"]
        assert error["message"].endswith(f"(and {count - 10} more)"), error["message"]
        assert len(reply.content) < 4096, len(reply.content)
        logged = [e for e in child.log_events() if e.get("event") == "tool.request_invalid"]
        assert [len(e["validation_errors"]) for e in logged] == [10], logged
        assert logged[0]["validation_errors_omitted"] == count - 10
        assert grew < 8192, grew
        assert (await http.get(f"{child.base}/health")).status_code == 200


async def test_an_unknown_argument_with_a_long_name_is_not_echoed_whole(workspace: Path, tmp_path: Path) -> None:
    name = "k" * 1_000_000
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        before = log_size(child)
        reply = await post(http, child, rpc("tools/call", {"name": "read", "arguments": {"path": "notes.md", name: 1}}))
        grew = log_size(child) - before
        error = reply.json()["error"]
        [problem] = error["data"]["errors"]
        assert problem.startswith("kkk") and problem.endswith("chars): unknown argument"), problem[:300]
        assert len(reply.content) < 4096 and grew < 8192, (len(reply.content), grew)


async def test_an_unknown_method_or_tool_with_a_long_name_is_not_echoed_whole(
    workspace: Path, tmp_path: Path
) -> None:
    name = "m" * 1_000_000
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        before = log_size(child)
        method = await post(http, child, rpc(name, {}))
        tool = await post(http, child, rpc("tools/call", {"name": name, "arguments": {}}))
        grew = log_size(child) - before
        assert method.json()["error"]["code"] == -32601, method.content[:300]
        assert tool.json().get("error") or tool.json()["result"]["isError"], tool.content[:300]
        assert len(method.content) < 4096 and len(tool.content) < 4096, (len(method.content), len(tool.content))
        assert grew < 8192, grew


def lines_of(*paths: Path) -> list[dict[str, Any]]:
    """Every line of the log files, each one a JSON object."""
    return [json.loads(line) for path in paths if path.exists() for line in path.read_text().splitlines()]


async def test_the_log_file_stays_within_its_bound_and_keeps_earlier_lines(workspace: Path, tmp_path: Path) -> None:
    # As the supervisor starts a child: a log file of 1 MiB, its rotation included.
    bound = 1024 * 1024
    log_file = tmp_path / "child.log"
    rotated = tmp_path / "child.log.1"
    extra = ("--log-file", str(log_file), "--log-file-bytes", str(bound))
    async with running_child(workspace, tmp_path, extra=extra) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        await post(http, child, rpc("tools/call", {"name": "read", "arguments": {"path": "notes.md"}}, "earlier"))
        await post(http, child, rpc("tools/call", {"name": "y" * 3_000_000, "arguments": {}}))
        sizes = [path.stat().st_size for path in (log_file, rotated) if path.exists()]
        assert sum(sizes) <= bound, sizes
        assert any(e.get("request_id") == "earlier" for e in lines_of(rotated, log_file)), sizes


def events(child: Child, name: str) -> list[dict[str, Any]]:
    return [e for e in child.log_events() if e.get("event") == name]


async def test_what_a_client_names_is_logged_clipped(workspace: Path, tmp_path: Path) -> None:
    long_name, long_id, long_reason = "x" * 3_000_000, "i" * 1_000_000, "r" * 3_000_000
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        before = log_size(child)
        await post(http, child, rpc("tools/call", {"name": long_name, "arguments": {}}))
        await post(http, child, rpc("tools/call", {"name": "read", "arguments": {"path": "notes.md"}}, long_id))
        for name in ("tool.request_received", "tool.request_invalid"):
            [line] = [e for e in events(child, name) if e["tool"].startswith("xxx")]
            assert line["tool"].endswith("(3000000 chars)") and len(line["tool"]) < 2000, (name, line["tool"][-50:])
        sent = [e for e in events(child, "tool.respond_ok") if e["request_id"].startswith("iii")]
        assert len(sent) == 1 and len(sent[0]["request_id"]) < 2000, sent
        async with trio.open_nursery() as nursery:
            nursery.start_soon(post, http, child, rpc("tools/call", {"name": "bash", "arguments": {"cmd": "sleep 30"}}, "s1"))
            with trio.fail_after(BOUND_S):
                while not [e for e in events(child, "tool.exec_start") if e["request_id"] == "s1"]:  # noqa: ASYNC110 - a log file
                    await trio.sleep(0.02)
            await post(http, child, rpc("notifications/cancelled", {"requestId": "s1", "reason": long_reason}, None))
        [cancel] = events(child, "tool.cancel_requested")
        assert cancel["reason"].startswith("rrr") and len(cancel["reason"]) < 2000, cancel["reason"][-50:]
        assert log_size(child) - before < 64 * 1024, log_size(child) - before


MANY = 5_000  # tools/list answers of 3 KB each: 15 MB from a 300 KB request


def too_many(reply: Any) -> None:
    assert isinstance(reply, dict) and reply["id"] is None, str(reply)[:300]
    assert reply["error"]["code"] == -32600 and "at most 100" in reply["error"]["message"], reply


async def test_a_batch_of_thousands_of_messages_gets_one_error(workspace: Path, tmp_path: Path) -> None:
    batch = [rpc("tools/list", request_id=index) for index in range(MANY)]
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        reply = await post(http, child, batch)
        assert len(reply.content) < 4096, len(reply.content)
        too_many(reply.json())
        fits = await post(http, child, batch[:100])
        assert sorted(answer["id"] for answer in fits.json()) == list(range(100))
        # The revision whose sessions take batches.
        session = await open_session(http, child, "2025-03-26")
        with trio.fail_after(BOUND_S):
            streamable = await http.post(child.url, content=json.dumps(batch),
                                         headers=headers(child, **{"mcp-session-id": session}))
        assert len(streamable.content) < 4096, len(streamable.content)
        too_many(streamable.json())


async def test_a_batch_of_thousands_of_messages_on_stdio_gets_one_error(workspace: Path) -> None:
    batch = [rpc("tools/list", request_id=index) for index in range(MANY)]
    lines = (json.dumps(batch) + "\n" + json.dumps(rpc("ping", request_id="after")) + "\n").encode()
    with trio.fail_after(BOUND_S):
        done = await trio.run_process(
            pruner_argv(workspace, "--stdio"), stdin=lines, capture_stdout=True, capture_stderr=True,
            env={k: v for k, v in os.environ.items() if k != "JEEVES_MCP_TOKEN"},
        )
    assert len(done.stdout) < 4096, len(done.stdout)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    too_many(next(r for r in replies if "error" in r))
    assert {"jsonrpc": "2.0", "id": "after", "result": {}} in replies


async def test_a_grep_over_a_hundred_thousand_paths_is_refused_before_any_is_looked_up(
    workspace: Path, tmp_path: Path
) -> None:
    # Each path was resolved and stat-ed in the event loop: 100,000 of them (a 500 KB request)
    # held every call and health check for 4 s.
    arguments = {"pattern": "x", "paths": ["notes.md"] * 100_000}
    async with running_child(workspace, tmp_path) as child, httpx.AsyncClient(timeout=BOUND_S + 10) as http:
        reply = (await post(http, child, rpc("tools/call", {"name": "grep", "arguments": arguments}))).json()
        assert reply["error"]["data"]["errors"] == ["paths: at most 1000 items, got 100000"], reply
        fine = (await post(http, child, rpc("tools/call", {"name": "grep", "arguments": {
            "pattern": "Some", "paths": ["notes.md"] * 1000}}))).json()
        assert not fine["result"].get("isError"), fine
