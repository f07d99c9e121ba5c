"""`ExternalEngine`: pruning by an external SWE-Pruner service (seed 000's endpoint).

The wire protocol, as published by SWE-Pruner's authors (repository
Ayanami1314/swe-pruner: `swe-pruner/online_serving.py` for the routes and
`swe-pruner/src/swe_pruner/prune_wrapper.py` for the models and the pruning):

    POST {endpoint}/prune   (FastAPI, pydantic `PruneRequest`)
        {"query": str,
         "code": str,
         "threshold": float = 0.5,            # a line is kept when its mean token score >= threshold
         "always_keep_first_frags": bool = False,   # True forces line 1 to be kept
         "chunk_overlap_tokens": int = 50}    # overlap between the model's 8k-token windows
    -> 200 `PruneResponse`
        {"score": float,                      # document-level relevance, 0..1
         "pruned_code": str,                  # kept lines joined by "\\n"; a pruned run becomes
                                              # "(filtered N lines)"; blank lines are dropped
         "token_scores": [[token, score], ...],
         "kept_frags": [int, ...],            # kept 1-based line numbers of code.splitlines(),
                                              # ascending; a one-line gap between kept lines is
                                              # kept too
         "origin_token_cnt": int, "left_token_cnt": int, "model_input_token_cnt": int,
         "error_msg": str | null}             # set when it could not prune (query too long):
                                              # then every line is in kept_frags
    GET {endpoint}/health -> {"status": "healthy", "model_loaded": bool}

Unknown request fields are ignored (pydantic's default), and a bad request
body gets FastAPI's 422. The same field names and defaults appear in the
clients of that service we looked at (benchmark and agent wrappers around
`requests.post(f"{api_base}/prune", json=...)`).

What this module does with it: `pruned_code` is not used (it is the
service's own rendering); `kept_frags` becomes the keep-mask and
`jeeves_mcp.pruning` renders seed 001's markers and annotations. Lines are
numbered by `str.splitlines()` on the service side and by `"\\n"` here, so
the mask is mapped through the line boundaries both agree on. Lines inside
⟦NO_PRUNE_BEGIN⟧ ... ⟦NO_PRUNE_END⟧ are kept whatever the service says, and
when the service keeps fewer lines than `max_prune_ratio` / `min_keep_lines`
allow, the lines nearest to kept ones are added back, so the contract holds.

Every failure is an `EngineError` whose `kind` is seed 000's `pruning.error`:

    EngineError
    ├── "timeout"           no complete answer within `PruneOptions.timeout_ms`
    ├── "http_error"        connection refused/reset, DNS, bad URL, or a non-2xx status
    └── "invalid_response"  not JSON, a field missing or of the wrong type,
                            a kept_frags line number out of range, body too large or
                            compressed (only identity is asked for and accepted), or
                            holding more JSON values than a tokenizer could give
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import httpx
import trio

from jeeves_mcp import _log
from jeeves_mcp.pruning.contract import (
    EngineError,
    FileAges,
    FileReader,
    LineHistory,
    PruneOptions,
    Selection,
    Window,
    protected_lines,
)
from jeeves_mcp.pruning.render import FOCUS_REASON
from jeeves_mcp.pruning.swe_models import (
    DEFAULT_CHUNK_OVERLAP_TOKENS,
    DEFAULT_THRESHOLD,
    HealthAnswer,
    PruneRequest,
    PruneResponse,
    parse,
)

__all__ = ["DEFAULT_THRESHOLD", "ExternalEngine", "parse_prune_response", "service_line_owners"]

log = logging.getLogger("jeeves_mcp.pruning.swe_client")

REASON = f"{FOCUS_REASON} (swe-pruner)"
HEALTH_TIMEOUT_S = 5.0
# Slack for the answer's own fields and any special tokens, in `[`, `{` and `,`.
VALUES_SLACK = 4096



class ExternalEngine:
    """An `Engine` that asks a SWE-Pruner-compatible service which lines to keep."""

    name = "swe-pruner"

    def __init__(
        self,
        endpoint: str,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        always_keep_first_frags: bool = True,
        chunk_overlap_tokens: int = DEFAULT_CHUNK_OVERLAP_TOKENS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base = endpoint.rstrip("/")
        # Accept the full route too: people paste ".../prune" from SWE-Pruner's README.
        self.endpoint = base.removesuffix("/prune")
        self.threshold = threshold
        # Seed 001's code rule keeps file headers; SWE-Pruner's own default is False.
        self.always_keep_first_frags = always_keep_first_frags
        self.chunk_overlap_tokens = chunk_overlap_tokens
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(transport=self._transport, follow_redirects=False)
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                await client.aclose()

    async def select(
        self,
        lines: list[str],
        question: str,
        source_type: str,
        *,
        options: PruneOptions,
        path: str | None,
        line_prior: LineHistory | None = None,  # SWE-Pruner's protocol has no place for it
        window: Window | None = None,  # nor for the file around a window
        files: FileReader | None = None,  # nor for the files a search's rows are of
        file_ages: FileAges | None = None,  # nor for how lately they changed
    ) -> Selection:
        code = "\n".join(lines)
        request = PruneRequest(
            query=question,
            code=code,
            threshold=self.threshold,
            always_keep_first_frags=self.always_keep_first_frags,
            chunk_overlap_tokens=self.chunk_overlap_tokens,
        ).model_dump()
        # token_scores repeats the text token by token: allow for it, but bound it.
        code_bytes = len(code.encode("utf-8", "surrogatepass"))
        limit = 1024 * 1024 + 48 * code_bytes
        payload = await self._exchange(
            "POST", "/prune", options.timeout_ms / 1000, limit, json_body=request,
            max_values=answer_values_bound(code, code_bytes + len(question.encode("utf-8", "surrogatepass"))),
        )
        answer = parse_prune_response(payload, len(code.splitlines()))
        if answer.error_msg:
            _log.event(log, "pruner.service_error_msg", logging.WARNING, detail=answer.error_msg[:500])
        return selection_from_frags(lines, answer.kept_frags, options)

    async def health(self, timeout_s: float = HEALTH_TIMEOUT_S) -> dict[str, Any]:
        """The service's `GET /health` answer, checked: {"status": str, "model_loaded": bool}."""
        payload = await self._exchange("GET", "/health", timeout_s, 64 * 1024)
        try:
            parse(HealthAnswer, payload)
        except ValueError as exc:
            raise EngineError("invalid_response", f"health answer: {exc}") from exc
        return payload

    async def _exchange(
        self,
        method: str,
        route: str,
        timeout_s: float,
        limit: int,
        *,
        json_body: dict[str, Any] | None = None,
        max_values: int | None = None,
    ) -> dict[str, Any]:
        """One request, its JSON object answer; every failure mapped to an `EngineError` once.
        `max_values` bounds the answer's `[`, `{` and `,` (counted in strings too) before it is
        parsed: a parsed value costs ~30 times the bytes of `["",0],`."""
        url = self.endpoint + route
        body = b""
        with trio.move_on_after(timeout_s) as deadline:
            try:
                async with self._http().stream(
                    method, url, json=json_body, timeout=httpx.Timeout(timeout_s),
                    headers={"Accept-Encoding": "identity"},
                ) as response:
                    if not 200 <= response.status_code < 300:
                        raise EngineError(
                            "http_error", f"{method} {url} answered HTTP {response.status_code}"
                        )
                    # httpx would inflate each chunk whole, before `limit` is checked:
                    # a few bytes of "gzip, gzip" become gigabytes.
                    encoding = response.headers.get("content-encoding", "identity").strip().lower()
                    if encoding not in ("", "identity"):
                        raise EngineError(
                            "invalid_response", f"answer is compressed ({encoding[:40]!r}), asked for identity"
                        )
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_raw():
                        size += len(chunk)
                        if size > limit:
                            raise EngineError(
                                "invalid_response", f"answer larger than {limit} bytes"
                            )
                        chunks.append(chunk)
                    body = b"".join(chunks)
            except httpx.TimeoutException as exc:
                raise EngineError("timeout", f"{method} {url}: {type(exc).__name__}") from exc
            except httpx.DecodingError as exc:
                raise EngineError("invalid_response", f"{method} {url}: {exc}") from exc
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise EngineError("http_error", f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        if deadline.cancelled_caught:
            raise EngineError("timeout", f"{method} {url}: no answer within {timeout_s:g} s")
        if max_values is not None:
            values = body.count(b"[") + body.count(b"{") + body.count(b",")
            if values > max_values:
                raise EngineError(
                    "invalid_response", f"answer holds up to {values} JSON values ('[', '{{' and ','), "
                    f"over the {max_values} a tokenizer's answer could need"
                )
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise EngineError("invalid_response", f"answer is not JSON: {exc}"[:300]) from exc
        if not isinstance(payload, dict):
            raise EngineError("invalid_response", "answer is not a JSON object")
        return payload


def answer_values_bound(code: str, text_bytes: int) -> int:
    """The most `[`, `{` and `,` a tokenizer's answer to `code` (with its query, `text_bytes`
    bytes of UTF-8 together) can hold: three per
    token of token_scores (a token is a byte of text or more; the model's windows overlap by
    about 1 %), the code's own in the tokens' texts and again in pruned_code, one per kept
    line. A real answer holds about a third of it (tokens of 3-4 bytes); `["",0]` pairs up to
    the byte bound hold seven times it, and cost ~30 times their size to parse."""
    tokens = math.ceil(text_bytes * 1.02) + 256
    punctuation = code.count(",") + code.count("[") + code.count("{")
    return VALUES_SLACK + 3 * tokens + math.ceil(2.04 * punctuation) + code.count("\n") + 1


def parse_prune_response(payload: dict[str, Any], line_count: int) -> PruneResponse:
    """The `PruneResponse` in `payload`, its kept_frags within 1..`line_count`, or
    `EngineError("invalid_response")` saying what is wrong."""
    try:
        answer = parse(PruneResponse, payload)
    except ValueError as exc:
        raise EngineError("invalid_response", f"answer: {exc}") from exc
    for number in answer.kept_frags:
        if not 1 <= number <= line_count:
            raise EngineError(
                "invalid_response", f"kept_frags has line {number}, outside 1..{line_count}"
            )
    return answer


def service_line_owners(lines: list[str]) -> list[int]:
    """For each line of `"\\n".join(lines).splitlines()`, the index of the line of `lines`
    it belongs to. `splitlines` also breaks at \\r, \\f, \\x1c.. and U+2028, and never
    across a "\\n", so each "\\n"-line maps to its own run of service lines."""
    owners: list[int] = []
    last = len(lines) - 1
    for index, line in enumerate(lines):
        pieces = len((line + "\n").splitlines()) if index < last else len(line.splitlines())
        owners.extend([index] * pieces)
    return owners


def selection_from_frags(lines: list[str], kept_frags: list[int], options: PruneOptions) -> Selection:
    """The keep-mask for `lines` from a service's kept line numbers, within the contract."""
    n = len(lines)
    owners = service_line_owners(lines)
    keep = [False] * n
    for number in kept_frags:
        keep[owners[number - 1]] = True
    seen = [False] * n
    for owner in owners:
        seen[owner] = True
    for index in range(n):
        # A line the service cannot see (the empty one after a final newline) costs nothing.
        if not seen[index]:
            keep[index] = True
    for index, protect in enumerate(protected_lines(lines)):
        if protect:
            keep[index] = True
    need = max(n - math.floor(options.max_prune_ratio * n + 1e-9), min(options.min_keep_lines, n))
    missing = need - sum(keep)
    if missing > 0:
        _add_nearest(keep, missing)
    return Selection(keep, [None if k else REASON for k in keep])


def _add_nearest(keep: list[bool], missing: int) -> None:
    """Keep `missing` more lines, those closest to a kept line first (from the top if none)."""
    n = len(keep)
    far = n + 1
    distance = [far] * n
    last = None
    for i in range(n):
        if keep[i]:
            last = i
        if last is not None:
            distance[i] = i - last
    last = None
    for i in range(n - 1, -1, -1):
        if keep[i]:
            last = i
        if last is not None:
            distance[i] = min(distance[i], last - i)
    order = sorted((i for i in range(n) if not keep[i]), key=lambda i: (distance[i] if distance[i] < far else i, i))
    for i in order[:missing]:
        keep[i] = True
