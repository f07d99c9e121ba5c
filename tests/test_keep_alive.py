"""An answer sent before its request's body was read tells the client the connection ends.

hypercorn closes an HTTP/1.1 connection whose request body was not all read when the answer
ended, but said nothing: the answer came without `Connection: close`, the client kept the
connection and its next request met "Server disconnected without sending a response". A
415, a 401 or a 404 sent early, then a ping on the same connection, lost the ping whenever
the client wrote before the server's FIN arrived (seen on a loaded machine, in the fuzz
tests). Here the body is never sent, so every such answer is sent before it is read. A
request with the token has its body read before any answer, and its connection goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests._child import running_child
from tests._daemon import running_daemon
from tests.test_descriptors import TCP_ENV, tcp_port

ANSWER_S = 10.0


async def answer(stream: trio.abc.Stream, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` (a head announcing a body that may never follow); its answer's status,
    headers (lower case) and body."""
    await stream.send_all(request)
    received = b""
    with trio.fail_after(ANSWER_S):
        while b"\r\n\r\n" not in received:
            chunk = await stream.receive_some(4096)
            assert chunk, f"closed without an answer: {received!r}"
            received += chunk
        head, body = received.split(b"\r\n\r\n", 1)
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        while len(body) < int(headers.get("content-length", 0)):
            chunk = await stream.receive_some(4096)
            assert chunk, f"closed in the answer's body: {body!r}"
            body += chunk
    return int(status_line.split()[1]), headers, body


def posted(path: str, token: str | None, content_type: str = "application/json", body: bytes = b"") -> bytes:
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body) or 64}\r\n\r\n").encode() + body


@pytest.mark.parametrize(("request_", "expected"), [
    (posted("/rpc", None), 401),
    (posted("/nowhere", "test-token"), 404),
], ids=["without_token", "no_route"])
async def test_a_child_answering_before_the_body_says_the_connection_closes(
    run_root: Path, tmp_path: Path, request_: bytes, expected: int
) -> None:
    async with running_child(run_root, tmp_path) as child:
        stream = await trio.open_tcp_stream("127.0.0.1", child.port)
        async with stream:
            status, headers, _ = await answer(stream, request_)
        assert status == expected
        assert headers.get("connection", "").lower() == "close", headers


async def test_a_body_of_the_wrong_type_is_read_and_the_connection_serves_the_next_request(
    run_root: Path, tmp_path: Path
) -> None:
    """A 415 came before the body was read: under load the connection was closed under the
    client's next request (the fuzz tests' ping)."""
    ping = json.dumps({"jsonrpc": "2.0", "id": "next", "method": "ping"}).encode()
    async with running_child(run_root, tmp_path) as child:
        stream = await trio.open_tcp_stream("127.0.0.1", child.port)
        async with stream:
            wrong_type = posted("/mcp", "test-token", "text/plain", ping)
            head_only = len(wrong_type) - len(ping)
            await stream.send_all(wrong_type[:head_only])
            await trio.sleep(0.2)  # an answer not waiting for the body is on its way by now
            status, headers, _ = await answer(stream, wrong_type[head_only:])
            assert status == 415
            assert "connection" not in headers, headers
            status, _, body = await answer(stream, posted("/rpc", "test-token", body=ping))
        assert status == 200
        assert json.loads(body) == {"jsonrpc": "2.0", "id": "next", "result": {}}


async def test_the_daemon_refusing_before_the_body_says_the_connection_closes(tmp_path: Path) -> None:
    """Its routes read the body before any answer; only a TCP request without the token is
    refused unread."""
    async with running_daemon(tmp_path, TCP_ENV) as daemon:
        stream = await trio.open_tcp_stream("127.0.0.1", tcp_port(daemon))
        async with stream:
            status, headers, _ = await answer(stream, posted("/v1/slots", None))
        assert status == 401
        assert headers.get("connection", "").lower() == "close", headers
