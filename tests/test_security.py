"""Who may call what, what a tool may reach, and what slow or oversized requests cost.

Against real processes: a daemon and the children it starts, or a child started
directly. Tool calls go through `/rpc` with the slot's own bearer token.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from jeeves_mcp.client import AsyncControlClient, ControlError
from tests._child import Child, running_child, tool_json
from tests._daemon import Daemon, running_daemon

SECRET = "s3cr3t-canary-7f1c9a"
BODY_TIMEOUT_S = 6.0  # body_timeout_s of the child and the daemon here (30 s by default)
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "s", "version": "0"}}}


def rpc_call(name: str, arguments: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


async def call_tool(http: httpx.AsyncClient, base: str, headers: dict[str, str], name: str,
                    arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's structured result, with `isError` folded in."""
    response = await http.post(f"{base}/rpc", json=rpc_call(name, arguments), headers=headers)
    assert response.status_code == 200, response.text
    reply = response.json()
    assert "result" in reply, reply
    return {**tool_json(reply["result"]), "isError": reply["result"].get("isError", False)}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the run root holding what no tool may show."""
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text(f"{SECRET}\n")
    return secret_dir


@pytest.fixture
def escape_root(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "ok.py").write_text("x = 1\n")
    (root / "link_file").symlink_to(outside / "secret.txt")  # a file link out of the root
    (root / "link_dir").symlink_to(outside)  # a directory link out of the root
    (root / "src" / "up").symlink_to("../..")  # a relative link climbing out, mid-path
    (root / "inner").symlink_to("src")  # a link that stays inside: allowed
    return root


# -- tokens ------------------------------------------------------------------------


async def test_no_call_succeeds_without_the_slots_own_token(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        first = await control.acquire("tok-a", run_root)
        second = await control.acquire("tok-b", run_root)
        base = first["mcp"]["url"].removesuffix("/mcp")
        own = first["mcp"]["headers"]
        other = second["mcp"]["headers"]
        assert own != other
        refused_headers = [{}, other, {"Authorization": "Bearer"}, {"Authorization": "Basic " + own["Authorization"][7:]},
                           {"Authorization": own["Authorization"] + "x"}, {"Authorization": own["Authorization"][:-1]}]
        async with httpx.AsyncClient(timeout=10) as http:
            for headers in refused_headers:
                requests = [
                    http.post(f"{base}/mcp", json=INIT, headers={**headers, "Accept": "application/json, text/event-stream"}),
                    http.post(f"{base}/rpc", json=rpc_call("read", {"path": "hello.py"}), headers=headers),
                    http.get(f"{base}/stats", headers=headers),
                    http.post(f"{base}/prune", json={"code": "x = 1\n", "query": "x"}, headers=headers),
                    http.get(f"{base}/mcp", headers={**headers, "Accept": "text/event-stream"}),
                    http.delete(f"{base}/mcp", headers={**headers, "Mcp-Session-Id": "x"}),
                ]
                for pending in requests:
                    response = await pending
                    assert response.status_code == 401, (headers, response.request.url, response.text)
                    assert response.json()["error"]["code"] == 401
            read = await call_tool(http, base, own, "read", {"path": "hello.py"})
            assert not read["isError"] and "hello" in read["content"]
        await control.release("tok-a")
        await control.release("tok-b")


# -- DNS rebinding: Origin and Host ---------------------------------------------------


async def test_foreign_origin_and_host_are_refused_on_every_route(child: Child) -> None:
    routes = [("POST", "/mcp", INIT), ("POST", "/rpc", rpc_call("read", {"path": "notes.md"})),
              ("POST", "/prune", {"code": "x = 1\n", "query": "x"}), ("GET", "/stats", None)]
    base_headers = {**child.headers(), "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(timeout=10) as http:
        for method, path, body in routes:
            url = f"{child.base}{path}"
            for origin in ("http://evil.example", "https://127.0.0.1.evil.example", "null",
                           f"http://localhost.evil.example:{child.port}", "http://[::2]"):
                response = await http.request(method, url, json=body, headers={**base_headers, "Origin": origin})
                assert response.status_code == 403, (path, origin, response.text)
                assert response.json()["error"]["code"] == 403
            for host in ("evil.example", f"evil.example:{child.port}", "127.0.0.1.evil.example",
                         "localhost.evil.example", "[::2]", "0.0.0.0"):
                response = await http.request(method, url, json=body, headers={**base_headers, "Host": host})
                assert response.status_code == 421, (path, host, response.text)
            local = await http.request(method, url, json=body,
                                       headers={**base_headers, "Origin": f"http://localhost:{child.port}",
                                                "Host": f"127.0.0.1:{child.port}"})
            assert local.status_code == 200, (path, local.text)


# -- the control API -----------------------------------------------------------------


async def test_control_socket_is_0600_and_tcp_needs_the_token(tmp_path: Path) -> None:
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": "tcp-secret-for-the-tests"}
    async with running_daemon(tmp_path, env) as daemon:
        mode = daemon.socket.stat().st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines()
                     if '"daemon.ready"' in line)
        url = ready["tcp"]
        assert url.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            for method, path in (("GET", "/healthz"), ("GET", "/metrics"), ("GET", "/v1/slots"),
                                 ("POST", "/v1/slots"), ("GET", "/v1/slots/x"), ("DELETE", "/v1/slots/x"),
                                 ("POST", "/v1/slots/x/renew"), ("GET", "/v1/slots/x/logs"), ("GET", "/v1/stats"),
                                 ("GET", "/v1/events"), ("GET", "/nope")):
                for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "tcp-secret-for-the-tests"},
                             {"Authorization": "Bearer tcp-secre"}):
                    response = await http.request(method, path, headers=auth, json={"run_id": "x", "root": "/"})
                    assert response.status_code == 401, (method, path, auth, response.text)
                    assert response.json()["error"]["code"] == "UNAUTHORIZED"
            ok = await http.get("/v1/slots", headers={"Authorization": "Bearer tcp-secret-for-the-tests"})
            assert ok.status_code == 200 and ok.json() == {"slots": []}
        async with AsyncControlClient(url=url, token="wrong") as wrong:
            with pytest.raises(ControlError):
                await wrong.acquire("never", tmp_path)
        async with daemon.client() as local:
            assert (await local.list())["slots"] == []


# -- the run root --------------------------------------------------------------------


ESCAPES = ["../outside/secret.txt", "/etc/passwd", "link_file", "link_dir/secret.txt", "src/up/outside/secret.txt",
           "src/../../outside/secret.txt", "./link_dir/../outside/secret.txt", "inner/up/outside/secret.txt"]


async def test_read_cannot_leave_the_root(escape_root: Path, tmp_path: Path) -> None:
    async with running_child(escape_root, tmp_path) as child, httpx.AsyncClient(timeout=10) as http:
        for path in [*ESCAPES, str(tmp_path / "outside" / "secret.txt"), "~/.bashrc", "link_dir"]:
            result = await call_tool(http, child.base, child.headers(), "read", {"path": path})
            assert result["isError"] and result["code"] == "FORBIDDEN", (path, result)
            assert SECRET not in json.dumps(result)
        inside = await call_tool(http, child.base, child.headers(), "read", {"path": "inner/ok.py"})
        assert not inside["isError"] and inside["content"] == "x = 1"


@pytest.mark.parametrize("engine", ["rg", "builtin"])
async def test_grep_cannot_leave_the_root(escape_root: Path, tmp_path: Path, engine: str) -> None:
    (escape_root / "src" / "ok.py").write_text(f"x = 1  # not {SECRET[:6]}\n")
    async with running_child(escape_root, tmp_path, without_rg=engine == "builtin") as child, \
            httpx.AsyncClient(timeout=20) as http:
        for paths in (["link_dir"], ["link_file"], ["link_dir/secret.txt"], [".."], ["/"], ["src/up"],
                      ["src/up/outside"], ["src", "link_dir"], [str(tmp_path / "outside")]):
            result = await call_tool(http, child.base, child.headers(), "grep", {"pattern": SECRET, "paths": paths})
            assert result["isError"] and result["code"] == "FORBIDDEN", (engine, paths, result)
            assert SECRET not in json.dumps(result)
        # A whole-root search walks past the links without following them out.
        whole = await call_tool(http, child.base, child.headers(), "grep", {"pattern": "s3cr3t"})
        assert SECRET not in json.dumps(whole), (engine, whole)
        assert whole["engine"] == engine, whole
        found = await call_tool(http, child.base, child.headers(), "grep", {"pattern": "x = 1", "paths": ["inner"]})
        assert not found["isError"] and found["match_count"] == 1, found


async def test_bash_cwd_cannot_leave_the_root(escape_root: Path, tmp_path: Path) -> None:
    async with running_child(escape_root, tmp_path) as child, httpx.AsyncClient(timeout=20) as http:
        for cwd in ["..", "/", "/etc", "link_dir", "src/up", "src/up/outside", "inner/up", str(tmp_path)]:
            result = await call_tool(http, child.base, child.headers(), "bash", {"cmd": "pwd", "cwd": cwd})
            assert result["isError"] and result["code"] == "FORBIDDEN", (cwd, result)
        inside = await call_tool(http, child.base, child.headers(), "bash", {"cmd": "pwd", "cwd": "inner"})
        assert not inside["isError"] and inside["stdout"].strip() == str(escape_root / "src")


# -- secrets -------------------------------------------------------------------------

SHOW_ENV = "env; echo ---; cat /proc/$PPID/environ | tr '\\0' '\\n'"


async def test_bash_does_not_inherit_the_daemons_secrets(tmp_path: Path, run_root: Path) -> None:
    secrets = {"JEEVES_SECRET_CANARY": SECRET, "AWS_SECRET_ACCESS_KEY": SECRET + "-aws",
               "ANTHROPIC_API_KEY": SECRET + "-ant", "JEEVES_MCP_TCP_TOKEN": SECRET + "-tcp",
               "JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0"}
    async with running_daemon(tmp_path, secrets) as daemon, daemon.client() as control:
        slot = await control.acquire("env-run", run_root, env={"RUN_VISIBLE": "yes"})
        base = slot["mcp"]["url"].removesuffix("/mcp")
        async with httpx.AsyncClient(timeout=20) as http:
            result = await call_tool(http, base, slot["mcp"]["headers"], "bash", {"cmd": SHOW_ENV})
        assert not result["isError"], result
        assert SECRET not in result["stdout"], result["stdout"]
        assert "RUN_VISIBLE=yes" in result["stdout"]  # the run's own env does reach it
        await control.release("env-run")


# Every token variable any process on the machine shows (a child a test starts by hand gets
# its token so, as an operator's would; another test may run one beside this one).
SCAN_TOKENS = "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep '^JEEVES_MCP_TOKEN=' || true"


@pytest.mark.parametrize("fork_server", ["true", "false"])
async def test_a_run_cannot_read_another_runs_token(tmp_path: Path, run_root: Path, fork_server: str) -> None:
    """Cold children get their token through a pipe, forked ones after exec: never in /proc/PID/environ."""
    async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon, \
            daemon.client() as control:
        first = await control.acquire("a", run_root)
        second = await control.acquire("b", run_root)
        tokens = {slot["mcp"]["headers"]["Authorization"].removeprefix("Bearer ") for slot in (first, second)}
        base = first["mcp"]["url"].removesuffix("/mcp")
        async with httpx.AsyncClient(timeout=20) as http:
            found = await call_tool(http, base, first["mcp"]["headers"], "bash", {"cmd": SCAN_TOKENS})
            dump = await call_tool(http, base, first["mcp"]["headers"], "bash",
                                   {"cmd": "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"})
        shown = {line.removeprefix("JEEVES_MCP_TOKEN=") for line in found["stdout"].split()}
        assert not shown & tokens, found["stdout"]
        assert not any(token in json.dumps(dump) for token in tokens)
        await control.release("a")
        await control.release("b")


async def test_bash_of_a_child_started_directly_does_not_see_its_secrets(workspace: Path, tmp_path: Path) -> None:
    env = {"JEEVES_SECRET_CANARY": SECRET, "GITHUB_TOKEN": SECRET + "-gh"}
    async with running_child(workspace, tmp_path, env=env) as child, httpx.AsyncClient(timeout=20) as http:
        result = await call_tool(http, child.base, child.headers(), "bash", {"cmd": "env"})
        assert not result["isError"], result
        assert SECRET not in result["stdout"]
        assert "PATH=" in result["stdout"]


# -- slow and oversized requests -------------------------------------------------------


async def slow_body(port: int, path: str, headers: dict[str, str], trickle_s: float = 1.0) -> tuple[bytes, float]:
    """Declare a 1 MB body, send a byte of it per `trickle_s` until the server answers."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    started = time.monotonic()
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "Content-Length: 1000000\r\n\r\n"
    async with stream, trio.open_nursery() as nursery:

        async def trickle() -> None:
            await stream.send_all(head.encode() + b'{"jsonrpc"')
            while True:
                await trio.sleep(trickle_s)
                await stream.send_all(b" ")

        nursery.start_soon(trickle)
        answer = await read_response(stream)
        nursery.cancel_scope.cancel()
    return answer, time.monotonic() - started


