"""What a run's own commands can do to other runs and to the daemon.

The attacker here is an agent: it controls the `bash` command of its run,
sent to its child with its run's token over loopback, and nothing else.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pwd
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import jeeves_mcp
from jeeves_mcp.mcp.errors import ToolError
from jeeves_mcp.proc import COMMAND_MAX_PROCESSES, command_user
from jeeves_mcp.proc.procfs import own_group, user_name
from tests._child import Child, kill_all, running_child, stop_process_group, tool_json, with_cmdline
from tests._daemon import running_daemon, skip_without_slot_cgroups

NOBODY = 65534


async def bash(slot: dict[str, Any], cmd: str, timeout_ms: int = 30_000) -> dict[str, Any]:
    base = slot["mcp"]["url"].removesuffix("/mcp")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"cmd": cmd, "timeout_ms": timeout_ms}}}
    async with httpx.AsyncClient(timeout=60) as http:
        reply = (await http.post(f"{base}/rpc", json=body, headers=slot["mcp"]["headers"])).json()
    return tool_json(reply["result"])


def escapes(marker: str) -> str:
    """Descendants that leave the command's group, session and environment, then outlive it:
    one in a new session, two more double-forked out of it. Each has escaped before the
    command ends, so the test does not race the command's own cleanup, which rightly kills
    what has not escaped yet: the parent reads the pipe to its end, which comes when the
    exec that drops the environment closes the pipe's last write end (os.pipe is
    close-on-exec). A byte written before the exec let the command end while the last
    descendant still carried the command's mark."""
    script = (
        "import os\n"
        "for i in (1, 2, 3):\n"
        "    r, w = os.pipe()\n"
        "    if os.fork() == 0:\n"
        "        os.close(r)\n"
        "        os.setsid()\n"
        "        if i > 1 and os.fork() > 0:\n"
        "            os._exit(0)\n"
        "        null = os.open(os.devnull, os.O_RDWR)\n"
        "        for fd in (0, 1, 2):\n"
        "            os.dup2(null, fd)\n"
        f"        os.execve(\"/bin/sleep\", [\"/bin/sleep\", \"{marker}\" + str(i)], {{}})\n"
        "    os.close(w)\n"
        "    os.read(r, 1)\n"
    )
    return f"python3 -c '{script}'; echo started"


# -- #2: every descendant dies with its slot -------------------------------------------


@pytest.mark.parametrize("fork_server", ["true", "false"], ids=["forked", "cold"])
@pytest.mark.parametrize("ending", ["release", "sigterm"])
async def test_escaped_descendants_die_with_the_slot(tmp_path: Path, run_root: Path, fork_server: str,
                                                     ending: str) -> None:
    marker = f"70{secrets.randbelow(10**6):06d}.{secrets.randbelow(10**6):06d}"
    env = {"JEEVES_MCP_FORK_SERVER": fork_server}
    try:
        async with running_daemon(tmp_path, env) as daemon, daemon.client() as control:
            slot = await control.acquire("escaper", run_root)
            ran = await bash(slot, escapes(marker))
            assert ran["stdout"] == "started\n", ran
            with trio.fail_after(10):  # the backgrounded ones get going
                while len(with_cmdline(marker)) < 3:  # noqa: ASYNC110 - a /proc scan
                    await trio.sleep(0.05)
            if ending == "release":
                await control.release("escaper")
            else:
                await stop_process_group(daemon.process)
            assert with_cmdline(marker) == []
    finally:
        kill_all(with_cmdline(marker))


# -- #1: a run's commands cannot read the daemon's state or another run's child ---------------


@contextmanager
def directory_owned_by(uid: int, prefix: str, gid: int | None = None) -> Iterator[Path]:
    """A fresh 0755 directory owned by `uid` (and `gid`, else `uid`), outside the 0700 pytest
    dirs; removed after."""
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user, and switching users, need root")
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    os.chown(path, uid, uid if gid is None else gid)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def owned_root() -> Iterator[Path]:
    """A run root owned by an unprivileged user (nobody), in group root, as `install -d -o
    nobody` run by root makes it: the group is the directory's, not its owner's."""
    with directory_owned_by(NOBODY, "jeeves-run-", gid=0) as root:
        (root / "hello.py").write_text("x = 1\n")
        yield root


