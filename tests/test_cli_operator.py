"""The CLI as an operator at a terminal or a script at a pipe meets it: what a released run
shows, what goes to stdout and what to stderr, errors with their code, whole table cells."""

from __future__ import annotations

from pathlib import Path

from tests._daemon import Daemon
from tests.test_cli import acquired, cli


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
