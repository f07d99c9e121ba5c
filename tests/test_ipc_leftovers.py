"""What a run shares through IPC dies with its slot (attack review 7, M2).

SysV shared memory lives until removed, not until its maker exits, and /dev/shm files
until unlinked: a run left a touched 1 GiB segment on the host past its release. Its
child now has an IPC namespace and a /dev/shm of its own, which its commands share with
each other and the kernel frees with the last of them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests._child import running_child
from tests._daemon import running_daemon
from tests.test_isolation import bash, child_bash, directory_owned_by

UNLISTED_UID = 61_235
IPC_RMID = 0

MAKE_SEGMENT = (
    "import ctypes, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "shmid = libc.shmget(int(sys.argv[1]), ctypes.c_size_t(1 << 20), 0o1600)\n"
    "print(shmid)\n"
)


def host_keys() -> set[int]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines}


def holders_of(namespace: str, tree: str, child: int) -> list[int]:
    """Processes of one slot (its child `child`, or a command carrying its tree mark `tree`) in
    the IPC namespace `namespace` (an ns link's target). Only theirs: the kernel hands a freed
    namespace's number to the next one made, which under a parallel run is another test's child."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/ns/ipc") != namespace:
                    continue
                environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if int(name) == child or f"JEEVES_MCP_TREE={tree}".encode() in environ:
                found.append(int(name))
    return found


def described(pid: int) -> str:
    """What a process is, for a failure's message: its status lines and command line."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError as exc:
        return f"{pid}: {exc.strerror}"
    wanted = ("Name:", "State:", "PPid:", "Uid:", "Threads:", "SigPnd:", "ShdPnd:")
    return f"{pid} {argv!r} " + "; ".join(line for line in status if line.startswith(wanted))


@contextmanager
def left_on_the_host(key: int, name: str) -> Iterator[None]:
    """Remove what a failing run left on the host, once the test has looked."""
    try:
        yield
    finally:
        libc = ctypes.CDLL(None, use_errno=True)
        shmid = libc.shmget(key, ctypes.c_size_t(0), 0)
        if shmid >= 0:
            libc.shmctl(shmid, IPC_RMID, None)
        Path(f"/dev/shm/{name}").unlink(missing_ok=True)


@pytest.mark.parametrize("fork_server", ["true", "false"], ids=["forked", "cold"])
async def test_shared_memory_and_dev_shm_die_with_the_slot(tmp_path: Path, fork_server: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("namespaces of the child's own need CAP_SYS_ADMIN (a root daemon)")
    key = secrets.randbelow(2**30) + 1
    name = f"jeeves-ipc-{secrets.token_hex(4)}"
    with directory_owned_by(UNLISTED_UID, "jeeves-ipc-") as run_root, left_on_the_host(key, name):
        (run_root / "segment.py").write_text(MAKE_SEGMENT)
        async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon, \
                daemon.client() as control:
            slot = await control.acquire("ipc", run_root)
            made = await bash(slot, f"python3 segment.py {key} && head -c 4096 /dev/zero > /dev/shm/{name} && echo made")
            assert made["stdout"].endswith("made\n") and int(made["stdout"].split()[0]) >= 0, made
            # The run's commands share both with each other...
            seen = await bash(slot, f"awk '$1 == {key}' /proc/sysvipc/shm | wc -l; ls /dev/shm")
            assert seen["stdout"].split()[0] == "1" and name in seen["stdout"].split()[1:], seen
            tree = (await bash(slot, 'printf %s "$JEEVES_MCP_TREE"'))["stdout"]
            assert len(tree) == 24, tree
            # ...the host sees neither...
            assert key not in host_keys()
            assert name not in os.listdir("/dev/shm")
            namespace = os.readlink(f"/proc/{slot['pid']}/ns/ipc")
            assert namespace != os.readlink("/proc/self/ns/ipc")
            assert holders_of(namespace, tree, slot["pid"]) == [slot["pid"]]
            await control.release("ipc")
            # ...and nothing holds them once the slot is gone.
            left = holders_of(namespace, tree, slot["pid"])
            assert left == [], [described(pid) for pid in left]
    assert key not in host_keys()


async def test_a_health_socket_below_dev_shm_stays_reachable(tmp_path: Path) -> None:
    """A state dir on a RAM disk under /dev/shm: the child's health socket would be bound in
    its own /dev/shm, out of the daemon's reach, and the child restarted until degraded. The
    host's /dev/shm is then left to it (a code review's finding)."""
    if os.geteuid() != 0:
        pytest.skip("namespaces of the child's own need CAP_SYS_ADMIN (a root daemon)")
    root = tmp_path / "ws"
    root.mkdir()
    health = Path(f"/dev/shm/jeeves-health-{secrets.token_hex(4)}.sock")
    try:
        async with running_child(root, tmp_path, env={"JEEVES_MCP_HEALTH_SOCKET": str(health)}) as child:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.connect(str(health))  # the host's /dev/shm holds it
            ran = await child_bash(child, "echo ok")
            assert ran["stdout"] == "ok\n", ran
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(health)
