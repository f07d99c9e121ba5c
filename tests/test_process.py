"""Process trees that always die: real processes, no mocks."""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import trio

from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc import (
    TAG_VAR,
    TREE_VAR,
    become_subreaper,
    kill_tree,
    new_tag,
    procfs,
    reap_orphans,
    run_command,
    sweep_zombies,
)
from jeeves_mcp.proc import reaper as process_reaper
from jeeves_mcp.proc import tree as process_tree
from tests._ages import until_started_ago

GRACE_S = 0.3


@pytest.fixture
def subreaper():
    """This test process is the subreaper, as the pruner child is in production."""
    assert become_subreaper(True)
    yield
    become_subreaper(False)


@pytest.fixture
def marker():
    """A variable every process of the test inherits, so leftovers can be found."""
    name, value = "JEEVES_TEST_MARK", secrets.token_hex(8)
    yield name, value
    leftovers = marked_pids(name, value)
    for pid in leftovers:  # never leak, even when an assertion failed
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not leftovers, f"processes left behind: {leftovers}"


def marked_pids(name: str, value: str) -> list[int]:
    needle = f"\0{name}={value}\0".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in b"\0" + environ + b"\0":
            pids.append(int(entry))
    return pids


def gone(pid: int) -> bool:
    """Neither running nor a zombie: the pid has been reaped."""
    return not Path(f"/proc/{pid}").exists()


def our_zombies() -> list[int]:
    me = str(os.getpid())
    zombies = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if fields[0] == "Z" and fields[1] == me:
            zombies.append(int(entry))
    return zombies


def base_env(marker: tuple[str, str]) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], marker[0]: marker[1]}


async def test_normal_exit_captures_output_and_status(tmp_path, marker):
    result = await run_command(
        ["bash", "-c", "echo out; echo err >&2; pwd; exit 3"],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=4096,
        kill_grace_s=GRACE_S,
    )
    assert result.stdout == f"out\n{tmp_path}\n".encode()
    assert result.stderr == b"err\n"
    assert (result.exit_code, result.signal) == (3, None)
    assert result.stdout_bytes == len(result.stdout)
    assert not result.truncated


