"""The jeeves-mcp CLI as an operator and a runner meet it: the real command, a real daemon."""

from __future__ import annotations

import datetime
import io
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from rich.console import Console

from jeeves_mcp.cli._config import codex_table, merge_codex_toml
from jeeves_mcp.cli._doctor import Check, render_checks
from jeeves_mcp.cli._render import format_event, new_lines, render_slot, render_slots
from tests._daemon import Daemon
from tests.fake_swe_pruner import refused_endpoint, running_fake


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def cli_env(socket: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JEEVES_", "NOTIFY_SOCKET", "COLUMNS"))}
    env.update({"JEEVES_MCP_SOCKET": str(socket), "COLUMNS": "120", **(extra or {})})
    return env


async def cli(socket: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    """Run `jeeves-mcp ARGS` as a process (stdout and stderr are pipes, not a terminal)."""
    done = await trio.run_process(
        [sys.executable, "-m", "jeeves_mcp", *args], capture_stdout=True, capture_stderr=True,
        check=False, env=cli_env(socket, env), stdin=subprocess.DEVNULL,
    )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


async def acquired(daemon: Daemon, run_id: str, root: Path, *extra: str) -> dict[str, Any]:
    result = await cli(daemon.socket, "acquire", run_id, "--root", str(root), "--json", *extra)
    assert result.code == 0, result.err
    return result.json()


# -- slots ---------------------------------------------------------------------


async def test_acquire_ls_show_logs_renew_release(daemon: Daemon, run_root: Path) -> None:
    slot = await acquired(daemon, "run-1", run_root, "--ttl", "600", "--label", "issue=5", "--env", "A=1")
    assert slot["state"] == "running" and slot["run_id"] == "run-1"
    assert slot["mcp"]["url"] == f"http://127.0.0.1:{slot['port']}/mcp"
    token = slot["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
    assert len(token) > 20 and slot["labels"] == {"issue": "5"} and slot["expires_at"]

    human = await cli(daemon.socket, "acquire", "run-1", "--root", str(run_root))
    assert human.code == 0 and human.err == ""  # piped: no spinner, no warning
    assert slot["mcp"]["url"] in human.out and token not in human.out

    listed = await cli(daemon.socket, "ls", "--json")
    assert listed.code == 0
    assert [(s["run_id"], s["port"], s["pid"]) for s in listed.json()["slots"]] == [
        ("run-1", slot["port"], slot["pid"])]
    table = await cli(daemon.socket, "ls")
    header, row = table.out.splitlines()
    footer, = table.err.splitlines()  # a note, not a row
    assert footer.startswith("fork server up (pid ") and footer.endswith("1 child forked")
    assert header.split() == ["run", "state", "pid", "port", "age", "restarts", "expires"]
    assert row.split()[:4] == ["run-1", "running", str(slot["pid"]), str(slot["port"])]
    assert row.split()[-2] == "in"  # expires in 9m..s

    shown = await cli(daemon.socket, "show", "run-1", "--json")
    assert shown.json()["mcp"] == slot["mcp"]
    shown_human = await cli(daemon.socket, "show", "run-1")
    assert "issue=5" in shown_human.out and token not in shown_human.out and "••••" in shown_human.out

    logs = await cli(daemon.socket, "logs", "run-1", "--tail", "3")
    assert logs.code == 0 and 0 < len(logs.out.splitlines()) <= 3
    assert all(json.loads(line)["event"] for line in logs.out.splitlines())

    renewed = await cli(daemon.socket, "renew", "run-1", "--ttl", "60", "--json")
    assert renewed.code == 0 and renewed.json()["expires_at"] < slot["expires_at"]

    released = await cli(daemon.socket, "release", "run-1", "--json")
    assert released.code == 0
    assert released.json()["state"] == "shutdown" and released.json()["mcp"] is None
    assert (await cli(daemon.socket, "ls", "--json")).json() == {"slots": []}
    assert "no slots" in (await cli(daemon.socket, "ls")).err
    assert daemon.our_processes() == []
    # A released run's logs stay readable.
    assert "pruner.stopped" in (await cli(daemon.socket, "logs", "run-1")).out


async def test_release_many_and_all(daemon: Daemon, run_root: Path) -> None:
    for run_id in ("a", "b", "c"):
        await acquired(daemon, run_id, run_root)
    some = await cli(daemon.socket, "release", "a", "nope", "--json")
    assert some.code == 1
    assert [s["run_id"] for s in some.json()["slots"]] == ["a"]
    assert [(e["run_id"], e["code"]) for e in some.json()["errors"]] == [("nope", "NOT_FOUND")]
    assert some.err.strip() == "jeeves-mcp release: cannot release nope: no slot for run 'nope' [NOT_FOUND]"

    everything = await cli(daemon.socket, "release", "--all", "--json")
    assert everything.code == 0 and everything.err == ""
    assert sorted((s["run_id"], s["state"]) for s in everything.json()["slots"]) == [
        ("b", "shutdown"), ("c", "shutdown")]
    assert daemon.our_processes() == []
    nothing = await cli(daemon.socket, "release", "--all")
    assert (nothing.code, nothing.out, nothing.err) == (0, "", "no slots to release\n"), nothing  # `| xargs` gets no run
    assert (await cli(daemon.socket, "release")).code == 2  # neither RUN_ID nor --all


async def test_logs_follow_ends_when_the_slot_is_released(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    await acquired(daemon, "run-f", run_root)
    output = tmp_path / "follow.out"
    with output.open("wb") as out:
        follow = await trio.lowlevel.open_process(
            [sys.executable, "-m", "jeeves_mcp", "logs", "run-f", "-f", "--tail", "0"], stdout=out,
            stderr=subprocess.STDOUT, env=cli_env(daemon.socket))
    try:
        async with daemon.client() as control:
            await control.release("run-f")
        with trio.fail_after(30):
            assert await follow.wait() == 0
    finally:
        with trio.CancelScope(shield=True):
            if follow.returncode is None:
                follow.kill()
            await follow.wait()
    # The child's last words arrived through the follow loop, each line once.
    assert output.read_text().count('"pruner.stopped"') == 1


# -- events --------------------------------------------------------------------


async def read_line(stream: trio.abc.ReceiveStream, buffer: bytearray) -> str:
    while b"\n" not in buffer:
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError(bytes(buffer).decode())
        buffer.extend(chunk)
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line.decode()


async def test_events_stream_until_the_daemon_stops(daemon: Daemon, run_root: Path) -> None:
    await acquired(daemon, "run-e", run_root)
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "jeeves_mcp", "events", "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=cli_env(daemon.socket))
    try:
        assert process.stdout is not None
        buffer = bytearray()
        async with daemon.client() as control:
            with trio.fail_after(30):
                # The daemon keeps no history: renew until the stream shows we are subscribed.
                while True:
                    await control.renew("run-e", 60)
                    with trio.move_on_after(0.5):
                        first = json.loads(await read_line(process.stdout, buffer))
                        break
        assert (first["event"], first["run_id"]) == ("mcp_pruner.renewed", "run-e")
        os.kill(daemon.process.pid, signal.SIGTERM)
        names = []
        with trio.fail_after(30):
            try:
                while True:
                    names.append(json.loads(await read_line(process.stdout, buffer))["event"])
            except EOFError:
                pass
            assert await process.wait() == 0  # without -f, the end of the daemon ends the stream
        assert "daemon.stopping" in names and "mcp_pruner.stopped" in names
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()


async def test_events_count_and_run_filter(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    await acquired(daemon, "x", run_root)
    await acquired(daemon, "y", run_root)
    output = tmp_path / "events.out"
    with output.open("wb") as out:
        watcher = await trio.lowlevel.open_process(
            [sys.executable, "-m", "jeeves_mcp", "events", "--run", "y", "--count", "2"],
            stdout=out, stderr=subprocess.STDOUT, env=cli_env(daemon.socket))
    try:
        async with daemon.client() as control:
            with trio.fail_after(30):
                while watcher.returncode is None:  # the daemon keeps no history: make events until seen
                    await control.renew("x", 60)  # filtered out
                    await control.renew("y", 60)
                    with trio.move_on_after(0.3):
                        await watcher.wait()
    finally:
        with trio.CancelScope(shield=True):
            if watcher.returncode is None:
                watcher.kill()
            await watcher.wait()
    assert watcher.returncode == 0
    lines = output.read_text().splitlines()
    assert len(lines) == 2 and all(" mcp_pruner.renewed y expires_at=" in line for line in lines)


async def test_events_without_daemon_exits_3(tmp_path: Path) -> None:
    result = await cli(tmp_path / "none.sock", "events")
    assert result.code == 3 and "jeeves-mcp daemon" in result.err


# -- errors and exit codes -------------------------------------------------------


async def test_no_daemon_is_one_line_and_exit_3(tmp_path: Path) -> None:
    socket = tmp_path / "nobody-home.sock"
    for args in (["ls"], ["show", "r"], ["acquire", "r", "--root", str(tmp_path)], ["release", "r"],
                 ["config", "claude", "r"], ["logs", "r"]):
        result = await cli(socket, *args)
        assert result.code == 3, (args, result)
        assert result.out == ""
        line, = result.err.splitlines()
        assert line.startswith(f"jeeves-mcp {' '.join(args[:2]) if args[0] == 'config' else args[0]}: ")
        # On the socket asked for (a plain `jeeves-mcp daemon` may listen elsewhere).
        assert f"start it with `jeeves-mcp daemon --socket {socket}`" in line, line
    debug = await cli(socket, "--debug", "ls")
    assert debug.code == 3 and "Traceback" in debug.err and "DaemonUnavailable" in debug.err


async def test_request_errors_and_usage_errors(daemon: Daemon, run_root: Path) -> None:
    missing = await cli(daemon.socket, "show", "nope")
    assert (missing.code, missing.err) == (1, "jeeves-mcp show: cannot show nope: no slot for run 'nope' [NOT_FOUND]\n")
    bad_id = await cli(daemon.socket, "acquire", "bad id", "--root", str(run_root))
    assert bad_id.code == 2 and "[INVALID_REQUEST]" in bad_id.err and "Traceback" not in bad_id.err
    bad_env = await cli(daemon.socket, "acquire", "r", "--root", str(run_root), "--env", "NOEQUALS")
    assert bad_env.code == 2 and "KEY=VALUE" in bad_env.err
    no_root = await cli(daemon.socket, "acquire", "r", "--root", str(run_root / "absent"))
    assert no_root.code == 2
    assert (await cli(daemon.socket, "ls", "--json")).json() == {"slots": []}


async def test_reacquire_with_another_root_is_one_line_conflict(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    await acquired(daemon, "twice", run_root)
    other = tmp_path / "elsewhere"
    other.mkdir()
    result = await cli(daemon.socket, "acquire", "twice", "--root", str(other))
    assert result.code == 1 and result.out == ""
    line, = result.err.splitlines()
    assert line.startswith("jeeves-mcp acquire: ") and line.endswith(" [CONFLICT]")
    assert f"root {run_root} (not {other})" in line
    assert (await cli(daemon.socket, "release", "twice")).code == 0


USAGE_ERRORS = [
    (["acquire", "r"], "jeeves-mcp acquire: bad usage: --root is required"),
    (["acquire", "r", "--root", "/nonexistent/run"], "--root: directory '/nonexistent/run' does not exist"),
    (["acquire", "r", "--root", "/tmp", "--ttl", "-5"], "jeeves-mcp acquire: bad usage: --ttl must be more than 0 and at most 604,800, not -5"),
    # inf passed the minimum and crashed the JSON encoder ('internal error'; the review of 2026-11-29)
    (["acquire", "r", "--root", "/tmp", "--ttl", "inf"], "jeeves-mcp acquire: bad usage: --ttl must be"),
    (["renew", "r", "--ttl", "1e400"], "jeeves-mcp renew: bad usage: --ttl must be"),
    (["ls", "--bogus"], "jeeves-mcp ls: bad usage: unknown option --bogus"),
    (["logs", "r", "--tail", "-1"], "jeeves-mcp logs: bad usage: --tail must be from 0 to 10000, not -1"),
    (["events", "--count=0"], "jeeves-mcp events: bad usage: --count must be at least 1, not 0"),
    (["nosuchcommand"], "jeeves-mcp: bad usage: no such command 'nosuchcommand'"),
]


async def test_usage_errors_are_one_line_in_our_words(tmp_path: Path) -> None:
    for args, expected in USAGE_ERRORS:
        result = await cli(tmp_path / "none.sock", *args)
        assert (result.code, result.out) == (2, ""), (args, result)
        line, = result.err.splitlines()
        assert line.startswith("jeeves-mcp") and line.endswith(" [USAGE]"), line
        assert expected in line, (expected, line)
        assert "Input should" not in line and "╭" not in line


async def test_help_documents_exit_codes(tmp_path: Path) -> None:
    result = await cli(tmp_path / "x.sock", "--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    for phrase in ("0 ok", "1 the daemon refused", "2 bad usage", "3 the daemon is not running", "--socket",
                   "--debug", "--install-completion"):
        assert phrase in text, phrase


# -- client configurations -----------------------------------------------------


async def test_config_claude(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    slot = await acquired(daemon, "run-c", run_root)
    token = slot["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
    printed = await cli(daemon.socket, "config", "claude", "run-c")
    assert printed.code == 0
    assert printed.json() == {"mcpServers": {"jeeves": {
        "type": "http", "url": slot["mcp"]["url"],
        "headers": {"Authorization": "Bearer ${JEEVES_MCP_TOKEN}"}}}}
    assert token not in printed.out
    assert printed.err.splitlines()[-1] == f"export JEEVES_MCP_TOKEN={token}"

    target = tmp_path / "project" / ".mcp.json"
    target.parent.mkdir()
    target.write_text(json.dumps({"mcpServers": {"other": {"type": "stdio", "command": "x"}}}))
    written = await cli(daemon.socket, "config", "claude", "run-c", "--write", str(target),
                        "--name", "pruner", "--token-env", "RUN_C_TOKEN")
    assert written.code == 0 and written.out == ""
    document = json.loads(target.read_text())
    assert document["mcpServers"]["other"] == {"type": "stdio", "command": "x"}
    assert document["mcpServers"]["pruner"]["headers"] == {"Authorization": "Bearer ${RUN_C_TOKEN}"}
    assert token not in target.read_text()
    assert (await cli(daemon.socket, "config", "claude", "run-c", "--export")).out == f"export JEEVES_MCP_TOKEN={token}\n"
    assert (await cli(daemon.socket, "config", "claude", "run-c", "--name", "a b")).code == 2
    assert (await cli(daemon.socket, "config", "claude", "run-c", "--token-env", "1X")).code == 2


async def test_config_codex(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    slot = await acquired(daemon, "run-x", run_root)
    token = slot["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
    printed = await cli(daemon.socket, "config", "codex", "run-x")
    assert printed.code == 0 and token not in printed.out
    expected = {"url": slot["mcp"]["url"], "bearer_token_env_var": "JEEVES_MCP_TOKEN"}
    assert tomllib.loads(printed.out) == {"mcp_servers": {"jeeves": expected}}
    assert f"export JEEVES_MCP_TOKEN={token}" in printed.err

    overrides = shlex.split((await cli(daemon.socket, "config", "codex", "run-x", "--overrides")).out)
    assert overrides[0::2] == ["-c", "-c"]
    merged: dict[str, Any] = {}
    for override in overrides[1::2]:  # what codex does with -c key=value: the value is TOML
        key, _, value = override.partition("=")
        node = merged
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = tomllib.loads(f"v = {value}")["v"]
    assert merged == {"mcp_servers": {"jeeves": expected}}
    assert " ".join(["codex", shlex.join(overrides)]) in printed.out  # the same, as a comment

    config = tmp_path / "config.toml"
    config.write_text('model = "o3"  # keep me\n\n[mcp_servers.jeeves]\nurl = "http://old/mcp"\n'
                      'bearer_token_env_var = "OLD"\n\n[mcp_servers.jeeves.env_http_headers]\nX = "Y"\n\n'
                      '[mcp_servers.other]\ncommand = "x"\n')
    written = await cli(daemon.socket, "config", "codex", "run-x", "--write", str(config))
    assert written.code == 0
    parsed = tomllib.loads(config.read_text())
    assert parsed == {"model": "o3", "mcp_servers": {"jeeves": expected, "other": {"command": "x"}}}
    assert "# keep me" in config.read_text() and token not in config.read_text()
    # A config.toml whose mcp_servers is no table is the operator's to fix: it crashed the merge
    # ('internal error: TypeError'; the operator review of 2026-11-29).
    for spelled in ("mcp_servers = 3\n", "mcp_servers = [1]\n"):
        config.write_text(spelled)
        refused = await cli(daemon.socket, "config", "codex", "run-x", "--write", str(config))
        assert refused.code == 1 and "mcp_servers is a" in refused.err and "internal error" not in refused.err, refused
        assert config.read_text() == spelled


NEW_SERVER = {"url": "http://127.0.0.1:9/mcp", "bearer_token_env_var": "JEEVES_MCP_TOKEN"}


@pytest.mark.parametrize(("existing", "others"), [
    # Each spelling TOML allows for the old server, which a regex over [headers] missed.
    ('[mcp_servers]\njeeves = { url = "old" }\nother.command = "x"  # mine\n', {"other": {"command": "x"}}),
    ('mcp_servers.jeeves.url = "old"\nmodel = "o3"  # mine\n', {}),
    ('mcp_servers.other.command = "x"\nmodel = "o3"  # mine\n', {"other": {"command": "x"}}),
    ('model = "o3"  # mine\nmcp_servers = { other = { command = "x" }, jeeves = { url = "old" } }\n',
     {"other": {"command": "x"}}),
    ('[mcp_servers."jeeves"]\nurl = "old"\n[mcp_servers.jeeves.env_http_headers]\nX = "Y"\n'
     '[profile]  # mine\na = 1\n', {}),
])
def test_codex_merge_replaces_the_server_however_it_is_spelled(existing: str, others: dict[str, Any]) -> None:
    merged = merge_codex_toml(existing, "jeeves", codex_table(NEW_SERVER["url"], "jeeves", "JEEVES_MCP_TOKEN"))
    parsed = tomllib.loads(merged)
    assert parsed["mcp_servers"] == {**others, "jeeves": NEW_SERVER}
    before = tomllib.loads(existing)
    before.pop("mcp_servers")
    assert {k: v for k, v in parsed.items() if k != "mcp_servers"} == before  # the rest untouched
    assert "# mine" in merged


async def test_config_agent_sdk(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    slot = await acquired(daemon, "run-s", run_root)
    printed = await cli(daemon.socket, "config", "agent-sdk", "run-s", "--name", "prune")
    assert printed.code == 0
    assert printed.json() == {"prune": {"type": "http", "url": slot["mcp"]["url"], "headers": slot["mcp"]["headers"]}}
    target = tmp_path / "servers.json"
    assert (await cli(daemon.socket, "config", "agent-sdk", "run-s", "--write", str(target))).code == 0
    assert json.loads(target.read_text())["jeeves"]["headers"] == slot["mcp"]["headers"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # it holds the token


async def test_config_write_into_a_missing_directory_is_an_error(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    await acquired(daemon, "run-w", run_root)
    for client in ("claude", "codex", "agent-sdk"):
        target = tmp_path / "absent" / "dir" / "x.json"
        result = await cli(daemon.socket, "config", client, "run-w", "--write", str(target))
        assert (result.code, result.out) == (2, ""), result
        assert result.err.splitlines() == [
            f"jeeves-mcp config {client}: cannot write {target}: no directory {target.parent} "
            "(create it first) [USAGE]"]
        assert not (tmp_path / "absent").exists()


async def test_config_of_a_slot_without_endpoint_fails(daemon: Daemon, run_root: Path) -> None:
    async with daemon.client() as control:
        off = await control.acquire("run-off", run_root, enabled=False)
    assert off["state"] == "disabled"
    result = await cli(daemon.socket, "config", "codex", "run-off")
    assert result.code == 1 and result.out == ""
    assert "run-off is disabled" in result.err and "no MCP endpoint" in result.err
    warned = await cli(daemon.socket, "acquire", "run-off", "--root", str(run_root))
    assert warned.code == 0 and "warning: slot run-off is disabled" in warned.err


# -- doctor --------------------------------------------------------------------


def checks_by_name(result: Result) -> dict[str, dict[str, str]]:
    return {check["name"]: check for check in result.json()["checks"]}


async def test_doctor_with_a_daemon_and_a_pruner_service(daemon: Daemon) -> None:
    async with running_fake() as fake:
        result = await cli(daemon.socket, "doctor", "--json", "--state-dir", str(daemon.state_dir),
                           env={"JEEVES_PRUNER_ENDPOINT": fake.endpoint})
    checks = checks_by_name(result)
    assert set(checks) == {"python", "children", "socket", "daemon", "fork server", "store", "state dir",
                           "ripgrep", "git", "pruner endpoint", "systemd unit", "isolation"}
    assert checks["git"]["status"] == ("pass" if shutil.which("git") else "warn")
    assert ("owner" in checks["isolation"]["detail"]) == (os.geteuid() == 0)
    for name in ("python", "children", "socket", "daemon", "store", "state dir", "pruner endpoint"):
        assert checks[name]["status"] == "pass", checks[name]
    assert "0600" in checks["socket"]["detail"]
    assert checks["ripgrep"]["status"] == "pass"  # the ripgrep wheel is a dependency
    assert checks["systemd unit"]["status"] in ("pass", "warn")
    assert result.json()["ok"] is True and result.code == 0


async def test_doctor_asks_the_daemon_for_its_state_dir_and_socket(daemon: Daemon, tmp_path: Path) -> None:
    # The CLI's own guess (state under HOME) differs from the daemon's private state dir.
    result = await cli(daemon.socket, "doctor", "--json", env={"HOME": str(tmp_path / "home")})
    checks = checks_by_name(result)
    assert checks["state dir"]["status"] == "pass", checks["state dir"]
    assert checks["state dir"]["detail"] == f"{daemon.state_dir} is writable (the running daemon's)"
    assert checks["daemon"]["detail"].endswith(f"answers on {daemon.socket} (0 slots)")


async def test_doctor_reports_failures(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o500)
    try:
        result = await cli(tmp_path / "absent.sock", "doctor", "--json", "--state-dir", str(state),
                           env={"JEEVES_PRUNER_ENDPOINT": refused_endpoint()})
    finally:
        state.chmod(0o700)
    checks = checks_by_name(result)
    assert result.code == 1 and result.json()["ok"] is False
    assert checks["socket"]["status"] == "fail" and "start the daemon" in checks["socket"]["detail"]
    # On the socket asked for, not a plain `jeeves-mcp daemon` elsewhere (the operator review of 2026-11-29).
    assert f"jeeves-mcp daemon --socket {tmp_path / 'absent.sock'}" in checks["socket"]["detail"]
    assert "root or root" not in checks["isolation"]["detail"]
    assert checks["daemon"]["status"] == "fail"
    assert checks["pruner endpoint"]["status"] == "fail"
    if os.geteuid() != 0:  # root writes anywhere
        assert checks["state dir"]["status"] == "fail"
    human = await cli(tmp_path / "absent.sock", "doctor")
    assert human.code == 1 and "fail" in human.out and "socket" in human.out


async def test_doctor_flags_a_socket_others_can_use(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "open.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        path.chmod(0o666)
        result = await cli(path, "doctor", "--json", "--state-dir", str(tmp_path))
    finally:
        listener.close()
    socket_check = checks_by_name(result)["socket"]
    assert socket_check["status"] == "fail" and "0666" in socket_check["detail"]


async def test_doctor_accepts_a_socket_for_an_operators_group(tmp_path: Path) -> None:
    """jeeves-mcp.socket's 0660: the socket's group may use it, others may not."""
    import socket

    path = tmp_path / "group.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        path.chmod(0o660)
        result = await cli(path, "doctor", "--json", "--state-dir", str(tmp_path))
    finally:
        listener.close()
    socket_check = checks_by_name(result)["socket"]
    assert socket_check["status"] == "pass" and "0660" in socket_check["detail"], socket_check


# -- rendering (rich into a StringIO) --------------------------------------------


def test_ls_table_rendering() -> None:
    now = datetime.datetime(2026, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)
    slots = [
        {"run_id": "run-b", "state": "degraded", "pid": None, "port": 4101, "restarts": 2,
         "started_at": "2026-01-01T09:55:00.000Z", "expires_at": None},
        {"run_id": "run-a", "state": "running", "pid": 321, "port": 4100, "restarts": 0,
         "started_at": "2026-01-01T11:58:30.000Z", "expires_at": "2026-01-01T12:30:00.000Z"},
    ]
    out = io.StringIO()
    render_slots(slots, Console(file=out, width=100, color_system=None), now)
    assert out.getvalue().splitlines() == [  # no trailing spaces
        "run    state     pid  port    age  restarts  expires",
        "run-b  degraded    —  4101  2h05m         2  never",
        "run-a  running   321  4100  1m30s         0  in 30m00s",
    ]


def test_a_slots_data_is_shown_as_it_is_never_read_as_markup() -> None:
    """Re-check NF1: `show` dropped "[pruner]" from a child's refusal reason, and a run root
    holding "[/x]" failed with a MarkupError after the slot was acquired."""
    slot = {"run_id": "run-a", "state": "disabled", "root": "/srv/ws[/x]/a[bold]b", "restarts": 0,
            "started_at": "2026-01-01T11:58:30.000Z",
            "reason": "start_failed: child refused to start: [pruner] max_concurrent_calls: too small"}
    out = io.StringIO()
    render_slot(slot, Console(file=out, width=200, color_system=None))
    shown = out.getvalue()
    assert "root      /srv/ws[/x]/a[bold]b" in shown, shown
    assert "reason    start_failed: child refused to start: [pruner] max_concurrent_calls: too small" in shown, shown
    out = io.StringIO()
    render_slots([{**slot, "run_id": "run-[b]"}], Console(file=out, width=100, color_system=None))
    assert "run-[b]" in out.getvalue()


def test_doctor_counts_in_good_english() -> None:
    from jeeves_mcp.cli._doctor import check_fork_server

    one = check_fork_server({"fork_server": {"up": True, "pid": 7, "spawns": 1, "starts": 1}})
    many = check_fork_server({"fork_server": {"up": True, "pid": 7, "spawns": 3, "starts": 2}})
    assert one.detail == "pid 7, 1 child forked, started once"
    assert many.detail == "pid 7, 3 children forked, started 2 times"


def test_doctor_says_what_a_restart_does_to_unsaved_runs_by_whether_they_are_noted() -> None:
    """A restart brings unsaved runs back degraded only if unsaved.runs names them: not on a
    copy-on-write filesystem, nor where the note was refused (or the daemon does not say)."""
    from jeeves_mcp.cli._doctor import check_store

    noted = check_store({"store": {"write_failures": 2, "pending": 1, "noted": True}})
    unnoted = check_store({"store": {"write_failures": 1, "pending": 3, "noted": False}})
    older = check_store({"store": {"write_failures": 1, "pending": 3}})
    assert noted.status == unnoted.status == older.status == "warn"
    assert noted.detail == ("1 run record not saved (2 writes failed): is the state dir's disk full? "
                            "They are retried on each write; a restart brings those runs back degraded")
    assert unnoted.detail == ("3 run records not saved (1 write failed): is the state dir's disk full? "
                              "They are retried on each write; a restart may bring released runs back: "
                              "free space before restarting")
    assert older.detail == unnoted.detail


def test_doctor_table_rendering() -> None:
    out = io.StringIO()
    render_checks([Check("python", "pass", "Python 3.11"), Check("ripgrep", "warn", "rg not found")],
                  Console(file=out, width=60, color_system=None))
    assert out.getvalue().splitlines() == [
        "check    status  detail",
        "python   pass    Python 3.11",
        "ripgrep  warn    rg not found",
    ]


def test_event_lines() -> None:
    event = {"seq": 3, "ts": 0.0, "event": "mcp_pruner.ready", "run_id": "r", "state": "running", "pid": 7,
             "reason": None}
    line = format_event(event)
    assert line.endswith(" mcp_pruner.ready r state=running pid=7")


def test_new_lines_of_a_sliding_tail() -> None:
    assert new_lines([], ["a", "b"]) == ["a", "b"]
    assert new_lines(["a", "b", "c"], ["a", "b", "c"]) == []
    assert new_lines(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]
    assert new_lines(["x", "y"], ["p", "q"]) == ["p", "q"]  # rotated past the window
    assert new_lines(["a", "a"], ["a", "a", "a"]) == ["a"]


async def test_a_pruner_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    """An OS error before the ready line (a host that does not resolve, a log file's missing
    directory) was printed as 'internal error: ExceptionGroup ...' (the operator review of
    2026-11-29); the failed line for the daemon stays on stdout."""
    missing_dir = ["--log-file", str(tmp_path / "missing" / "x.log")]
    for args, code in ((["--host", "no-such-host.invalid"], "[FAILED]"), (missing_dir, "[ENOENT]")):
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "jeeves_mcp", "pruner", "--root", str(tmp_path), *args],
                capture_stdout=True, capture_stderr=True, check=False,
            )
        err = done.stderr.decode()
        assert done.returncode == 1 and "jeeves-mcp pruner: cannot start: " in err and "internal error" not in err, err
        assert err.splitlines()[-1].endswith(code), err  # ends with its code, as every CLI error
        assert json.loads(done.stdout.decode().splitlines()[-1])["event"] == "failed"


async def test_a_run_id_no_slot_can_have_is_refused_in_the_daemons_words(daemon: Daemon) -> None:
    # `show bad/id` reached the daemon as a path of two segments: 'no route GET /v1/slots/bad/id
    # [NOT_FOUND]' (the operator review of 2026-11-29).
    for args in (["show", "bad/id"], ["release", "bad/id"], ["logs", "a b"], ["renew", ".x", "--ttl", "5"]):
        result = await cli(daemon.socket, *args)
        assert result.code == 2 and "[INVALID_REQUEST]" in result.err, (args, result)
        assert "starting with a letter or digit" in result.err and "no route" not in result.err, result.err


async def test_pruner_help_keeps_its_bracketed_table_name(tmp_path: Path) -> None:
    # rich read "[pruner]" as markup and dropped it: "TOML file whose  table holds settings".
    result = await cli(tmp_path / "x.sock", "pruner", "--help")
    assert result.code == 0 and "[pruner] table" in " ".join(result.out.split()), result.out


async def test_events_for_a_run_id_no_slot_can_have_is_a_usage_error(tmp_path: Path) -> None:
    """`events --run bad/id` filtered the stream for a run that can never exist and waited
    forever: refused at once, with the rule, as `show` refuses it."""
    with trio.fail_after(20):
        result = await cli(tmp_path / "none.sock", "events", "--run", "bad/id")
    assert result.code == 2 and result.out == ""
    assert "--run: 'bad/id' is no run id: run ids are 1-128 of" in result.err


async def test_a_url_that_is_no_http_url_is_a_usage_error(tmp_path: Path) -> None:
    """`--url notaurl` failed as httpx's UnsupportedProtocol, exit 1."""
    for url in ("notaurl", "ftp://127.0.0.1:1", "http://"):
        result = await cli(tmp_path / "none.sock", "--url", url, "ls")
        assert result.code == 2 and result.out == "", (url, result)
        assert "--url: " in result.err and "is no http:// URL" in result.err and "[USAGE]" in result.err
