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
import os
import secrets
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from jeeves_mcp.proc.fuse import fuse_devices, mounted_outside
from jeeves_mcp.supervisor.cgroups import cgroup_base
from tests._daemon import running_daemon, skip_without_slot_cgroups
from tests.test_isolation import bash, directory_owned_by
from tests.test_main_thread_exit import python_without_cgroups

UNLISTED_UID = 61_237
# The FUSE tests' run owners, one each: tests run side by side and count their uid's processes.
FUSE_UIDS = {"dev-null": 61_239, "attached-cgroups": 61_240, "attached-no-cgroups": 61_241,
             "detached-cgroups": 61_242, "detached-no-cgroups": 61_243, "left-alone": 61_244}
MQUEUE = Path("/dev/mqueue")
FUSE = Path("/dev/fuse")
FUSE_CONNECTIONS = Path("/sys/fs/fuse/connections")

# Mounts a FUSE file system answered by a thread of its own, then blocks on a lookup that
# thread reads and never answers (run in `unshare -Urm`, where the mount is allowed). argv: the
# mount point, the device, and "detached" to make the mount with fsopen/fsmount and never attach
# it, so that no mount table lists it (review 10, F1).
SELF_SERVED_FUSE = r"""
import ctypes, os, struct, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
mnt = sys.argv[1]
os.makedirs(mnt, exist_ok=True)
fd = os.open(sys.argv[2] if len(sys.argv) > 2 else "/dev/fuse", os.O_RDWR)
if sys.argv[3:] == ["detached"]:
    fs = libc.syscall(430, b"fuse", 0)  # fsopen, fsconfig, fsmount: the same numbers everywhere
    for key, value in ((b"fd", str(fd).encode()), (b"rootmode", b"40000"), (b"user_id", b"0"), (b"group_id", b"0")):
        libc.syscall(431, fs, 1, key, value, 0)
    libc.syscall(431, fs, 6, None, None, 0)
    where = libc.syscall(432, fs, 0, 0)
    if where < 0:
        sys.exit(f"mount refused: {os.strerror(ctypes.get_errno())}")
    look = lambda: os.stat("x", dir_fd=where)
else:
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"jeeves-selfserved", mnt.encode(), b"fuse", 0, opts) != 0:
        sys.exit(f"mount refused: {os.strerror(ctypes.get_errno())}")
    look = lambda: os.stat(os.path.join(mnt, "x"))
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
look()
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


def fuse_connections() -> set[str]:
    """The FUSE connections open now (fusectl mounted first where it is not)."""
    if FUSE_CONNECTIONS.is_dir() and not os.path.ismount(FUSE_CONNECTIONS):
        subprocess.run(["mount", "-t", "fusectl", "fusectl", str(FUSE_CONNECTIONS)], check=False)
    return set(os.listdir(FUSE_CONNECTIONS)) if FUSE_CONNECTIONS.is_dir() else set()


async def free_what_is_left(uid: int, before: set[str]) -> None:
    """What a failing test left: where processes of `uid` stay, abort the FUSE connections made
    since `before`, so that those stuck on them exit. Nothing when none stays: a connection of a
    test running beside this one must stay for that test to prove anything."""
    if await none_left(uid):
        abort_connections_since(before)
        await none_left(uid)


def waiting(connection: str) -> int:
    """Requests a FUSE connection waits on (0 once aborted)."""
    return int((FUSE_CONNECTIONS / connection / "waiting").read_text())


def abort_connections_since(before: set[str]) -> None:
    """Abort the FUSE connections made since `before`."""
    for name in fuse_connections() - before:
        with contextlib.suppress(OSError):
            (FUSE_CONNECTIONS / name / "abort").write_text("1")


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
def fuse_run_root(uid: int) -> Iterator[tuple[Path, set[str]]]:
    """A run root holding the self-served FUSE program, and the FUSE connections open before."""
    if os.geteuid() != 0 or not FUSE.exists():
        pytest.skip("needs root and a /dev/fuse")
    if not user_namespaces_allowed():
        pytest.skip("unprivileged user namespaces are not allowed here")
    with directory_owned_by(uid, "jeeves-fuse-") as run_root:
        (run_root / "selfserved.py").write_text(SELF_SERVED_FUSE)
        yield run_root, fuse_connections()


@contextlib.contextmanager
def fuse_device_elsewhere() -> Iterator[Path]:
    """A FUSE device anyone may open, outside /dev: what a run gets through another process's
    /proc/PID/root or a descriptor passed over a socket (reviews 9 and 10), without making the
    host's /dev/fuse usable by all while tests run."""
    with directory_owned_by(0, "jeeves-fusedev-") as where:
        device = where / "fuse"
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(10, 229))
        device.chmod(0o666)
        try:
            os.close(os.open(device, os.O_RDWR))
        except OSError as exc:  # /tmp mounted nodev (systemd's tmp.mount)
            pytest.skip(f"no device node usable outside /dev here: {exc.strerror}")
        yield device


def hang_on_fuse(device: str = "", how: str = "") -> str:
    """The command that starts the program in a user and mount namespace of its own (the
    FUSE device given as fd 3 when `device`; `how`: "detached" or not), and shows what it said
    first."""
    fd3 = f"/dev/fd/3 {how} 3<>{device} " if device else ""
    return (f"setsid unshare -Urm python3 selfserved.py mnt {fd3}</dev/null >out 2>&1 & "
            "for i in $(seq 100); do [ -s out ] && break; sleep 0.1; done; cat out")


