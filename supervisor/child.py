"""One pruner child process, as the supervisor sees it.

A child runs in its own session and process group, gets its token through
the environment, logs to a per-slot file (so its output survives a daemon
restart and a re-adopted child keeps logging), and prints one ready line
on stdout. A child the daemon started is a `trio.Process`; one re-adopted
after a daemon restart is watched through a pidfd.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from jeeves_mcp.paths import unix_socket_name
from jeeves_mcp.proc import kill_tree, proc_stat, spawning
from jeeves_mcp.pruner_config import SHORT_OF_SPACE
from jeeves_mcp.supervisor.descriptors import out_of_descriptors, restore_for_child

PING = {
    "jsonrpc": "2.0",
    "id": "health",
    "method": "ping",
    "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
}
PING_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "ping",
}
# What a child inherits from the daemon's environment; the rest (secrets) stays behind.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "TMPDIR")


class SpawnError(Exception):
    """The child could not be started or never became ready."""


class SpawnRefused(SpawnError):
    """The daemon would not start the child (`strictmodes.spawn_problem`): nothing ran."""


class SpawnShort(SpawnError):
    """The child could not make its files for want of space or inodes (a run can use up a
    filesystem it shares with the state dir): the host is short, the run not broken."""


# Restarts refused so are retried until there is room, never faster than this.
SHORT_RETRY_S = 1.0


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/PID/stat field 22)."""
    fields = proc_stat(pid)
    return int(fields[19]) if fields is not None else None


@dataclass
class Child:
    pid: int
    port: int
    start_ticks: int
    tree: str | None = None  # JEEVES_MCP_TREE: marks the child's commands, which leave its group
    process: trio.Process | None = None  # None for a re-adopted child
    pidfd: int | None = None
    health_socket: Path | None = None  # where the daemon pings it; None: its TCP port (an older child)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def alive(self) -> bool:
        if self.process is not None:
            return self.process.returncode is None
        if self.pidfd is not None:
            # The pidfd says for sure and needs no file: a /proc read fails when the
            # daemon is out of descriptors, and must not pass for a dead process.
            poller = select.poll()
            poller.register(self.pidfd, select.POLLIN)
            return not poller.poll(0)
        return process_start_ticks(self.pid) == self.start_ticks

    async def wait(self) -> int | None:
        """Until the child exits; its exit code when it was ours to reap."""
        if self.process is not None:
            return await self.process.wait()
        if self.pidfd is not None:
            await trio.lowlevel.wait_readable(self.pidfd)
        return None

    async def stop(self, grace_s: float) -> bool:
        """SIGTERM the child's group, SIGKILL after `grace_s`; True if it had to be killed."""
        with trio.CancelScope(shield=True), trio.move_on_after(grace_s + 10):
            if not self.alive():
                # Dead (killed, crashed): its commands, in sessions of their own, may not be.
                if self.tree is not None:
                    await kill_tree(None, None, grace_s=0, tree=self.tree)
                return False
            exited = trio.Event()

            async def watch() -> None:
                await self.wait()
                exited.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                try:
                    os.killpg(self.pid, signal.SIGTERM)
                except ProcessLookupError:  # no group of that number: a stray need not lead one
                    self.send_signal(signal.SIGTERM)
                except PermissionError:
                    pass
                with trio.move_on_after(grace_s):
                    await exited.wait()
                escalated = not exited.is_set()
                # The child's own commands run in sessions of their own; they carry its tree mark.
                await kill_tree(self.pid, None, grace_s=0, leader=self.process, tree=self.tree)
                if not exited.is_set():  # kill_tree signals the group, which a non-leader is not in
                    self.send_signal(signal.SIGKILL)
                    with trio.move_on_after(1):
                        await exited.wait()
                nursery.cancel_scope.cancel()
            return escalated
        return True

    def send_signal(self, sig: int) -> None:
        """Signal this very process (through its pidfd: never a recycled pid); no error if gone."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self.process is not None:
                if self.process.returncode is None:
                    self.process.send_signal(sig)
            elif self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, sig)

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def tree_mark(token: str) -> str:
    """The child's JEEVES_MCP_TREE value: derived from its token, so it survives re-adoption."""
    return hashlib.sha256(b"tree:" + token.encode()).hexdigest()[:24]


