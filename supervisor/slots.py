"""Slots: one pruner child per agent run, from acquire to release.

The API-facing manager: acquire, renew, release, list and the savings of the
runs. Each slot's life (spawn, health checks, restart, degrade, stop) is in
lifecycle.py; one slot's state and view in slot.py.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from jeeves_mcp.client import RUN_ID, RUN_ID_RULE  # one rule for the client and the daemon
from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor import savings
from jeeves_mcp.supervisor.child_start import marker_env
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.forkserver import ForkServer
from jeeves_mcp.supervisor.lifecycle import SlotLifecycle
from jeeves_mcp.supervisor.metrics import Metrics
from jeeves_mcp.supervisor.port_store import PortStore
from jeeves_mcp.supervisor.reconcile import reconcile
from jeeves_mcp.supervisor.records import SlotRecord
from jeeves_mcp.supervisor.slot import Slot, SlotState, iso, record_view
from jeeves_mcp.supervisor.store import SlotStore

log = logging.getLogger("jeeves_mcp.supervisor")


class SlotError(Exception):
    """A control request that cannot be served; `code` is stable, `status` is HTTP."""

    def __init__(self, code: str, message: str, status: int, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.extra = extra  # more fields of the error body


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
        ports: PortStore | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.metrics = metrics
        self.http = http
        self.slots: dict[str, Slot] = {}
        self._nursery: trio.Nursery | None = None
        self.fork_server = (
            ForkServer(children.inherited_environment() | marker_env(config), events)
            # With pruning disabled no slot gets a child: nothing to fork for.
            if config.fork_server and config.pruner_enabled else None
        )
        self.lifecycle = SlotLifecycle(
            config, store, events, metrics, http, self.slots, self.fork_server, ports or PortStore()
        )

    # -- lifecycle of the manager --------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the slot tasks; reconcile with the records first."""
        self.config.log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config.health_dir.mkdir(exist_ok=True, mode=0o700)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await reconcile(self.lifecycle, nursery)
                if self.fork_server is not None:
                    await nursery.start(self.fork_server.run)
                task_status.started()
                try:
                    await trio.sleep_forever()
                finally:
                    self.lifecycle.cgroups.close()
        finally:
            self._report_unsaved()

    def _report_unsaved(self) -> None:
        """Every slot task is over: the records that still could not be written, by name.
        The next daemon restores these runs degraded when the store's note names them
        (`noted`), else finds them as its file has them (a released run still live)."""
        unsaved = self.store.flush()
        if unsaved:
            self.events.publish(
                "store.unsaved_at_exit", logging.ERROR, run_ids=unsaved, noted=self.store.unsaved_noted,
                state_dir=str(self.config.state_dir), remedy="free space on the state dir's filesystem, "
                "then check these runs with `jeeves-mcp ls` once the daemon is back",
            )

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
        """Live restore: end the slot tasks but leave their children serving, each on
        record. Pending writes are tried once more first; a slot whose record still cannot
        be written is stopped as a release would stop it: the next daemon would kill its
        child as a stray (no record) or restart the run from a stale one."""
        unsaved = set(self.store.flush())
        for slot in self.slots.values():
            slot.detach = slot.run_id not in unsaved
            if not slot.detach:
                self.events.publish("mcp_pruner.not_detached", logging.WARNING, run_id=slot.run_id,
                                    reason="its record could not be written")
            slot.scope.cancel()

    def counts(self) -> Counter[str]:
        return Counter(slot.record.state for slot in self.slots.values())

    # -- control requests ----------------------------------------------------

    async def get(self, run_id: str) -> Slot:
        """The run's live slot. A run released before is still NOT_FOUND, saying so and when
        (`ended_at`): a bare 'no slot' left operators wondering whether it ever existed."""
        slot = self.slots.get(run_id)
        if slot is not None:
            return slot
        record = await self.store.get(run_id)
        if record is None or record.state != SlotState.SHUTDOWN:
            raise SlotError("NOT_FOUND", f"no slot for run {run_id!r}", 404)
        ended_at = iso(record.ended_at)
        raise SlotError(
            "NOT_FOUND", f"run {run_id!r} is not active: it was released"
            + (f" at {ended_at}" if ended_at else "") + (f" ({record.reason})" if record.reason else ""),
            404, ended_at=ended_at,
        )

    async def acquire(self, request: AcquireRequest) -> tuple[dict[str, Any], bool]:
        """Start (or find) the run's slot; returns its view and whether it was created."""
        if not RUN_ID.match(request.run_id):
            raise SlotError("INVALID_REQUEST", f"run_id: {RUN_ID_RULE}", 400)
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
        enabled = request.enabled and self.config.pruner_enabled
        try:
            await self._nursery.start(self.lifecycle.run_slot, slot, enabled)
        finally:
            slot.ready.set()
        self.metrics.acquire.observe(time.monotonic() - started)
        if slot.install_problem is not None or slot.overloaded is not None:
            # The refused slot's task is still recording its end: answer once it has left the
            # registry, so that no list or acquire after the refusal finds it holding a place.
            await slot.done.wait()
        if slot.install_problem is not None:
            raise SlotError(
                "INSTALL_BROKEN", f"no pruner child can start: {slot.install_problem}; "
                "the installation is broken (jeeves-mcp doctor)", 503,
            )
        if slot.overloaded is not None:
            raise SlotError("QUEUE_OVERLOADED", slot.overloaded, 429)
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
        slot = await self.get(run_id)
        ttl = ttl_s or slot.record.ttl_s or self.config.default_ttl_s
        if ttl is None:
            raise SlotError("INVALID_REQUEST", "the slot has no lease; give ttl_s", 400)
        slot.record.ttl_s = ttl
        slot.record.expires_at = time.time() + ttl
        slot.lease_changed.set()
        await self.lifecycle.save(slot)
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
            await self.lifecycle.save(slot)
            self.events.publish("mcp_pruner.releasing", run_id=run_id)
            slot.scope.cancel()
        await slot.done.wait()
        self.metrics.release.observe(time.monotonic() - started)
        return slot.view()

    async def savings_by_run(
        self, run_id: str | None = None, *, refresh: bool = True
    ) -> dict[str, dict[str, Any]]:
        """Savings of live slots (asked now when `refresh`) and of ended ones (their records)."""
        live = [slot for slot in self.slots.values() if run_id in (None, slot.run_id)]
        if refresh:
            async with trio.open_nursery() as nursery:
                for slot in live:
                    nursery.start_soon(self.lifecycle.refresh_stats, slot)
        runs = {slot.run_id: savings.total(slot.record.stats) for slot in live}
        for record in await self.store.ended():
            if run_id in (None, record.run_id) and record.run_id not in runs:
                runs[record.run_id] = savings.total(record.stats)
        return runs

    def log_path(self, run_id: str) -> Path:
        return self.config.log_path(run_id)
