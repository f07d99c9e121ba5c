"""Slots: one pruner child per agent run, from acquire to release.

Every slot is a task in the manager's nursery, started with `nursery.start`
so that `acquire` returns only once the child answers its health check (or
the slot is known to be disabled). The task owns the child: it watches the
process and pings it, restarts it on the same port and token with capped
exponential backoff, degrades the slot after `max_restarts`, and on release
(its cancel scope cancelled) stops the child's whole tree in a shielded,
time-bounded cleanup. States follow seed 000's runner lifecycle:

    init → disabled | starting → running ⇄ starting (restart) → degraded → shutdown
"""

from __future__ import annotations

import errno
import logging
import os
import random
import re
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from jeeves_mcp.preflight import child_start_problem
from jeeves_mcp.proc import kill_tree, processes_with_env
from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor import savings
from jeeves_mcp.supervisor.child import Child, SpawnError
from jeeves_mcp.supervisor.config import DaemonConfig
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.forkserver import ForkServer, ForkServerUnavailable
from jeeves_mcp.supervisor.metrics import Metrics
from jeeves_mcp.supervisor.slot import Slot, SlotState, iso, record_view
from jeeves_mcp.supervisor.store import SlotRecord, SlotStore

log = logging.getLogger("jeeves_mcp.supervisor")

STATS_EVERY_PINGS = 6  # savings are collected on release anyway; this bounds a crash's loss
RUN_ID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")  # \Z: "$" would let a final "\n" in


class SlotError(Exception):
    """A control request that cannot be served; `code` is stable, `status` is HTTP."""

    def __init__(self, code: str, message: str, status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass
class AcquireRequest:
    run_id: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    pruner_endpoint: str | None = None
    ttl_s: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    enabled: bool = True


def _keys_differing(old: dict[str, str], new: dict[str, str]) -> str:
    """The keys whose values differ (never the values: env may hold secrets)."""
    return ", ".join(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)))