# What a run's bash could reach of the daemon's or another run's, one word each.
LEAKS = {"DB_READ", "TOKEN_FOUND", "ENVIRON_READ", "MEM_OPENED", "SIGNALLED", "CONTROL_REACHED", "HEALTH_REACHED"}
# The owner's uid and its own group alone: never the group of the root directory (root, when
# made by `install -d -o USER`), nor the daemon's.
OWNER_IDS = [str(NOBODY), str(pwd.getpwuid(NOBODY).pw_gid), str(pwd.getpwuid(NOBODY).pw_gid)]
# CapInh too: a file with inheritable capabilities would get them back at exec (N6).
NO_CAPABILITIES = [f"{kind}:0000000000000000" for kind in ("CapInh", "CapPrm", "CapEff", "CapAmb")]


async def attack_the_other_run(daemon: Any, mine: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """From `mine`'s bash: its uid, gid, groups and capability sets, then a word of LEAKS for each thing it
    reached (the state DB, `other`'s token, its child's environ, memory or signals, the control
    socket, the socket `other`'s child answers the daemon's health checks on); "done" last."""
    token = other["mcp"]["headers"]["Authorization"].removeprefix("Bearer ")
    state, pid = daemon.state_dir, other["pid"]
    health = state / "health" / f"{hashlib.sha256(other['run_id'].encode()).hexdigest()[:16]}.sock"
    assert health.is_socket()  # the daemon pings there: a flood of the TCP port cannot delay it
    probe = (f"id -u; id -g; id -G; grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status | tr -d '\\t'; "
             f"cat {state}/slots.sqlite3 > /dev/null 2>&1 && echo DB_READ; "
             f"grep -rl {token} {state} 2>/dev/null && echo TOKEN_FOUND; "
             f"head -c1 /proc/{pid}/environ > /dev/null 2>&1 && echo ENVIRON_READ; "
             f"(exec 3< /proc/{pid}/mem) 2>/dev/null && echo MEM_OPENED; "
             f"kill -0 {pid} 2>/dev/null && echo SIGNALLED; "
             f"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{daemon.socket}\")' "
             f"2>/dev/null && echo CONTROL_REACHED; "
             f"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{health}\")' "
             f"2>/dev/null && echo HEALTH_REACHED; echo done")
    ran = await bash(mine, probe)
    return ran["stdout"].split()


async def test_commands_run_as_the_roots_owner_and_reach_no_token(tmp_path: Path, owned_root: Path) -> None:
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        mine = await control.acquire("attacker", owned_root)
        other = await control.acquire("victim", owned_root)
        lines = await attack_the_other_run(daemon, mine, other)
        assert lines[:7] == [*OWNER_IDS, *NO_CAPABILITIES], lines
        assert lines[-1] == "done" and not LEAKS & set(lines), lines
        wrote = await bash(mine, "echo made > made.txt && stat -c %u made.txt")
        assert wrote["stdout"] == f"{NOBODY}\n"  # the workspace stays the owner's to write
        await control.release("attacker")
        await control.release("victim")


async def test_commands_see_no_process_of_another_user(tmp_path: Path, owned_root: Path) -> None:
    """A run's command read another run's command lines in /proc (`bash -c ...` with whatever
    an agent put there) and the children's (the cross-run review of 2026-11-29): it sees its
    own user's processes only (that the child still finds and kills its commands' processes
    is every process-tree test's, under the same mount)."""
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        mine = await control.acquire("looker", owned_root)
        ran = await bash(mine, "for p in /proc/[0-9]*; do stat -c %u $p 2>/dev/null; done | sort -u; "
                               f"test -e /proc/{os.getpid()} || echo NOT_THE_TEST")
        assert ran["stdout"].split() == [str(NOBODY), "NOT_THE_TEST"], ran  # no 0: nor the test, nor the child
        await control.release("looker")


async def test_commands_do_not_get_the_group_of_a_root_made_by_root(tmp_path: Path, owned_root: Path) -> None:
    # `install -d -o nobody` leaves the root in group root: commands ran as nobody:root, read
    # root:root 0640 files and could leave a setgid-root copy of a program behind.
    with directory_owned_by(0, "jeeves-secret-", gid=0) as private:
        secret = private / "secret.txt"
        secret.write_text("SECRET\n")
        secret.chmod(0o640)
        async with running_daemon(tmp_path) as daemon, daemon.client() as control:
            mine = await control.acquire("attacker", owned_root)
            ran = await bash(mine, f"id -g; cat {secret} 2>/dev/null; cp /bin/true kept && chmod 2755 kept; "
                                   "stat -c %g kept")
            owner_gid = pwd.getpwuid(NOBODY).pw_gid
            assert ran["stdout"] == f"{owner_gid}\n{owner_gid}\n", ran
            await control.release("attacker")


def test_an_owner_with_no_passwd_entry_gets_no_privileged_group() -> None:
    unknown = next(uid for uid in range(54_321, 60_000) if user_name(uid) is None)
    overflow = int(Path("/proc/sys/kernel/overflowgid").read_text())
    assert own_group(NOBODY) == pwd.getpwuid(NOBODY).pw_gid  # a passwd entry: its group
    assert own_group(unknown) == overflow  # none: no group anyone is given


async def test_commands_get_the_dumpable_bit_the_pruner_gave_up(tmp_path: Path, run_root: Path) -> None:
    """The pruner is non-dumpable (its memory holds its token); execve gives its commands
    theirs back, so a command's core dumps and debuggers work as usual. (That the
    pruner's own /proc/PID/mem is closed to its user needs a non-root daemon to see.)"""
    async with running_daemon(tmp_path) as daemon, daemon.client() as control:
        slot = await control.acquire("dump", run_root)
        ran = await bash(slot, "python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'")
        assert ran["stdout"] == "1\n", ran
        await control.release("dump")


# -- #1 under a service user: CAP_SETUID/CAP_SETGID/CAP_KILL instead of root ----------------

SERVICE_UID = 64_999  # the daemon's user: no passwd entry needed
SERVICE_CAPS = "+setuid,+setgid,+kill"  # what systemd/jeeves-mcp.service gives it


# The folders an editable install maps into the package (setup.py's MAPPED); a wheel has them inside.
MAPPED_SUBPACKAGES = ("supervisor", "cli")


def _link_or_copy(source: str, target: str) -> str:
    """Hard-link a file others may read (fast, no space), else copy it and let others read it:
    the service user reads the copy whatever the modes of the directories above the original."""
    mode = os.stat(source).st_mode
    if mode & stat.S_IROTH:
        try:
            os.link(source, target)
            return target
        except OSError:  # another file system
            pass
    shutil.copy2(source, target)
    os.chmod(target, stat.S_IMODE(mode) | 0o444 | (0o111 if mode & stat.S_IXUSR else 0))
    return target


def readable_site_packages(home: Path) -> Path:
    """This test run's site-packages, with jeeves_mcp laid out whole in it as the wheel has it,
    linked or copied under `home`: the service user cannot enter a tree in a 0700 directory
    (a fresh clone under `mktemp -d`), nor a venv inside it."""
    site = Path(sysconfig.get_paths()["purelib"])
    copy = home / "site-packages"
    # An editable install's finder would map jeeves_mcp back into the tree.
    shutil.copytree(site, copy, symlinks=True, copy_function=_link_or_copy,
                    ignore=shutil.ignore_patterns("__editable__*"))
    package = copy / "jeeves_mcp"
    if not package.exists():  # editable: the tree's jeeves_mcp/, supervisor/ and cli/
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(Path(jeeves_mcp.__file__).parent, package, copy_function=_link_or_copy, ignore=ignore)
        for name in MAPPED_SUBPACKAGES:
            module = importlib.import_module(f"jeeves_mcp.{name}")
            assert module.__file__ is not None
            if not (package / name).exists():
                shutil.copytree(Path(module.__file__).parent, package / name, copy_function=_link_or_copy,
                                ignore=ignore)
    for folder, _, _ in os.walk(copy):
        os.chmod(folder, 0o755)
    return copy


def service_python(home: Path) -> Path:
    """An interpreter the service user can run, with this test run's packages: a venv of a
    system Python of our version (ours may sit under a home the service user cannot enter)
    that loads a copy of our site-packages (`readable_site_packages`)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = next((p for p in (Path("/usr/bin") / version, Path("/usr/local/bin") / version) if p.exists()), None)
    if system is None:
        pytest.skip(f"no system {version} that a service user could run")
    venv = home / "venv"
    made = subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"{system} cannot make a venv: {made.stderr.decode().strip()[-200:]}")
    site = venv / "lib" / version / "site-packages"
    (site / "jeeves-test-run.pth").write_text(f"import site; site.addsitedir({str(readable_site_packages(home))!r})\n")
    return venv / "bin" / "python"


def as_service_user(home: Path) -> str:
    """An interpreter that starts as SERVICE_UID with the unit's ambient capabilities,
    as systemd's User= plus AmbientCapabilities= start the daemon."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to start a daemon as a service user")
    wrapper = home / "python-as-service"
    wrapper.write_text(f"#!/bin/sh\nexec {setpriv} --reuid={SERVICE_UID} --regid={SERVICE_UID} "
                       f"--clear-groups --inh-caps={SERVICE_CAPS} --ambient-caps={SERVICE_CAPS} "
                       f"{service_python(home)} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture
def service_home() -> Iterator[Path]:
    """The daemon's own directory (state, socket, log), owned by the service user."""
    with directory_owned_by(SERVICE_UID, "jeeves-service-") as home:
        yield home


async def test_a_service_user_with_capabilities_isolates_runs(service_home: Path, owned_root: Path) -> None:
    """The systemd default: an unprivileged daemon given CAP_SETUID/CAP_SETGID/CAP_KILL. A
    run's commands run as the root's owner with no capability at all, reach neither the
    daemon's state nor its control socket nor another run's child, and still die with the slot."""
    python = as_service_user(service_home)
    marker = f"71{secrets.randbelow(10**6):06d}.{secrets.randbelow(10**6):06d}"
    try:
        async with running_daemon(service_home, python=python) as daemon, daemon.client() as control:
            health = await control.healthz()
            assert health["isolation"] == {"user": str(SERVICE_UID), "switch_users": True}, health
            own_home = owned_root / "home"  # a HOME the runner made for the run, the owner's
            own_home.mkdir()
            os.chown(own_home, NOBODY, NOBODY)
            mine = await control.acquire("attacker", owned_root, env={"HOME": str(own_home)})
            other = await control.acquire("victim", owned_root)
            lines = await attack_the_other_run(daemon, mine, other)
            assert lines[:7] == [*OWNER_IDS, *NO_CAPABILITIES], lines  # no CAP_SETUID kept from the daemon
            assert lines[-1] == "done" and not LEAKS & set(lines), lines
            wrote = await bash(mine, "echo made > made.txt && stat -c %u made.txt")
            assert wrote["stdout"] == f"{NOBODY}\n", wrote
            owner = pwd.getpwuid(NOBODY)
            who = await bash(mine, 'echo "$HOME $USER"')
            assert who["stdout"] == f"{own_home} {owner.pw_name}\n", who  # the run's HOME, the owner's
            who = await bash(other, 'echo "$HOME $USER"')
            assert who["stdout"] == f"{owner.pw_dir} {owner.pw_name}\n", who  # not the daemon's HOME
            escaped = await bash(mine, escapes(marker))
            assert escaped["stdout"] == "started\n", escaped
            with trio.fail_after(10):
                while len(with_cmdline(marker)) < 3:  # noqa: ASYNC110 - a /proc scan
                    await trio.sleep(0.05)
            await control.release("attacker")
            assert with_cmdline(marker) == []  # the child killed its owner's processes: CAP_KILL
            await control.release("victim")
    finally:
        kill_all(with_cmdline(marker))


# -- #2 when the child itself is killed: a cgroup per slot --------------------------------


def cgroup_of(pid: int) -> str:
    line = next(x for x in Path(f"/proc/{pid}/cgroup").read_text().splitlines() if x.startswith("0::"))
    return line[3:]


async def running_pid(control: Any, run_id: str, other_than: int) -> int:
    """The slot's pid once it runs a child other than `other_than`."""
    with trio.fail_after(30):
        while True:
            slot = await control.get(run_id)
            if slot["state"] == "running" and slot["pid"] not in (None, other_than):
                return int(slot["pid"])
            await trio.sleep(0.05)


@pytest.mark.parametrize("fork_server", ["true", "false"], ids=["forked", "cold"])
async def test_what_a_killed_child_left_dies_with_its_cgroup(tmp_path: Path, run_root: Path, fork_server: str) -> None:
    """A child killed outright cannot stop its commands; its slot's cgroup does, before the
    restart, and release removes the cgroup."""
    own = skip_without_slot_cgroups(tmp_path).parent
    marker = f"72{secrets.randbelow(10**6):06d}.{secrets.randbelow(10**6):06d}"
    try:
        async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon, \
                daemon.client() as control:
            slot = await control.acquire("crashy", run_root)
            group = cgroup_of(slot["pid"])
            assert group.endswith("/slot-crashy"), group
            ran = await bash(slot, escapes(marker))
            assert ran["stdout"] == "started\n", ran
            with trio.fail_after(10):
                while len(with_cmdline(marker)) < 3:  # noqa: ASYNC110 - a /proc scan
                    await trio.sleep(0.05)
            assert {cgroup_of(pid) for pid in with_cmdline(marker)} == {group}
            os.kill(slot["pid"], signal.SIGKILL)
            restarted = await running_pid(control, "crashy", other_than=slot["pid"])
            assert with_cmdline(marker) == []  # gone before the new child started
            assert cgroup_of(restarted) == group
            await control.release("crashy")
            assert not (own / group.removeprefix(cgroup_of(os.getpid())).lstrip("/")).exists()
    finally:
        kill_all(with_cmdline(marker))


# -- The attack review: a run cannot change whom its commands run as -----------------------


async def child_bash(child: Child, cmd: str, **arguments: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"cmd": cmd, "timeout_ms": 30_000, **arguments}}}
    async with httpx.AsyncClient(timeout=60) as http:
        reply = (await http.post(f"{child.base}/rpc", json=body, headers=child.headers())).json()
    return tool_json(reply["result"])