async def test_slow_bodies_time_out_without_blocking_others(tmp_path: Path, workspace: Path) -> None:
    timeout = {"JEEVES_MCP_BODY_TIMEOUT_S": str(BODY_TIMEOUT_S)}
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": "tcp-secret-for-the-tests",
           "JEEVES_MCP_PRUNER_ENABLED": "false", **timeout}
    (tmp_path / "d").mkdir()
    async with running_daemon(tmp_path / "d", env) as daemon, \
            running_child(workspace, tmp_path, env=timeout) as child:
        ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines()
                     if '"daemon.ready"' in line)
        daemon_port = int(ready["tcp"].rsplit(":", 1)[1])
        results: dict[str, tuple[bytes, float]] = {}
        others: list[float] = []

        async def slow(name: str, port: int, path: str, headers: dict[str, str]) -> None:
            results[name] = await slow_body(port, path, headers)

        with trio.fail_after(BODY_TIMEOUT_S + 30):
            async with trio.open_nursery() as nursery:
                for n in range(3):
                    nursery.start_soon(slow, f"child-{n}", child.port, "/rpc", child.headers())
                    nursery.start_soon(slow, f"daemon-{n}", daemon_port, "/v1/slots",
                                       {"Authorization": "Bearer tcp-secret-for-the-tests"})
                await trio.sleep(2)  # the slow clients are connected and trickling
                async with httpx.AsyncClient(timeout=10) as http:
                    for _ in range(5):  # meanwhile, others are served at once
                        started = time.monotonic()
                        read = await call_tool(http, child.base, child.headers(), "read", {"path": "notes.md"})
                        assert not read["isError"]
                        listed = await http.get(f"{ready['tcp']}/v1/slots", headers={"Authorization": "Bearer tcp-secret-for-the-tests"})
                        assert listed.status_code == 200
                        others.append(time.monotonic() - started)
                assert not results  # ... while every slow client is still waiting
        for name, (answer, elapsed) in sorted(results.items()):
            status_line = answer.split(b"\r\n", 1)[0]
            assert status_line.startswith(b"HTTP/1.1 408"), (name, answer[:300])
            body = answer.split(b"\r\n\r\n", 1)[1]
            assert "error" in json.loads(body), (name, body)
            assert elapsed >= BODY_TIMEOUT_S - 1, (name, elapsed)
        print(f"slowloris: {len(results)} slow clients answered 408 after "
              f"{min(e for _, e in results.values()):.1f}-{max(e for _, e in results.values()):.1f} s; "
              f"other clients' read+list meanwhile: max {max(others) * 1000:.0f} ms")


