"""Paths no file can have are the caller's error, not a bug (attack review F7).

A symlink loop, an over-long name and a lone surrogate (JSON allows `\\ud800`, no file name or
argv can hold one) gave INTERNAL with a logged stack from `read`, `grep` and `bash`; each is a
structured INVALID_REQUEST through a real child, and the child logs no `tool.internal_error`.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from jeeves_mcp.tools.base import path_error
from tests._child import Child, running_child, tool_json

KINDS = {
    "loop": ("loop1/x", "too many levels of symbolic links"),
    "long_name": ("a" * 5000, "too long"),
    "long_path": ("d" + "/a" * 3000, "too long"),
    # Longer than any path the kernel takes, though it resolves to a short one: resolving it
    # first cost time growing with the square of its length, in the event loop (a 4 MB one
    # held every call and health check of the child for 80 s).
    "long_walk": ("d/../" * 100_000 + "x", "too long"),
    "surrogate": ("x/\ud800", "not valid Unicode"),
}


async def call(http: httpx.AsyncClient, child: Child, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    # Escaped as JSON allows (`\\ud800`): httpx's own encoder would refuse a lone surrogate.
    headers = {**child.headers(), "Content-Type": "application/json"}
    reply = (await http.post(f"{child.base}/rpc", content=json.dumps(body), headers=headers)).json()
    return {**tool_json(reply["result"]), "isError": reply["result"].get("isError", False)}


@pytest.fixture
def looping_root(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    return root


@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_impossible_path_is_invalid_request_in_every_tool(looping_root: Path, tmp_path: Path,
                                                                    kind: str) -> None:
    path, says = KINDS[kind]
    calls = [("read", {"path": path}), ("grep", {"pattern": "x", "paths": [path]}),
             ("bash", {"cmd": "pwd", "cwd": path})]
    async with running_child(looping_root, tmp_path) as child, httpx.AsyncClient(timeout=20) as http:
        for name, arguments in calls:
            result = await call(http, child, name, arguments)
            assert result["isError"] and result["code"] == "INVALID_REQUEST", (name, result)
            assert says in result["message"], (name, result)
            assert len(json.dumps(result)) < 2000, (name, result)  # the long path is not echoed
        logged = [e for e in child.log_events() if e.get("event") == "tool.internal_error"]
    assert logged == []


async def test_a_lone_surrogate_in_a_command_or_pattern_is_invalid_request(looping_root: Path,
                                                                           tmp_path: Path) -> None:
    calls = [("bash", {"cmd": "echo \ud800"}, "cmd"), ("bash", {"cmd": "env", "env": {"A": "\udfff"}}, "env"),
             ("grep", {"pattern": "\ud800"}, "pattern")]
    async with running_child(looping_root, tmp_path) as child, httpx.AsyncClient(timeout=20) as http:
        for name, arguments, field in calls:
            result = await call(http, child, name, arguments)
            assert result["isError"] and result["code"] == "INVALID_REQUEST", (name, result)
            assert result["message"] == f"{field} is not valid Unicode (a lone surrogate)", result
        logged = [e for e in child.log_events() if e.get("event") == "tool.internal_error"]
    assert logged == []


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE])
def test_a_child_out_of_descriptors_is_overloaded_not_a_missing_file(code: int) -> None:
    # A read that could not open its file for want of descriptors said "no such file".
    error = path_error(OSError(code, os.strerror(code)), "notes.md")
    assert error.code == "QUEUE_OVERLOADED" and "out of file descriptors" in error.message, error