async def test_no_descriptor_left_to_start_a_command_is_overloaded_not_internal(tmp_path, marker):
    """A run that took the system's file table (ENFILE) made every other run's bash and grep
    INTERNAL (the cross-run review of 2026-11-29): the state of the machine, worth a retry.
    EMFILE stands in for it here (the process's own limit, the same path)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 1, hard))  # no room for a pipe's two ends
    try:
        with pytest.raises(ToolError) as info:
            await run_command(["true"], cwd=tmp_path, env=base_env(marker), timeout_s=5,
                              max_output_bytes=1024, kill_grace_s=GRACE_S)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert info.value.code == "QUEUE_OVERLOADED"
    assert "cannot start the command" in info.value.message and "descriptors" in info.value.message


async def test_missing_executable_is_not_found(tmp_path):
    with pytest.raises(ToolError) as info:
        await run_command(
            ["/nonexistent/jeeves-tool"],
            cwd=tmp_path,
            env={},
            timeout_s=5,
            max_output_bytes=1024,
            kill_grace_s=GRACE_S,
        )
    assert info.value.code == "NOT_FOUND"


async def test_timeout_kills_double_forked_setsid_daemon(tmp_path, marker, subreaper):
    pidfile = tmp_path / "daemon.pid"
    script = f"(setsid sleep 300 & echo $! > {pidfile}); echo started; sleep 300"
    with pytest.raises(ToolError) as info:
        await run_command(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=base_env(marker),
            timeout_s=2,
            max_output_bytes=4096,
            kill_grace_s=GRACE_S,
        )
    error = info.value
    assert error.code == "TOOL_TIMEOUT"
    assert error.details["timeoutMs"] == 2000
    assert "started" in error.details["stdout"]
    daemon = int(pidfile.read_text())
    assert gone(daemon), "the setsid daemon survived or was left a zombie"
    assert marked_pids(*marker) == []
    assert daemon not in our_zombies()


async def test_leftover_background_jobs_die_when_command_exits(tmp_path, marker, subreaper):
    # 20 background sleepers in the group and 20 that left it with setsid.
    script = (
        "for i in $(seq 20); do sleep 300 & (setsid sleep 300 &); done; "
        "sleep 0.1; echo done"  # let the setsid children exec before we return
    )
    result = await run_command(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=4096,
        kill_grace_s=GRACE_S,
    )
    assert result.exit_code == 0
    assert result.stdout == b"done\n"
    assert marked_pids(*marker) == []


async def test_kill_tree_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path, marker):
    tag = new_tag()
    proc = await trio.lowlevel.open_process(
        ["bash", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
        cwd=tmp_path,
        env={**base_env(marker), TAG_VAR: tag},
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert await proc.stdout.receive_some(64) == b"ready\n"  # the trap is set
        with trio.fail_after(10):
            await kill_tree(proc.pid, tag, grace_s=GRACE_S, leader=proc)
        assert proc.returncode == -signal.SIGKILL
    finally:
        await proc.stdout.aclose()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_kill_tree_stops_at_sigterm_when_it_is_honoured(tmp_path, marker):
    proc = await trio.lowlevel.open_process(
        ["bash", "-c", "echo ready; exec sleep 300"],
        cwd=tmp_path,
        env=base_env(marker),
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert await proc.stdout.receive_some(64) == b"ready\n"
        with trio.fail_after(10):
            await kill_tree(proc.pid, None, grace_s=5, leader=proc)
        assert proc.returncode == -signal.SIGTERM
    finally:
        await proc.stdout.aclose()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_cancellation_kills_the_tree(tmp_path, marker, subreaper):
    pidfile = tmp_path / "daemon.pid"
    script = (
        f"(setsid bash -c 'trap \"\" TERM; sleep 300' & echo $! > {pidfile}); "
        "trap '' TERM; echo ready; sleep 300"
    )
    ready = trio.Event()

    def on_output(line: str) -> None:
        if line == "ready":
            ready.set()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:

            async def call() -> None:
                await run_command(
                    ["bash", "-c", script],
                    cwd=tmp_path,
                    env=base_env(marker),
                    timeout_s=600,
                    max_output_bytes=4096,
                    kill_grace_s=GRACE_S,
                    on_output=on_output,
                )
                raise AssertionError("run_command returned although cancelled")

            nursery.start_soon(call)
            await ready.wait()
            nursery.cancel_scope.cancel()
    daemon = int(pidfile.read_text())
    assert gone(daemon)
    assert marked_pids(*marker) == []


async def test_output_over_the_cap_is_capped_counted_and_bounded(tmp_path, marker):
    total = 200_000_000
    cap = 1024 * 1024
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    result = await run_command(
        ["bash", "-c", f"yes | head -c {total}; echo tail-marker >&2"],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=120,
        max_output_bytes=cap,
        kill_grace_s=GRACE_S,
    )
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.exit_code == 0
    assert result.stdout_bytes == total
    assert result.truncated
    assert len(result.stdout) < cap + 100  # head + omission marker + tail
    assert result.stdout.startswith(b"y\ny\n") and result.stdout.endswith(b"y\n")
    assert f"[... {total - cap} bytes omitted ...]".encode() in result.stdout
    assert result.stderr == b"tail-marker\n"
    assert rss_after - rss_before < 64 * 1024, "peak RSS grew by more than 64 MiB"


async def test_head_only_capture_has_no_marker(tmp_path, marker):
    result = await run_command(
        ["bash", "-c", "seq 1 100000"],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=1024,
        kill_grace_s=GRACE_S,
        keep_tail=False,
    )
    assert len(result.stdout) == 1024
    assert result.stdout.startswith(b"1\n2\n3\n")
    assert result.stdout_bytes > 1024


async def test_sweep_reaps_orphans_that_exited_on_their_own(tmp_path, marker, subreaper):
    # An orphan that exits by itself becomes our zombie (we are the
    # subreaper); a sweep reaps it.
    result = await run_command(
        ["bash", "-c", "(setsid true &); sleep 0.2; echo $$"],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=1024,
        kill_grace_s=GRACE_S,
    )
    assert result.exit_code == 0
    with trio.fail_after(10):
        while our_zombies():
            # The orphan may still be exiting when the command ends: sweep again.
            await trio.sleep(0.2)
            await trio.to_thread.run_sync(sweep_zombies)
    assert our_zombies() == []


async def test_the_sweep_after_a_command_reaps_an_orphan_that_exited_a_moment_ago(tmp_path, marker, subreaper):
    """The command ends once its orphan (ours: we are the subreaper) is a zombie: kill_tree's scan
    sees it, and its sweep takes it however young (every spawn says so, no age tells them apart)."""
    script = (
        "(setsid sh -c 'echo $$ > orphan' &); "
        "until [ -s orphan ] && [ \"$(cut -d' ' -f3 /proc/$(cat orphan)/stat)\" = Z ]; do sleep 0.01; done"
    )
    result = await run_command(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=1024,
        kill_grace_s=GRACE_S,
    )
    orphan = int((tmp_path / "orphan").read_text())
    try:
        assert result.exit_code == 0
        assert gone(orphan)
    finally:  # never left to a later test
        with contextlib.suppress(ChildProcessError):
            os.waitpid(orphan, os.WNOHANG)  # noqa: ASYNC222 (a zombie by then: WNOHANG, no wait)


async def test_timeout_kills_a_forking_tree_that_escapes_and_ignores_sigterm(
    tmp_path, marker, subreaper
):
    # A binary tree of ~127 processes; every left branch leaves the group
    # with setsid, and every node ignores SIGTERM.
    script = (
        "bomb() { if [ $1 -gt 0 ]; then "
        'setsid bash -c "$(declare -f bomb); bomb $(($1-1))" & bomb $(($1-1)) & fi; '
        "trap '' TERM; sleep 300; }; bomb 6"
    )
    with pytest.raises(ToolError) as info:
        await run_command(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=base_env(marker),
            timeout_s=2,
            max_output_bytes=4096,
            kill_grace_s=GRACE_S,
        )
    assert info.value.code == "TOOL_TIMEOUT"
    assert marked_pids(*marker) == []


async def test_one_command_ending_does_not_kill_another_commands_daemon(
    tmp_path, marker, subreaper
):
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    pidfile = tmp_path / "b.pid"
    script_b = f"(setsid sleep 300 & echo $! > {pidfile}); echo ready; read x < {fifo}; echo got $x"
    ready = trio.Event()
    results = {}

    async def command_b() -> None:
        results["b"] = await run_command(
            ["bash", "-c", script_b],
            cwd=tmp_path,
            env=base_env(marker),
            timeout_s=60,
            max_output_bytes=4096,
            kill_grace_s=GRACE_S,
            on_output=lambda line: ready.set() if line == "ready" else None,
        )

    def release_b() -> None:
        with open(fifo, "w") as f:  # blocks until B opens the fifo for reading
            f.write("go\n")

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(command_b)
            await ready.wait()
            daemon_b = int(pidfile.read_text())
            a = await run_command(
                ["bash", "-c", "(setsid sleep 300 &); echo a"],
                cwd=tmp_path,
                env=base_env(marker),
                timeout_s=60,
                max_output_bytes=4096,
                kill_grace_s=GRACE_S,
            )
            assert a.stdout == b"a\n"
            assert not gone(daemon_b), "command A's cleanup killed command B's daemon"
            await trio.to_thread.run_sync(release_b)
    assert results["b"].stdout == b"ready\ngot go\n"
    assert gone(daemon_b)


async def test_commands_inherit_the_tree_tag_and_kill_tree_finds_it(
    tmp_path, marker, subreaper, monkeypatch
):
    tree = new_tag()
    monkeypatch.setenv(TREE_VAR, tree)
    result = await run_command(
        ["bash", "-c", f'echo "${TREE_VAR}"'],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=1024,
        kill_grace_s=GRACE_S,
    )
    assert result.stdout == f"{tree}\n".encode()
    # A daemon left by a process of the tree (as a killed pruner leaves its
    # commands) is found by the tree tag alone.
    pidfile = tmp_path / "daemon.pid"
    proc = await trio.lowlevel.open_process(
        ["bash", "-c", f"(setsid sleep 300 & echo $! > {pidfile})"],
        cwd=tmp_path,
        env={**base_env(marker), TREE_VAR: tree},
        start_new_session=True,
    )
    assert await proc.wait() == 0
    daemon = int(pidfile.read_text())
    assert not gone(daemon)
    with trio.fail_after(10):
        assert await kill_tree(None, None, grace_s=GRACE_S, tree=tree) == 1
    assert gone(daemon)


async def test_descendant_walk_kills_a_setsid_double_forked_tagged_process(
    tmp_path, marker, subreaper, monkeypatch
):
    # As the subreaper of its commands, kill_tree finds what left the group
    # among its own descendants: with /proc listing disabled, the setsid
    # daemon (orphaned by its subshell, so reparented to us) still dies.
    monkeypatch.setattr(process_tree, "list_pids", lambda: [])
    walks: list[list[int] | None] = []
    real_descendants = process_tree.descendants

    def spy(me: int) -> list[int] | None:
        walks.append(real_descendants(me))
        return walks[-1]

    monkeypatch.setattr(process_tree, "descendants", spy)
    pidfile = tmp_path / "daemon.pid"
    script = (
        f"(setsid bash -c 'trap \"\" TERM; sleep 300' & echo $! > {pidfile}); "
        "echo started"
    )
    result = await run_command(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=base_env(marker),
        timeout_s=30,
        max_output_bytes=4096,
        kill_grace_s=GRACE_S,
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split()[-1] == b"started"
    daemon = int(pidfile.read_text())
    assert walks and walks[0] is not None and daemon in walks[0]
    assert gone(daemon), "the setsid daemon survived the descendant walk"
    assert marked_pids(*marker) == []


# Splits this process's own `NAME=value` (argv[1]) in place, as bash does importing it.
_SPLIT_ENTRY = """
import ctypes, signal, sys
name = sys.argv[1].encode() + b"="
environ = ctypes.POINTER(ctypes.c_void_p).in_dll(ctypes.CDLL(None), "environ")
i = 0
while environ[i]:
    if ctypes.string_at(environ[i]).startswith(name):
        ctypes.memset(environ[i] + len(name) - 1, 0, 1)
    i += 1