def adopt(pid: int, port: int, start_ticks: int, tree: str | None = None) -> Child | None:
    """Watch a child a previous daemon started, if it is still that process."""
    if process_start_ticks(pid) != start_ticks:
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    if process_start_ticks(pid) != start_ticks:  # the pid was recycled before we opened it
        os.close(pidfd)
        return None
    return Child(pid=pid, port=port, start_ticks=start_ticks, tree=tree, pidfd=pidfd)


def inherited_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in INHERITED_ENV if name in os.environ}


def child_environment(token: str, env: dict[str, str], pruner_endpoint: str | None) -> dict[str, str]:
    """The whole environment of a child: an allow-list of ours, the run's, and its token."""
    child_env = inherited_environment()
    child_env.update(env)
    child_env["JEEVES_MCP_TOKEN"] = token
    child_env["JEEVES_MCP_TREE"] = tree_mark(token)
    run_names = sorted(name for name in env if not name.startswith("JEEVES_MCP_"))
    if run_names:
        child_env["JEEVES_MCP_ENV_PASS"] = ",".join(run_names)
    if pruner_endpoint:
        child_env["JEEVES_MCP_PRUNER_ENDPOINT"] = pruner_endpoint
    return child_env


async def spawn(
    *,
    root: Path,
    token: str,
    port: int,
    log_file: Path,
    log_bytes: int,
    env: dict[str, str],
    timeout_s: float,
    listener: socket.socket | None = None,
) -> Child:
    """Start a cold child (a new interpreter) and wait for its ready line.

    `env` is the child's whole environment (`child_environment`). `listener`: the slot's
    listening socket, which the child serves on (same descriptor number, named by
    JEEVES_MCP_LISTEN_FD) instead of binding `port`. SpawnError, and nothing left behind,
    on failure.
    """
    argv = [
        # -I: neither the run root (the cwd) nor PYTHON* variables may put code on the
        # child's path: a run's workspace must not be able to replace the pruner.
        sys.executable, "-I", "-m", "jeeves_mcp", "pruner",
        "--host", "127.0.0.1", "--root", str(root), "--port", str(port),
        "--log-file", str(log_file), "--log-file-bytes", str(log_bytes),
    ]
    # The token goes through a pipe, not the environment: another run's commands,
    # same user, could read this process's /proc/PID/environ.
    exec_env = {k: v for k, v in env.items() if k != "JEEVES_MCP_TOKEN"} | {"JEEVES_MCP_TOKEN_STDIN": "1"}
    pass_fds: tuple[int, ...] = ()
    if listener is not None:
        pass_fds = (listener.fileno(),)
        exec_env["JEEVES_MCP_LISTEN_FD"] = str(listener.fileno())
    try:
        with spawning():  # the daemon's sweep leaves its status to trio (jeeves_mcp.proc.reaper)
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=str(root),
                env=exec_env,
                start_new_session=True,
                pass_fds=pass_fds,
            )
    except OSError as exc:
        raise SpawnError(f"spawn failed: {exc.strerror or exc}") from exc
    restore_for_child(process.pid)  # its commands start long after this
    child = Child(pid=process.pid, port=0, start_ticks=process_start_ticks(process.pid) or 0,
                  tree=env.get("JEEVES_MCP_TREE"), process=process)
    try:
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(trio.BrokenResourceError):
            await process.stdin.send_all(token.encode() + b"\n")
        await process.stdin.aclose()
        with trio.fail_after(timeout_s):
            ready = await read_ready(process.stdout, child)
        child.port = int(ready["port"])
        return child
    except BaseException as exc:
        await child.stop(grace_s=0.5)
        if isinstance(exc, trio.TooSlowError):
            raise SpawnError(f"no ready line within {timeout_s:g} s") from exc
        raise


