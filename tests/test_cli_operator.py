"""The CLI as an operator at a terminal or a script at a pipe meets it: what a released run
shows, what goes to stdout and what to stderr, errors with their code, whole table cells."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import socket
import struct
import subprocess
import sys
import termios
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from tests._daemon import Daemon
from tests.test_cli import Result, acquired, cli, cli_env


async def test_show_of_a_released_run_says_it_was_released_and_where_its_history_is(
    daemon: Daemon, run_root: Path
) -> None:
    """A bare 'no slot for run' left the operator guessing whether the run ever existed."""
    await acquired(daemon, "run-gone", run_root)
    released = await cli(daemon.socket, "release", "run-gone", "--json")
    ended_at = released.json()["ended_at"]
    shown = await cli(daemon.socket, "show", "run-gone")
    assert (shown.code, shown.out) == (1, ""), shown
    line, = shown.err.splitlines()
    assert line.startswith("jeeves-mcp show: cannot show run-gone: run 'run-gone' is not active: "
                           f"it was released at {ended_at}"), line
    assert "`jeeves-mcp logs run-gone`" in line and "`jeeves-mcp stats run-gone`" in line, line
    assert line.endswith(" [NOT_FOUND]"), line
    # A run the daemon never had is still plainly unknown.
    never = await cli(daemon.socket, "show", "never-was")
    assert never.err == "jeeves-mcp show: cannot show never-was: no slot for run 'never-was' [NOT_FOUND]\n"


async def test_ls_prints_its_rows_on_stdout_and_its_notes_on_stderr(daemon: Daemon, run_root: Path) -> None:
    """The fork server line and 'no slots' went to stdout: `ls | awk` read them as rows."""
    empty = await cli(daemon.socket, "ls")
    assert (empty.code, empty.out) == (0, ""), empty
    assert empty.err.startswith("no slots (acquire one with"), empty.err
    slot = await acquired(daemon, "run-ls", run_root)
    listed = await cli(daemon.socket, "ls")
    assert listed.code == 0, listed
    header, row = listed.out.splitlines()
    assert header.split() == ["run", "state", "pid", "port", "age", "restarts", "expires"]
    assert row.split()[:4] == ["run-ls", "running", str(slot["pid"]), str(slot["port"])]
    note, = listed.err.splitlines()
    assert note.startswith("fork server up (pid ") and note.endswith("1 child forked"), note
    as_json = await cli(daemon.socket, "ls", "--json")
    assert as_json.err == "" and [s["run_id"] for s in as_json.json()["slots"]] == ["run-ls"]


@asynccontextmanager
async def answering(path: Path, reply: bytes) -> AsyncIterator[Path]:
    """A Unix socket at `path` whose every connection gets `reply` to whatever it sends."""
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await listener.bind(str(path))
    listener.listen(16)

    async def serve() -> None:
        while True:
            connection, _ = await listener.accept()
            with connection:
                await connection.recv(65536)
                await connection.send(reply)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            yield path
            nursery.cancel_scope.cancel()
    finally:
        listener.close()


def http_reply(content_type: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode() + body


def one_line_with_code(result: Result, code: str) -> str:
    assert result.out == "", result
    line, = result.err.splitlines()
    assert line.startswith("jeeves-mcp ") and line.endswith(f" [{code}]"), line
    assert "internal error" not in line, line
    return line


async def test_no_daemon_and_a_refused_connect_say_their_code(tmp_path: Path) -> None:
    stale = tmp_path / "stale.sock"  # a daemon that died: the file is left, nothing listens
    with socket.socket(socket.AF_UNIX) as left:
        left.bind(str(stale))
    for where in (tmp_path / "absent.sock", stale):
        for args in (["ls"], ["events"], ["release", "a", "b"], ["stats"]):
            with trio.fail_after(30):
                result = await cli(where, *args)
            assert result.code == 3, (args, result)
            assert "start it with `jeeves-mcp daemon" in one_line_with_code(result, "DAEMON_UNAVAILABLE")


async def test_something_else_answering_on_the_socket_is_a_bad_response(tmp_path: Path) -> None:
    """A daemon's socket answered by another program (an HTML page, broken JSON) crashed the
    CLI: 'internal error: AttributeError' or 'JSONDecodeError', or `events` printed nothing, exit 0."""
    for reply in (http_reply("text/html", b"<html>hello</html>"), http_reply("application/json", b"{nope")):
        async with answering(tmp_path / "other.sock", reply) as where:
            for args in (["ls"], ["show", "r"], ["release", "r"], ["events"], ["stats"]):
                with trio.fail_after(30):
                    result = await cli(where, *args)
                assert result.code == 1, (args, result)
                line = one_line_with_code(result, "BAD_RESPONSE")
                assert f"{where} answered" in line and "not the daemon's" in line, line
        (tmp_path / "other.sock").unlink()


async def test_permission_denied_on_the_socket_is_not_no_daemon(daemon: Daemon) -> None:
    """EACCES on connect said 'no daemon answers ... start it' (exit 3): one is there, the
    operator may not use it (a user outside the systemd socket's group)."""
    prefix: list[str] = []
    if os.geteuid() == 0:  # root connects whatever the mode: without the capability that lets it
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv(1) to drop CAP_DAC_OVERRIDE")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]
    daemon.socket.chmod(0)
    try:
        with trio.fail_after(60):
            done = await trio.run_process(
                [*prefix, sys.executable, "-m", "jeeves_mcp", "ls"], capture_stdout=True, capture_stderr=True,
                check=False, env=cli_env(daemon.socket), stdin=subprocess.DEVNULL)
    finally:
        daemon.socket.chmod(0o600)
    result = Result(done.returncode, done.stdout.decode(), done.stderr.decode())
    assert result.code == 1, result
    line = one_line_with_code(result, "PERMISSION_DENIED")
    assert f"permission denied on {daemon.socket}" in line and "start it" not in line, line


async def test_config_refusals_say_their_code(daemon: Daemon, run_root: Path, tmp_path: Path) -> None:
    """A client's file that is not JSON, or a slot with no endpoint: one line, and its code."""
    await acquired(daemon, "run-cfg", run_root)
    broken = tmp_path / "broken.json"
    broken.write_text("{nope")
    result = await cli(daemon.socket, "config", "claude", "run-cfg", "--write", str(broken))
    assert result.code == 1 and "is not valid JSON" in one_line_with_code(result, "FAILED")
    async with daemon.client() as control:
        await control.acquire("run-off", run_root, enabled=False)
    result = await cli(daemon.socket, "config", "codex", "run-off")
    assert result.code == 1 and "no MCP endpoint" in one_line_with_code(result, "NO_ENDPOINT")


LONG_RUN_ID = "swe-bench-django__django-11099-attempt-3-2026-11-29T12.00.00-0123456789abcdef"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_a_terminal(args: list[str], env: dict[str, str], columns: int) -> str:
    """`jeeves-mcp ARGS` with stdout on a pty `columns` wide; what it wrote, styles removed."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    try:
        process = subprocess.Popen([sys.executable, "-m", "jeeves_mcp", *args], stdout=side,
                                   stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                   env={**env, "COLUMNS": str(columns), "TERM": "xterm"})
    finally:
        os.close(side)
    chunks = []
    try:
        while chunk := os.read(main, 65536):  # EIO once the CLI has exited and closed the pty
            chunks.append(chunk)
    except OSError:
        pass
    finally:
        os.close(main)
        process.wait(timeout=60)
    return ANSI.sub("", b"".join(chunks).decode().replace("\r\n", "\n"))


async def test_tables_keep_ids_whole_piped_and_at_a_narrow_terminal(daemon: Daemon, run_root: Path) -> None:
    """Piped output was cut to COLUMNS (80 by default) with rich's ellipsis, ids and paths
    included: `ls | awk '{print $1}'` read "swe-bench-dja…"."""
    slot = await acquired(daemon, LONG_RUN_ID, run_root)
    listed = await cli(daemon.socket, "ls", env={"COLUMNS": "60"})
    assert "…" not in listed.out, listed.out
    _, row = listed.out.splitlines()  # the header and one row: none wrapped
    assert row.split()[:4] == [LONG_RUN_ID, "running", str(slot["pid"]), str(slot["port"])], row
    shown = await cli(daemon.socket, "show", LONG_RUN_ID, env={"COLUMNS": "60"})
    assert "…" not in shown.out, shown.out
    rows = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in shown.out.splitlines()
            if not line.startswith("mcp url")}
    assert rows["run"] == LONG_RUN_ID and rows["root"] == str(run_root), shown.out
    assert f"mcp url   {slot['mcp']['url']}" in shown.out, shown.out

    with trio.fail_after(60):
        narrow = await trio.to_thread.run_sync(in_a_terminal, ["ls"], cli_env(daemon.socket), 40)
    assert LONG_RUN_ID in narrow and str(slot["pid"]) in narrow and str(slot["port"]) in narrow, narrow
    with trio.fail_after(60):
        narrow = await trio.to_thread.run_sync(in_a_terminal, ["show", LONG_RUN_ID], cli_env(daemon.socket), 40)
    assert f"run       {LONG_RUN_ID}" in narrow and "…" not in narrow, narrow
