"""A fake SWE-Pruner service: the published wire protocol over real HTTP on loopback.

`POST /prune` checks the request like SWE-Pruner's pydantic model (FastAPI
answers 422 otherwise) and, in "normal" mode, keeps line 1 and every line
containing a word of the query; `GET /health` answers {"status", "model_loaded"}.
Other modes make it misbehave; switch `fake.mode` at any time in a test:

    normal        a valid PruneResponse
    slow          no answer until the test ends (past any client timeout)
    500           HTTP 500 with FastAPI's {"detail": ...}
    malformed     200 with a body that is not JSON
    missing       200 with JSON lacking kept_frags and the token counts
    mistyped      200 with kept_frags as strings
    out_of_range  200 with kept_frags naming line 0 and a line past the end
    cannot_prune  200 keeping every line, with error_msg set (SWE-Pruner's "query too long")
    gzip_bomb     200 with a valid answer padded to 256 MiB of spaces, gzipped twice
                  ("Content-Encoding: gzip, gzip"): a few KiB on the wire
    escapes       GET /health answers a status holding terminal escapes (OSC 52, CSI)
    value_flood   200 with a valid answer whose token_scores is padded with ["", 0] pairs
                  to just under the client's byte bound: 7 bytes on the wire, ~220 parsed

`refused_endpoint()` gives a loopback URL where nothing listens.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from jeeves_mcp.mcp.transports.asgi import Receive, Send, read_body, send_bytes, send_json

MODES = (
    "normal", "slow", "500", "malformed", "missing", "mistyped", "out_of_range", "cannot_prune", "gzip_bomb",
    "escapes", "value_flood",
)
ESCAPES = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2J\x9b31m"
BOMB_BYTES = 256 * 1024 * 1024
REQUEST_FIELDS = {
    "query": (str,),
    "code": (str,),
    "threshold": (int, float),
    "always_keep_first_frags": (bool,),
    "chunk_overlap_tokens": (int,),
}


@dataclass
class FakeSwePruner:
    mode: str = "normal"
    port: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: trio.Event = field(default_factory=trio.Event)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[-1]
                await send({"type": f"{message['type']}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] != "http":
            return
        route = (scope["method"], scope["path"])
        if route == ("GET", "/health"):
            status = ESCAPES + "healthy" if self.mode == "escapes" else "healthy"
            await send_json(send, 200, {"status": status, "model_loaded": True})
        elif route == ("POST", "/prune"):
            await self._prune(await read_body(receive, 64 * 1024 * 1024), send)
        else:
            await send_json(send, 404, {"detail": "Not Found"})

    async def _prune(self, body: bytes, send: Send) -> None:
        try:
            request = json.loads(body)
        except ValueError:
            await send_json(send, 422, {"detail": "body is not JSON"})
            return
        problems = [
            name for name, types in REQUEST_FIELDS.items()
            if name not in request or not isinstance(request[name], types)
            or (bool not in types and isinstance(request[name], bool))
        ]
        if problems:
            await send_json(send, 422, {"detail": [{"loc": ["body", p]} for p in problems]})
            return
        self.requests.append(request)
        mode = self.mode
        if mode == "slow":
            with trio.move_on_after(120):
                await self.release.wait()
        if mode == "500":
            await send_json(send, 500, {"detail": "Model not loaded"})
            return
        if mode == "malformed":
            await send_bytes(send, 200, b'{"score": 0.9, "pruned_code": "x", ', "application/json")
            return
        answer = prune_answer(request["query"], request["code"])
        if mode == "missing":
            for name in ("kept_frags", "origin_token_cnt", "left_token_cnt"):
                del answer[name]
        elif mode == "mistyped":
            answer["kept_frags"] = [str(n) for n in answer["kept_frags"]]
        elif mode == "cannot_prune":
            answer["kept_frags"] = list(range(1, len(request["code"].splitlines()) + 1))
            answer["pruned_code"] = request["code"]
            answer["error_msg"] = "Query too long, insufficient space for code processing."
        elif mode == "out_of_range":
            answer["kept_frags"] = [0, *answer["kept_frags"], len(request["code"].splitlines()) + 1]
        elif mode == "value_flood":
            # The client's byte bound (jeeves_mcp.pruning.swe_client), less room for the rest.
            room = 1024 * 1024 + 48 * len(request["code"].encode()) - len(json.dumps(answer)) - 64
            answer["token_scores"] += [["", 0]] * (room // len('["",0],'))
            await send_bytes(send, 200, json.dumps(answer, separators=(",", ":")).encode(), "application/json")
            return
        elif mode == "gzip_bomb":
            body = await trio.to_thread.run_sync(gzip_bomb, json.dumps(answer).encode())
            await send_bytes(send, 200, body, "application/json", [("Content-Encoding", "gzip, gzip")])
            return
        await send_json(send, 200, answer)


def gzip_bomb(payload: bytes) -> bytes:
    """`payload` and trailing spaces up to BOMB_BYTES (still the same JSON), gzipped twice."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [inner.compress(payload)]
    spaces = b" " * (1024 * 1024)
    parts += [inner.compress(spaces) for _ in range(BOMB_BYTES // len(spaces))]
    parts.append(inner.flush())
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(b"".join(parts)) + outer.flush()


def prune_answer(query: str, code: str) -> dict[str, Any]:
    """Normal mode: line 1 and the lines holding a query word, rendered like SWE-Pruner."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]{2,}", query)}
    lines = code.splitlines()
    kept = [
        n for n, line in enumerate(lines, 1)
        if n == 1 or words & {w.lower() for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", line)}
    ]
    rendered: list[str] = []
    gap = 0
    for n, line in enumerate(lines, 1):
        if n in kept:
            if gap:
                rendered.append(f"(filtered {gap} lines)")
                gap = 0
            rendered.append(line)
        else:
            gap += 1
    if gap:
        rendered.append(f"(filtered {gap} lines)")
    pruned = "\n".join(rendered)
    return {
        "score": 0.87,
        "pruned_code": pruned,
        "token_scores": [[w, 0.9 if w.lower() in words else 0.1] for w in code.split()[:50]],
        "kept_frags": kept,
        "origin_token_cnt": len(code.split()),
        "left_token_cnt": len(pruned.split()),
        "model_input_token_cnt": len(code.split()) + len(query.split()) + 40,
        "error_msg": None,
    }


@asynccontextmanager
async def running_fake(mode: str = "normal") -> AsyncIterator[FakeSwePruner]:
    """Serve a fake on 127.0.0.1 (port chosen by the OS) for the duration of the block."""
    fake = FakeSwePruner(mode=mode)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    config.errorlog = logging.getLogger("tests.fake_swe_pruner")
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(fake, config, task_status=task_status)  # type: ignore[arg-type]
        )
        fake.port = int(binds[0].rsplit(":", 1)[1])
        try:
            yield fake
        finally:
            fake.release.set()
            nursery.cancel_scope.cancel()


def refused_endpoint() -> str:
    """A loopback URL with no listener: bind a port, then close it without listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
