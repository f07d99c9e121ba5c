"""A slot's TCP port stays the slot's while its child restarts (attack-seventh M1): the daemon
holds the listening socket for the slot's whole life and hands it to every child it starts, so
another local user looping on bind() during a restart never gets it, and the agent's URL never
leads anywhere else. Real daemon, real children, a real process of another uid."""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from jeeves_mcp.listener_owners import LISTEN, proc_net_address
from jeeves_mcp.supervisor.port_store import slot_socket_name
from tests._daemon import EventLog, running_daemon, stop_group, watch_events

OTHER_UID = 2002

# Binds 127.0.0.1:PORT in a tight loop for SECONDS; "BOUND" and a hold if it ever succeeds.
SQUATTER = r"""
import errno, socket, sys, time
port, end = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
tries = other = 0
print("LOOPING", flush=True)
while time.monotonic() < end:
    tries += 1
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen(8)
    except OSError as exc:
        s.close()
        if exc.errno != errno.EADDRINUSE:
            other += 1
        continue
    print("BOUND", flush=True)
    time.sleep(max(end - time.monotonic(), 0))
    break
print("TRIES", tries, "OTHER", other, flush=True)
"""


async def squat_during_restart(setpriv: str, port: int, pid: int, events: EventLog) -> bytes:
    """SIGKILL `pid` while a process of another uid loops on bind() to `port`, until the slot
    is restarted (or degraded); what the squatter printed."""
    after = len(events.events)
    squatter = await trio.lowlevel.open_process(
        [setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
         sys.executable, "-I", "-c", SQUATTER, str(port), "6"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd="/", start_new_session=True,
    )
    out = b""
    try:
        assert squatter.stdout is not None
        with trio.fail_after(10):
            while b"\n" not in out:
                out += await squatter.stdout.receive_some(4096)
        assert out == b"LOOPING\n", out
        os.kill(pid, signal.SIGKILL)  # a crash, the OOM killer
        with trio.fail_after(30):
            while not any(event["event"] in ("mcp_pruner.restarted", "mcp_pruner.degraded")
                          for event in events.events[after:]):
                await events.changed.wait()
            while chunk := await squatter.stdout.receive_some(4096):
                out += chunk
            await squatter.wait()
    finally:
        if squatter.returncode is None:
            os.killpg(squatter.pid, signal.SIGKILL)
            with trio.CancelScope(shield=True):
                await squatter.wait()
        if squatter.stdout is not None:
            await squatter.stdout.aclose()
    return out


def assert_never_bound(out: bytes) -> None:
    assert b"BOUND" not in out, out  # every bind failed...
    tries, other = out.split()[2], out.split()[4]
    assert int(tries) > 100 and other == b"0", out  # ...with EADDRINUSE


def needs_setpriv() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root: the squatter runs as another uid (setpriv)")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is needed to run the squatter as another uid")
    return setpriv


def close_on_exec_sockets(pid: int) -> tuple[int, int]:
    """How many of `pid`'s sockets are close-on-exec, of how many."""
    cloexec = total = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                continue
            flags = Path(f"/proc/{pid}/fdinfo/{fd}").read_text().split("flags:")[1].split()[0]
        except (OSError, IndexError):
            continue
        total += 1
        cloexec += bool(int(flags, 8) & 0o2000000)
    return cloexec, total


@pytest.mark.parametrize("fork_server", ["true", "false"])
async def test_another_uid_cannot_take_a_restarting_childs_port(
    tmp_path: Path, run_root: Path, fork_server: str
) -> None:
    setpriv = needs_setpriv()
    async with running_daemon(tmp_path, {"JEEVES_MCP_FORK_SERVER": fork_server}) as daemon:
        async with daemon.client() as control, watch_events(daemon) as events:
            slot = await control.acquire("victim", run_root)
            assert slot["state"] == "running"
            port, old_pid = slot["port"], slot["pid"]
            out = await squat_during_restart(setpriv, port, old_pid, events)
            assert_never_bound(out)
            now = await control.get("victim")
            assert now["state"] == "running", now
            assert now["port"] == port and now["pid"] not in (None, old_pid), now
            cloexec, total = close_on_exec_sockets(now["pid"])  # the run's commands get none
            assert cloexec == total >= 2, (cloexec, total)  # the TCP port's and the health socket
            # The agent's next call, at its old URL, is answered by the new child.
            headers = {**now["mcp"]["headers"], "Content-Type": "application/json",
                       "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "ping"}
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping",
                    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}
            async with httpx.AsyncClient(trust_env=False) as http:
                answer = await http.post(slot["mcp"]["url"], json=ping, headers=headers, timeout=10)
            assert answer.status_code == 200 and "result" in answer.json(), answer.text
            await control.release("victim")


