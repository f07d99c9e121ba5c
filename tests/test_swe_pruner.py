"""The SWE-Pruner protocol both ways: the client engine against a fake service over
real HTTP, a child pruning through it, the child's own POST /prune, and `jeeves-mcp prune`."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jeeves_mcp.pruning import EngineError, PruneOptions, PruneOutcome
from jeeves_mcp.pruning.swe_client import (
    ExternalEngine,
    answer_values_bound,
    parse_prune_response,
    service_line_owners,
)
from jeeves_mcp.pruning.swe_models import PruneRequest
from jeeves_mcp.pruning.swe_server import parse_request, prune_response
from tests._child import Child, running_child, tool_json
from tests.fake_swe_pruner import refused_endpoint, running_fake
from tests.test_http import call

MARKER = re.compile(r"^⟦PRUNÉ: prune_id=(\S+) lignes (\d+)-(\d+) \((\d+)\) raison=(.*)⟧$")
RESPONSE_KEYS = {
    "score", "pruned_code", "token_scores", "kept_frags",
    "origin_token_cnt", "left_token_cnt", "model_input_token_cnt", "error_msg",
}


def module_text(functions: int = 30) -> str:
    """A Python module where only `parse_config` is about configuration."""
    parts = ['"""A module."""', "import os", ""]
    for n in range(functions):
        parts += [f"def helper_{n}(value):", f"    total = value * {n}", "    return total + 1", ""]
    parts += [
        "def parse_config(path):",
        "    with open(path) as handle:",
        "        config = handle.read()",
        "    return config.split()",
        "",
    ]
    return "\n".join(parts)


async def select(engine: ExternalEngine, lines: list[str], question: str, **options: object):
    return await engine.select(
        lines, question, "code", options=PruneOptions(**options), path=None  # type: ignore[arg-type]
    )


# -- the engine against the fake ---------------------------------------------------


async def test_engine_sends_the_protocol_and_maps_kept_frags() -> None:
    lines = module_text(5).split("\n")
    async with running_fake() as fake:
        engine = ExternalEngine(fake.endpoint + "/")
        try:
            chosen = await select(engine, lines, "where is the config parsed", max_prune_ratio=1.0)
        finally:
            await engine.aclose()
    (request,) = fake.requests
    assert request == {
        "query": "where is the config parsed",
        "code": "\n".join(lines),
        "threshold": 0.5,
        "always_keep_first_frags": True,
        "chunk_overlap_tokens": 50,
    }
    kept = [line for line, keep in zip(lines, chosen.keep, strict=True) if keep]
    # line 1, the lines naming "config", and the empty line after the final newline
    assert kept == [lines[0], "        config = handle.read()", "    return config.split()", ""]
    assert all(reason == "hors focus (swe-pruner)" for reason, keep in
               zip(chosen.reasons, chosen.keep, strict=True) if not keep)


async def test_engine_keeps_no_prune_blocks_and_the_ratio_bound() -> None:
    lines = ["first", *[f"filler {n}" for n in range(10)], "⟦NO_PRUNE_BEGIN⟧", "secret", "⟦NO_PRUNE_END⟧",
             *[f"filler {n}" for n in range(10, 20)], "the needle", *[f"tail {n}" for n in range(5)]]
    async with running_fake() as fake:
        engine = ExternalEngine(fake.endpoint)
        try:
            free = await select(engine, lines, "needle", max_prune_ratio=1.0)
            bounded = await select(engine, lines, "needle", max_prune_ratio=0.5, min_keep_lines=0)
        finally:
            await engine.aclose()
    kept = {line for line, keep in zip(lines, free.keep, strict=True) if keep}
    assert kept == {"first", "⟦NO_PRUNE_BEGIN⟧", "secret", "⟦NO_PRUNE_END⟧", "the needle"}
    assert sum(bounded.keep) == len(lines) - len(lines) // 2
    # the lines added back are the nearest to kept ones
    needle = lines.index("the needle")
    assert bounded.keep[needle - 1] and bounded.keep[needle + 1]


def test_service_lines_are_mapped_through_splitlines() -> None:
    lines = ["a\r", "x\x0cneedle", "c\u2028d", ""]
    # splitlines sees: "a", "x", "needle", "c", "d"; nothing of the final empty line
    assert service_line_owners(lines) == [0, 1, 1, 2, 2]
    assert len("\n".join(lines).splitlines()) == 5


async def test_engine_maps_frags_of_odd_line_breaks() -> None:
    lines = ["head\r", "x\x0cneedle", "other", "more", ""]
    async with running_fake() as fake:
        engine = ExternalEngine(fake.endpoint)
        try:
            chosen = await select(engine, lines, "needle", max_prune_ratio=1.0)
        finally:
            await engine.aclose()
    assert chosen.keep == [True, True, False, False, True]


@pytest.mark.parametrize(
    ("mode", "kind", "message"),
    [
        ("slow", "timeout", None),
        ("500", "http_error", None),
        ("malformed", "invalid_response", None),
        # A malformed PruneResponse names what is wrong with it (one shared model, #13).
        ("missing", "invalid_response", "answer: missing field 'kept_frags'"),
        ("mistyped", "invalid_response", "answer: 'kept_frags' must be a list of integers"),
        ("out_of_range", "invalid_response", "kept_frags has line 0, outside 1..2"),
    ],
)
async def test_engine_failures_have_their_kind(mode: str, kind: str, message: str | None) -> None:
    async with running_fake(mode) as fake:
        engine = ExternalEngine(fake.endpoint)
        try:
            with pytest.raises(EngineError) as caught:
                await select(engine, ["one needle", "two"], "needle", timeout_ms=300)
        finally:
            await engine.aclose()
    assert caught.value.kind == kind
    if message is not None:
        assert str(caught.value) == message


async def test_engine_takes_a_service_that_could_not_prune_at_its_word(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_fake("cannot_prune") as fake:
        engine = ExternalEngine(fake.endpoint)
        try:
            chosen = await select(engine, ["one", "two", "three"], "needle")
        finally:
            await engine.aclose()
    assert chosen.keep == [True, True, True]
    assert any(r.getMessage() == "pruner.service_error_msg" for r in caplog.records)


async def test_engine_connection_refused_is_an_http_error() -> None:
    engine, nowhere = ExternalEngine(refused_endpoint()), ExternalEngine("not a url")
    try:
        with pytest.raises(EngineError) as caught:
            await select(engine, ["x"], "x")
        with pytest.raises(EngineError) as bad_url:
            await select(nowhere, ["x"], "x")
    finally:
        await engine.aclose()
        await nowhere.aclose()
    assert caught.value.kind == "http_error"
    assert bad_url.value.kind == "http_error"


async def test_engine_health_and_reused_client() -> None:
    async with running_fake() as fake:
        engine = ExternalEngine(fake.endpoint + "/prune")  # the full route is accepted too
        try:
            assert await engine.health() == {"status": "healthy", "model_loaded": True}
            client = engine._http()
            await select(engine, ["a needle"], "needle")
            assert engine._http() is client
        finally:
            await engine.aclose()
        assert client.is_closed and engine._client is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"kept_frags": [True]}, "integers"),
        ({"kept_frags": [1.0]}, "integers"),
        ({"score": "high"}, "'score'"),
        ({"score": float("nan")}, "finite"),
        ({"left_token_cnt": None}, "'left_token_cnt'"),
        ({"token_scores": [["tok"]]}, "token_scores"),
        ({"error_msg": 3}, "error_msg"),
    ],
)
def test_parse_rejects_mistyped_fields(change: dict, problem: str) -> None:
    valid = {"score": 0.5, "pruned_code": "", "token_scores": [["a", 0.1]], "kept_frags": [1],
             "origin_token_cnt": 1, "left_token_cnt": 1, "model_input_token_cnt": 3, "error_msg": None}
    assert parse_prune_response(valid, 1).kept_frags == [1]
    with pytest.raises(EngineError, match=problem) as caught:
        parse_prune_response({**valid, **change}, 1)
    assert caught.value.kind == "invalid_response"


@settings(max_examples=60, deadline=None)
@given(code=st.text(max_size=300), query=st.text(max_size=40), data=st.data())
def test_what_one_side_sends_the_other_accepts(code: str, query: str, data: st.DataObject) -> None:
    """Client and server share the models: any request the client builds parses on the server,
    and any answer the server builds parses on the client, with the same kept lines."""
    request = PruneRequest(query=query, code=code, threshold=0.3, always_keep_first_frags=True,
                           chunk_overlap_tokens=7)
    assert parse_request(json.dumps(request.model_dump()).encode()) == request
    lines = code.splitlines()
    keep = data.draw(st.lists(st.booleans(), min_size=len(lines), max_size=len(lines)))
    answer = json.loads(json.dumps(prune_response(code, query, keep, None)))
    assert parse_prune_response(answer, len(lines)).kept_frags == [n for n, k in enumerate(keep, 1) if k]


# -- a child pruning through the fake ------------------------------------------------


async def test_child_prunes_through_the_service(workspace: Path, tmp_path: Path) -> None:
    text = module_text()
    (workspace / "mod.py").write_text(text)
    env = {"JEEVES_MCP_PRUNER_THRESHOLD": "0.7", "JEEVES_MCP_PRUNER_CHUNK_OVERLAP_TOKENS": "20"}
    async with running_fake() as fake, running_child(
        workspace, tmp_path, env={"JEEVES_PRUNER_ENDPOINT": fake.endpoint, **env}
    ) as child, httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "mod.py", "context_focus_question": "where is the config parsed"
        }))
        assert (fake.requests[0]["threshold"], fake.requests[0]["chunk_overlap_tokens"]) == (0.7, 20)
        assert result["pruning"]["applied"] is True
        assert result["pruning"]["engine"] == "swe-pruner"
        assert result["pruning"]["fallback"] is False
        content = result["content"].split("\n")
        markers = [MARKER.match(line) for line in content if line.startswith("⟦PRUNÉ")]
        assert markers and all(markers)
        assert "        config = handle.read()" in "\n".join(content)
        assert len(result["content"]) < len(text) / 2
        assert [r["code"] for r in fake.requests] == [text.removesuffix("\n")]  # read drops the final newline
        # a marker is recoverable like any other
        first = markers[0]
        assert first is not None
        start, end = int(first.group(2)), int(first.group(3))
        recovered = tool_json(await call(http, child, "recover_text", {
            "prune_id": first.group(1), "ranges": [{"start_line": start, "end_line": end}],
            "include_line_numbers": False,
        }))
        assert recovered["raw_text"] == "\n".join(text.split("\n")[start - 1:end])


async def test_child_falls_back_to_raw_output(workspace: Path, tmp_path: Path) -> None:
    text = module_text()
    (workspace / "mod.py").write_text(text)
    modes = {"slow": "timeout", "500": "http_error", "malformed": "invalid_response",
             "missing": "invalid_response", "out_of_range": "invalid_response"}
    async with running_fake() as fake, running_child(
        workspace, tmp_path,
        env={"JEEVES_PRUNER_ENDPOINT": fake.endpoint, "JEEVES_MCP_PRUNE_TIMEOUT_MS": "500"},
    ) as child, httpx.AsyncClient(headers=child.headers()) as http:
        for mode, kind in modes.items():
            fake.mode = mode
            result = tool_json(await call(http, child, "read", {
                "path": "mod.py", "context_focus_question": "where is the config parsed"
            }))
            assert result["content"] == text.removesuffix("\n"), mode
            pruning = result["pruning"]
            assert pruning["attempted"] is True and pruning["applied"] is False, mode
            assert pruning["fallback"] is True and pruning["error"] == kind, mode
        failures = [e for e in child.log_events() if e.get("event") == "pruner.call_failed"]
        assert [e["reason"] for e in failures] == list(modes.values())


@settings(max_examples=100, deadline=None)
@given(code=st.text(alphabet=st.sampled_from(list(",[]{}()\n x1é€\"\\")), max_size=3000),
       query=st.text(max_size=40))
@example(code="," * 3000, query="")  # what three per byte of code refused
def test_no_tokenizers_answer_holds_more_values_than_the_bound(code: str, query: str) -> None:
    # The costliest legitimate answer: a token per byte of code and of the query (a byte-level
    # tokenizer's least), every line kept, the code again as pruned_code.
    tokens = [bytes([b]).decode("utf-8", "replace") for b in (code + query).encode("utf-8")]
    answer = {"score": 0.5, "pruned_code": code, "token_scores": [[t, 0.123456789] for t in tokens],
              "kept_frags": list(range(1, len(code.splitlines()) + 1)), "origin_token_cnt": len(tokens),
              "left_token_cnt": len(tokens), "model_input_token_cnt": len(tokens), "error_msg": None}
    body = json.dumps(answer).encode()
    assert body.count(b"[") + body.count(b"{") + body.count(b",") <= answer_values_bound(code, len((code + query).encode()))


@pytest.mark.parametrize(("mode", "refused_for"), [
    # 586 bytes of "gzip, gzip" on the wire are 256 MiB once decoded: refused for what it is,
    # not found too large once inflated (513 MiB of the child's peak).
    ("gzip_bomb", "answer is compressed ('gzip, gzip'), asked for identity"),
    # Within the byte bound, ["",0] pairs cost ~30 times their size to parse, in the event
    # loop: a 0.5 MB file's answer took the child from 57 to 846 MiB and 4 s.
    ("value_flood", "JSON values"),
])
async def test_child_refuses_an_answer_that_would_cost_far_more_than_its_size(
    workspace: Path, tmp_path: Path, mode: str, refused_for: str
) -> None:
    text = module_text()
    (workspace / "mod.py").write_text(text)
    async with running_fake(mode) as fake, running_child(
        workspace, tmp_path, env={"JEEVES_PRUNER_ENDPOINT": fake.endpoint}
    ) as child, httpx.AsyncClient(headers=child.headers()) as http:
        with trio.fail_after(30):
            result = tool_json(await call(http, child, "read", {
                "path": "mod.py", "context_focus_question": "where is the config parsed"
            }))
        assert fake.requests, "the service was asked"
        assert result["content"] == text.removesuffix("\n")
        assert result["pruning"]["fallback"] is True
        assert result["pruning"]["error"] == "invalid_response"
        failures = [e["detail"] for e in child.log_events() if e.get("event") == "pruner.call_failed"]
        assert len(failures) == 1 and refused_for in failures[0], failures


async def test_child_with_no_service_listening(workspace: Path, tmp_path: Path) -> None:
    text = module_text()
    (workspace / "mod.py").write_text(text)
    async with running_child(
        workspace, tmp_path, env={"JEEVES_PRUNER_ENDPOINT": refused_endpoint()}
    ) as child, httpx.AsyncClient(headers=child.headers()) as http:
        result = tool_json(await call(http, child, "read", {
            "path": "mod.py", "context_focus_question": "config"
        }))
        assert result["content"] == text.removesuffix("\n")
        assert result["pruning"]["fallback"] is True
        assert result["pruning"]["error"] == "http_error"
        assert result["pruning"]["engine"] == "swe-pruner"
        assert any(e.get("event") == "pruner.call_failed" and e.get("reason") == "http_error"
                   for e in child.log_events())
        health = tool_json(await call(http, child, "health", {}))
        assert health["engine_status"]["status"] == "unreachable"
        assert health["engine_status"]["error"] == "http_error"
        assert "unreachable" in health["summary"]


# -- the child as a SWE-Pruner service --------------------------------------------------


async def test_post_prune_speaks_swe_pruners_format(child: Child) -> None:
    code = module_text()
    lines = code.splitlines()
    async with httpx.AsyncClient(headers=child.headers()) as http:
        answer = await http.post(f"{child.base}/prune", json={
            "query": "where is the config parsed", "code": code, "threshold": 0.5,
            "always_keep_first_frags": True, "chunk_overlap_tokens": 50, "language": "python",
        })
        everything = await http.post(f"{child.base}/prune", json={
            "query": "config", "code": code, "threshold": 0,
        })
        health = await http.get(f"{child.base}/health")
        wrong = await http.get(f"{child.base}/prune")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == RESPONSE_KEYS
    assert body["error_msg"] is None
    kept = body["kept_frags"]
    assert kept == sorted(set(kept)) and 1 in kept and all(1 <= n <= len(lines) for n in kept)
    parse_line = lines.index("def parse_config(path):") + 1
    assert set(range(parse_line, parse_line + 4)) <= set(kept)
    assert len(kept) < len(lines) / 2
    assert "(filtered " in body["pruned_code"] and "config = handle.read()" in body["pruned_code"]
    assert [pair[0] for pair in body["token_scores"]] == lines
    assert 0 <= body["score"] <= 1 and body["left_token_cnt"] < body["origin_token_cnt"]
    assert everything.json()["kept_frags"] == list(range(1, len(lines) + 1))
    assert health.json()["status"] == "healthy" and health.json()["model_loaded"] is True


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (json.dumps({"query": "q"}).encode(), "'code'"),
        (json.dumps({"query": 3, "code": "x"}).encode(), "'query'"),
        (json.dumps({"query": "q", "code": "x", "threshold": "high"}).encode(), "threshold"),
        (json.dumps({"query": "q", "code": "x", "threshold": 2}).encode(), "between 0 and 1"),
        (json.dumps({"query": "q", "code": "x", "always_keep_first_frags": "yes"}).encode(), "boolean"),
        (json.dumps({"query": "q", "code": "x", "chunk_overlap_tokens": -1}).encode(), "non-negative"),
    ],
)
async def test_post_prune_rejects_bad_bodies(child: Child, body: bytes, problem: str) -> None:
    async with httpx.AsyncClient(headers=child.headers()) as http:
        answer = await http.post(f"{child.base}/prune", content=body,
                                 headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert problem in answer.json()["error"]["message"]


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        ({"query": "q"}, "missing field 'code'"),
        ({"query": "q", "code": "x", "threshold": True}, "'threshold' must be a number between 0 and 1"),
        ({"query": "q", "code": "x", "chunk_overlap_tokens": "5"},
         "'chunk_overlap_tokens' must be a non-negative integer"),
    ],
)
async def test_post_prune_bad_request_shape(child: Child, request_body: dict, message: str) -> None:
    """The shared model's errors keep the route's structured 400 (#13): same shape, one line."""
    async with httpx.AsyncClient(headers=child.headers()) as http:
        answer = await http.post(f"{child.base}/prune", json=request_body)
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json() == {"error": {"code": 400, "message": message}, "detail": message}


async def test_post_prune_is_guarded_and_bounded(workspace: Path, tmp_path: Path) -> None:
    env = {"JEEVES_MCP_MAX_BODY_BYTES": "2048", "JEEVES_MCP_PRUNING_ENABLED": "false"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient() as http:
        anonymous = await http.post(f"{child.base}/prune", json={"query": "q", "code": "x"})
        huge = await http.post(
            f"{child.base}/prune", headers=child.headers(), json={"query": "q", "code": "x" * 5000}
        )
        small = await http.post(
            f"{child.base}/prune", headers=child.headers(), json={"query": "q", "code": "x" * 1000}
        )
    assert anonymous.status_code == 401
    assert huge.status_code == 413
    assert small.status_code == 200
    assert small.json()["error_msg"] == "disabled_or_unconfigured"
    assert small.json()["kept_frags"] == [1]


async def test_external_engine_against_a_child(workspace: Path, tmp_path: Path) -> None:
    """Our client and our server agree on the protocol: a child serves a child's engine."""
    lines = module_text().split("\n")
    async with running_child(workspace, tmp_path, token=None) as child:
        engine = ExternalEngine(child.base)
        try:
            assert (await engine.health())["model_loaded"] is True
            chosen = await select(engine, lines, "where is the config parsed")
        finally:
            await engine.aclose()
    kept = [line for line, keep in zip(lines, chosen.keep, strict=True) if keep]
    assert "        config = handle.read()" in kept and len(kept) < len(lines) / 2


# -- jeeves-mcp prune ----------------------------------------------------------------


async def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "jeeves_mcp", "prune", *args],
        stdin=stdin, capture_stdout=True, capture_stderr=True, check=False,
    )


