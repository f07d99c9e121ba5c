"""Arguments longer than the kernel passes to a process are the caller's error, not a bug.

Linux refuses one argv string or environment entry over 128 KiB (MAX_ARG_STRLEN), and an
argv and environment over ARG_MAX together, with E2BIG: a long bash `cmd`, `env` value or
grep `pattern` gave INTERNAL with a logged stack. Each is INVALID_REQUEST naming what is
too long, through a real child.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.mcp.errors import McpError, ToolError
from jeeves_mcp.tools.bash import sanitized_env
from tests._child import running_child
from tests.test_path_errors import call

BOUND_S = 60
LONG = 200_000  # bytes: over 131,072, the kernel's limit for one string

CALLS = {
    "cmd": ("bash", {"cmd": "echo " + "x" * LONG}),
    "env.BIG": ("bash", {"cmd": "echo ok", "env": {"BIG": "z" * LONG}}),
    "pattern": ("grep", {"pattern": "needle|" + "y" * LONG}),
    "glob": ("grep", {"pattern": "needle", "glob": "*" + "g" * LONG}),
}


@pytest.mark.parametrize("without_rg", [False, True], ids=["rg", "builtin"])
async def test_an_argument_longer_than_the_kernel_takes_is_invalid_request(
    workspace: Path, tmp_path: Path, without_rg: bool
) -> None:
    async with running_child(workspace, tmp_path, without_rg=without_rg) as child, \
            httpx.AsyncClient(timeout=BOUND_S + 10, headers=child.headers()) as http:
        for field, (name, arguments) in CALLS.items():
            with trio.fail_after(BOUND_S):
                result = await call(http, child, name, arguments)
            assert result["isError"] and result["code"] == "INVALID_REQUEST", (field, result)
            assert result["message"].startswith(f"{field} is too long: "), (field, result["message"])
            assert "131,071" in result["message"], result["message"]
        for name, arguments in (("bash", {"cmd": "echo a\x00b"}), ("grep", {"pattern": "a\x00b"})):
            refused = await call(http, child, name, arguments)  # exec's strings end at a NUL
            assert refused["isError"] and refused["code"] == "INVALID_REQUEST", refused
            assert "NUL" in refused["message"], refused
        ran = await call(http, child, "bash", {"cmd": "echo ok", "env": {"FITS": "z" * 131_000}})
        assert not ran["isError"] and ran["stdout"] == "ok\n", ran
        logged = [e for e in child.log_events() if e.get("event") == "tool.internal_error"]
    assert logged == []


async def test_a_command_and_environment_over_arg_max_together_is_invalid_request(
    workspace: Path, tmp_path: Path
) -> None:
    # Each variable fits; together they are 3.6 MB (under the 4 MiB body limit).
    env = {f"V{index}": "v" * 100_000 for index in range(36)}
    if os.sysconf("SC_ARG_MAX") >= 3_600_000:
        pytest.skip(f"ARG_MAX is {os.sysconf('SC_ARG_MAX')} here (an unlimited stack): 3.6 MB fits")
    async with running_child(workspace, tmp_path) as child, \
            httpx.AsyncClient(timeout=BOUND_S + 10, headers=child.headers()) as http:
        with trio.fail_after(BOUND_S):
            result = await call(http, child, "bash", {"cmd": "echo ok", "env": env})
        assert result["isError"] and result["code"] == "INVALID_REQUEST", result
        assert "together" in result["message"], result["message"]
        logged = [e for e in child.log_events() if e.get("event") == "tool.internal_error"]
    assert logged == []


@pytest.mark.parametrize("name", ["A=" + "n" * LONG, "BASH_FUNC_" + "n" * LONG, "N" * LONG],
                         ids=["invalid", "function", "long"])
def test_a_long_variable_name_is_not_echoed_whole(name: str) -> None:
    with pytest.raises((McpError, ToolError)) as refused:
        sanitized_env((), {name: "value"})
    assert len(json.dumps(getattr(refused.value, "data", None))) + len(str(refused.value)) < 1000, refused.value
