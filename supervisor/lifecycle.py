"""One slot's life, from its task's start to its end.

Every slot is a task in the manager's nursery, started with `nursery.start`
so that `acquire` returns only once the child answers its health check (or
the slot is known to be disabled). The task owns the child: it watches the
process and pings it, restarts it on the same port and token with capped
exponential backoff, degrades the slot after `max_restarts`, and on release
(its cancel scope cancelled) stops the child's whole tree in a shielded,
time-bounded cleanup. A restarted daemon starts the same tasks for the slots
it re-adopts (see reconcile.py).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import trio
from hypercorn.config import Config as HypercornConfig

from jeeves_mcp.capped_listener import listening_socket
from jeeves_mcp.preflight import child_start_problem
from jeeves_mcp.proc import kill_tree
from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor import savings
from jeeves_mcp.supervisor.cgroups import SlotCgroups
from jeeves_mcp.supervisor.child import SpawnError, SpawnRefused, SpawnShort
from jeeves_mcp.supervisor.child_start import ChildStarter
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from jeeves_mcp.supervisor.descriptors import DESCRIPTOR_ERRNOS
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.forkserver import ForkServer
from jeeves_mcp.supervisor.metrics import Metrics
from jeeves_mcp.supervisor.port_store import PortStore, refuse_connections
from jeeves_mcp.supervisor.slot import Slot, SlotState
from jeeves_mcp.supervisor.store import SlotStore

log = logging.getLogger("jeeves_mcp.supervisor")

# bind(127.0.0.1:0) with every ephemeral port held, or no loopback address to bind.
PORT_ERRNOS = (errno.EADDRINUSE, errno.EADDRNOTAVAIL)
STATS_EVERY_PINGS = 6  # savings are collected on release anyway; this bounds a crash's loss
# A failed ping does not count when the child or the daemon was runnable but off a CPU for
# this share of its timeout (child.starved): the host was short of CPU, not the child sick.
STARVED_SHARE = 0.5


class SlotLifecycle:
    """The slot tasks and what they need. `slots` is the manager's registry: a slot
    leaves it when its task ends."""

    def __init__(
        self,
        config: DaemonConfig,
        store: SlotStore,
        events: EventBus,
        metrics: Metrics,
        http: httpx.AsyncClient,
        slots: dict[str, Slot],
        fork_server: ForkServer | None,
        ports: PortStore,
    ) -> None:
        self.ports = ports
        self.config = config
        self.store = store
        self.events = events
        self.metrics = metrics
        self.http = http
        self.slots = slots
        self.cgroups = SlotCgroups.for_state_dir(config.state_dir)
        self.starter = ChildStarter(config, events, metrics, http, self.cgroups, fork_server)

    async def refresh_stats(self, slot: Slot) -> None:
        """Ask the slot's child what it has counted so far (kept in the record)."""
        child = slot.child
        if child is None or slot.state != SlotState.RUNNING:
            return
        reported = await savings.fetch(self.http, child, slot.record.token, self.config.health_timeout_s)
        if reported is not None and slot.child is child:
            self.metrics.count_savings(slot.record.stats.get("current", {}), reported)
            slot.record.stats = {"base": slot.record.stats.get("base", {}), "current": reported}

    async def save(self, slot: Slot) -> None:
        """Write the slot's record; a failure (full disk, ...) is an event, not an error."""
        problem = await self.store.save(slot.record)
        if problem is not None:
            self.events.publish(
                "store.write_failed", logging.ERROR, run_id=slot.run_id,
                error=f"{type(problem).__name__}: {problem}", pending=self.store.pending,
            )

    # -- the slot task ---------------------------------------------------------

    async def _degrade_after_fault(self, slot: Slot, exc: Exception) -> None:
        """The error boundary of a slot task: a bug or an unexpected error here
        degrades this slot (child stopped, event sent) and never the daemon."""
        log.error("slot.task_failed", exc_info=exc, extra={"run_id": slot.run_id})
        self.metrics.task_failures.inc()
        error = f"{type(exc).__name__}: {exc}"[:500]
        child, slot.child = slot.child, None
        if child is not None:
            with trio.CancelScope(shield=True):
                await child.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
                child.close()
        slot.record.reason = f"degraded: internal error: {error}"
        await self._transition(slot, SlotState.DEGRADED, "mcp_pruner.degraded", error=f"internal error: {error}")

    async def _transition(self, slot: Slot, state: SlotState, event: str, **fields: Any) -> None:
        """Record the new state, then tell: whoever sees the event finds the state in place."""
        previous = slot.record.state
        slot.record.state = state
        if state == SlotState.SHUTDOWN:
            slot.record.ended_at = time.time()
        await self.save(slot)
        if state == SlotState.SHUTDOWN and self.slots.get(slot.run_id) is slot:
            del self.slots[slot.run_id]
        level = logging.WARNING if state in (SlotState.DEGRADED, SlotState.DISABLED) else logging.INFO
        self.events.publish(
            event, level, run_id=slot.run_id, state=str(state), previous=previous, **fields
        )

    async def _guarded(self, slot: Slot, body: Callable[[], Awaitable[None]],
                       on_fault: Callable[[], None] | None = None) -> None:
        """A slot task's error boundary: `body` runs in the slot's scope; an unexpected error
        degrades that slot (it stays until its lease ends, the daemon goes on), and the slot is
        always finished."""
        try:
            with slot.scope:
                try:
                    await body()
                except Exception as exc:
                    await self._degrade_after_fault(slot, exc)
                    if on_fault is not None:
                        on_fault()
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self.finish(slot)

    async def run_slot(
        self, slot: Slot, enabled: bool, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False

        def report() -> None:
            nonlocal started
            started = True
            task_status.started()

        def report_once() -> None:
            if not started:
                report()

        try:
            await self._guarded(slot, lambda: self._start_and_supervise(slot, enabled, report), report_once)
        finally:
            if not started and slot.scope.cancelled_caught:
                # Released while starting (nothing else is propagating): the
                # acquirer gets the final state rather than a task that never started.
                report()

    async def _start_and_supervise(self, slot: Slot, enabled: bool, report: Any) -> None:
        if not enabled:
            slot.record.reason = "config_disabled"
            await self._transition(slot, SlotState.DISABLED, "mcp_pruner.disabled", reason="config_disabled")
            report()
            await self._lease_watch(slot)
            return
        await self._transition(slot, SlotState.STARTING, "mcp_pruner.starting")
        try:
            self.hold_port(slot, 0)
            slot.child = await self.starter.start(slot.record, port=0, listener=slot.listener)
        except (OSError, SpawnShort) as exc:
            remedy = "release slots or raise the limit"
            if isinstance(exc, SpawnShort):  # no inode or space for its files: a run can use them up
                reason, remedy = str(exc), "free space or inodes there"
            elif exc.errno in DESCRIPTOR_ERRNOS:
                reason = f"out of file descriptors ({os.strerror(exc.errno)})"
            elif exc.errno in PORT_ERRNOS:  # every ephemeral port held: a run's bash can do it
                reason = f"no free port on 127.0.0.1 ({os.strerror(exc.errno)})"
            else:
                raise
            # The host is short, not the run broken: 429 (as past max_slots), the slot ends at once.
            slot.record.reason, slot.overloaded = reason, f"{reason}; {remedy}"
            self.events.publish("mcp_pruner.overloaded", logging.WARNING, run_id=slot.run_id, error=reason)
            report()
            return
        except SpawnError as exc:
            self.metrics.start_failures.inc()
            problem = None if isinstance(exc, SpawnRefused) else await child_start_problem()
            if problem is not None:
                # Not this run's failure: every run would fail. The acquirer gets an error
                # (503 INSTALL_BROKEN), not a disabled slot to go on without.
                slot.install_problem = problem
                slot.record.reason = f"install_broken: {problem}"
                self.events.publish(
                    "mcp_pruner.install_broken", logging.ERROR, run_id=slot.run_id, error=problem
                )
                report()
                return
            slot.record.reason = f"start_failed: {exc}"
            self.release_port(slot)  # no child will serve it, none will refuse on it
            await self._transition(slot, SlotState.DISABLED, "mcp_pruner.start_failed", error=str(exc))
            report()
            await self._lease_watch(slot)
            return
        await self._mark_running(slot, "mcp_pruner.ready")
        report()
        await self._supervise(slot)

    async def _mark_running(self, slot: Slot, event: str) -> None:
        assert slot.child is not None
        slot.record.pid = slot.child.pid
        slot.record.pid_start = slot.child.start_ticks
        slot.record.port = slot.child.port
        await self._transition(
            slot, SlotState.RUNNING, event, host="127.0.0.1", port=slot.child.port, pid=slot.child.pid
        )

    async def _supervise(self, slot: Slot) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._lease_watch, slot)
            while True:
                reason = await self._watch_child(slot)
                await self._restart_or_degrade(slot, reason)

    async def _restart_or_degrade(self, slot: Slot, reason: str) -> None:
        if slot.child is not None:  # None: it died while the daemon was down
            await slot.child.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
            slot.child.close()
        if slot.listener is None and slot.record.port:
            # A re-adopted child held the port itself, and it went with it: take it back at once
            # (retried below, before each start, if someone was quicker).
            with contextlib.suppress(OSError):
                self.hold_port(slot, slot.record.port)
        await self.cgroups.kill(slot.run_id, remove=False)  # what a killed child could not stop
        slot.record.stats = savings.fold_current(slot.record.stats)
        short = 0  # restarts the host's want of space or inodes failed: not counted
        while True:
            if slot.record.restarts >= self.config.max_restarts:
                slot.child = None
                slot.record.reason = f"degraded: {reason}"
                await self._transition(
                    slot, SlotState.DEGRADED, "mcp_pruner.degraded", error=reason, restarts=slot.record.restarts
                )
                await refuse_connections(slot.listener)  # unavailable for the rest of the run
            slot.record.restarts += 1
            self.metrics.restarts.inc()
            exponent = min(slot.record.restarts - 1 + short, 30)  # short of space: retried for hours
            delay = min(self.config.restart_backoff_max_s, self.config.restart_backoff_s * 2**exponent)
            delay = max(delay, children.SHORT_RETRY_S if short else 0) * random.uniform(0.5, 1.0)
            await self._transition(
                slot, SlotState.STARTING, "mcp_pruner.restarting",
                error=reason, attempt=slot.record.restarts, delay_s=round(delay, 3),
            )
            await trio.sleep(delay)
            try:
                self.hold_port(slot, slot.record.port or 0)
            except OSError as exc:
                reason = f"restart failed: cannot listen on 127.0.0.1:{slot.record.port} again: {exc.strerror or exc}"
                continue
            try:
                slot.child = await self.starter.start(slot.record, port=slot.record.port or 0, listener=slot.listener)
            except SpawnShort as exc:  # retried until the host has room again, never degraded for it
                short, slot.record.restarts = short + 1, slot.record.restarts - 1
                self.events.publish("mcp_pruner.overloaded", logging.WARNING, run_id=slot.run_id, error=str(exc))
                continue
            except (SpawnError, OSError) as exc:  # OSError: the daemon out of descriptors, memory, ...
                reason = f"restart failed: {exc}"  # retried as any other, not a task crash (T1)
                continue
            await self._mark_running(slot, "mcp_pruner.restarted")
            return

    async def _watch_child(self, slot: Slot) -> str:
        """Until the child exits or fails `health_failures` pings in a row; says which."""
        child = slot.child
        assert child is not None
        outcome = ""
        async with trio.open_nursery() as nursery:

            async def exited() -> None:
                nonlocal outcome
                code = await child.wait()
                outcome = f"exited (status {code})" if code is not None else "exited"
                nursery.cancel_scope.cancel()

            async def health() -> None:
                nonlocal outcome
                failures = pings = starved = 0
                while True:
                    await trio.sleep(self.config.health_interval_s)
                    times = children.cpu_times(child.pid)
                    try:
                        problem = await children.ping(self.http, child, slot.record.token, self.config.health_timeout_s)
                    except OSError as exc:  # the daemon's own EMFILE: nothing learnt of the child
                        starved += 1
                        self.events.publish("daemon.out_of_descriptors", logging.WARNING, run_id=slot.run_id,
                                            error=exc.strerror, consecutive=starved)
                        continue
                    starved = 0
                    if problem is None:
                        failures = 0
                        pings += 1
                        self.metrics.health_passes.inc()
                        if pings % STATS_EVERY_PINGS == 0:
                            await self.refresh_stats(slot)
                        continue
                    cpu = children.starved(child.pid, times, problem, self.config.health_timeout_s, STARVED_SHARE)
                    if cpu is not None:  # neither a crash nor health: the host's CPU was short
                        self.events.publish("mcp_pruner.health_starved", logging.INFO, run_id=slot.run_id,
                                            error=problem, **cpu)
                        continue
                    failures += 1
                    self.metrics.health_failures.inc()
                    self.events.publish(
                        "mcp_pruner.health_failed", logging.WARNING,
                        run_id=slot.run_id, error=problem, consecutive=failures,
                    )
                    if failures >= self.config.health_failures:
                        outcome = f"unreachable ({problem})"
                        nursery.cancel_scope.cancel()
                        return

            nursery.start_soon(exited)
            nursery.start_soon(health)
        event = "mcp_pruner.exited" if outcome.startswith("exited") else "mcp_pruner.unreachable"
        self.events.publish(event, logging.WARNING, run_id=slot.run_id, error=outcome)
        return outcome

    async def _lease_watch(self, slot: Slot) -> None:
        """Release the slot when its lease runs out without a renewal."""
        while True:
            expires_at = slot.record.expires_at
            with trio.move_on_after(
                max(expires_at - time.time(), 0) if expires_at is not None else float("inf")
            ) as waiting:
                await slot.lease_changed.wait()
            slot.lease_changed = trio.Event()
            if waiting.cancelled_caught:
                self.metrics.lease_expiries.inc()
                slot.record.reason = "lease_expired"
                self.events.publish("mcp_pruner.lease_expired", logging.WARNING, run_id=slot.run_id)
                slot.scope.cancel()
                return

    def hold_port(self, slot: Slot, port: int) -> None:
        """The slot's listening socket on 127.0.0.1:`port` (0: any), unless it has one (bound
        earlier, or handed back by systemd's store at reconcile): kept until the slot ends, every
        child of the slot serves on it (close-on-exec here; only the child it is passed to gets
        it, and the child's commands do not). A copy goes to systemd's store, if any."""
        if slot.listener is None:
            slot.listener = listening_socket("127.0.0.1", port, HypercornConfig.backlog)
            self.ports.keep(slot.run_id, slot.listener)

    def release_port(self, slot: Slot) -> None:
        """Close the slot's socket; unless its child is detached (it keeps its own copy, and
        systemd its for the next daemon), drop systemd's copy too: the port is free again."""
        if slot.listener is not None:
            if not slot.detach:
                self.ports.forget(slot.run_id, slot.listener)
            slot.listener.close()
            slot.listener = None

    async def finish(self, slot: Slot) -> None:
        """Shielded end of a slot task: stop the child (unless detached) and record it."""
        try:
            if slot.detach:
                self.events.publish("mcp_pruner.detached", run_id=slot.run_id, pid=slot.record.pid)
                return
            previous = slot.state
            if slot.child is not None:
                with trio.move_on_after(self.config.health_timeout_s):
                    await self.refresh_stats(slot)
                escalated = await slot.child.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
                slot.child.close()
                if escalated:
                    self.events.publish("mcp_pruner.kill_escalated", logging.WARNING, run_id=slot.run_id)
            # With a child or not: the child's own unlink dies with a SIGKILL, and a slot whose
            # last child was killed (degraded since) has none left to stop.
            with contextlib.suppress(OSError):
                self.config.health_socket(slot.run_id).unlink(missing_ok=True)
            event = {
                SlotState.RUNNING: "mcp_pruner.stopped",
                SlotState.STARTING: "mcp_pruner.stopped",
                SlotState.DEGRADED: "mcp_pruner.shutdown_after_degraded",
            }.get(previous, "mcp_pruner.not_running")
            await self._transition(slot, SlotState.SHUTDOWN, event)
        except Exception as exc:  # the end of one slot must not end the daemon
            log.error("slot.finish_failed", exc_info=exc, extra={"run_id": slot.run_id})
            self.metrics.task_failures.inc()
        finally:
            if not slot.detach:
                await self.cgroups.kill(slot.run_id)
            self.release_port(slot)
            slot.child = None
            slot.ready.set()
            slot.done.set()
            if self.slots.get(slot.run_id) is slot:
                del self.slots[slot.run_id]

    async def run_adopted(self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async def body() -> None:
            self.events.publish("mcp_pruner.adopted", run_id=slot.run_id, pid=slot.record.pid,
                                port=slot.record.port)
            task_status.started()
            await self._supervise(slot)

        await self._guarded(slot, body)

    async def run_recovered(
        self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        reason = "child gone while the daemon was down"

        async def body() -> None:
            self.events.publish("mcp_pruner.exited", logging.WARNING, run_id=slot.run_id, error=reason)
            task_status.started()
            if slot.record.token:  # its commands may have outlived it
                await kill_tree(None, None, grace_s=0, tree=children.tree_mark(slot.record.token))
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._lease_watch, slot)
                await self._restart_or_degrade(slot, reason)
                nursery.cancel_scope.cancel()
            await self._supervise(slot)

        await self._guarded(slot, body)

    async def run_idle(self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with slot.scope:
                task_status.started()
                if slot.state == SlotState.DEGRADED:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._lease_watch, slot)
                        if slot.record.port:  # the previous daemon held it: nobody else may listen there
                            with contextlib.suppress(OSError):
                                self.hold_port(slot, slot.record.port)
                            nursery.start_soon(refuse_connections, slot.listener)
                else:
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self.finish(slot)
