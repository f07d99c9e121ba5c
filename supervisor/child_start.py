"""Starting a slot's child: its environment and log, the checks before anything runs, the
fork server or a cold spawn, its cgroup, and the health check it must pass in time.
SlotLifecycle (lifecycle.py) decides when; this decides how."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor.cgroups import SlotCgroups
from jeeves_mcp.supervisor.child import Child, SpawnError, SpawnRefused
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.forkserver import ForkServer, ForkServerUnavailable
from jeeves_mcp.supervisor.metrics import Metrics
from jeeves_mcp.supervisor.records import SlotRecord
from jeeves_mcp.supervisor.strictmodes import spawn_problem


def marker_env(config: DaemonConfig) -> dict[str, str]:
    """Marks the daemon's processes in /proc: the stray kill finds them by it."""
    return {"JEEVES_MCP_STATE_DIR": str(config.state_dir)}


@dataclass
class ChildStarter:
    """Starts healthy children for slot records, `config.spawn_concurrency` at a time."""

    config: DaemonConfig = field(repr=False)  # it holds tcp_token
    events: EventBus
    metrics: Metrics
    http: httpx.AsyncClient
    cgroups: SlotCgroups
    fork_server: ForkServer | None
    # Children starting at once compete with the daemon for the CPU; a burst
    # of acquires queues here instead of starving the control API.
    _spawning: trio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self._spawning = trio.Semaphore(self.config.spawn_concurrency)

    async def start(self, record: SlotRecord, port: int, listener: socket.socket | None = None) -> Child:
        """A child for `record` that has answered its health check; SpawnError if none.
        `listener`: the slot's listening socket, for the child to serve on (`port` unused)."""
        log_file = self.config.log_path(record.run_id)
        health_socket = self.config.health_socket(record.run_id)
        env = children.child_environment(
            record.token,
            {**self.config.child_env, **record.env, **marker_env(self.config), "JEEVES_MCP_RUN_ID": record.run_id,
             "JEEVES_MCP_HEALTH_SOCKET": str(health_socket)},  # last: not the run's to choose
            record.pruner_endpoint,
        )
        if (problem := spawn_problem(log_file, env, Path(record.root))) is not None:
            raise SpawnRefused(problem)  # the slot's reason says it; the child's stderr would not
        options: dict[str, Any] = {
            "root": Path(record.root), "token": record.token, "port": port, "env": env,
            "log_file": log_file, "log_bytes": self.config.child_log_bytes,
            "timeout_s": self.config.startup_timeout_s, "listener": listener,
        }
        async with self._spawning:
            return await self._start_healthy(record, options, health_socket)

    async def _start_healthy(self, record: SlotRecord, options: dict[str, Any], health_socket: Path) -> Child:
        child: Child | None = None
        if self.fork_server is not None and self.fork_server.up.is_set():
            try:
                child = await self.fork_server.spawn(**options)
                self.metrics.spawns.labels(mode="fork").inc()
            except ForkServerUnavailable as exc:
                self.events.publish("fork_server.unavailable", logging.WARNING, run_id=record.run_id, error=str(exc))
        if child is None:
            child = await children.spawn(**options)
            self.metrics.spawns.labels(mode="cold").inc()
        child.health_socket = health_socket  # bound before its ready line
        self.cgroups.place(record.run_id, child.pid)  # before it can start any command
        try:
            with trio.fail_after(self.config.startup_timeout_s):
                while (problem := await children.ping(self.http, child, record.token, self.config.health_timeout_s)) is not None:
                    if not child.alive():
                        raise SpawnError(f"child exited during its health check ({problem})")
                    await trio.sleep(0.05)  # ready line printed, socket listening: a retry is rare
        except BaseException as exc:
            with trio.CancelScope(shield=True):
                await child.stop(grace_s=0.5)
                child.close()
                await self.cgroups.kill(record.run_id)
            if isinstance(exc, trio.TooSlowError):
                raise SpawnError("health check did not pass before the startup timeout") from exc
            raise
        return child