@pytest.mark.parametrize("under_systemd", [True, False])
async def test_a_readopted_childs_port_is_taken_back_when_it_dies(
    tmp_path: Path, run_root: Path, under_systemd: bool
) -> None:
    """After a live-restore daemon restart, under systemd the new daemon holds the re-adopted
    child's socket again at once (its fd store); without it the child holds its socket alone
    (the gap left: between its death and the new daemon's bind), and the daemon binds the port
    again as soon as the child is gone. Either way it holds it from then on."""
    setpriv = needs_setpriv()
    async with running_daemon(tmp_path, {"JEEVES_MCP_LIVE_RESTORE": "true"}) as daemon:
        async with daemon.client() as control:
            slot = await control.acquire("kept", run_root)
        await stop_group(daemon.process)  # live restore: the child stays
        if not under_systemd:  # nobody kept a copy: the restart gets nothing back
            for stored in daemon.fd_store.values():
                stored.close()
            daemon.fd_store.clear()
        daemon.process = await daemon.restart(stored=under_systemd)  # type: ignore[attr-defined]
        await daemon.wait_ready(2)
        async with daemon.client() as control, watch_events(daemon) as events:
            adopted = await control.get("kept")
            assert (adopted["state"], adopted["pid"]) == ("running", slot["pid"]), adopted
            assert holds(daemon.process.pid, listening_inode(slot["port"])) is under_systemd
            after = len(events.events)
            os.kill(slot["pid"], signal.SIGKILL)
            await events.wait_for("mcp_pruner.restarted", "kept", after=after)
            second = await control.get("kept")
            assert (second["state"], second["port"]) == ("running", slot["port"]), second
            assert second["pid"] not in (None, slot["pid"]), second
            assert_never_bound(await squat_during_restart(setpriv, slot["port"], second["pid"], events))
            third = await control.get("kept")
            assert (third["state"], third["port"]) == ("running", slot["port"]), third
            assert third["pid"] not in (None, second["pid"]), third
            await control.release("kept")


async def test_a_degraded_slot_keeps_its_port_and_resets_each_connection(tmp_path: Path, run_root: Path) -> None:
    setpriv = needs_setpriv()
    async with running_daemon(tmp_path, {"JEEVES_MCP_MAX_RESTARTS": "0"}) as daemon:
        async with daemon.client() as control, watch_events(daemon) as events:
            slot = await control.acquire("gone", run_root)
            assert_never_bound(await squat_during_restart(setpriv, slot["port"], slot["pid"], events))
            now = await control.get("gone")
            assert (now["state"], now["port"]) == ("degraded", slot["port"]), now
            async with httpx.AsyncClient(trust_env=False) as http:
                with trio.fail_after(5), pytest.raises(httpx.TransportError) as refused:
                    await http.post(slot["mcp"]["url"], json={}, headers=slot["mcp"]["headers"], timeout=10)
            assert not isinstance(refused.value, httpx.TimeoutException), refused.value  # reset, not left queued
            await control.release("gone")
        with socket.socket() as probe:  # released: the port is free again
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", slot["port"]))


def listening_inode(port: int) -> str:
    """The inode of the socket listening on 127.0.0.1:`port` (/proc/net/tcp, read as the
    client's listener check reads it)."""
    loopback = ipaddress.ip_address("127.0.0.1")
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == LISTEN and proc_net_address(fields[1]) == (loopback, port):
            return fields[9]
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def holds(pid: int, inode: str) -> bool:
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                return True
        except OSError:
            continue
    return False