@contextmanager
def replaced_by_symlink(root: Path, target: Path) -> Iterator[None]:
    """`root` moved aside and a symlink to `target` in its place, as a run that may rename its
    own root can do; put back after."""
    moved = root.with_name(root.name + ".moved")
    root.rename(moved)
    try:
        root.symlink_to(target)
        yield
    finally:
        if root.is_symlink():
            root.unlink()
        moved.rename(root)


def test_the_command_user_is_decided_once_and_a_replaced_root_is_refused() -> None:
    """F1: the owner was read from the path on every call, following symlinks, and a root-owned
    target meant "run as the pruner" (root). Now the first look decides, and a root that is no
    longer the same directory is refused rather than run as anyone else."""
    with directory_owned_by(NOBODY, "jeeves-run-") as root, directory_owned_by(0, "jeeves-rootdir-") as other:
        assert command_user(root) == (NOBODY, NOBODY)
        with replaced_by_symlink(root, other), pytest.raises(ToolError) as refused:
            command_user(root)
        assert refused.value.code == "FORBIDDEN", refused.value
        assert command_user(root) == (NOBODY, NOBODY)  # the same directory back: its owner again


async def test_a_run_that_swaps_its_root_for_a_symlink_gets_no_root_shell(tmp_path: Path) -> None:
    """F1 through a real child: between two `bash` calls the root (nobody's) becomes a symlink
    to a root-owned directory. With `allow_outside_root` the cwd check lets that through, so
    this needs no race; the second call is refused, never run as uid 0."""
    with directory_owned_by(NOBODY, "jeeves-run-") as root, directory_owned_by(0, "jeeves-rootdir-") as other:
        async with running_child(root, tmp_path, env={"JEEVES_MCP_ALLOW_OUTSIDE_ROOT": "true"}) as child:
            first = await child_bash(child, "id -u")
            assert first["stdout"] == f"{NOBODY}\n", first
            with replaced_by_symlink(root, other):
                second = await child_bash(child, "id -u")
            assert second.get("stdout") != "0\n", second
            assert second["code"] == "FORBIDDEN", second
            again = await child_bash(child, "id -u")
            assert again["stdout"] == f"{NOBODY}\n", again


