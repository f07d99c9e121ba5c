"""Plain data under a focus question keeps the lines that match it, even when the engine leaves
it whole (over max_prune_input_bytes): through a real child and the official MCP SDK client."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jeeves_mcp.pruning import line_scan
from tests._child import running_child
from tests.test_sdk_client import http_client, payload

MARKER = re.compile(r"^⟦PRUNÉ: prune_id=(\S+) lignes (\d+)-(\d+) \((\d+)\) raison=(.*)⟧$")
LIMIT = 10_240  # seed 002: a serialized tool result stays under this


def result_bytes(result) -> int:
    return len(json.dumps(result.model_dump(by_alias=True, exclude_none=True),
                          separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.parametrize(("count", "env"), [
    # Over the default 2 MiB bound.
    (400_000, {}),
    # seq 1 200000 (1.3 MB) over a lower bound, as a deployment may set it.
    (200_000, {"JEEVES_MCP_MAX_PRUNE_INPUT_BYTES": "1000000"}),
])
async def test_seq_over_the_prune_bound_shows_the_line_asked_for(
    workspace: Path, tmp_path: Path, count: int, env: dict[str, str]
) -> None:
    async with running_child(workspace, tmp_path, env=env) as child, http_client(child) as client:
        result = await client.call_tool(
            "bash", {"cmd": f"seq 1 {count}", "context_focus_question": "where is 123456?"})
        assert not result.is_error
        body = payload(result)
        lines = body["stdout"].split("\n")
        assert "123456│ 123456" in lines
        assert result_bytes(result) < LIMIT
        assert body["pruning"]["applied"] is True
        assert body["pruning"]["line_scan"] == {
            "why": "input_too_large", "terms": ["123456"], "matching_lines": 1}
        # The head and tail are still there; every block between is one recoverable marker.
        assert lines[0] == "1│ 1" and lines[-1] == f"{count}│ {count}"
        markers = [MARKER.match(line) for line in lines if line.startswith("⟦")]
        assert len(markers) == 2 and all(markers)
        shown = {int(line.split("│")[0]) for line in lines if not line.startswith("⟦")}
        hidden: set[int] = set()
        for match in markers:
            assert match is not None
            start, end = int(match.group(2)), int(match.group(3))
            hidden.update(range(start, end + 1))
            back = payload(await client.call_tool("recover_text", {
                "prune_id": match.group(1), "ranges": [{"start_line": start, "end_line": start + 2}],
                "include_line_numbers": False}))
            assert back["raw_text"].split("\n") == [str(n) for n in range(start, start + 3)]
        assert shown | hidden == set(range(1, count + 1)) and not shown & hidden


async def test_a_question_naming_nothing_found_keeps_head_and_tail(workspace: Path, tmp_path: Path) -> None:
    env = {"JEEVES_MCP_MAX_PRUNE_INPUT_BYTES": "100000"}
    async with running_child(workspace, tmp_path, env=env) as child, http_client(child) as client:
        body = payload(await client.call_tool(
            "bash", {"cmd": "seq 1 50000", "context_focus_question": "where is 999999?"}))
    assert body["pruning"] == {"attempted": False, "applied": False, "fallback": False,
                               "reason": "input_too_large"}
    assert body["stdout"].startswith("1\n2\n") and body["stdout"].endswith("\n50000")


def test_question_terms() -> None:
    assert line_scan.question_terms("where is 123456?") == ["123456"]
    assert line_scan.question_terms("Why does parse_config fail on 1.2.3 in the CI log?") == [
        "parse_config", "fail", "1.2.3", "log"]
    assert line_scan.question_terms("what broke in v1.2.3 or ab?") == ["broke"]


def test_whole_words_only_and_rare_terms_first() -> None:
    text = "\n".join(["error 7"] * 50 + ["x1234567", "id=1234 error", "1234"]) + "\n"
    found = line_scan.scan(text, "error 1234", "prn_x")
    assert found is not None
    # 1234 is rarer than error: its two lines lead; x1234567 is no match.
    assert [index for index, _ in found.ranked[:2]] == [51, 52]
    assert 50 not in dict(found.ranked)
    rows = found.rows(400)
    assert "52│ id=1234 error" in [row.text for row in rows]
    assert sum(len(row.text.encode()) + 1 for row in rows) <= 400


def test_a_long_matching_line_shows_the_part_around_the_match() -> None:
    text = "a" * 5000 + " needle_here " + "b" * 5000 + "\nshort\n"
    found = line_scan.scan(text, "where is needle_here?", "prn_x")
    assert found is not None
    (line,) = [row.text for row in found.rows(2000) if row.start == 1 and not row.marker]
    assert "needle_here" in line and line.startswith("1│ …") and line.endswith("…")
    assert len(line) < line_scan.MAX_SHOWN_CHARS + 20