async def read_response(stream: trio.SocketStream) -> bytes:
    """One HTTP/1.1 response (head and Content-Length body), or what came before the close."""
    answer = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError:
            return answer
        if not chunk:
            return answer
        answer += chunk
        head, found, rest = answer.partition(b"\r\n\r\n")
        if found:
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(rest) >= length:
                return answer


async def raw_exchange(port: int, request: bytes) -> bytes:
    """Send `request` and read until the server answers and closes, or 10 s pass."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    answer = b""
    async with stream:
        try:
            await stream.send_all(request)
        except trio.BrokenResourceError:
            pass  # refused while we were still sending
        with trio.move_on_after(10):
            answer = await read_response(stream)
    return answer


async def test_huge_headers_are_refused_without_harm(child: Child, tmp_path: Path) -> None:
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": "tcp-secret-for-the-tests"}
    (tmp_path / "d").mkdir()
    async with running_daemon(tmp_path / "d", env) as daemon:
        ready = next(json.loads(line) for line in daemon.log_path.read_text().splitlines()
                     if '"daemon.ready"' in line)
        daemon_port = int(ready["tcp"].rsplit(":", 1)[1])
        auth = f"Authorization: Bearer {child.token}\r\n"
        for port, path in ((child.port, "/rpc"), (daemon_port, "/v1/slots")):
            huge = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}X-Big: {'a' * 1_000_000}\r\n\r\n").encode()
            many = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
                    + "".join(f"X-H{n}: {n}\r\n" for n in range(10_000)) + "\r\n").encode()
            for request in (huge, many):
                answer = await raw_exchange(port, request)
                status = answer.split(b"\r\n", 1)[0]
                # Refused: a 4xx, or the connection closed without an answer.
                assert answer == b"" or status.split(b" ")[1][:1] == b"4", status
                assert not status.startswith(b"HTTP/1.1 2"), status
        async with httpx.AsyncClient(timeout=10) as http:
            ping = await http.post(f"{child.base}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                   headers=child.headers())
            assert ping.json()["result"] == {}
            listed = await http.get(f"{ready['tcp']}/v1/slots", headers={"Authorization": "Bearer tcp-secret-for-the-tests"})
            assert listed.status_code == 200
        assert os.kill(child.process.pid, 0) is None


async def test_a_child_starters_repr_does_not_show_the_tcp_token(tmp_path: Path) -> None:
    """A repr lands in tracebacks and debug logs: the daemon's config holds the TCP token."""
    from jeeves_mcp.supervisor.cgroups import SlotCgroups
    from jeeves_mcp.supervisor.child_start import ChildStarter
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config
    from jeeves_mcp.supervisor.events import EventBus
    from jeeves_mcp.supervisor.metrics import Metrics

    token = secrets.token_urlsafe(32)
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": token}
    config = load_daemon_config(None, env, state_dir=tmp_path / "s")
    async with httpx.AsyncClient() as http:
        starter = ChildStarter(config, EventBus(), Metrics(), http, SlotCgroups(None), None)
        assert token not in repr(starter) and "ChildStarter(" in repr(starter)


def test_the_configs_reprs_do_not_show_their_tokens(tmp_path: Path) -> None:
    """A config's repr lands in tracebacks and debug logs too."""
    from jeeves_mcp.pruner_config import PrunerConfig
    from jeeves_mcp.supervisor.daemon_config import load_daemon_config

    token = secrets.token_urlsafe(32)
    env = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_TOKEN": token}
    daemon = load_daemon_config(None, env, state_dir=tmp_path / "s")
    assert daemon.tcp_token == token and token not in repr(daemon) and token not in str(daemon)
    child = PrunerConfig(token=token)
    assert child.token == token and token not in repr(child) and token not in str(child)