async def test_a_command_enters_its_cwd_as_its_own_user(tmp_path: Path) -> None:
    """F4: subprocess changed directory as the pruner (root), before switching users, so a cwd
    behind a directory only root may traverse was entered anyway (with a swapped symlink, any
    such directory on the host). The command now enters it itself, and may not."""
    with directory_owned_by(NOBODY, "jeeves-run-") as root:
        inner = root / "private" / "sub"
        inner.mkdir(parents=True)
        (inner / "file.txt").write_text("behind a 0700 parent\n")
        (root / "private").chmod(0o700)  # root's, as mkdir made it
        async with running_child(root, tmp_path) as child:
            ran = await child_bash(child, "id -u; cat file.txt", cwd="private/sub")
            assert "behind a 0700 parent" not in ran.get("stdout", ""), ran
            assert ran["code"] == "FORBIDDEN", ran
            assert "cannot enter" in ran["message"], ran
            fine = await child_bash(child, "id -u; pwd", cwd=".")
            assert fine["stdout"] == f"{NOBODY}\n{root}\n", fine


# A fork-and-exit loop, as the review's hop.py: one live process at a time, each exit a zombie
# of the child (the subreaper). It says "x" once it has left the command's session, group and
# environment, then makes `argv[1]` forks and touches `argv[2]`.
HOPPER = (
    "import os, sys\n"
    "os.write(1, b'x')\n"
    "null = os.open(os.devnull, os.O_RDWR)\n"
    "for fd in (0, 1, 2):\n"
    "    os.dup2(null, fd)\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    if os.fork():\n"
    "        os._exit(0)\n"
    "open(sys.argv[2], 'w').close()\n"
)


