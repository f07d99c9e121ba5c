"""A process whose main thread has ended while its other threads run (attack review 7, H1).

A run's `bash` double-forks out of its command's group and session, starts a thread and
ends its main thread alone with the raw exit syscall (not exit_group): /proc/PID/stat then
says Z, its environment file reads ESRCH, and the process runs on. Taken for a zombie, it
outlived its command, its slot's release, the daemon's stop and its slot's `cgroup.kill`,
holding whatever it held (in the review, every task its uid may have: the owner's next runs
could not fork).
"""

from __future__ import annotations

import os
import platform
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from jeeves_mcp.proc.procfs import proc_stat
from tests._child import running_child, stop_process_group
from tests._daemon import running_daemon, skip_without_slot_cgroups
from tests.test_isolation import bash, child_bash, directory_owned_by, running_pid

SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())
pytestmark = pytest.mark.skipif(SYS_EXIT is None, reason="the raw exit syscall's number is not known here")

MAIN_THREAD_EXITS = (
    "import ctypes, os, sys, threading, time\n"
    "if os.fork(): os._exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): os._exit(0)\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "threading.Thread(target=lambda: time.sleep(3600)).start()\n"
    "time.sleep(0.2)\n"
    f"ctypes.CDLL(None).syscall({SYS_EXIT}, 0)\n"
)

# An owner of its own (no passwd entry): what tests beside these run as nobody is theirs.
UNLISTED_UID = 61_234


def threads_alive(pid: int) -> bool:
    """Whether any thread of `pid` is neither gone nor a zombie."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            state = Path(f"/proc/{pid}/task/{tid}/stat").read_text(errors="replace").rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def main_thread_exited(pid: int) -> bool:
    """The trick took: the process reads as a zombie while a thread of it runs."""
    return threads_alive(pid) and (proc_stat(pid) or ["?"])[0] == "Z"


async def until_dead(pid: int) -> None:
    with trio.fail_after(10):
        while threads_alive(pid):  # noqa: ASYNC110 - a /proc scan
            await trio.sleep(0.05)


def leave_one(run_root: Path, *, scrubbed: bool = False) -> tuple[str, Path]:
    """The command that leaves such a process, and the file its pid is written to;
    `scrubbed`: with no environment, so no tag a command's cleanup could find it by."""
    script = run_root / "main_thread_exits.py"
    script.write_text(MAIN_THREAD_EXITS)
    script.chmod(0o644)
    python = 'env -i "$(command -v python3)"' if scrubbed else "python3"
    pid_file = run_root / "leftover.pid"
    # "started" once its main thread has ended (the trick took), not after a guessed while.
    wait = (f"for i in $(seq 400); do s=$(awk '{{print $3}}' /proc/$(cat {pid_file} 2>/dev/null)/stat 2>/dev/null); "
            '[ "$s" = Z ] && break; sleep 0.025; done; [ "$s" = Z ] && echo started')
    return f"{python} {script} {pid_file}; {wait}", pid_file


def read_pid(pid_file: Path) -> int:
    return int(pid_file.read_text())


def kill_left(pid_file: Path) -> None:
    """What a failure left, gone before the daemon removes the slot's cgroup."""
    if pid_file.exists() and threads_alive(pid := int(pid_file.read_text())):
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while threads_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)


async def test_it_dies_when_its_command_ends(tmp_path: Path) -> None:
    """The command's own cleanup finds it by its environment, read through a live thread."""
    root = tmp_path / "ws"
    root.mkdir()
    command, pid_file = leave_one(root)
    try:
        async with running_child(root, tmp_path) as child:
            ran = await child_bash(child, command)
            assert ran["stdout"] == "started\n", ran
            await until_dead(read_pid(pid_file))
    finally:
        kill_left(pid_file)


async def left_behind(slot: dict[str, Any], command: str, pid_file: Path) -> int:
    ran = await bash(slot, command)
    assert ran["stdout"] == "started\n", ran
    pid = read_pid(pid_file)
    assert main_thread_exited(pid), pid  # out of reach of its command's cleanup, as meant
    return pid


def python_without_cgroups(tmp_path: Path) -> str:
    """An interpreter wrapper whose daemon sees the cgroup v2 hierarchy read-only, so its slots
    get no cgroup and the child's own sweep is all there is (a host without delegation)."""
    mounts = [line.split() for line in Path("/proc/self/mountinfo").read_text().splitlines() if " - cgroup2 " in line]
    if not mounts:
        return sys.executable  # no cgroup v2 here: no slot cgroups anyway
    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed")
    wrapper = tmp_path / "python-no-cgroups"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec unshare -m --propagation private sh -c 'mount -o remount,bind,ro {mounts[0][4]} "
        f"&& exec \"$0\" \"$@\"' {sys.executable} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "no-cgroups"])
@pytest.mark.parametrize("ending", ["release", "sigterm"])
async def test_it_dies_with_the_slot(tmp_path: Path, ending: str, cgroups: bool) -> None:
    """Out of its command's group and environment: the child's last sweep of its
    descendants takes it, with or without the slot's cgroup behind it."""
    python = sys.executable if cgroups else python_without_cgroups(tmp_path)
    with directory_owned_by(UNLISTED_UID, "jeeves-main-exit-") as run_root:
        command, pid_file = leave_one(run_root, scrubbed=True)
        # Killed (when a failure left it) before the daemon goes, which then removes its cgroups.
        async with running_daemon(tmp_path, python=python) as daemon, daemon.client() as control:
            try:
                pid = await left_behind(await control.acquire("leftover", run_root), command, pid_file)
                if ending == "release":
                    await control.release("leftover")
                else:
                    await stop_process_group(daemon.process)
                await until_dead(pid)
            finally:
                kill_left(pid_file)


async def test_it_dies_with_its_killed_childs_cgroup(tmp_path: Path) -> None:
    """The child killed outright cannot sweep; `cgroup.kill` signals a process through its
    leader, lost on an exited one, so the slot's cgroup signals what is left in it."""
    skip_without_slot_cgroups(tmp_path)
    with directory_owned_by(UNLISTED_UID, "jeeves-main-exit-") as run_root:
        command, pid_file = leave_one(run_root, scrubbed=True)
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("crashy", run_root)
                pid = await left_behind(slot, command, pid_file)
                os.kill(slot["pid"], signal.SIGKILL)
                await running_pid(control, "crashy", other_than=slot["pid"])
                assert not threads_alive(pid)  # gone before the new child started
            finally:
                kill_left(pid_file)
