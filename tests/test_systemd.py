"""The systemd units and the daemon's side of the contract: sd_notify, watchdog, socket activation."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from jeeves_mcp.supervisor.daemon import _hypercorn_config
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from tests._daemon import PASS_FDS, TEST_ENV, running_daemon, stop_group
from tests._tree import SOURCE_TREE

REPO = SOURCE_TREE
UNITS = REPO / "systemd"


def unit(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(path)
    return parser


async def install(target: Path, workspaces: str, bin_path: Path | None = None) -> subprocess.CompletedProcess:
    args = ["make", "-s", "install-systemd", f"SYSTEMD_DIR={target}", f"SYSUSERS_DIR={target}/sysusers.d",
            f"WORKSPACES={workspaces}", "SYSTEMCTL=:", "SYSUSERS=:"]
    if bin_path is not None:
        args.append(f"JEEVES_MCP_BIN={bin_path}")
    return await trio.run_process(args, cwd=REPO, capture_stdout=True, capture_stderr=True, check=True)


def test_service_unit_settings() -> None:
    service = unit(UNITS / "jeeves-mcp.service")["Service"]
    assert (service["Type"], service["NotifyAccess"]) == ("notify", "main")
    assert service["Restart"] == "on-failure" and int(service["WatchdogSec"]) >= 10
    # Every slot's socket fits systemd's fd store (port_store.py): none is refused.
    stored = int(service["FileDescriptorStoreMax"])
    assert DaemonConfig.model_fields["max_slots"].default <= stored < int(service["LimitNOFILE"].split(":")[0]) - 20
    assert service["RuntimeDirectory"] == "jeeves-mcp" and service["RuntimeDirectoryPreserve"] == "yes"
    assert service["StateDirectory"].split()[0] == "jeeves-mcp" and service["StateDirectoryMode"] == "0700"
    assert service["ExecStart"] == "@JEEVES_MCP@ daemon"
    assert service["KillMode"] == "mixed"  # live_restore defaults to false
    assert DaemonConfig.model_fields["live_restore"].default is False
    assert (service["ProtectSystem"], service["NoNewPrivileges"], service["PrivateTmp"]) == ("strict", "yes", "no")
    assert {"/tmp", "/var/tmp", "@READ_WRITE@"} <= set(service["ReadWritePaths"].split())
    # Stopping releases every slot (child grace) and then closes the API gracefully.
    graceful_s = DaemonConfig.model_fields["shutdown_timeout_ms"].default / 1000 + _hypercorn_config([]).graceful_timeout
    assert int(service["TimeoutStopSec"]) > graceful_s
    # An unprivileged user of its own, declared for systemd-sysusers; operators share its group.
    assert (service["User"], service["Group"]) == ("jeeves-mcp", "jeeves-mcp") and "DynamicUser" not in service
    sysusers = (UNITS / "jeeves-mcp.sysusers").read_text().splitlines()
    assert [line.split()[:2] for line in sysusers if line and not line.startswith("#")] == [["u", "jeeves-mcp"]]
    sock = unit(UNITS / "jeeves-mcp.socket")["Socket"]
    assert sock["ListenStream"] == "%t/jeeves-mcp/control.sock"
    assert (sock["SocketMode"], sock["SocketGroup"], sock["Service"]) == ("0660", "jeeves-mcp", "jeeves-mcp.service")
    # What keeps agents' bash working: the network, the host's /tmp, JIT runtimes (node, java).
    assert {"AF_INET", "AF_INET6", "AF_UNIX"} <= set(service["RestrictAddressFamilies"].split())
    assert "PrivateNetwork" not in service and "IPAddressDeny" not in service
    assert "MemoryDenyWriteExecute" not in service and service["SystemCallErrorNumber"] == "EPERM"
    # What runs share through IPC and /dev/shm stays the unit's (attack review 7, M2).
    assert (service["PrivateIPC"], service["RemoveIPC"]) == ("yes", "yes")
    assert service["TemporaryFileSystem"].split(":")[0] == "/dev/shm"
    assert "-/dev/mqueue" in service["InaccessiblePaths"].split()
    # soft:hard (one value would set both). The daemon raises its soft limit to the hard one:
    # systemd's 1024 is what a run's connections to the TCP control port used up (attack T1).
    # Its children get the soft one back, no more than select()'s FD_SETSIZE (1024).
    soft, hard = service["LimitNOFILE"].split(":")
    assert (int(soft), int(hard)) == (1024, 65536)


async def test_install_substitutes_and_systemd_analyze_verifies(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    target = tmp_path / "units"
    done = await install(target, f"{tmp_path}/ws /srv/more")
    assert b"next: sudo systemctl enable --now jeeves-mcp.socket" in done.stdout
    service = unit(target / "jeeves-mcp.service")["Service"]
    assert service["ExecStart"] == f"{(REPO / '.venv' / 'bin' / 'jeeves-mcp')} daemon"
    assert service["ReadWritePaths"].split() == [f"-{tmp_path}/ws", "-/srv/more", "/tmp", "/var/tmp"]
    assert service["ProtectHome"] == ("read-only" if str(REPO).startswith(("/home/", "/root/")) else "yes")
    # No placeholder left (`@system-service` is a syscall set, not one).
    assert not [line for line in (target / "jeeves-mcp.service").read_text().splitlines()
                if re.search(r"@[A-Z_]+@", line) and not line.startswith("#")]
    home = await install(tmp_path / "home-units", "/home/someone/runs")
    assert home.returncode == 0
    assert unit(tmp_path / "home-units" / "jeeves-mcp.service")["Service"]["ProtectHome"] == "read-only"

    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    verified = await trio.run_process(
        [analyze, "verify", str(target / "jeeves-mcp.socket"), str(target / "jeeves-mcp.service")],
        capture_stdout=True, capture_stderr=True, check=False,
    )
    assert verified.returncode == 0, verified.stderr.decode()
    assert verified.stderr.decode().strip() == "", verified.stderr.decode()  # no unknown or bad directives
    assert (target / "sysusers.d" / "jeeves-mcp.conf").read_text() == (UNITS / "jeeves-mcp.sysusers").read_text()


MAX_EXPOSURE = 4.5


async def test_systemd_analyze_security_exposure(tmp_path: Path) -> None:
    """The installed service's exposure, as `systemd-analyze security --offline=true` scores it."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    target = tmp_path / "units"
    await install(target, "/srv/jeeves/workspaces")
    with trio.fail_after(60):
        scored = await trio.run_process(
            [analyze, "security", "--offline=true", "--no-pager", str(target / "jeeves-mcp.service")],
            capture_stdout=True, capture_stderr=True, check=False,
        )
    report = scored.stdout.decode()
    found = re.search(r"Overall exposure level for jeeves-mcp\.service: ([0-9.]+)", report)
    if found is None and "offline" in scored.stderr.decode():
        pytest.skip(f"this systemd-analyze has no --offline: {scored.stderr.decode().strip()}")
    assert found, report + scored.stderr.decode()
    assert float(found[1]) <= MAX_EXPOSURE, report


