"""A broken installation is an error, loudly: the daemon does not serve when no child can
start, `doctor` says so, and a child that fails because of the installation is an error for
the runner (503 INSTALL_BROKEN), not a quiet `disabled` slot (that stays for one run's failure).

An "installation" here is a small venv whose site-packages holds a copy of the package as a
wheel installs it (supervisor/ and cli/ inside jeeves_mcp/), copied from wherever this
interpreter imports it (the tree, or the wheel under `make test-installed`), with the
dependencies reached through a .pth file: it can be broken without touching the original.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sysconfig
import venv
from pathlib import Path

import trio

import jeeves_mcp
import jeeves_mcp.cli
import jeeves_mcp.supervisor
from jeeves_mcp.client import ControlError
from jeeves_mcp.preflight import child_start_problem
from tests._daemon import running_daemon

MISSING = "No module named 'jeeves_mcp.mcp.transports'"


def installed_copy(tmp: Path) -> tuple[str, Path]:
    """(python, package dir) of a venv with the package copied in, as a wheel installs it."""
    home = tmp / "venv"
    venv.create(home, with_pip=False)
    site = next((home / "lib").glob("python*/site-packages"))
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    package = site / "jeeves_mcp"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(jeeves_mcp.__file__).parent, package, ignore=ignore)
    for folder, module in (("supervisor", jeeves_mcp.supervisor), ("cli", jeeves_mcp.cli)):
        shutil.rmtree(package / folder, ignore_errors=True)  # a wheel's own copy is there already
        shutil.copytree(Path(module.__file__ or "").parent, package / folder, ignore=ignore)
    return str(home / "bin" / "python"), package


def break_it(package: Path) -> None:
    """The defect of issue 10: a wheel without jeeves_mcp/mcp/transports."""
    shutil.move(str(package / "mcp" / "transports"), str(package.parent / "transports.removed"))


def repair(package: Path) -> None:
    shutil.move(str(package.parent / "transports.removed"), str(package / "mcp" / "transports"))


async def run(argv: list[str], tmp: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, **(env or {})}
    full.pop("JEEVES_MCP_SOCKET", None)
    with trio.fail_after(90):
        return await trio.run_process(argv, cwd=tmp, env=full, stdin=subprocess.DEVNULL, capture_stdout=True,
                                      capture_stderr=True, check=False)


async def test_preflight_passes_on_this_installation() -> None:
    assert await child_start_problem() is None


async def test_the_copy_is_the_installation_its_python_uses(tmp_path: Path) -> None:
    python, package = installed_copy(tmp_path)
    done = await run([python, "-I", "-c", "import jeeves_mcp.mcp.transports.http as m; print(m.__file__)"], tmp_path)
    assert done.stdout.decode().strip() == str(package / "mcp" / "transports" / "http.py")
    break_it(package)
    done = await run([python, "-I", "-m", "jeeves_mcp.preflight"], tmp_path)
    assert done.returncode == 1 and MISSING in done.stderr.decode()


async def test_the_daemon_refuses_to_serve_when_no_child_can_start(tmp_path: Path) -> None:
    python, package = installed_copy(tmp_path)
    break_it(package)
    notify_path = tmp_path / "notify.sock"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(notify_path))
    receiver.setblocking(False)
    control = tmp_path / "control.sock"
    done = await run([python, "-m", "jeeves_mcp", "daemon", "--state-dir", str(tmp_path / "state"),
                      "--socket", str(control)], tmp_path, {"NOTIFY_SOCKET": str(notify_path)})
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("jeeves-mcp daemon: cannot start a pruner child:"), stderr
    assert MISSING in last and last.endswith("[INSTALL_BROKEN]")
    assert not control.exists()  # it never served
    try:
        heard = receiver.recv(4096).decode()
    except BlockingIOError:
        heard = ""
    receiver.close()
    assert "READY=1" not in heard


async def test_doctor_runs_the_same_check(tmp_path: Path) -> None:
    python, package = installed_copy(tmp_path)
    break_it(package)
    done = await run([python, "-m", "jeeves_mcp", "doctor", "--json", "--state-dir", str(tmp_path / "state")],
                     tmp_path, {"JEEVES_MCP_SOCKET": str(tmp_path / "none.sock")})
    report = json.loads(done.stdout)
    children = next(c for c in report["checks"] if c["name"] == "children")
    assert done.returncode != 0 and not report["ok"]
    assert children["status"] == "fail" and MISSING in children["detail"]


async def test_a_child_that_cannot_start_because_of_the_installation_is_an_error_for_the_runner(
    tmp_path: Path,
) -> None:
    python, package = installed_copy(tmp_path)
    root = tmp_path / "root"
    root.mkdir()
    # Cold children: each start imports the package from disk as it is installed now.
    async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": "false"}, python=python) as daemon, \
            daemon.client() as control:
        assert (await control.acquire("before", root))["state"] == "running"
        await control.release("before")
        break_it(package)  # an upgrade gone wrong under the running daemon
        try:
            await control.acquire("after", root)
        except ControlError as exc:
            error = exc
        else:
            raise AssertionError("acquire answered a slot")
        assert error.code == "INSTALL_BROKEN" and error.status == 503 and MISSING in error.message
        # The runner's other road, the CLI: one line on stderr, exit 1, nothing on stdout.
        cli = await run([python, "-m", "jeeves_mcp", "--socket", str(daemon.socket), "acquire", "after-cli",
                         "--root", str(root), "--json"], tmp_path)
        line = cli.stderr.decode().strip()
        assert cli.returncode == 1 and cli.stdout == b"", line
        assert line.startswith("jeeves-mcp acquire:") and line.endswith("[INSTALL_BROKEN]") and MISSING in line
        with trio.fail_after(30):  # the failed slot's task ends: nothing of it keeps running
            # No event of the daemon's is ours to wait on through the client: a bounded poll.
            while any(s["run_id"] in ("after", "after-cli") and s["state"] != "shutdown"  # noqa: ASYNC110
                      for s in (await control.list())["slots"]):
                await trio.sleep(0.05)
        repair(package)
        # A run's env cannot reach the pruner's own interpreter (issue 12 #19): cold children
        # start with -I, so PYTHONHOME/PYTHONPATH are the commands' business only.
        own = await control.acquire("own", root, env={"PYTHONHOME": str(tmp_path / "nowhere"),
                                                      "PYTHONPATH": str(tmp_path / "nowhere")})
        assert own["state"] == "running", own
        await control.release("own")
        assert (await control.acquire("repaired", root))["state"] == "running"
        await control.release("repaired")
        assert daemon.our_processes() == []

