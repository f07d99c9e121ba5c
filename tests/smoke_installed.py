"""Smoke test of an installed jeeves-mcp (a wheel in a fresh venv), run from outside the tree.

    make smoke-installed          # builds the wheel, installs it alone, runs this

Uses only the `jeeves-mcp` on PATH and the installed package's own dependencies (httpx):
--version; `systemd-units` (the units the wheel carries, run from its venv); a `pruner`
ready line and one `read` over /mcp; a `daemon` with `acquire --json` -> running, a
tools/call through the slot's endpoint, `prune` on a file, `release`; then the daemon stops and nothing it started is left. With
JEEVES_SDK_PYTHON set to a Python that has the official MCP SDK, the SDK client also
calls the slot. Prints one line per step; exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import jeeves_mcp

BOUND_S = 60.0


def step(message: str) -> None:
    print(f"smoke: {message}", flush=True)


def fail(message: str) -> None:
    print(f"smoke: FAILED: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["jeeves-mcp", *args], capture_output=True, text=True, timeout=BOUND_S)
    if check and done.returncode != 0:
        fail(f"jeeves-mcp {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done


def mcp_call(url: str, headers: dict[str, str], name: str, arguments: dict) -> dict:
    """initialize, then one tools/call, over Streamable HTTP (JSON responses)."""
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **headers}
    with httpx.Client(timeout=BOUND_S) as http:
        init = http.post(url, headers=base, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "smoke", "version": "1"}}})
        init.raise_for_status()
        session = {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        http.post(url, headers={**base, **session},
                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        reply = http.post(url, headers={**base, **session}, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        reply.raise_for_status()
        body = reply.text
        if reply.headers.get("content-type", "").startswith("text/event-stream"):
            body = next(line[5:] for line in body.splitlines() if line.startswith("data:"))
        return json.loads(body)["result"]


def our_processes(marker: str) -> list[int]:
    """Pids whose command line mentions `marker` (this run's state dir or root)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{entry}/environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append(int(entry))
    return found


def main() -> None:
    package = Path(jeeves_mcp.__file__).resolve().parent
    if package == Path(__file__).resolve().parent.parent / "jeeves_mcp" or "site-packages" not in package.parts:
        fail(f"jeeves_mcp is imported from the source tree ({package}), not from an installed wheel")
    step(f"package at {package}")

    version = cli("--version").stdout.strip()
    if version != jeeves_mcp.__version__:
        fail(f"--version printed {version!r}, the package is {jeeves_mcp.__version__!r}")
    step(f"--version {version}")

    with tempfile.TemporaryDirectory(prefix="jeeves-smoke-units-") as units:
        cli("systemd-units", "--out", units)
        service = (Path(units) / "jeeves-mcp.service").read_text()
        script = Path(sys.executable).parent / "jeeves-mcp"  # the wheel's console script
        if f"\nExecStart={script} daemon\n" not in service or "@JEEVES_MCP@ daemon" in service:
            fail(f"systemd-units: the service does not run {script}")
        step(f"systemd-units: the wheel's units, ExecStart={script} daemon")

    with tempfile.TemporaryDirectory(prefix="jeeves-smoke-") as tmp:
        root = Path(tmp) / "root"
        root.mkdir()
        source = "".join(f"def helper_{n}(x):\n    return x * {n}\n\n\n" for n in range(200))
        source += "def parse_config(path):\n    return open(path).read().split('=')\n"
        (root / "module.py").write_text(source)
        # A git workspace whose last commit changed one helper: a focused read shows that line too.
        git_env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                   "GIT_AUTHOR_NAME": "smoke", "GIT_AUTHOR_EMAIL": "smoke@example.org",
                   "GIT_COMMITTER_NAME": "smoke", "GIT_COMMITTER_EMAIL": "smoke@example.org"}
        for args in (["init", "-q"], ["add", "module.py"], ["commit", "-qm", "first"]):
            subprocess.run(["git", "-C", str(root), *args], check=True, env=git_env, capture_output=True)
        source = source.replace("    return x * 150\n", "    return x * 150  # the last commit\n")
        (root / "module.py").write_text(source)
        subprocess.run(["git", "-C", str(root), "commit", "-qam", "second"], check=True, env=git_env,
                       capture_output=True)

        pruner = subprocess.Popen(["jeeves-mcp", "pruner", "--root", str(root)], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            ready = json.loads(pruner.stdout.readline() if pruner.stdout else "{}")
            if ready.get("event") != "ready":
                fail(f"pruner printed no ready line (exit {pruner.poll()})")
            result = mcp_call(f"{ready['url']}/mcp" if not ready["url"].endswith("/mcp") else ready["url"], {},
                              "read", {"path": "module.py", "context_focus_question": "where is the config parsed?"})
            shown = json.loads(result["content"][0]["text"])
            content = shown["content"]
            if "def parse_config(path):" not in content or not shown["pruning"]["applied"]:
                fail(f"read over /mcp did not return the pruned function: {content[:300]!r}")
            if "# the last commit" not in content:
                fail(f"read in a git workspace did not show the last commit's line: {content[:300]!r}")
            step(f"pruner ready on port {ready['port']}, read over /mcp pruned to {len(content)} bytes,"
                 " the last commit's line shown")
        finally:
            pruner.send_signal(signal.SIGTERM)
            pruner.wait(timeout=BOUND_S)

        state = Path(tmp) / "state"
        sock = Path(tmp) / "control.sock"
        daemon = subprocess.Popen(["jeeves-mcp", "daemon", "--state-dir", str(state), "--socket", str(sock)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True)
        try:
            deadline = time.monotonic() + BOUND_S
            while not sock.exists():
                if daemon.poll() is not None:
                    fail(f"daemon exited {daemon.returncode}: {daemon.stderr.read()[-600:] if daemon.stderr else ''}")
                if time.monotonic() > deadline:
                    fail("daemon did not open its control socket")
                time.sleep(0.05)
            step("daemon serving")
            slot = json.loads(cli("--socket", str(sock), "acquire", "smoke-run", "--root", str(root), "--json").stdout)
            if slot["state"] != "running":
                fail(f"acquire answered {slot['state']}: {slot.get('reason')}")
            result = mcp_call(slot["mcp"]["url"], slot["mcp"]["headers"], "grep",
                              {"pattern": "parse_config", "paths": ["."]})
            if "module.py" not in json.dumps(result):
                fail(f"grep through the slot found nothing: {json.dumps(result)[:300]}")
            step(f"acquire -> running (pid {slot['pid']}), grep through the slot's endpoint")
            sdk_python = os.environ.get("JEEVES_SDK_PYTHON")
            if sdk_python:
                sdk_client(sdk_python, slot["mcp"]["url"], slot["mcp"]["headers"])
                step("the official MCP SDK client called the slot")
            pruned = cli("prune", str(root / "module.py"), "-q", "where is the config parsed?").stdout
            if "parse_config" not in pruned or "⟦PRUNÉ" not in pruned:
                fail(f"prune did not prune to the function: {pruned[:300]!r}")
            step(f"prune FILE: {len(pruned)} of {len(source)} bytes")
            released = cli("--socket", str(sock), "release", "smoke-run", "--json").stdout
            if "shutdown" not in released:
                fail(f"release answered {released[:300]!r}")
            step("release -> shutdown")
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                daemon.kill()
                fail("daemon did not stop on SIGTERM")
        left = our_processes(str(state)) + our_processes(str(root))
        if left:
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            fail(f"processes left after the daemon stopped: {left}")
        step(f"daemon stopped (exit {daemon.returncode}), nothing left running")
    step("passed")


SDK_CLIENT = """
import json, sys, trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
async def main():
    url, headers = sys.argv[1], json.loads(sys.argv[2])
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            assert {"read", "bash", "grep"} <= {t.name for t in tools.tools}, tools
            result = await client.call_tool("bash", {"cmd": "echo sdk-ok"})
            assert not result.is_error and "sdk-ok" in json.dumps(result.model_dump()), result
trio.run(main)
"""


def sdk_client(python: str, url: str, headers: dict[str, str]) -> None:
    done = subprocess.run([python, "-c", SDK_CLIENT, url, json.dumps(headers)], capture_output=True, text=True,
                          timeout=BOUND_S)
    if done.returncode != 0:
        fail(f"the MCP SDK client failed: {done.stderr.strip()[-600:]}")


if __name__ == "__main__":
    main()
