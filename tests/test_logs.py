"""Log lines under journald, and the log level as a choice: real processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.mcp.transports.http import REFUSAL_LOG_INTERVAL_S
from jeeves_mcp.supervisor.store import SCHEMA_VERSION
from tests._child import pruner_argv, stop_process_group
from tests.test_slot_store import old_store

PREFIXED = re.compile(r"^<([0-7])>(.*)$")


def journal_env(stderr: Path, matching: bool = True) -> dict[str, str]:
    """The environment systemd gives a service whose stderr is the journal: JOURNAL_STREAM
    names that stream's device and inode (here a file stands in for journald's socket)."""
    status = os.stat(stderr)
    named = f"{status.st_dev}:{status.st_ino}" if matching else f"{status.st_dev}:{status.st_ino + 1}"
    env = {k: v for k, v in os.environ.items() if k != "JEEVES_MCP_TOKEN"}
    return {**env, "JOURNAL_STREAM": named}


async def run_child_and_warn(
    workspace: Path, stderr_path: Path, env: dict[str, str], hosts: list[bytes] | None = None
) -> list[str]:
    """Start a pruner child, make it log a warning (a foreign Host, or each of `hosts` sent
    in turn), stop it; its stderr lines."""
    with stderr_path.open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            pruner_argv(workspace, "--port", "0"), stdout=subprocess.PIPE, stderr=stderr, env=env,
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        with trio.fail_after(20):
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(4096)
                assert chunk, lines_of(stderr_path)
                line += chunk
        url = json.loads(line)["url"]
        # A connection per request: the listener lets go of a connection that carries no
        # token once its header deadline passes, and a loaded machine can reach it mid-loop.
        no_reuse = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=no_reuse) as http:
            for host in hosts or [b"evil.example"]:
                refused = await http.post(url, json={}, headers={"Host": host})
                assert refused.status_code == 421
    finally:
        with trio.CancelScope(shield=True):
            await stop_process_group(process)
    return lines_of(stderr_path)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def test_under_journald_every_line_carries_its_priority(workspace: Path, tmp_path: Path) -> None:
    stderr_path = tmp_path / "journal"
    stderr_path.touch()
    lines = await run_child_and_warn(workspace, stderr_path, journal_env(stderr_path))
    priorities: dict[str, int] = {}
    for line in lines:
        match = PREFIXED.match(line)
        assert match, line
        priorities[json.loads(match[2])["event"]] = int(match[1])
    assert priorities["pruner.ready"] == 6
    assert priorities["http.host_rejected"] == 4  # `journalctl -p warning` shows it


async def test_a_stderr_that_is_not_the_journal_gets_plain_json(workspace: Path, tmp_path: Path) -> None:
    """JOURNAL_STREAM inherited, stderr redirected elsewhere: no prefixes."""
    stderr_path = tmp_path / "redirected"
    stderr_path.touch()
    lines = await run_child_and_warn(workspace, stderr_path, journal_env(stderr_path, matching=False))
    assert lines and all(json.loads(line)["event"] for line in lines)


async def test_the_daemons_last_words_are_an_error_under_journald(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    old_store(state / "slots.sqlite3", SCHEMA_VERSION + 1)  # the daemon refuses to start on it
    stderr_path = tmp_path / "journal"
    stderr_path.touch()
    with stderr_path.open("ab") as stderr, trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, "-m", "jeeves_mcp", "daemon", "--state-dir", str(state),
             "--socket", str(tmp_path / "d.sock")],
            stdout=subprocess.DEVNULL, stderr=stderr, env=journal_env(stderr_path), check=False,
        )
    assert done.returncode == 1
    last = lines_of(stderr_path)[-1]
    assert last.startswith("<3>jeeves-mcp daemon: ") and last.endswith("[STORE_TOO_NEW]"), last


async def test_refused_hosts_from_anyone_cannot_flood_the_log(workspace: Path, tmp_path: Path) -> None:
    """Attack T3: any local user, no token needed, sent 80 foreign Host headers of 15 KB and
    rotated a child's whole log away; a C1 control (CSI) in one reached `jeeves-mcp logs`."""
    stderr_path = tmp_path / "stderr"
    stderr_path.touch()
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    started = trio.current_time()
    lines = await run_child_and_warn(workspace, stderr_path, env, [b"\x9b31m" + b"x" * 15_000] * 200)
    elapsed = trio.current_time() - started
    refused = [json.loads(line) for line in lines if '"http.host_rejected"' in line]
    windows = 1 + int(elapsed // REFUSAL_LOG_INTERVAL_S)  # at most one line per window
    assert 1 <= len(refused) <= windows + 1, (len(refused), elapsed)
    assert all(len(entry["host"]) < 300 for entry in refused), refused
    assert refused[0]["suppressed"] == 0  # the next line, a window later, counts the rest
    assert stderr_path.stat().st_size < 64 * 1024
    assert not any(0x7F <= ord(c) <= 0x9F for c in stderr_path.read_text()), "a C1 control reached the log"
    assert refused[0]["host"].startswith("\x9b31m")  # escaped in the line, intact once parsed


@pytest.mark.parametrize("command", ["daemon", "pruner"])
async def test_a_log_level_typo_is_a_usage_error(command: str, tmp_path: Path) -> None:
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, "-m", "jeeves_mcp", command, "--log-level", "warn", "--state-dir", str(tmp_path)]
            if command == "daemon" else [sys.executable, "-m", "jeeves_mcp", command, "--log-level", "warn", "--stdio"],
            stdin=b"", capture_stdout=True, capture_stderr=True, check=False,
        )
    assert done.returncode == 2
    message = done.stderr.decode()
    assert "'warn' is not one of" in message and "'warning'" in message, message