async def test_a_run_s_dev_fuse_is_dev_null(tmp_path: Path) -> None:
    uid = FUSE_UIDS["dev-null"]
    with fuse_run_root(uid) as (run_root, before):
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("fuse", run_root)
                device = await bash(slot, "stat -L -c %t:%T /dev/fuse")
                assert device["stdout"] == "1:3\n", device  # /dev/null's numbers, not FUSE's (a:e5)
                started = await bash(slot, hang_on_fuse())
                assert "mount refused" in started["stdout"], started  # no FUSE mount on /dev/null
                await control.release("fuse")
                assert await none_left(uid) == []
            finally:  # what a failure left, gone before the daemon, which removes its cgroups
                await free_what_is_left(uid, before)


@pytest.mark.parametrize("how", ["attached", "detached"])
@pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "no-cgroups"])
async def test_a_run_hung_on_its_own_fuse_mount_is_freed(tmp_path: Path, cgroups: bool, how: str) -> None:
    """A FUSE device reached elsewhere than /dev/fuse: what then hangs on a mount the run serves
    itself is aborted when the slot is killed, by the daemon through the slot's cgroup or by the
    child's own sweep where there is none, whether the mount is in the run's mount table or in
    none (made with fsmount and never attached: review 10, F1)."""
    if cgroups:
        skip_without_slot_cgroups(tmp_path)
    python = sys.executable if cgroups else python_without_cgroups(tmp_path)
    uid = FUSE_UIDS[f"{how}-{'cgroups' if cgroups else 'no-cgroups'}"]
    with fuse_run_root(uid) as (run_root, before), fuse_device_elsewhere() as device:
        async with running_daemon(tmp_path, python=python) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("fuse", run_root)
                started = await bash(slot, hang_on_fuse(str(device), how))
                assert "blocking" in started["stdout"], started  # the hang is in place
                await control.release("fuse")
                assert await none_left(uid) == []
                base = cgroup_base(daemon.state_dir)
                assert base is None or not (base / "slot-fuse").exists()
            finally:  # what a failure left, gone before the daemon, which removes its cgroups
                await free_what_is_left(uid, before)


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


VICTIM_UID = 61_238


@contextlib.contextmanager
def stuck_fuse_outside_the_run(program: Path, device: Path) -> Iterator[tuple[subprocess.Popen[bytes], set[str]]]:
    """Another user's process hung on its own FUSE mount, in a user and mount namespace of its
    own outside any run (the mount attached there), and its connection; killed after, that one
    connection aborted first (a process hung on FUSE cannot be killed before)."""
    python = shutil.which("python3", path="/usr/bin:/bin") or "python3"
    mount_point = device.parent / "victim-mnt"
    mount_point.mkdir()
    os.chown(mount_point, VICTIM_UID, VICTIM_UID)
    victim = subprocess.Popen(
        ["setpriv", f"--reuid={VICTIM_UID}", f"--regid={VICTIM_UID}", "--clear-groups",
         "unshare", "-Urm", python, str(program), str(mount_point), str(device)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    connections: set[str] = set()
    try:
        assert victim.stdout is not None and victim.stdout.readline() == b"blocking\n"
        mounted = Path(f"/proc/{victim.pid}/mountinfo").read_text()  # unshare execs in place
        connections = {device.split(":")[1] for device in fuse_devices(mounted)}
        assert connections
        yield victim, connections
    finally:
        for name in connections:
            with contextlib.suppress(OSError):
                (FUSE_CONNECTIONS / name / "abort").write_text("1")
        victim.kill()
        victim.wait()
        if victim.stdout is not None:
            victim.stdout.close()


async def test_a_stuck_fuse_connection_outside_the_slot_is_left_alone(tmp_path: Path) -> None:
    """Only what holds the slot's processes is aborted: another user's FUSE mount, mounted in a
    namespace of its own outside the run and waiting on a request, keeps its connection."""
    skip_without_slot_cgroups(tmp_path)
    uid = FUSE_UIDS["left-alone"]
    with fuse_run_root(uid) as (run_root, before), fuse_device_elsewhere() as device, \
            stuck_fuse_outside_the_run(run_root / "selfserved.py", device) as (victim, victims):
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            try:
                slot = await control.acquire("fuse", run_root)
                started = await bash(slot, hang_on_fuse(str(device), "detached"))
                assert "blocking" in started["stdout"], started
                await control.release("fuse")
                assert await none_left(uid) == []  # the run's own was aborted...
                assert victim.poll() is None and all(waiting(name) > 0 for name in victims)  # ...not this one
            finally:
                await free_what_is_left(uid, before | victims)


def test_a_mount_point_that_is_no_utf8_does_not_stop_the_scan() -> None:
    """Mount points are bytes: one that is no UTF-8, in a namespace of another process, made
    the scan of mount tables raise, and the slot's kill with it (a review's finding)."""
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    name = b"/tmp/jeeves-mnt-\xff-" + secrets.token_hex(4).encode()
    holder = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mkdir -p "$1" && mount -t tmpfs jeeves-bytes "$1" && echo ready && exec sleep 60', "sh", name],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"ready\n"
        assert b"\xff" in Path(f"/proc/{holder.pid}/mountinfo").read_bytes()  # written as it is
        seen = mounted_outside(set(), {2**20}, time.monotonic() + 10)  # a connection nobody has
        assert seen is not None and 2**20 not in seen
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        with contextlib.suppress(OSError):
            os.rmdir(name)
