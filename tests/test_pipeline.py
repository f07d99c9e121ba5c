"""The tool pipeline over a real child: budget, recovery, progress, cancellation, overload."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import httpx
import trio

from jeeves_mcp.mcp.progress import ProgressReporter
from tests._child import Child, running_child, tool_json
from tests.test_http import INIT, call, headers, rpc


async def test_long_output_keeps_head_and_tail_and_the_middle_is_recoverable(
    child: Child, workspace: Path
) -> None:
    lines = [f"line {n:05d} " + "x" * 60 for n in range(1, 2001)]
    (workspace / "big.txt").write_text("\n".join(lines) + "\n")
    async with httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {"path": "big.txt"}))
        content = result["content"]
        assert len(content.encode()) <= 10 * 1024
        assert content.startswith(lines[0]) and content.endswith(lines[-1])
        marker = next(line for line in content.split("\n") if line.startswith("⟦PRUNÉ"))
        cut = result["truncated"]["content"]
        start, end = cut["lines"]
        # The summary alone says the content is not whole (a reader of it took it for whole).
        assert result["summary"].startswith("read big.txt: 2000 lines")
        assert result["summary"].endswith("; content cut to fit (see truncated)")
        assert len(result["summary"]) <= 100
        assert f"prune_id={cut['prune_id']} lignes {start}-{end}" in marker
        recovered = tool_json(
            await call(http, child, "recover_text", {
                "prune_id": cut["prune_id"],
                "ranges": [{"start_line": start, "end_line": start + 2}, {"start_line": 1, "end_line": 1}],
                "include_line_numbers": True,
            })
        )
        assert recovered["raw_text"].split("\n") == [
            f"{start}│ {lines[start - 1]}", f"{start + 1}│ {lines[start]}",
            f"{start + 2}│ {lines[start + 1]}", f"1│ {lines[0]}",
        ]
        # Recovering more than a response holds: the summary says what was held back.
        whole = tool_json(await call(http, child, "recover_text", {
            "prune_id": cut["prune_id"], "ranges": [{"start_line": start, "end_line": end}],
            "include_line_numbers": True,
        }))
        assert whole["metadata"]["truncated"]["original_start_line"] > start
        assert whole["summary"].endswith("; cut to fit (metadata.truncated)")
        assert len(whole["summary"]) <= 100
        missing = (await http.post(f"{child.base}/rpc", json=rpc("tools/call", {
            "name": "recover_range",
            "arguments": {"prune_id": "prn_nope", "ranges": [], "include_line_numbers": False},
        }))).json()
        assert missing["error"]["code"] == -32004
        assert missing["error"]["data"] == {"code": "prune_id_not_found", "prune_id": "prn_nope"}
        # An error echoes what it was given, clipped: a 3 MB prune_id came back whole.
        huge = (await http.post(f"{child.base}/rpc", json=rpc("tools/call", {
            "name": "recover_text",
            "arguments": {"prune_id": "p" * 100_000, "ranges": [], "include_line_numbers": False},
        }))).json()
        assert huge["error"]["code"] == -32004 and len(huge["error"]["data"]["prune_id"]) == 500
        backwards = (await http.post(f"{child.base}/rpc", json=rpc("tools/call", {
            "name": "recover_text",
            "arguments": {"prune_id": cut["prune_id"], "ranges": [{"start_line": 9, "end_line": 3}],
                          "include_line_numbers": False},
        }))).json()
        assert backwards["error"]["code"] == -32005
        assert backwards["error"]["data"]["code"] == "invalid_range"


async def test_recover_clamps_the_end_line(child: Child, workspace: Path) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        pruned = tool_json(await call(http, child, "prune_text", {
            "text": "a\nb\nc", "goal_hint": "b", "source_type": "docs",
            "options": {"max_prune_ratio": 0.5, "min_keep_lines": 1, "timeout_ms": 1000,
                        "annotate_lines": True, "include_markers": True},
        }))
        recovered = tool_json(await call(http, child, "recover_text", {
            "prune_id": pruned["prune_id"], "ranges": [{"start_line": 2, "end_line": 99}],
            "include_line_numbers": False,
        }))
    assert recovered["raw_text"] == "b\nc"
    assert recovered["metadata"]["ranges"] == [{"start_line": 2, "end_line": 3}]
    # Overlapping ranges are shown as asked; the summary counts each line once.
    async with httpx.AsyncClient(headers=child.headers()) as http:
        repeated = tool_json(await call(http, child, "recover_text", {
            "prune_id": pruned["prune_id"], "ranges": [{"start_line": 1, "end_line": 3}] * 3
            + [{"start_line": 2, "end_line": 2}], "include_line_numbers": False,
        }))
    assert repeated["raw_text"] == "\n".join(["a\nb\nc"] * 3 + ["b"])
    assert repeated["summary"].endswith(": 3 of 3 lines (10 as the ranges ask)"), repeated["summary"]


async def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    messages = []
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            messages.append(json.loads(line[6:]))
    return messages


async def test_progress_with_a_falsy_token_streams_before_the_response(child: Child) -> None:
    async with httpx.AsyncClient() as http:
        init = await http.post(child.url, json=INIT, headers=headers(child))
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"]}
        params = {
            "name": "bash",
            "arguments": {"cmd": "for i in 1 2 3 4; do echo step $i; sleep 0.3; done"},
            "_meta": {"progressToken": 0},
        }
        async with http.stream("POST", child.url, json=rpc("tools/call", params, 5),
                               headers=headers(child, **session)) as response:
            assert response.headers["content-type"] == "text/event-stream"
            messages = await sse_messages(response)
    *progress, final = messages
    assert final["id"] == 5 and final["result"]["isError"] is False
    assert progress and all(m["method"] == "notifications/progress" for m in progress)
    assert all(m["params"]["progressToken"] == 0 for m in progress)
    counts = [m["params"]["progress"] for m in progress]
    assert counts == sorted(set(counts))


async def test_progress_is_throttled_and_stops_at_close(autojump_clock: Any) -> None:
    sent: list[float] = []

    async def notify(method: str, params: dict[str, Any]) -> None:
        sent.append(trio.current_time())

    reporter = ProgressReporter("tok", notify, rate_hz=4)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reporter.run)
        for _ in range(200):  # 200 reports over 2 s
            reporter.report("working")
            await trio.sleep(0.01)
        reporter.close()
        closed_at = trio.current_time()
        reporter.report("too late")
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert 2 <= len(sent) <= 9
    assert all(b - a >= 0.25 - 1e-9 for a, b in itertools.pairwise(sent))
    assert all(t <= closed_at for t in sent)


async def test_cancel_request_with_a_string_id_stops_a_numeric_request(child: Child) -> None:
    replies: dict[str, Any] = {}
    async with httpx.AsyncClient(headers=child.headers(), timeout=30) as http:

        async def slow_call() -> None:
            replies["call"] = (await http.post(f"{child.base}/rpc", json=rpc(
                "tools/call", {"name": "bash", "arguments": {"cmd": "sleep 30"}}, 41))).json()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow_call)
            with trio.fail_after(10):
                while not any(e["event"] == "tool.exec_start" for e in child.log_events()):  # noqa: ASYNC110
                    await trio.sleep(0.05)  # the child's log is a file: no event to wait on
            cancel = await http.post(f"{child.base}/rpc", json=rpc("$/cancelRequest", {"id": "41"}, None))
            assert cancel.status_code == 202
    result = replies["call"]["result"]
    assert result["isError"] is True
    assert tool_json(result)["code"] == "CANCELLED"


async def test_calls_beyond_the_bound_are_refused_at_once(workspace: Path, tmp_path: Path) -> None:
    env = {"JEEVES_MCP_MAX_CONCURRENT_CALLS": "1"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient(
        headers=child.headers(), timeout=30
    ) as http:
        async with trio.open_nursery() as nursery:
            slow = rpc("tools/call", {"name": "bash", "arguments": {"cmd": "sleep 30"}}, 1)
            nursery.start_soon(lambda: http.post(f"{child.base}/rpc", json=slow))
            with trio.fail_after(10):
                while not any(e["event"] == "tool.exec_start" for e in child.log_events()):  # noqa: ASYNC110
                    await trio.sleep(0.05)
            second = await call(http, child, "read", {"path": "notes.md"}, request_id=2)
            assert second["isError"] and tool_json(second)["code"] == "QUEUE_OVERLOADED"
            await http.post(f"{child.base}/rpc", json=rpc("notifications/cancelled", {"requestId": 1}, None))
        third = await call(http, child, "read", {"path": "notes.md"}, request_id=3)
        assert third["isError"] is False


async def test_tools_list_is_small() -> None:
    from jeeves_mcp.tools import DEFAULT_TOOLS

    for version in (None, "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"):
        payload = {"tools": [tool.definition(version) for tool in DEFAULT_TOOLS]}
        size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
        assert size <= 3 * 1024, (version, size)
    for tool in [tool.definition() for tool in DEFAULT_TOOLS]:
        assert tool["description"] and tool["title"] and tool["inputSchema"]["type"] == "object"


async def test_progress_tokens_of_other_types_or_huge_get_no_progress_and_nan_is_no_json(child: Child) -> None:
    """A progress token is a string or an integer: objects, floats and a 3 MiB string were
    echoed in every notification (18.9 MB for a 1.8 s call), and NaN, which Python's json
    reads, was written back as no JSON parser reads it (the attack review of 2026-11-29)."""
    async with httpx.AsyncClient() as http:
        init = await http.post(child.url, json=INIT, headers=headers(child))
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"]}
        for token in ({"a": 1}, 1.5, True, "t" * 300):
            params = {"name": "bash", "arguments": {"cmd": "for i in 1 2 3; do echo $i; sleep 0.3; done"},
                      "_meta": {"progressToken": token}}
            async with http.stream("POST", child.url, json=rpc("tools/call", params, 7),
                                   headers=headers(child, **session)) as response:
                messages = await sse_messages(response) if response.headers["content-type"] == "text/event-stream" \
                    else [json.loads(await response.aread())]
            *progress, final = messages
            assert progress == [] and final["result"]["isError"] is False, (token, messages)
        body = b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "bash", ' \
               b'"_meta": {"progressToken": NaN}, "arguments": {"cmd": "echo"}}}'
        refused = await http.post(child.url, content=body, headers=headers(child, **session))
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32700, refused.text


async def test_prune_text_counts_what_the_budget_cut_too(child: Child) -> None:
    """Its summary and stats said the lines the engine kept before the response budget cut
    them: 'kept 210 of 606 lines' where its own annotations hid 449 (the review of 2026-11-29)."""
    text = "\n".join(f"def handler_{k}(request):\n    return request.body[{k}:] + 'limit {k} reached'" for k in range(600))
    async with httpx.AsyncClient(headers=child.headers()) as http:
        pruned = tool_json(await call(http, child, "prune_text", {
            "text": text, "goal_hint": "where is the limit reached?", "source_type": "code",
            "options": {"max_prune_ratio": 0.1, "min_keep_lines": 0, "timeout_ms": 5000,
                        "annotate_lines": True, "include_markers": True},
        }))
    assert "response_budget" in pruned["warnings"], pruned["warnings"]
    hidden = sum(a["pruned_line_count"] for a in pruned["annotations"])
    stats = pruned["stats"]
    assert stats["kept_lines"] == stats["original_lines"] - hidden == stats["original_lines"] - stats["pruned_lines"]
    assert pruned["summary"].startswith(f"prune_text: kept {stats['kept_lines']} of {stats['original_lines']} lines"), pruned["summary"]
    shown = [line for line in pruned["pruned_text"].split("\n") if not line.startswith("⟦")]
    assert len(shown) == stats["kept_lines"]


async def test_grep_says_its_match_limit_and_the_budget_cut_apart(child: Child, workspace: Path) -> None:
    """grep's own `truncated` (more matches than max_matches) was replaced by the pipeline's
    `truncated` object when the budget cut its rows: the flag was lost, and the field's type
    depended on the output's size. The limit is `limit_reached`; `truncated` is the cut's."""
    (workspace / "hits.txt").write_text("".join(f"hit {n:04d} " + "x" * 90 + "\n" for n in range(300)))
    async with httpx.AsyncClient(headers=child.headers()) as http:
        cut = tool_json(await call(http, child, "grep", {"pattern": "hit", "paths": ["hits.txt"]}))
        small = tool_json(await call(http, child, "grep", {"pattern": "hit 000", "paths": ["hits.txt"]}))
    assert cut["limit_reached"] is True and cut["match_count"] == 300
    assert cut["truncated"]["matches"]["prune_id"]
    assert small["limit_reached"] is False and small["match_count"] == 10 and "truncated" not in small