async def test_sd_notify_ready_status_watchdog_stopping(tmp_path: Path) -> None:
    async with running_daemon(tmp_path, {"WATCHDOG_USEC": "200000"}) as daemon:
        with trio.fail_after(30):
            while "WATCHDOG=1" not in daemon.notifications:
                await daemon.notified.wait()
        assert daemon.notifications[0] == "READY=1"
        assert "STATUS=serving 0 slots" in daemon.notifications
        os.kill(daemon.process.pid, signal.SIGTERM)
        with trio.fail_after(30):
            await daemon.process.wait()
            while "STOPPING=1" not in daemon.notifications:
                await daemon.notified.wait()
        assert daemon.process.returncode == 0


class Notifications:
    """What arrived on a NOTIFY_SOCKET, line by line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = trio.Event()

    async def wait_for(self, line: str, timeout_s: float = 30) -> None:
        with trio.fail_after(timeout_s):
            while line not in self.lines:
                await self.changed.wait()


@asynccontextmanager
async def notifications(path: Path) -> AsyncIterator[Notifications]:
    """A NOTIFY_SOCKET datagram socket at `path`, collecting what arrives."""
    received = Notifications()
    receiver = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    await receiver.bind(str(path))

    async def listen() -> None:
        while True:
            received.lines.extend((await receiver.recv(4096)).decode().splitlines())
            received.changed.set()
            received.changed = trio.Event()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(listen)
            yield received
            nursery.cancel_scope.cancel()
    finally:
        receiver.close()


async def test_socket_activation_serves_the_inherited_socket(tmp_path: Path) -> None:
    activate = shutil.which("systemd-socket-activate")
    if activate is None:
        pytest.skip("systemd-socket-activate is not installed")
    control = tmp_path / "control.sock"
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JEEVES_", "LISTEN_"))}
    env.update(TEST_ENV, NOTIFY_SOCKET=str(tmp_path / "notify.sock"))
    async with notifications(tmp_path / "notify.sock") as received, trio.open_nursery() as nursery:
        # Like jeeves-mcp.socket: systemd-socket-activate listens, and on the first connection
        # execs the daemon with the listening socket as fd 3 (LISTEN_FDS=1, LISTEN_PID=its pid).
        process = await trio.lowlevel.open_process(
            # It hands the daemon only the variables named with -E (and a few like PATH).
            [activate, "--listen", str(control), *(f"-E{name}" for name in (*TEST_ENV, "NOTIFY_SOCKET")),
             sys.executable, "-m", "jeeves_mcp", "daemon",
             "--state-dir", str(state), "--socket", str(tmp_path / "unused.sock")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
            start_new_session=True,
        )
        log = bytearray()
        listening = trio.Event()

        async def drain() -> None:  # the daemon logs to the same pipe once exec'd
            assert process.stderr is not None
            async for chunk in process.stderr:
                log.extend(chunk)
                if b"Listening on" in log:
                    listening.set()

        nursery.start_soon(drain)
        try:
            with trio.fail_after(30):
                await listening.wait()
            inode = control.stat().st_ino
            assert "READY=1" not in received.lines  # nothing runs until someone connects
            cli_env = {**env, "JEEVES_MCP_SOCKET": str(control)}
            listed = await trio.run_process(
                [sys.executable, "-m", "jeeves_mcp", "ls", "--json"], capture_stdout=True,
                capture_stderr=True, check=False, env=cli_env)
            assert listed.returncode == 0, listed.stderr.decode() + log.decode()
            assert json.loads(listed.stdout) == {"slots": []}
            await received.wait_for("READY=1")
            assert not (tmp_path / "unused.sock").exists()  # it served the inherited socket
            os.kill(process.pid, signal.SIGTERM)
            with trio.fail_after(30):
                await process.wait()
            # The socket belongs to whoever activated the daemon: it must not unlink it.
            assert control.exists() and control.stat().st_ino == inode
        finally:
            with trio.CancelScope(shield=True):
                await stop_group(process)


# Receives, as systemd passes them, the socket unit's fd and then the fd store's (3, 4, ...), and
# prints what the daemon's start-up makes of them.
SORT_PASSED_FDS = """import json, os, sys
from pathlib import Path
from jeeves_mcp.supervisor.daemon import control_socket, socket_activated, stored_slot_sockets
control = control_socket(Path("/nonexistent/control.sock"))
stored = stored_slot_sockets()
print(json.dumps({
    "activated": socket_activated(),
    "control": control.getsockname(),
    "stored": {name: sock.getsockname() for name, sock in stored.items()},
    "inheritable": [os.get_inheritable(fd) for fd in range(3, 3 + int(os.environ["LISTEN_FDS"]))],
}))
"""


def test_the_control_socket_and_stored_slot_sockets_are_told_apart_by_name(tmp_path: Path) -> None:
    """systemd passes the socket unit's fd first and the fd store's after it, each named in
    LISTEN_FDNAMES: the control socket is the one that is not a slot's, whatever its name."""
    from jeeves_mcp.supervisor.port_store import slot_socket_name

    control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    control.bind(str(tmp_path / "control.sock"))
    control.listen()
    slot = socket.socket()
    slot.bind(("127.0.0.1", 0))
    slot.listen()
    port = slot.getsockname()[1]
    name = slot_socket_name("run:with:colons", port)
    with control, slot:
        done = subprocess.run(
            [sys.executable, "-c", PASS_FDS, f"jeeves-mcp.socket:{name}", f"{control.fileno()},{slot.fileno()}",
             "-c", SORT_PASSED_FDS],
            pass_fds=(control.fileno(), slot.fileno()), capture_output=True, text=True,
            timeout=60, check=False, cwd=tmp_path,
        )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["activated"] is True and seen["control"] == str(tmp_path / "control.sock"), seen
    assert seen["stored"] == {name: ["127.0.0.1", port]}, seen
    assert seen["inheritable"] == [False, False], seen  # none reaches what the daemon starts


def test_the_unit_that_delegates_cgroups_leaves_them_writable() -> None:
    """ProtectControlGroups=yes mounts /sys/fs/cgroup read-only for the whole unit, the subtree
    Delegate=yes hands over included: the unit set both, and under systemd no slot could get
    the cgroup that kills what a crashed child left (the review of 2026-11-29)."""
    settings = dict(
        line.split("=", 1) for line in (UNITS / "jeeves-mcp.service").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    assert settings.get("Delegate") == "yes"
    assert settings.get("ProtectControlGroups", "no") == "no", settings.get("ProtectControlGroups")
