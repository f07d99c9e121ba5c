"""What a run reaches through /dev: its own POSIX queues, and no FUSE device (attack review 9).

M1: the child's IPC namespace did not cover /dev/mqueue, the host's mqueue mount, through which
a run's commands made host queues that outlived the release and that other runs could read.
H1: with unprivileged user namespaces and a usable /dev/fuse, a command could mount a FUSE file
system served by one of its own threads and wait on it: killed, it waits for the answer its own
descriptor would have to give, so it never exits, and it held the slot's cgroup and the run's
/dev/shm past the release.
"""

from __future__ import annotations

import contextlib
import grp
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from jeeves_mcp.supervisor.cgroups import SlotCgroups, cgroup_base
from tests._daemon import running_daemon
from tests.test_isolation import bash, directory_owned_by
from tests.test_main_thread_exit import python_without_cgroups

UNLISTED_UID = 61_237
MQUEUE = Path("/dev/mqueue")
FUSE = Path("/dev/fuse")
FUSE_CONNECTIONS = Path("/sys/fs/fuse/connections")

# Mounts a FUSE file system answered by a thread of its own, then blocks on a lookup that
# thread reads and never answers (run in `unshare -Urm`, where the mount is allowed).
SELF_SERVED_FUSE = r"""
import ctypes, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
mnt = sys.argv[1]
os.makedirs(mnt, exist_ok=True)
fd = os.open(sys.argv[2] if len(sys.argv) > 2 else "/dev/fuse", os.O_RDWR)
opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
if libc.mount(b"jeeves-selfserved", mnt.encode(), b"fuse", 0, opts) != 0:
    sys.exit(f"mount refused: {os.strerror(ctypes.get_errno())}")
def serve():
    while True:
        request = os.read(fd, 1 << 20)
        _, opcode, unique = struct.unpack_from("<IIQ", request)
        if opcode != 26:  # anything but FUSE_INIT is never answered
            time.sleep(10**9)
        body = struct.pack("<IIIIHHIIHHII24x", 7, 31, 0, 0, 16, 12, 4096, 1, 1, 0, 0, 0)
        os.write(fd, struct.pack("<IiQ", 16 + len(body), 0, unique) + body)
threading.Thread(target=serve, daemon=True).start()
time.sleep(0.3)
print("blocking", flush=True)
os.stat(os.path.join(mnt, "x"))
"""