async def read_ready(stream: trio.abc.ReceiveStream, child: Child) -> dict[str, Any]:
    """The child's one line on stdout: {"event": "ready", "port": ...}."""
    buffer = b""
    while b"\n" not in buffer:
        chunk = await stream.receive_some(4096)
        if not chunk:
            code = await child.wait()
            status = f" with status {code}" if code is not None else ""
            raise SpawnError(f"child exited{status} before it was ready")
        buffer += chunk
        if len(buffer) > 65536:
            raise SpawnError("child printed no ready line")
    try:
        ready = json.loads(buffer.split(b"\n", 1)[0])
        if ready.get("event") == "failed" and isinstance(ready.get("error"), str):
            kind = SpawnShort if ready.get("errno") in SHORT_OF_SPACE else SpawnError
            raise kind(f"child refused to start: {ready['error'][:500]}")
        if ready.get("event") != "ready" or not isinstance(ready.get("port"), int):
            raise ValueError(ready)
    except ValueError as exc:
        raise SpawnError(f"unexpected first line from child: {buffer[:200]!r}") from exc
    return ready


async def request(
    http: httpx.AsyncClient, child: Child, method: str, path: str, timeout_s: float, **options: Any
) -> httpx.Response:
    """One request from the daemon to `child`: over its health socket when it has one (any
    local user can fill its TCP port's listen queue), else its TCP port (an older child)."""
    if child.health_socket is None:
        return await http.request(method, f"http://127.0.0.1:{child.port}{path}", timeout=timeout_s, **options)
    with unix_socket_name(child.health_socket) as name:
        # verify=False: no certificates loaded per request, and nothing here is TLS.
        transport = httpx.AsyncHTTPTransport(uds=name, verify=False, retries=0)
        async with httpx.AsyncClient(transport=transport, trust_env=False) as private:
            return await private.request(method, f"http://127.0.0.1{path}", timeout=timeout_s, **options)


async def ping(http: httpx.AsyncClient, child: Child, token: str, timeout_s: float) -> str | None:
    """One MCP-level health check (`request`); None when healthy, else what went wrong.

    OSError (EMFILE, ENFILE) when the daemon itself is out of file descriptors: that
    says nothing about the child, and must not count against it."""
    headers = {**PING_HEADERS, "Authorization": f"Bearer {token}"}
    try:
        response = await request(http, child, "POST", "/mcp", timeout_s, json=PING, headers=headers)
    except httpx.TimeoutException:
        return "timeout"
    except httpx.HTTPError as exc:
        if (own := out_of_descriptors(exc)) is not None:
            raise OSError(own.errno, f"daemon out of file descriptors: {own.strerror}") from exc
        return f"connect: {type(exc).__name__}"
    if response.status_code != 200:
        return f"http {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return "invalid json"
    return None if isinstance(body, dict) and "result" in body else "no result"


@dataclass(frozen=True)
class CpuTimes:
    """From /proc/PID/schedstat, in nanoseconds: the child's main thread's time on a CPU and
    waiting for one, and the daemon's main thread's wait; None where it cannot be read (a
    kernel without schedstat)."""

    child_ran: int | None
    child_waited: int | None
    daemon_waited: int | None


def cpu_times(pid: int) -> CpuTimes:
    child = _schedstat(pid)
    return CpuTimes(*child, _schedstat(os.getpid())[1])


def starved(pid: int, since: CpuTimes, problem: str, timeout_s: float, share: float) -> dict[str, float] | None:
    """Whether a ping that timed out was starved of CPU (attack review 7, M1), with the figures;
    None when the failure counts. Starved: the daemon, or the child, waited runnable for a
    CPU `share` of `timeout_s`, or the child is runnable now yet ran less than that share.
    (The kernel adds a wait to schedstat only once the waiting thread runs.) A child stopped,
    deadlocked or stuck on I/O is not runnable; one spinning runs; a refused connection is no
    timeout; without schedstat nothing is known: all of those count."""
    if problem != "timeout":
        return None
    now = cpu_times(pid)
    ran, waited, daemon_waited = (_delta_s(a, b) for a, b in zip(astuple(now), astuple(since), strict=True))
    if ran is None or waited is None:
        return None
    waits = [waited] if daemon_waited is None else [waited, daemon_waited]
    runnable = (proc_stat(pid) or ["?"])[0] == "R"
    if max(waits) >= timeout_s * share or (runnable and ran < timeout_s * share):
        return {"cpu_wait_s": round(max(waits), 3), "ran_s": round(ran, 3)}
    return None


def _delta_s(now: int | None, since: int | None) -> float | None:
    return None if now is None or since is None else (now - since) / 1e9


def _schedstat(pid: int) -> tuple[int | None, int | None]:
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            ran, waited = f.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None, None