print("split", flush=True)
signal.pause()
"""


async def test_a_tag_split_at_its_equals_sign_as_bash_starts_is_still_found(tmp_path, marker):
    """bash, importing its environment as it starts, turns each entry's `=` into a NUL for
    a moment: a daemon just started by a command was read untagged then and survived it."""
    tag = new_tag()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", _SPLIT_ENTRY, TAG_VAR],
        cwd=tmp_path,
        env={**base_env(marker), TAG_VAR: tag},
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        said = b""
        with trio.fail_after(10):
            while not said.endswith(b"\n") and (chunk := await proc.stdout.receive_some()):
                said += chunk
        assert said == b"split\n"
        environ = b"\0" + await trio.Path(f"/proc/{proc.pid}/environ").read_bytes()
        assert f"\0{TAG_VAR}\0{tag}\0".encode() in environ  # what a scan reads meanwhile
        assert procfs.has_env_entry(proc.pid, (f"{TAG_VAR}={tag}".encode(),))
        assert not procfs.has_env_entry(proc.pid, (f"{TAG_VAR}={new_tag()}".encode(),))
    finally:
        await proc.stdout.aclose()
        proc.kill()
        await proc.wait()


async def test_an_empty_environment_is_not_taken_for_an_exec_under_way():
    """Mid-exec an environment reads empty until the exec ends, and the reader waits for
    that; a process that has none at all (`env -i`) is told apart, not waited on."""
    proc = await trio.lowlevel.open_process(["sleep", "300"], env={})
    try:
        # Spawned: its exec has begun (the spawn returns once it closed our pipe), maybe not ended.
        deadline = time.monotonic() + 10
        assert await trio.to_thread.run_sync(procfs.read_environ, proc.pid, deadline) == b""
    finally:
        proc.kill()
        await proc.wait()


@pytest.mark.parametrize("children_lists", [True, False], ids=["children_lists", "no_children_lists"])
async def test_the_orphan_reaper_never_takes_the_status_of_a_command(
    tmp_path, marker, subreaper, monkeypatch, children_lists
):
    """Reaping orphans as they exit (attack review F3) while commands run and spawn: each
    command's status stays its own (a status reaped under trio reads as exit 0), and the
    orphans are gone after, with no sweep. Also as on a kernel without children lists."""
    if not children_lists:
        monkeypatch.setattr(process_reaper, "own_children", lambda: None)
    results: dict[int, int | None] = {}

    async def command(code: int) -> None:
        result = await run_command(
            ["bash", "-c", f"(sleep 0.0{code % 10}; exit 0) & exit {code}"],  # an orphan exiting
            cwd=tmp_path,
            env=base_env(marker),
            timeout_s=30,
            max_output_bytes=1024,
            kill_grace_s=GRACE_S,
        )
        results[code] = result.exit_code

    async with trio.open_nursery() as reaper:
        await reaper.start(reap_orphans)
        async with trio.open_nursery() as commands:
            for code in range(1, 61):
                commands.start_soon(command, code)
        with trio.fail_after(10):
            while our_zombies():  # noqa: ASYNC110 - a /proc scan; the reaper takes them
                await trio.sleep(0.05)
        reaper.cancel_scope.cancel()
    assert results == {code: code for code in range(1, 61)}


@pytest.mark.parametrize("children_lists", [True, False], ids=["children_lists", "no_children_lists"])
async def test_a_command_whose_spawn_returns_late_keeps_its_status(tmp_path, marker, monkeypatch, children_lists):
    """The spawn returns to the event loop only after the command exited more than
    a second ago (tests/_ages.py), as when the loop was blocked that long: the orphan reaper's passes
    meanwhile leave the command's status to run_command (it read as exit 0 when taken)."""
    if not children_lists:
        monkeypatch.setattr(process_reaper, "own_children", lambda: None)
    passes = threading.Condition()
    begun, done = [0], [0]  # reaper passes begun and finished
    real_reap_once = process_reaper.reap_once

    def counted_reap_once() -> tuple[int, bool]:
        with passes:
            begun[0] += 1
        try:
            return real_reap_once()
        finally:
            with passes:
                done[0] += 1
                passes.notify_all()

    monkeypatch.setattr(process_reaper, "reap_once", counted_reap_once)
    real_popen = subprocess.Popen

    class LatePopen(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            # In trio's worker thread: the command exits and grows old, and a reaper pass
            # begins and ends after that, before the spawn returns.
            deadline = time.monotonic() + 10
            while os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                assert time.monotonic() < deadline, "the command did not exit"
                time.sleep(0.01)
            until_started_ago(self.pid)
            with passes:
                after = begun[0]
                assert passes.wait_for(lambda: done[0] > after, timeout=10), "no reaper pass"

    monkeypatch.setattr(subprocess, "Popen", LatePopen)
    async with trio.open_nursery() as reaper:
        await reaper.start(reap_orphans)
        with trio.fail_after(20):
            result = await run_command(
                ["sh", "-c", "exit 7"],
                cwd=tmp_path,
                env=base_env(marker),
                timeout_s=30,
                max_output_bytes=1024,
                kill_grace_s=GRACE_S,
            )
        reaper.cancel_scope.cancel()
    assert result.exit_code == 7


async def test_after_the_grace_a_group_is_signalled_only_while_it_is_still_the_trees():
    """Attack T5: a group that emptied during the grace may have a recycled number, now
    another run's command's group; kill_tree's SIGKILL to the group must not reach it."""
    ours = await trio.lowlevel.open_process(["sleep", "30"], start_new_session=True)
    stranger = await trio.lowlevel.open_process(["sleep", "30"], start_new_session=True)
    member_fd = os.pidfd_open(ours.pid)
    try:
        # Our leader unreaped: its number cannot have been reused.
        assert process_tree._group_still_ours(ours.pid, ours, {})
        # No leader, a live member known by pidfd: still ours.
        assert process_tree._group_still_ours(ours.pid, None, {ours.pid: member_fd})
        # A live group that none of ours is in stands for a recycled number: not ours,
        # although killpg would reach it.
        assert not process_tree._group_still_ours(stranger.pid, None, {ours.pid: member_fd})
        ours.kill()
        await ours.wait()  # reaped: its number is free for anyone
        assert not process_tree._group_still_ours(ours.pid, ours, {ours.pid: member_fd})
        assert stranger.returncode is None
    finally:
        os.close(member_fd)
        for process in (ours, stranger):
            if process.returncode is None:
                process.kill()
                await process.wait()
