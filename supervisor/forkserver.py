"""The daemon's side of the fork server (`jeeves_mcp.zygote`).

`ForkServer.run` keeps one zygote alive (restarting it with backoff if it
dies); `spawn` asks it for a child and waits for the child's ready line, as a
cold spawn does. A forked child is the zygote's child, so the daemon watches
it through a pidfd, like a re-adopted one; the zygote reaps it, and the daemon's
sweep never sees it (the daemon is no subreaper), so only the zygote's own spawn
is announced to the sweep (`spawning()`). Anything wrong with the zygote
itself is `ForkServerUnavailable`, and the caller spawns cold instead.
"""

from __future__ import annotations

import array
import errno
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp.proc import spawning
from jeeves_mcp.supervisor.child import (
    Child,
    SpawnError,
    process_start_ticks,
    read_ready,
    tree_mark,
)
from jeeves_mcp.supervisor.descriptors import restore_for_child
from jeeves_mcp.supervisor.events import EventBus

START_TIMEOUT_S = 30.0
RESTART_BACKOFF_S = (0.5, 30.0)


class ForkServerUnavailable(Exception):
    pass


class ForkServer:
    def __init__(self, env: dict[str, str], events: EventBus) -> None:
        self._env = env
        self._events = events
        self._sock: trio.socket.SocketType | None = None
        self._process: trio.Process | None = None
        self._lock = trio.Lock()
        self.up = trio.Event()
        self.spawns = 0
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self.up.is_set() else None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Keep a zygote running; reports started after the first attempt, up or not."""
        delay = RESTART_BACKOFF_S[0]
        reported = False
        while True:
            try:
                await self._start()
                delay = RESTART_BACKOFF_S[0]
                if not reported:
                    reported = True
                    task_status.started()
                assert self._process is not None
                await self._process.wait()
                self._events.publish("fork_server.exited", logging.WARNING, status=self._process.returncode)
            except (OSError, ForkServerUnavailable, trio.TooSlowError) as exc:
                self._events.publish("fork_server.start_failed", logging.WARNING, error=str(exc))
                if not reported:
                    reported = True
                    task_status.started()
            finally:
                self._close()
            await trio.sleep(delay)
            delay = min(delay * 2, RESTART_BACKOFF_S[1])

    async def _start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with spawning():  # the daemon's sweep leaves its status to trio (jeeves_mcp.proc.reaper)
                self._process = await trio.lowlevel.open_process(
                    [sys.executable, "-I", "-m", "jeeves_mcp.zygote", str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=self._env,
                    start_new_session=True,
                )
            restore_for_child(self._process.pid)  # before it forks any child
        finally:
            theirs.close()
        self._sock = trio.socket.from_stdlib_socket(ours)
        with trio.fail_after(START_TIMEOUT_S):
            hello = json.loads(await self._sock.recv(65536) or b"{}")
        if not hello.get("ready"):
            raise ForkServerUnavailable("the zygote did not say it was ready")
        self.starts += 1
        self.up.set()
        self._events.publish("fork_server.ready", pid=self._process.pid)

    def _close(self) -> None:
        self.up = trio.Event()
        if self._sock is not None:
            self._sock.close()  # the zygote exits on EOF
            self._sock = None
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    async def spawn(
        self, *, root: Path, port: int, token: str, env: dict[str, str],
        log_file: Path, log_bytes: int, timeout_s: float, listener: socket.socket | None = None,
    ) -> Child:
        """`listener`: the slot's listening socket, sent along (SCM_RIGHTS) for the child to
        serve on instead of binding `port`."""
        if not self.up.is_set() or self._sock is None:
            raise ForkServerUnavailable("no fork server running")
        request = {"root": str(root), "port": port, "env": env,
                   "log_file": str(log_file), "log_bytes": log_bytes}
        read_end, write_end = os.pipe()
        passed = [write_end] if listener is None else [write_end, listener.fileno()]
        try:
            async with self._lock:
                # Re-checked under the lock: the spawn before ours may have found the
                # zygote hung and closed it while we waited our turn.
                sock = self._sock
                if not self.up.is_set() or sock is None:
                    raise ForkServerUnavailable("no fork server running")
                try:
                    await sock.sendmsg(
                        [json.dumps(request).encode()],
                        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", passed))],
                    )
                except OSError as exc:
                    if exc.errno != errno.EMSGSIZE:  # a request too big for one message is
                        self._close()                # not the zygote's fault: keep it, start cold
                    raise ForkServerUnavailable(f"fork server unreachable: {exc}") from exc
                # The zygote forks now: its reply must be read whatever happens to our
                # caller, or the next spawn would take this one's pid for its own.
                with trio.CancelScope(shield=True):
                    try:
                        with trio.fail_after(5):
                            reply: dict[str, Any] = json.loads(await sock.recv(65536) or b"{}")
                    except (OSError, ValueError, trio.TooSlowError) as exc:
                        self._close()  # out of step: start a fresh zygote
                        raise ForkServerUnavailable(f"fork server did not answer: {exc}") from exc
            if "pid" not in reply:
                raise ForkServerUnavailable(f"fork server refused: {reply.get('error', reply)}")
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.spawns += 1
        pid = reply["pid"]
        stdout = trio.lowlevel.FdStream(read_end)
        try:
            child = Child(pid=pid, port=0, start_ticks=process_start_ticks(pid) or 0,
                          tree=tree_mark(token), pidfd=os.pidfd_open(pid))
        except OSError as exc:
            await stdout.aclose()
            raise SpawnError(f"forked child {pid} vanished at once") from exc
        try:
            with trio.fail_after(timeout_s):
                ready = await read_ready(stdout, child)
            child.port = int(ready["port"])
            return child
        except BaseException as exc:
            await child.stop(grace_s=0.5)
            child.close()
            if isinstance(exc, trio.TooSlowError):
                raise SpawnError(f"no ready line within {timeout_s:g} s") from exc
            raise
        finally:
            with trio.CancelScope(shield=True):
                await stdout.aclose()
