"""Start a real pruner child process for a test and make sure it is gone after."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

START_TIMEOUT_S = 20


@dataclass
class Child:
    process: trio.Process
    url: str
    port: int
    token: str | None
    stderr_path: Path

    @property
    def base(self) -> str:
        return self.url.removesuffix("/mcp")

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def log_events(self) -> list[dict]:
        events = []
        for line in self.stderr_path.read_text().splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events


def tool_json(result: dict[str, Any]) -> dict[str, Any]:
    """The JSON a tool result carries: content[0].text (there is no structuredContent)."""
    assert "structuredContent" not in result, result
    value: dict[str, Any] = json.loads(result["content"][0]["text"])
    return value


def processes_whose(field: str, holds: Callable[[bytes], bool]) -> list[int]:
    """Pids whose /proc/PID/`field` (cmdline, environ) `holds` what a test looks for."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/{field}", "rb") as handle:
                if holds(handle.read()):
                    found.append(int(name))
        except OSError:
            continue
    return found


def with_cmdline(marker: str) -> list[int]:
    """Pids whose command line holds `marker` (an argument unique to one test)."""
    wanted = marker.encode()
    return processes_whose("cmdline", lambda data: wanted in data.replace(b"\0", b" "))


def kill_all(pids: list[int]) -> None:
    """SIGKILL what a failing test left behind."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# `python -m jeeves_mcp` with ripgrep out of reach, so the grep tool takes its built-in search
# (rg is a dependency, found beside the interpreter whatever PATH says).
WITHOUT_RG = ("import runpy, jeeves_mcp.tools.grep as grep; grep.find_rg = lambda: None; "
              "runpy.run_module('jeeves_mcp', run_name='__main__', alter_sys=True)")


def pruner_argv(root: Path, *extra: str, without_rg: bool = False) -> list[str]:
    start = ["-c", WITHOUT_RG] if without_rg else ["-m", "jeeves_mcp"]
    return [sys.executable, *start, "pruner", "--root", str(root), *extra]


@asynccontextmanager
async def running_child(
    root: Path, tmp: Path, *, token: str | None = "test-token", env: dict[str, str] | None = None,
    without_rg: bool = False, nofile: int | None = None, extra: tuple[str, ...] = (),
) -> AsyncIterator[Child]:
    """`nofile`: the child's soft RLIMIT_NOFILE (systemd's default is 1024), its hard one kept;
    `extra`: more `pruner` arguments."""
    # A start that fails shows its traceback, not the CLI's one line (a flake is then legible).
    child_env = {**os.environ, "JEEVES_MCP_DEBUG": "1", **(env or {})}
    child_env.pop("JEEVES_MCP_TOKEN", None)
    if token:
        child_env["JEEVES_MCP_TOKEN"] = token
    stderr_path = tmp / f"child-{os.urandom(3).hex()}.log"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            pruner_argv(root, "--port", "0", *extra, without_rg=without_rg),
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=child_env,
            start_new_session=True,
            preexec_fn=None if nofile is None else lambda: _limit_descriptors(nofile),
        )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(START_TIMEOUT_S):
            while b"\n" not in buffer:
                chunk = await process.stdout.receive_some(4096)
                if not chunk:
                    raise RuntimeError(f"child exited before ready: {stderr_path.read_text()[-2000:]}")
                buffer += chunk
        ready = json.loads(buffer.split(b"\n", 1)[0])
        assert ready["event"] == "ready"
        yield Child(process, ready["url"], ready["port"], token, stderr_path)
    finally:
        with trio.CancelScope(shield=True):
            await stop_process_group(process)


def _limit_descriptors(soft: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


async def stop_process_group(process: trio.Process, grace_s: float = 5.0) -> None:
    """SIGTERM the child's group, SIGKILL what is left after `grace_s`."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    with trio.move_on_after(grace_s):
        await process.wait()
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    await process.wait()