def zombies_of(parent: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        try:
            raw = Path(f"/proc/{name}/stat").read_text() if name.isdigit() else ""
        except OSError:
            continue
        fields = raw[raw.rfind(")") + 2 :].split()
        count += bool(fields) and fields[0] == "Z" and fields[1] == str(parent)
    return count


def all_reaped(done: Path, parent: int) -> bool:
    return done.exists() and not zombies_of(parent)


async def test_what_a_command_leaves_exiting_is_reaped_with_no_further_call(tmp_path: Path, run_root: Path) -> None:
    """F3: orphans' zombies were reaped only at the end of a later tool call, so a fork-and-exit
    loop left behind filled the host's pid table. Now the child reaps them as they exit."""
    python = shutil.which("python3", path="/usr/bin:/bin")  # one any user may run
    if python is None:
        pytest.skip("needs a system python3 for the fork-and-exit loop")
    forks, done = 2000, run_root / "hopped"
    async with running_child(run_root, tmp_path) as child:
        ran = await child_bash(child, f'setsid env -i {python} -c "$HOP" {forks} {done} | head -c1; echo started',
                               env={"HOP": HOPPER})
        assert ran["stdout"] == "xstarted\n", ran
        with trio.fail_after(30):  # a bound, not a timing: before, they stayed until the next call
            while not all_reaped(done, child.process.pid):  # noqa: ASYNC110 - a /proc scan
                await trio.sleep(0.05)


async def test_a_call_cannot_define_shell_functions_for_the_commands_wrapper(tmp_path: Path, owned_root: Path) -> None:
    """Where /bin/sh is bash (Fedora, Arch), an `env` entry BASH_FUNC_ulimit%% became a function
    of the /bin/sh that lowers RLIMIT_NPROC before the command: the limit was never set, and
    a run had the pruner's (root's) instead, 4096 -> 96365 on the machine that showed it."""
    async with running_child(owned_root, tmp_path) as child, httpx.AsyncClient(timeout=60) as http:
        for name in ("BASH_FUNC_ulimit%%", "BASH_FUNC_cd%%", "BASH_FUNC_x"):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "bash", "arguments": {"cmd": "ulimit -u", "env": {name: "() { :; }"}}}}
            error = (await http.post(f"{child.base}/rpc", json=body, headers=child.headers())).json().get("error")
            assert error and error["data"]["code"] == "INVALID_REQUEST", (name, error)
            assert error["data"]["errors"] == [f"env.{name}: bash reads it as a shell function definition"], error
        ran = await child_bash(child, 'echo "$MY_FUNC"', env={"MY_FUNC": "() { :; }"})
        assert ran["stdout"] == "() { :; }\n", ran  # a value may look like one: only bash's names are refused