async def test_systemds_fd_store_keeps_each_slots_port_across_a_daemon_crash(tmp_path: Path, run_root: Path) -> None:
    """The gap 4718481 left (attack-eighth): a slot with no live child when the daemon died
    (restarting, degraded) had its port free until the new daemon bound it again, and a
    process of another uid that bound it first got the agent's token; a re-adopted child held
    its socket alone. Now each slot's socket is also in systemd's file descriptor store
    (FDSTORE=1, named by its port; the test plays systemd), which hands it back at the restart:
    nobody can bind the port while the daemon is down, and the new daemon holds it again."""
    setpriv = needs_setpriv()
    env = {"JEEVES_MCP_LIVE_RESTORE": "true", "JEEVES_MCP_RESTART_BACKOFF_S": "5"}
    async with running_daemon(tmp_path, env) as daemon:
        async with daemon.client() as control, watch_events(daemon) as events:
            waiting = await control.acquire("waiting", run_root)
            adopted = await control.acquire("adopted", run_root)
            names = {slot_socket_name(slot["run_id"], slot["port"]) for slot in (waiting, adopted)}
            assert names <= set(daemon.fd_store), daemon.fd_store
            os.kill(waiting["pid"], signal.SIGKILL)  # its restart waits out the 5 s backoff
            await events.wait_for("mcp_pruner.exited", "waiting")
        os.kill(daemon.process.pid, signal.SIGKILL)  # a crash: systemd restarts it
        await daemon.process.wait()
        squatter = await trio.lowlevel.open_process(
            [setpriv, f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups",
             sys.executable, "-I", "-c", SQUATTER, str(waiting["port"]), "1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd="/", start_new_session=True,
        )
        assert squatter.stdout is not None
        async with squatter.stdout:
            with trio.fail_after(20):
                out = b""
                while chunk := await squatter.stdout.receive_some(4096):
                    out += chunk
                await squatter.wait()
        assert_never_bound(out)  # while no daemon runs
        daemon.process = await daemon.restart()  # type: ignore[attr-defined]
        await daemon.wait_ready(2)
        async with daemon.client() as control, watch_events(daemon) as events:
            # The re-adopted child's socket is held by the daemon again, at once.
            assert holds(daemon.process.pid, listening_inode(adopted["port"]))
            with trio.fail_after(30):
                while (now := await control.get("waiting"))["state"] != "running":
                    await events.changed.wait()
            assert now["port"] == waiting["port"] and now["pid"] not in (None, waiting["pid"]), now
            assert holds(daemon.process.pid, listening_inode(waiting["port"]))
            async with httpx.AsyncClient(trust_env=False) as http:
                answer = await http.get(waiting["mcp"]["url"].removesuffix("/mcp") + "/health", timeout=10)
            assert answer.status_code == 200, answer.text
            await control.release("waiting")
            await control.release("adopted")
        assert not names & set(daemon.fd_store), daemon.fd_store  # FDSTOREREMOVE=1 on release
        for slot in (waiting, adopted):
            with socket.socket() as probe:  # released: the port is free again
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(("127.0.0.1", slot["port"]))


async def test_every_socket_of_the_daemon_is_close_on_exec(tmp_path: Path, run_root: Path) -> None:
    """What the daemon starts gets none of its sockets: a slot's listener, the control socket.
    hypercorn marks the sockets it serves inheritable (for its reloader's workers); the control
    socket's copy it served was (attack-eighth, LOW: every spawn closes other descriptors, so
    nothing got it, but one that did not would have)."""
    tcp = {"JEEVES_MCP_TCP_HOST": "127.0.0.1", "JEEVES_MCP_TCP_PORT": "0", "JEEVES_MCP_TCP_TOKEN": secrets.token_urlsafe(32)}
    async with running_daemon(tmp_path, tcp) as daemon:
        async with daemon.client() as control:
            await control.acquire("fds", run_root)
            cloexec, total = close_on_exec_sockets(daemon.process.pid)
            assert cloexec == total >= 3, (cloexec, total)  # control (Unix and TCP), the slot's port
            await control.release("fds")
