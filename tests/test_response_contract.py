"""Seed 002's response contract over every tool, errors included, through the official
SDK client: the serialized result stays under
10,240 bytes, and every result has a one-line summary of at most 100 characters."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from jeeves_mcp.results import PROTOCOL_RESERVE
from tests._child import Child
from tests.test_http import headers, rpc
from tests.test_sdk_client import http_client, payload

LIMIT = 10240  # INV-MCP-RESP-001: JSON.stringify(result) < 10 KB
FOCUS = "context_focus_question"
OPTIONS = {"max_prune_ratio": 0.9, "min_keep_lines": 0, "timeout_ms": 5000,
           "annotate_lines": True, "include_markers": True}


def serialized(result: Any) -> bytes:
    """The result as seed 002 measures it, in UTF-8 bytes (never fewer than its UTF-16 units)."""
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(dumped, ensure_ascii=False, separators=(",", ":")).encode()


def make_files(root: Path) -> None:
    lines = [f"def function_{n}(value):  # computes {n} things" for n in range(700)]
    (root / "big.py").write_text("\n".join(lines) + "\n")  # about 30 KB
    (root / "min.json").write_text(json.dumps({f"key{n}": n for n in range(4000)}))  # one line
    (root / "quotes.txt").write_text(('"\\"\t\x01' * 20 + "\n") * 600)  # JSON's costliest bytes
    (root / "accents.md").write_text(("## Section é\n" + "Çà et là, ⟦texte⟧ accentué.\n" * 20) * 60)
    (root / "blob.bin").write_bytes(b"\x00\x01" * 100)


CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("read big", "read", {"path": "big.py"}),
    ("read big focused", "read", {"path": "big.py", FOCUS: "where is function_345?"}),
    ("read one long line", "read", {"path": "min.json"}),
    ("read quotes", "read", {"path": "quotes.txt"}),
    ("read accents", "read", {"path": "accents.md", FOCUS: "what about section é?"}),
    ("read missing", "read", {"path": "nope/" + "n" * 3000 + ".py"}),
    ("read directory", "read", {"path": "src"}),
    ("read binary", "read", {"path": "blob.bin"}),
    ("read outside", "read", {"path": "../" + "x" * 3000}),
    ("read past the end", "read", {"path": "big.py", "offset": 99999}),
    ("bash seq", "bash", {"cmd": "seq 1 200000"}),
    ("bash seq focused", "bash", {"cmd": "seq 1 200000", FOCUS: "where is 123456?"}),
    ("bash long line", "bash", {"cmd": "echo hi; cat min.json; echo bye"}),
    ("bash quotes on both", "bash", {"cmd": "cat quotes.txt; cat quotes.txt >&2; exit 4"}),
    ("bash timeout", "bash", {"cmd": "sleep 30", "timeout_ms": 200}),
    ("bash bad cwd", "bash", {"cmd": "true", "cwd": "n" * 3000}),
    ("grep many", "grep", {"pattern": "function_", "max_matches": 5000}),
    ("grep bad regex", "grep", {"pattern": "(" * 4000}),
    ("grep missing", "grep", {"pattern": "x", "paths": ["m" * 3000]}),
    ("unknown tool", "t" * 6000, {}),
]


async def test_every_result_fits_seed_002(child: Child, workspace: Path) -> None:
    make_files(workspace)
    sizes: dict[str, int] = {}
    async with http_client(child) as client:
        results = [(label, await client.call_tool(name, args)) for label, name, args in CALLS]
        text = (workspace / "big.py").read_text() * 3
        pruned = await client.call_tool("prune_text", {
            "text": text, "goal_hint": "function_345", "source_type": "code", "options": OPTIONS})
        results.append(("prune_text", pruned))
        prune_id = payload(pruned)["prune_id"]
        results.append(("recover_text", await client.call_tool("recover_text", {
            "prune_id": prune_id, "ranges": [{"start_line": 1, "end_line": 2100}],
            "include_line_numbers": True})))
        results.append(("health", await client.call_tool("health", {})))
    for label, result in results:
        size = len(serialized(result))
        sizes[label] = size
        assert size < LIMIT, (label, size)
        body = payload(result)
        summary = body["summary"]
        assert 0 < len(summary) <= 100 and "\n" not in summary, (label, summary)
        assert not re.search(r"\b1 (lines|matches|files|slots)\b", summary), (label, summary)
        if result.is_error:  # a failed command's summary gives its exit status instead
            assert body["code"] in summary or "exit 4" in summary, (label, summary)
    print(json.dumps(sizes))  # the figures the issue asks for, with `pytest -s`
    by_label = dict(results)
    # The budget cuts recoverably, and still shows something of what it cut.
    assert payload(by_label["bash seq"])["truncated"]["stdout"]["prune_id"]
    assert payload(by_label["read big"])["content"].startswith("1│ ") is False
    assert by_label["read past the end"].is_error


async def test_results_fit_with_what_the_stateless_revision_adds(child: Child, workspace: Path) -> None:
    """The stateless revision adds `resultType` and a `_meta` naming the server to every result.
    The room the fit keeps for them is their exact size, not a guess: the fullest results still
    fit, and what is added is no more than that room."""
    make_files(workspace)
    version = "2026-07-28"
    meta = {"io.modelcontextprotocol/protocolVersion": version}
    base = headers(child, **{"MCP-Protocol-Version": version, "Mcp-Method": "tools/call"})
    async with httpx.AsyncClient(timeout=60) as http:
        for label, name, args in CALLS[:-1]:  # the last names a tool too long for a header
            reply = await http.post(child.url, headers={**base, "Mcp-Name": name},
                                    json=rpc("tools/call", {"name": name, "arguments": args, "_meta": meta}))
            result = reply.json()["result"]
            assert result["resultType"] == "complete" and result["_meta"], (label, result)
            size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
            bare = {key: value for key, value in result.items() if key not in ("resultType", "_meta")}
            added = size - len(json.dumps(bare, ensure_ascii=False, separators=(",", ":")).encode())
            assert size < LIMIT and 0 < added <= PROTOCOL_RESERVE, (label, size, added)


async def test_read_past_the_end_is_an_error_naming_the_line_count(child: Child, workspace: Path) -> None:
    async with http_client(child) as client:
        result = await client.call_tool("read", {"path": "src/app.py", "offset": 99999})
        one = await client.call_tool("read", {"path": "notes.md", "offset": 3, "limit": 1})
    assert result.is_error
    body = payload(result)
    assert body["code"] == "INVALID_REQUEST" and body["total_lines"] == 9
    assert "9 lines" in body["message"] and "99999" in body["message"]
    assert body["summary"] == "read: offset 99999 is past the end of src/app.py (9 lines) [INVALID_REQUEST]"
    assert not one.is_error
    assert payload(one)["summary"] == "read notes.md: 3 lines, 20 B (lines 3-3)"


async def test_summaries_count_in_good_english(child: Child, workspace: Path) -> None:
    (workspace / "one.txt").write_text("single\n")
    async with http_client(child) as client:
        read = await client.call_tool("read", {"path": "one.txt"})
        bash = await client.call_tool("bash", {"cmd": "printf x"})
        grep = await client.call_tool("grep", {"pattern": "single"})
    assert payload(read)["summary"].startswith("read one.txt: 1 line, ")
    assert payload(bash)["summary"].endswith(", 1 line")
    assert payload(grep)["summary"] == "grep 'single': 1 match in 1 file"


async def test_a_cut_output_has_no_phantom_last_line(child: Child) -> None:
    async with http_client(child) as client:
        result = await client.call_tool("bash", {"cmd": "seq 1 20000"})
        body = payload(result)
        start, end = body["truncated"]["stdout"]["lines"]
        shown = body["stdout"].split("\n")
        marker = next(i for i, line in enumerate(shown) if line.startswith("⟦PRUNÉ"))
        assert shown[-1] == "20000" and shown[marker + 1 :] == [str(n) for n in range(end + 1, 20001)]
        assert shown[:marker] == [str(n) for n in range(1, start)]
        back = await client.call_tool("recover_text", {
            "prune_id": body["truncated"]["stdout"]["prune_id"],
            "ranges": [{"start_line": 19999, "end_line": 20005}], "include_line_numbers": True})
        assert payload(back)["raw_text"] == "19999│ 19999\n20000│ 20000"
