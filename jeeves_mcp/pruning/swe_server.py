"""SWE-Pruner's own HTTP API served by a pruner child, backed by its engine.

`POST /prune` takes SWE-Pruner's `PruneRequest` and answers its
`PruneResponse` (see `jeeves_mcp.pruning.swe_client` for the protocol and where it
comes from), so an integration written for SWE-Pruner can point at a child
and prune on the CPU, without the model. `GET /health` is already answered
by the transport with {"status": "healthy", "model_loaded": true, ...},
which SWE-Pruner clients read the same way.

How SWE-Pruner's knobs map onto the built-in engine:

- `threshold`: SWE-Pruner keeps lines scoring at least this. The engine ranks
  units rather than scoring lines against a fixed cut, so any threshold > 0
  prunes at the engine's defaults; threshold 0 keeps every line, as it does
  with SWE-Pruner (clients use it to get scores without pruning).
- `always_keep_first_frags`: line 1 is kept.
- `chunk_overlap_tokens`: accepted and ignored (the engine has no windows).
- `kept_frags` are 1-based numbers of `code.splitlines()`, as SWE-Pruner's.
- `pruned_code` is rendered SWE-Pruner's way: kept lines, and "(filtered N
  lines)" for a pruned run.
- `score` is the share of the query's terms found in the code, 0..1.
- `token_scores` has one [line, 1.0 | 0.0] pair per line: the engine's unit
  of choice is the line, kept or not.
- Token counts are estimates (4 characters a token), as in seed 001's stats.
- When pruning fails open (input too large, timeout, ...) or is disabled
  (`JEEVES_MCP_PRUNING_ENABLED=false`), every line is kept and `error_msg` names
  the warning, as SWE-Pruner does when it cannot prune.

The route goes through the app's own guards (Host/Origin, bearer token) and
body limit (413), like /rpc.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from jeeves_mcp import _log
from jeeves_mcp.mcp.transports.asgi import Receive, RouteHost, Routes, Send, send_json
from jeeves_mcp.pruner_config import PrunerConfig
from jeeves_mcp.pruning.contract import PruneOptions, estimate_tokens
from jeeves_mcp.pruning.pruner import Pruner
from jeeves_mcp.pruning.swe_models import PruneRequest, PruneResponse, parse

__all__ = ["BadRequest", "parse_request", "prune_response", "routes"]

log = logging.getLogger("jeeves_mcp.pruning.swe_server")

FILTERED = "(filtered {} lines)"


class BadRequest(ValueError):
    """The body is not a valid SWE-Pruner PruneRequest."""


def parse_request(body: bytes) -> PruneRequest:
    """The request with SWE-Pruner's defaults filled in; unknown fields are ignored."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BadRequest(f"body is not JSON: {exc}"[:200]) from exc
    if not isinstance(request, dict):
        raise BadRequest("body must be a JSON object")
    try:
        return parse(PruneRequest, request)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def prune_response(
    code: str, query: str, keep: list[bool], error_msg: str | None
) -> dict[str, Any]:
    """SWE-Pruner's PruneResponse for `code.splitlines()` and a keep-mask over it."""
    from jeeves_mcp.pruning.engine import query_terms, terms

    lines = code.splitlines()
    rendered: list[str] = []
    gap = 0
    for line, kept in zip(lines, keep, strict=True):
        if kept:
            if gap:
                rendered.append(FILTERED.format(gap))
                gap = 0
            rendered.append(line)
        else:
            gap += 1
    if gap:
        rendered.append(FILTERED.format(gap))
    pruned_code = "\n".join(rendered)
    wanted = set(query_terms(query))
    score = len(wanted & set(terms(code))) / len(wanted) if wanted else 0.0
    return PruneResponse(
        score=round(score, 4),
        pruned_code=pruned_code,
        token_scores=[(line, 1.0 if kept else 0.0) for line, kept in zip(lines, keep, strict=True)],
        kept_frags=[n for n, kept in enumerate(keep, 1) if kept],
        origin_token_cnt=estimate_tokens(code),
        left_token_cnt=estimate_tokens(pruned_code),
        model_input_token_cnt=estimate_tokens(query) + estimate_tokens(code),
        error_msg=error_msg,
    ).model_dump(mode="json")


async def prune_swe(pruner: Pruner, config: PrunerConfig, request: PruneRequest) -> dict[str, Any]:
    """Answer one parsed PruneRequest with `pruner`."""
    from jeeves_mcp.pruning.engine import guess_source_type

    code, query = request.code, request.query
    lines = code.splitlines()
    if not lines or request.threshold == 0:
        return prune_response(code, query, [True] * len(lines), None)
    if not config.pruning_enabled:
        return prune_response(code, query, [True] * len(lines), "disabled_or_unconfigured")
    outcome = await pruner.prune(
        "\n".join(lines),  # the pruner numbers lines by "\n"; SWE-Pruner by splitlines()
        query,
        guess_source_type(None, code),
        PruneOptions(
            timeout_ms=config.prune_timeout_ms, annotate_lines=False, include_markers=False
        ),
    )
    keep = [True] * len(lines)
    for block in outcome.annotations:
        for number in range(block["original_start_line"], block["original_end_line"] + 1):
            keep[number - 1] = False
    if request.always_keep_first_frags:
        keep[0] = True
    error_msg = ", ".join(outcome.warnings) if outcome.used_fallback else None
    return prune_response(code, query, keep, error_msg or None)


def routes(pruner: Pruner, config: PrunerConfig) -> Routes:
    """`POST /prune` in SWE-Pruner's format, for the child's HTTP app to serve."""

    async def prune_route(app: RouteHost, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        # The app's guard (Host/Origin, bearer token) and bounded body reader
        # (413, 408), as for /rpc.
        if not await app.guard(scope, send):
            return
        body = await app.read_body(receive, send)
        if body is None:
            return
        started = time.monotonic()
        try:
            request = parse_request(body)
        except BadRequest as exc:
            message = str(exc)
            _log.event(log, "swe_compat.bad_request", logging.WARNING, problem=message)
            await send_json(send, 400, {"error": {"code": 400, "message": message}, "detail": message})
            return
        answer = await app.watching(receive, prune_swe(pruner, config, request))
        _log.event(
            log,
            "swe_compat.prune",
            duration_ms=_log.monotonic_ms(started),
            lines=len(answer["token_scores"]),
            kept=len(answer["kept_frags"]),
            fallback=answer["error_msg"],
        )
        await send_json(send, 200, answer)

    async def wrong_method(app: RouteHost, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        message = "use POST"
        await send_json(send, 405, {"error": {"code": 405, "message": message}, "detail": message},
                        [("allow", "POST")])

    served: Routes = {("POST", "/prune"): prune_route}
    for method in ("GET", "PUT", "DELETE", "PATCH"):
        served[(method, "/prune")] = wrong_method
    return served
