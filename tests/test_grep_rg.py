"""ripgrep comes with the package (the `ripgrep` wheel ships `rg` into the venv's bin/), and the
grep tool finds it there even when that bin/ is not on PATH, as under systemd; so does a run's
bash, through a directory holding that `rg` alone, last on the command's PATH."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.proc import process_alive
from jeeves_mcp.tools import bash as bash_tool
from jeeves_mcp.tools import grep
from tests._child import running_child
from tests._daemon import running_daemon
from tests.test_beneath import runnable_by_nobody
from tests.test_isolation import NOBODY, directory_owned_by
from tests.test_run_devices import (
    FUSE,
    SELF_SERVED_FUSE,
    abort_connections_since,
    fuse_connections,
    waiting,
)
from tests.test_security import call_tool


def test_rg_is_the_one_beside_the_interpreter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    rg = grep.find_rg()
    assert rg is not None and Path(rg).parent == Path(sys.executable).parent
    version = subprocess.run([rg, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("ripgrep ")


async def test_a_daemon_without_the_venv_on_path_greps_with_rg(tmp_path: Path, run_root: Path) -> None:
    """systemd starts /venv/bin/jeeves-mcp with PATH=/usr/bin:...: no rg of the venv on it."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    (run_root / "notes.txt").write_text("alpha\nneedle here\nomega\n")
    async with running_daemon(tmp_path, {"PATH": str(empty)}) as daemon, daemon.client() as control:
        slot = await control.acquire("rg-run", run_root)
        base = slot["mcp"]["url"].removesuffix("/mcp")
        async with httpx.AsyncClient(timeout=20) as http:
            result = await call_tool(http, base, slot["mcp"]["headers"], "grep", {"pattern": "needle"})
        await control.release("rg-run")
    assert not result["isError"], result
    assert result["engine"] == "rg", result
    assert result["match_count"] == 1


# A daemon's PATH under systemd: no venv on it, and here no rg either.
SYSTEM_PATH = "/usr/bin:/bin"
# Seen by the command itself (the directory may be in the child's own /dev/shm): rg's first line,
# where `rg` is found, PATH, what PATH's last directory holds, where its `rg` leads, its mode,
# and whether the command may write there.
SHOW_RG = ('rg --version | head -n 1; command -v rg; printf "%s\\n" "$PATH"; d=${PATH##*:}; ls -A "$d"; '
           'readlink "$d/rg"; stat -c %a "$d"; [ -w "$d" ] && echo writable || echo read-only')


@contextmanager
def run_root_of(owner: str, tmp_path: Path) -> Iterator[Path]:
    """A run root whose commands run as the pruner's own user, or as nobody (root only)."""
    if owner == "own":
        yield tmp_path
        return
    if not runnable_by_nobody(grep.find_rg()):
        pytest.skip("nobody may not run this venv's rg (a clone in a 0700 directory)")
    with directory_owned_by(NOBODY, "jeeves-rg-run-", gid=0) as root:
        yield root


@pytest.mark.parametrize("owner", ["own", "nobody"])
async def test_a_runs_bash_finds_the_bundled_rg_last_on_its_path(tmp_path: Path, owner: str) -> None:
    if shutil.which("rg", path=SYSTEM_PATH) is not None:
        pytest.skip(f"this host has an rg on {SYSTEM_PATH}, which would win")
    bundled = grep.find_rg()
    assert bundled is not None
    with run_root_of(owner, tmp_path) as root:
        async with running_child(root, tmp_path, env={"PATH": SYSTEM_PATH}) as child, \
                httpx.AsyncClient(timeout=30) as http:
            shown = await call_tool(http, child.base, child.headers(), "bash", {"cmd": SHOW_RG})
            kept = await call_tool(http, child.base, child.headers(), "bash",
                                   {"cmd": 'printf "%s" "$PATH"', "env": {"PATH": "/opt/none:/bin"}})
    version, found, path, *listing, target, mode, writable = shown["stdout"].splitlines()
    assert version.startswith("ripgrep "), shown
    rg_dir = path.rpartition(":")[2]
    assert path == f"{SYSTEM_PATH}:{rg_dir}" and found == f"{rg_dir}/rg", shown
    assert listing == ["rg"] and target == bundled and mode == "755", shown
    if owner != "own":
        assert writable == "read-only", shown
    assert kept["stdout"] == "/opt/none:/bin", kept  # the call's own PATH, as given
    assert not await trio.Path(rg_dir).exists()  # nothing left where the test can see


def rg_dirs_of(pid: int) -> list[Path]:
    """The rg directories a child made in the host's /dev/shm (named with its pid)."""
    return list(Path("/dev/shm").glob(f"jeeves-rg-{pid}-*"))