async def test_commands_of_another_user_get_a_process_limit(tmp_path: Path, owned_root: Path) -> None:
    """F3: commands had no RLIMIT_NPROC, so a run could fork until the host had no pid left."""
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    limit = COMMAND_MAX_PROCESSES if hard == resource.RLIM_INFINITY else min(COMMAND_MAX_PROCESSES, hard)
    async with running_child(owned_root, tmp_path) as child:
        ran = await child_bash(child, f"ulimit -u; ulimit -Hu; ulimit -u {limit + 1} 2>/dev/null || echo kept")
        assert ran["stdout"] == f"{limit}\n{limit}\nkept\n", ran


async def test_the_commands_process_limit_is_the_operators_to_set(tmp_path: Path, owned_root: Path) -> None:
    """Runs of different owners share the unit's TasksMax (8192): at 4096 each, two hostile runs
    took 8,180 of it. An operator sizes the limit to the runs the host should hold."""
    env = {"JEEVES_MCP_COMMAND_MAX_PROCESSES": "64"}
    async with running_child(owned_root, tmp_path, env=env) as child:
        ran = await child_bash(child, "ulimit -u; ulimit -Hu; ulimit -u 65 2>/dev/null || echo kept")
        assert ran["stdout"] == "64\n64\nkept\n", ran