async def test_cli_json_is_seed_001s_result(tmp_path: Path) -> None:
    source = tmp_path / "mod.py"
    source.write_text(module_text())
    done = await run_cli(str(source), "--question", "where is the config parsed", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == {"prune_id", "pruned_text", "annotations", "stats", "warnings"}
    assert result["stats"]["used_fallback"] is False and result["annotations"]
    rows = result["pruned_text"].split("\n")
    markers = [row for row in rows if row.startswith("⟦PRUNÉ")]
    assert markers == [a["marker"] for a in result["annotations"]]
    assert all(re.match(r"^\d+│ ", row) for row in rows if row not in markers)


async def test_cli_pretty_view_from_stdin(tmp_path: Path) -> None:
    done = await run_cli("-", "-q", "where is the config parsed", "--source-type", "code",
                         "--max-prune-ratio", "0.8", stdin=module_text().encode())
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode().rstrip("\n").split("\n")
    assert any(MARKER.match(line) for line in out)
    assert any(re.match(r"^\s*\d+│ +config = handle.read\(\)$", line) for line in out)
    assert re.match(r"^kept \d+ of \d+ lines \(\d+ pruned in \d+ blocks?, \d+%\); ~\d+ tokens saved", out[-1])


async def test_cli_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    missing = await run_cli(str(tmp_path / "nope.py"), "-q", "x")
    directory = await run_cli(str(tmp_path), "-q", "x")
    empty = await run_cli("-", "-q", " ", stdin=b"text")
    for done in (missing, directory, empty):
        assert done.returncode == 2 and done.stdout == b""
        assert len(done.stderr.decode().strip().split("\n")) == 1
    assert missing.stderr.decode().endswith(": no such file [NOT_FOUND]\n"), missing.stderr
    assert directory.stderr.decode().endswith(": is a directory [INVALID_REQUEST]\n"), directory.stderr
    assert empty.stderr == b"jeeves-mcp prune: --question is empty [INVALID_REQUEST]\n"


# Peak memory of the pruning process while 300 MB stream through its stdin, from a
# wrapper that waits for it (RUSAGE_CHILDREN: the largest of yes, head and the CLI).
PEAK_RSS_OF_PIPE = """
import resource, subprocess, sys
pipe = subprocess.Popen(["sh", "-c", 'yes "2026-11-23 12:00:00 INFO worker 7: step ok" | head -c 300000000'],
                        stdout=subprocess.PIPE)
done = subprocess.run([sys.executable, "-m", "jeeves_mcp", "prune", "-", "-q", "where did it fail?", "--json"],
                      stdin=pipe.stdout, capture_output=True)
pipe.stdout.close(); pipe.wait()
sys.stdout.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) + "\\n")
sys.stdout.write(done.stderr.decode() + "\\n" + done.stdout.decode())
"""


async def test_cli_streams_an_input_over_its_bound_in_bounded_memory() -> None:
    done = await trio.run_process([sys.executable, "-c", PEAK_RSS_OF_PIPE], capture_stdout=True, check=True)
    peak_kib, warning, body = done.stdout.decode().split("\n", 2)
    assert int(peak_kib) < 150 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB for a 300 MB input"
    assert warning.startswith("jeeves-mcp prune: -: not pruned: the input is 286.1 MiB, above the 16.0 MiB bound")
    assert warning.endswith("[input_too_large]")
    result = json.loads(body)
    assert result["warnings"] == ["input_too_large"] and result["stats"]["used_fallback"] is True
    assert result["stats"]["original_bytes"] == 300_000_000
    rows = result["pruned_text"].split("\n")
    assert len(result["pruned_text"].encode()) < 10_000  # its two ends, not the whole
    marker, = [row for row in rows if row.startswith("⟦PRUNÉ")]
    assert marker == result["annotations"][0]["marker"]
    lines = result["stats"]["original_lines"]
    assert rows[-1].startswith(f"{lines}│ ") and rows[0].startswith("1│ 2026-11-23")


def test_markers_have_their_own_style() -> None:
    from rich.console import Console

    from jeeves_mcp.cli._prune import render_pretty
    from jeeves_mcp.pruning.render import Row

    outcome = PruneOutcome(
        prune_id="prn_x",
        text="a\nb\nc",
        rows=[Row(1, 1, "a"), Row(2, 3, "⟦PRUNÉ: prune_id=prn_x lignes 2-3 (2) raison=hors focus⟧", marker=True)],
        annotations=[{"kind": "pruned_block"}],
        stats={"original_lines": 3, "kept_lines": 1, "pruned_lines": 2, "pruned_ratio": 0.6667,
               "tokens_est_before": 40, "tokens_est_after": 30, "elapsed_ms": 1, "used_fallback": False},
    )
    buffer = io.StringIO()
    render_pretty(outcome, Console(file=buffer, width=100, force_terminal=True, color_system="standard"))
    lines = buffer.getvalue().split("\n")
    assert lines[1].startswith("\x1b[1;35m⟦PRUNÉ")
    plain = io.StringIO()
    render_pretty(outcome, Console(file=plain, width=100))
    assert plain.getvalue().split("\n")[:3] == [
        "1│ a",
        "⟦PRUNÉ: prune_id=prn_x lignes 2-3 (2) raison=hors focus⟧",
        "kept 1 of 3 lines (2 pruned in 1 block, 67%); ~10 tokens saved (40 → 30 est.)",
    ]



def test_cli_summary_counts_in_good_english() -> None:
    from jeeves_mcp.cli._prune import summary

    outcome = PruneOutcome(
        prune_id="prn_x", text="a\nb", rows=[], annotations=[{"kind": "pruned_block"}],
        stats={"original_lines": 2, "kept_lines": 1, "pruned_lines": 1, "pruned_ratio": 0.5,
               "tokens_est_before": 1, "tokens_est_after": 1, "elapsed_ms": 1, "used_fallback": False},
    )
    assert summary(outcome).startswith("kept 1 of 2 lines (1 pruned in 1 block, 50%)")