class SlotManager:
    def __init__(
        self,
        config: DaemonConfig,
        store: SlotStore,
        events: EventBus,
        metrics: Metrics,
        http: httpx.AsyncClient,
    ) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.metrics = metrics
        self.http = http
        self.slots: dict[str, Slot] = {}
        self._nursery: trio.Nursery | None = None
        # Children starting at once compete with the daemon for the CPU; a burst
        # of acquires queues here instead of starving the control API.
        self._spawning = trio.Semaphore(config.spawn_concurrency)
        self.fork_server = (
            ForkServer(children.inherited_environment() | self._marker_env(), events)
            # With pruning disabled no slot gets a child: nothing to fork for.
            if config.fork_server and config.enabled else None
        )

    def _marker_env(self) -> dict[str, str]:
        return {"JEEVES_MCP_STATE_DIR": str(self.config.state_dir)}  # marks our processes in /proc

    # -- lifecycle of the manager --------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the slot tasks; reconcile with the records first."""
        self.config.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await self._reconcile()
            if self.fork_server is not None:
                await nursery.start(self.fork_server.run)
            task_status.started()
            await trio.sleep_forever()

    async def release_all(self) -> None:
        async with trio.open_nursery() as nursery:
            for run_id in list(self.slots):
                nursery.start_soon(self._release_quietly, run_id)

    async def _release_quietly(self, run_id: str) -> None:
        try:
            await self.release(run_id)
        except SlotError:
            pass

    def detach_all(self) -> None:
        """Live restore: end the slot tasks but leave their children serving."""
        for slot in self.slots.values():
            slot.detach = True
            slot.scope.cancel()

    def counts(self) -> Counter[str]:
        return Counter(slot.record.state for slot in self.slots.values())

    # -- control requests ----------------------------------------------------

    def get(self, run_id: str) -> Slot:
        slot = self.slots.get(run_id)
        if slot is None:
            raise SlotError("NOT_FOUND", f"no slot for run {run_id!r}", 404)
        return slot

    async def acquire(self, request: AcquireRequest) -> tuple[dict[str, Any], bool]:
        """Start (or find) the run's slot; returns its view and whether it was created."""
        if not RUN_ID.match(request.run_id):
            raise SlotError("INVALID_REQUEST", "run_id: 1-128 of A-Z a-z 0-9 . _ : @ -", 400)
        while (existing := self.slots.get(request.run_id)) is not None:
            if not existing.scope.cancel_called:
                await existing.ready.wait()
                if not existing.scope.cancel_called and existing.state != SlotState.SHUTDOWN:
                    differences = self._conflicts(existing.record, request)
                    if differences:
                        # Idempotent only for the same run: another root (or env, ...) under
                        # this id is a runner's mistake, not a slot to hand back silently.
                        raise SlotError(
                            "CONFLICT",
                            f"run {request.run_id!r} is already acquired with {'; '.join(differences)}; "
                            "release it first or use another run id",
                            409,
                        )
                    return existing.view(), False
            # Being released (or its lease ran out): that slot's endpoint is going away.
            # Wait for the release to finish, then this acquire starts the run anew.
            await existing.done.wait()
        if len(self.slots) >= self.config.max_slots:
            raise SlotError(
                "QUEUE_OVERLOADED", f"{len(self.slots)} slots already, the limit is {self.config.max_slots}", 429
            )
        assert self._nursery is not None, "the manager is not running"
        now = time.time()
        ttl = request.ttl_s or self.config.default_ttl_s
        slot = Slot(
            SlotRecord(
                run_id=request.run_id,
                state=SlotState.INIT,
                root=str(request.root),
                token=secrets.token_urlsafe(32),
                started_at=now,
                env=request.env,
                labels=request.labels,
                pruner_endpoint=request.pruner_endpoint or self.config.pruner_endpoint,
                ttl_s=ttl,
                expires_at=now + ttl if ttl else None,
            )
        )
        self.slots[slot.run_id] = slot
        started = time.monotonic()
        enabled = request.enabled and self.config.enabled
        try:
            await self._nursery.start(self._run_slot, slot, enabled)
        finally:
            slot.ready.set()
        self.metrics.acquire.observe(time.monotonic() - started)
        if slot.install_problem is not None:
            raise SlotError(
                "INSTALL_BROKEN", f"no pruner child can start: {slot.install_problem}; "
                "the installation is broken (jeeves-mcp doctor)", 503,
            )
        if slot.overloaded is not None:
            raise SlotError("QUEUE_OVERLOADED", f"{slot.overloaded}; release slots or raise the limit", 429)
        if slot.state == SlotState.SHUTDOWN:
            raise SlotError("RELEASED", f"run {request.run_id!r} was released while its slot was starting", 409)
        return slot.view(), True

    def _conflicts(self, record: SlotRecord, request: AcquireRequest) -> list[str]:
        """How `request` differs from the slot it would re-acquire: the root always counts;
        env, labels and pruner endpoint when the request gives them. A lease is renewed
        with `renew`, so a different ttl is no conflict."""
        found = []
        if str(request.root) != record.root:
            found.append(f"root {record.root} (not {request.root})")
        if request.env and request.env != record.env:
            found.append(f"other env ({_keys_differing(record.env, request.env)} differ)")
        if request.labels and request.labels != record.labels:
            found.append(f"other labels ({_keys_differing(record.labels, request.labels)} differ)")
        endpoint = request.pruner_endpoint
        if endpoint and endpoint != record.pruner_endpoint:
            found.append(f"pruner endpoint {record.pruner_endpoint or 'none'} (not {endpoint})")
        return found

    async def renew(self, run_id: str, ttl_s: float | None) -> dict[str, Any]:
        slot = self.get(run_id)
        ttl = ttl_s or slot.record.ttl_s or self.config.default_ttl_s
        if ttl is None:
            raise SlotError("INVALID_REQUEST", "the slot has no lease; give ttl_s", 400)
        slot.record.ttl_s = ttl
        slot.record.expires_at = time.time() + ttl
        slot.lease_changed.set()
        await self.save(slot)
        self.events.publish("mcp_pruner.renewed", run_id=run_id, expires_at=iso(slot.record.expires_at))
        return slot.view()

    async def release(self, run_id: str) -> dict[str, Any]:
        slot = self.slots.get(run_id)
        if slot is None:
            record = await self.store.get(run_id)
            if record is None:
                raise SlotError("NOT_FOUND", f"no slot for run {run_id!r}", 404)
            return record_view(record)  # released before: same answer again
        started = time.monotonic()
        if not slot.scope.cancel_called:
            # On record before it acts: a daemon that dies mid-release finishes it at
            # restart (`ended_at` on a live record) instead of bringing the run back.
            slot.record.ended_at = time.time()
            await self.save(slot)
            self.events.publish("mcp_pruner.releasing", run_id=run_id)
            slot.scope.cancel()
        await slot.done.wait()
        self.metrics.release.observe(time.monotonic() - started)
        return slot.view()

    async def refresh_stats(self, slot: Slot) -> None:
        """Ask the slot's child what it has counted so far (kept in the record)."""
        child = slot.child
        if child is None or slot.state != SlotState.RUNNING:
            return
        reported = await savings.fetch(self.http, child.port, slot.record.token, self.config.health_timeout_s)
        if reported is not None and slot.child is child:
            self.metrics.count_savings(slot.record.stats.get("current", {}), reported)
            slot.record.stats = {"base": slot.record.stats.get("base", {}), "current": reported}

    async def savings_by_run(
        self, run_id: str | None = None, *, refresh: bool = True
    ) -> dict[str, dict[str, Any]]:
        """Savings of live slots (asked now when `refresh`) and of ended ones (their records)."""
        live = [slot for slot in self.slots.values() if run_id in (None, slot.run_id)]
        if refresh:
            async with trio.open_nursery() as nursery:
                for slot in live:
                    nursery.start_soon(self.refresh_stats, slot)
        runs = {slot.run_id: savings.total(slot.record.stats) for slot in live}
        for record in await self.store.ended():
            if run_id in (None, record.run_id) and record.run_id not in runs:
                runs[record.run_id] = savings.total(record.stats)
        return runs

    def log_path(self, run_id: str) -> Path:
        return self.config.log_dir / f"{run_id}.log"

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

    async def _run_slot(
        self, slot: Slot, enabled: bool, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False

        def report() -> None:
            nonlocal started
            started = True
            task_status.started()

        try:
            with slot.scope:
                try:
                    await self._start_and_supervise(slot, enabled, report)
                except Exception as exc:
                    await self._degrade_after_fault(slot, exc)
                    if not started:
                        report()
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(slot)
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
            slot.child = await self._spawn(slot, port=0)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # Out of file descriptors: the daemon is full, not this run broken. The
            # acquirer gets 429 (as past max_slots) and the slot ends at once.
            slot.overloaded = f"out of file descriptors ({os.strerror(exc.errno)})"
            slot.record.reason = slot.overloaded
            self.events.publish("mcp_pruner.overloaded", logging.WARNING, run_id=slot.run_id, error=slot.overloaded)
            report()
            return
        except SpawnError as exc:
            self.metrics.start_failures.inc()
            problem = await child_start_problem()
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

    async def _spawn(self, slot: Slot, port: int) -> Child:
        record = slot.record
        env = children.child_environment(
            record.token,
            {**self.config.child_env, **record.env, **self._marker_env(), "JEEVES_MCP_RUN_ID": record.run_id},
            record.pruner_endpoint,
        )
        options: dict[str, Any] = {
            "root": Path(record.root), "token": record.token, "port": port, "env": env,
            "log_file": self.log_path(record.run_id), "log_bytes": self.config.child_log_bytes,
            "timeout_s": self.config.startup_timeout_s,
        }
        async with self._spawning:
            return await self._spawn_healthy(record, options)

    async def _spawn_healthy(self, record: SlotRecord, options: dict[str, Any]) -> Child:
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
            if isinstance(exc, trio.TooSlowError):
                raise SpawnError("health check did not pass before the startup timeout") from exc
            raise
        return child

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
        slot.record.stats = savings.fold_current(slot.record.stats)
        while True:
            if slot.record.restarts >= self.config.max_restarts:
                slot.child = None
                slot.record.reason = f"degraded: {reason}"
                await self._transition(
                    slot, SlotState.DEGRADED, "mcp_pruner.degraded", error=reason, restarts=slot.record.restarts
                )
                await trio.sleep_forever()  # unavailable for the rest of the run
            slot.record.restarts += 1
            self.metrics.restarts.inc()
            delay = min(
                self.config.restart_backoff_max_s,
                self.config.restart_backoff_s * 2 ** (slot.record.restarts - 1),
            ) * random.uniform(0.5, 1.0)
            await self._transition(
                slot, SlotState.STARTING, "mcp_pruner.restarting",
                error=reason, attempt=slot.record.restarts, delay_s=round(delay, 3),
            )
            await trio.sleep(delay)
            try:
                slot.child = await self._spawn(slot, port=slot.record.port or 0)
            except SpawnError as exc:
                reason = f"restart failed: {exc}"
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
                failures = pings = 0
                while True:
                    await trio.sleep(self.config.health_interval_s)
                    problem = await children.ping(self.http, child, slot.record.token, self.config.health_timeout_s)
                    if problem is None:
                        failures = 0
                        pings += 1
                        if pings % STATS_EVERY_PINGS == 0:
                            await self.refresh_stats(slot)
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

    async def _finish(self, slot: Slot) -> None:
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
            slot.child = None
            slot.ready.set()
            slot.done.set()
            if self.slots.get(slot.run_id) is slot:
                del self.slots[slot.run_id]

    # -- a restarted daemon ------------------------------------------------------

    async def _reconcile(self) -> None:
        """Re-adopt the live children our records name; close the records of dead ones;
        kill children of ours that no record names (a crash between spawn and save)."""
        adopted: set[int] = set()
        for record in await self.store.live():
            child = None
            if record.pid and record.pid_start and record.port:
                child = children.adopt(
                    record.pid, record.port, record.pid_start, children.tree_mark(record.token)
                )
            slot = Slot(record)
            self.slots[record.run_id] = slot
            if record.ended_at is not None:  # released, and the daemon died before it was done
                if child is not None:
                    await child.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
                    child.close()
                if record.token:
                    await kill_tree(None, None, grace_s=0, tree=children.tree_mark(record.token))
                slot.record.reason = "released; finished after a daemon restart"
                await self._finish(slot)
                continue
            if child is not None and record.state == SlotState.RUNNING:
                slot.child = child
                adopted.add(child.pid)
                await self._nursery_start(self._run_adopted, slot)
                continue
            if child is not None:  # alive but the slot was not serving: stop it
                await child.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
                child.close()
            if record.state in (SlotState.DISABLED, SlotState.DEGRADED):
                await self._nursery_start(self._run_idle, slot)
                continue
            if record.state in (SlotState.RUNNING, SlotState.STARTING):
                # The run still holds this endpoint: restart (or degrade) as if the
                # daemon had seen the child die, rather than drop the slot.
                await self._nursery_start(self._run_recovered, slot)
                continue
            slot.record.reason = "child gone while the daemon was down"
            await self._finish(slot)
        await self._kill_strays(adopted)

    async def _nursery_start(self, task: Any, slot: Slot) -> None:
        assert self._nursery is not None
        await self._nursery.start(task, slot)
        slot.ready.set()

    async def _run_adopted(self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with slot.scope:
                self.events.publish("mcp_pruner.adopted", run_id=slot.run_id, pid=slot.record.pid,
                                    port=slot.record.port)
                task_status.started()
                try:
                    await self._supervise(slot)
                except Exception as exc:
                    await self._degrade_after_fault(slot, exc)
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(slot)

    async def _run_recovered(
        self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        reason = "child gone while the daemon was down"
        try:
            with slot.scope:
                self.events.publish("mcp_pruner.exited", logging.WARNING, run_id=slot.run_id, error=reason)
                task_status.started()
                try:
                    if slot.record.token:  # its commands may have outlived it
                        await kill_tree(None, None, grace_s=0, tree=children.tree_mark(slot.record.token))
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._lease_watch, slot)
                        await self._restart_or_degrade(slot, reason)
                        nursery.cancel_scope.cancel()
                    await self._supervise(slot)
                except Exception as exc:
                    await self._degrade_after_fault(slot, exc)
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(slot)

    async def _run_idle(self, slot: Slot, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with slot.scope:
                task_status.started()
                if slot.state == SlotState.DEGRADED:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._lease_watch, slot)
                else:
                    await self._lease_watch(slot)
        finally:
            with trio.CancelScope(shield=True):
                await self._finish(slot)

    async def _kill_strays(self, adopted: set[int]) -> None:
        marker = f"JEEVES_MCP_STATE_DIR={self.config.state_dir}".encode()
        strays = await trio.to_thread.run_sync(processes_with_env, marker)
        for pid in strays:
            if pid in adopted:
                continue
            start = children.process_start_ticks(pid)
            stray = children.adopt(pid, 0, start) if start is not None else None
            if stray is not None:
                self.events.publish("mcp_pruner.stray_killed", logging.WARNING, pid=pid)
                await stray.stop(grace_s=self.config.shutdown_timeout_ms / 1000)
                stray.close()