def pids_of(uid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
    return found


async def none_left(uid: int, within_s: float = 10.0) -> list[int]:
    """The processes of `uid` still there after `within_s` (an empty list once they are gone)."""
    with trio.move_on_after(within_s):
        while pids_of(uid):  # noqa: ASYNC110 - a /proc scan
            await trio.sleep(0.05)
    return pids_of(uid)


def abort_self_served_fuse(uid: int) -> None:
    """What a failing test left: abort the FUSE connections of `uid`'s own mounts, so that
    its stuck processes exit (the connection number is the mount's device minor)."""
    if not FUSE_CONNECTIONS.is_dir() or not any(FUSE_CONNECTIONS.iterdir()):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(FUSE_CONNECTIONS)], check=False)
    for pid in pids_of(uid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
                fields = line.split(" - ")
                if len(fields) == 2 and fields[1].startswith("fuse ") and "jeeves-selfserved" in fields[1]:
                    minor = line.split()[2].split(":")[1]
                    with contextlib.suppress(OSError):
                        (FUSE_CONNECTIONS / minor / "abort").write_text("1")


@contextlib.contextmanager
def host_mqueue() -> Iterator[None]:
    """The host's /dev/mqueue, as systemd mounts it; mounted for the test where it is not."""
    mounted = subprocess.run(["findmnt", "-t", "mqueue", str(MQUEUE)], capture_output=True).returncode == 0
    made_dir = False
    if not mounted:
        if not MQUEUE.exists():
            MQUEUE.mkdir()
            made_dir = True
        if subprocess.run(["mount", "-t", "mqueue", "mqueue", str(MQUEUE)], capture_output=True).returncode != 0:
            if made_dir:
                MQUEUE.rmdir()
            pytest.skip("cannot mount an mqueue file system here")
    try:
        yield
    finally:
        if not mounted:
            subprocess.run(["umount", str(MQUEUE)], check=False)
            if made_dir:
                MQUEUE.rmdir()


async def test_a_runs_posix_queues_are_its_own(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("namespaces of the child's own need CAP_SYS_ADMIN (a root daemon)")
    name = f"jeeves-mq-{secrets.token_hex(4)}"
    with directory_owned_by(UNLISTED_UID, "jeeves-mq-") as run_root, host_mqueue():
        try:
            async with running_daemon(tmp_path) as daemon, daemon.client() as control:
                slot = await control.acquire("mq", run_root)
                made = await bash(slot, f": > /dev/mqueue/{name} && ls /dev/mqueue")
                assert name in made["stdout"].split(), made  # the run's commands share it...
                assert name not in os.listdir(MQUEUE)  # ...the host does not see it...
                await control.release("mq")
            assert name not in os.listdir(MQUEUE)  # ...nor is it left there
        finally:
            (MQUEUE / name).unlink(missing_ok=True)


def user_namespaces_allowed() -> bool:
    return subprocess.run(
        ["setpriv", f"--reuid={UNLISTED_UID}", f"--regid={UNLISTED_UID}", "--clear-groups",
         "unshare", "-Urm", "true"], capture_output=True).returncode == 0


@contextlib.contextmanager
def fuse_run_root() -> Iterator[Path]:
    """A run root holding the self-served FUSE program, /dev/fuse usable by all meanwhile (as
    most distributions ship it)."""
    if os.geteuid() != 0 or not FUSE.exists():
        pytest.skip("needs root and a /dev/fuse")
    if not user_namespaces_allowed():
        pytest.skip("unprivileged user namespaces are not allowed here")
    mode = stat.S_IMODE(FUSE.stat().st_mode)
    FUSE.chmod(0o666)
    try:
        with directory_owned_by(UNLISTED_UID, "jeeves-fuse-") as run_root:
            (run_root / "selfserved.py").write_text(SELF_SERVED_FUSE)
            yield run_root
    finally:
        FUSE.chmod(mode)


@contextlib.contextmanager
def process_outside_the_run() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the run's owner, run as its commands run (a uid with no passwd entry gets
    the group nogroup), outside the run."""
    outside = subprocess.Popen(["setpriv", f"--reuid={UNLISTED_UID}", f"--regid={grp.getgrnam('nogroup').gr_gid}",
                                "--clear-groups", "sleep", "600"])
    try:
        yield outside
    finally:
        outside.kill()
        outside.wait()


def hang_on_fuse(device: str = "") -> str:
    """The command that starts the program in a user and mount namespace of its own (the
    FUSE device given as fd 3 when `device`), and shows what it said first."""
    fd3 = f"/dev/fd/3 3<>{device} " if device else ""
    return (f"setsid unshare -Urm python3 selfserved.py /tmp/jeeves-fuse-mnt {fd3}</dev/null >out 2>&1 & "
            "for i in $(seq 100); do [ -s out ] && break; sleep 0.1; done; cat out")


async def test_a_run_cannot_hang_itself_on_its_own_fuse_mount(tmp_path: Path) -> None:
    with fuse_run_root() as run_root:
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("fuse", run_root)
                started = await bash(slot, hang_on_fuse())
                # /dev/fuse is /dev/null there: the kernel takes no FUSE mount on it.
                assert "mount refused" in started["stdout"], started
                await control.release("fuse")
                assert await none_left(UNLISTED_UID) == []
            finally:  # what a failure left, gone before the daemon, which removes its cgroups
                abort_self_served_fuse(UNLISTED_UID)
                await none_left(UNLISTED_UID)


@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "no-cgroups"])
async def test_a_fuse_mount_reached_through_another_process_is_aborted(tmp_path: Path, cgroups: bool) -> None:
    """The run's owner has a process outside the run: through its /proc/PID/root the run
    reaches the host's /dev/fuse. What then hangs is aborted when the slot is killed, by the
    daemon through the slot's cgroup or by the child's own sweep where there is none."""
    probe = SlotCgroups.for_state_dir(tmp_path / "probe")
    probe.close()
    if cgroups and probe.base is None:
        pytest.skip("no writable cgroup v2 with cgroup.kill (Linux 5.14+) here")
    python = sys.executable if cgroups else python_without_cgroups(tmp_path)
    with fuse_run_root() as run_root, process_outside_the_run() as outside:
        async with running_daemon(tmp_path, python=python) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("fuse", run_root)
                started = await bash(slot, hang_on_fuse(f"/proc/{outside.pid}/root/dev/fuse"))
                assert "blocking" in started["stdout"], started  # the hang is in place
                await control.release("fuse")
                outside.kill()
                outside.wait()
                assert await none_left(UNLISTED_UID) == []
                base = cgroup_base(daemon.state_dir)
                assert base is None or not (base / "slot-fuse").exists()
            finally:  # what a failure left, gone before the daemon, which removes its cgroups
                abort_self_served_fuse(UNLISTED_UID)
                await none_left(UNLISTED_UID)


@contextlib.contextmanager
def filesystem_of_its_own() -> Iterator[Path]:
    """A tmpfs mounted for the test, holding a run root owned by the unlisted user; unmounted
    after (lazily, if a failure left it busy)."""
    with directory_owned_by(0, "jeeves-volume-") as mount_point:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "jeeves-volume", str(mount_point)],
                          capture_output=True).returncode != 0:
            pytest.skip("cannot mount a tmpfs here")
        try:
            run_root = mount_point / "run"
            run_root.mkdir(mode=0o755)
            os.chown(run_root, UNLISTED_UID, UNLISTED_UID)
            yield run_root
        finally:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def unmount(mount_point: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["umount", str(mount_point)], capture_output=True, text=True)


async def test_the_host_cannot_unmount_a_run_s_filesystem_under_it(tmp_path: Path) -> None:
    """The child's mount namespace held its own copy of the run root's mount: the host's
    `umount` succeeded while the run went on writing to a filesystem nobody else saw (attack
    review 9, L3). The child pins the root before it makes its namespace."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    with filesystem_of_its_own() as run_root:
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            slot = await control.acquire("volume", run_root)
            wrote = await bash(slot, "echo kept > f && cat f")
            assert wrote["stdout"] == "kept\n", wrote
            busy = unmount(run_root.parent)
            assert busy.returncode != 0 and "busy" in busy.stderr, busy
            await control.release("volume")
        done = unmount(run_root.parent)
        assert done.returncode == 0, done