async def test_a_directory_a_killed_child_left_is_removed_by_the_next(tmp_path: Path) -> None:
    """Where /dev/shm is the host's (a child not run as root, or one whose health socket is below
    it), a child killed outright left its rg directory there until reboot; the next child of the
    same user removes what children gone left."""
    root = tmp_path / "ws"
    root.mkdir()
    sockets = [Path(f"/dev/shm/jeeves-health-{secrets.token_hex(4)}.sock") for _ in range(2)]
    left: list[Path] = []
    try:
        async with running_child(root, tmp_path, env={"JEEVES_MCP_HEALTH_SOCKET": str(sockets[0])}) as first:
            left = rg_dirs_of(first.process.pid)
            assert len(left) == 1 and (left[0] / "rg").is_symlink(), left
            first.process.kill()
            await first.process.wait()
        assert left[0].is_dir()  # nothing ran to remove it
        async with running_child(root, tmp_path, env={"JEEVES_MCP_HEALTH_SOCKET": str(sockets[1])}) as second:
            assert len(rg_dirs_of(second.process.pid)) == 1
            with trio.fail_after(10):  # removed by a thread of the new child's, not waited for
                while rg_dirs_of(first.process.pid):  # noqa: ASYNC110 - a directory scan
                    await trio.sleep(0.05)
    finally:
        for path in sockets:
            path.unlink(missing_ok=True)
        for path in left:
            shutil.rmtree(path, ignore_errors=True)


async def test_a_fuse_mount_named_as_a_left_directory_does_not_hold_a_child_s_start(tmp_path: Path) -> None:
    """Another local user can name a FUSE mount of theirs in the host's /dev/shm as a directory
    a killed child left; its first lookup never returns. The sweep runs in a thread no start
    waits for: the child is ready and serves, while the sweep waits on the mount."""
    if os.geteuid() != 0 or not FUSE.exists():
        pytest.skip("needs root and a /dev/fuse")
    gone = next(pid for pid in range(32_767, 300, -1) if not process_alive(pid))
    mount = Path(f"/dev/shm/jeeves-rg-{gone}-fuse")
    health = Path(f"/dev/shm/jeeves-health-{secrets.token_hex(4)}.sock")
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "selfserved.py").write_text(SELF_SERVED_FUSE)
    before = fuse_connections()
    server = await trio.lowlevel.open_process(
        [sys.executable, str(tmp_path / "selfserved.py"), str(mount)], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert server.stdout is not None
        said = b""
        with trio.fail_after(10):
            while not said.endswith(b"\n") and (chunk := await server.stdout.receive_some(100)):
                said += chunk
        assert said == b"blocking\n", said  # mounted, and its own lookup waits
        [connection] = fuse_connections() - before
        async with running_child(root, tmp_path, env={"JEEVES_MCP_HEALTH_SOCKET": str(health)}) as child:
            async with httpx.AsyncClient(timeout=30) as http:
                ran = await call_tool(http, child.base, child.headers(), "bash", {"cmd": "echo ok"})
            assert ran["stdout"] == "ok\n", ran
            with trio.fail_after(10):  # the sweep reached the mount and waits there, alone
                while waiting(connection) < 2:  # noqa: ASYNC110 - a counter in /sys
                    await trio.sleep(0.05)
    finally:
        abort_connections_since(before)
        server.kill()
        await server.wait()
        remove_mount(mount, health)


def remove_mount(mount: Path, *files: Path) -> None:
    subprocess.run(["umount", "-l", str(mount)], check=False)
    with contextlib.suppress(OSError):
        mount.rmdir()
    for path in files:
        path.unlink(missing_ok=True)


def test_the_sweep_removes_only_its_users_link_directories_and_looks_at_a_bounded_few(tmp_path: Path) -> None:
    """Another user's directory, a link, a directory holding more than `rg`, a live child's: left.
    Anyone may make such names, so one start looks at SWEEP_MOST of them at most."""
    if os.geteuid() != 0:
        pytest.skip("makes directories owned by another user")
    gone = 4_194_304 + 1  # above any pid_max: no live process
    mine = tmp_path / f"jeeves-rg-{gone}-mine"
    theirs = tmp_path / f"jeeves-rg-{gone}-theirs"
    fuller = tmp_path / f"jeeves-rg-{gone}-fuller"
    live = tmp_path / f"jeeves-rg-{os.getpid()}-live"
    for directory in (mine, theirs, fuller, live):
        directory.mkdir()
        (directory / "rg").symlink_to("/usr/bin/true")
    os.chown(theirs, NOBODY, NOBODY)
    (fuller / "kept").write_text("x")
    (tmp_path / f"jeeves-rg-{gone}-link").symlink_to(mine)
    bash_tool._sweep(str(tmp_path))
    assert not mine.exists() and theirs.is_dir() and (fuller / "kept").exists() and (live / "rg").is_symlink()
    assert (tmp_path / f"jeeves-rg-{gone}-link").is_symlink()

    many = tmp_path / "many"
    many.mkdir()
    for k in range(bash_tool.SWEEP_MOST + 36):
        (many / f"jeeves-rg-{gone + k}-x").mkdir()
    bash_tool._sweep(str(many))
    assert len(os.listdir(many)) == 36
