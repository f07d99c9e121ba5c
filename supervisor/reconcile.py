"""A restarted daemon: re-adopt the children its records name, finish what the
last daemon left half done, restore degraded the runs whose last record it could
not save, kill the children of ours no record names, and remove the health
sockets no slot owns."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from typing import Any

import trio

from jeeves_mcp.proc import kill_tree, process_real_uid, processes_with_env
from jeeves_mcp.supervisor import child as children
from jeeves_mcp.supervisor.daemon_config import DaemonConfig
from jeeves_mcp.supervisor.events import EventBus
from jeeves_mcp.supervisor.lifecycle import SlotLifecycle
from jeeves_mcp.supervisor.slot import Slot, SlotState
from jeeves_mcp.supervisor.unsaved import EVERY_RUN

UNSAVED_REASON = ("its last record was not saved before the daemon stopped (state disk full?), "
                  "so it may have been released: release it, and acquire it again to go on")


async def reconcile(life: SlotLifecycle, nursery: trio.Nursery) -> None:
    """Re-adopt the live children our records name; close the records of dead ones;
    kill children of ours that no record names (a crash between spawn and save).
    The slots' tasks are started in `nursery`."""

    async def start(task: Any, slot: Slot) -> None:
        await nursery.start(task, slot)
        slot.ready.set()

    config = life.config
    adopted: set[int] = set()
    unsaved = life.store.unsaved_before
    for record in await life.store.live():
        child = None
        if record.pid and record.pid_start and record.port:
            child = children.adopt(
                record.pid, record.port, record.pid_start, children.tree_mark(record.token)
            )
            health_socket = config.health_socket(record.run_id)
            if child is not None and health_socket.is_socket():  # else a child from before health sockets
                child.health_socket = health_socket
        slot = Slot(record)
        if record.port:  # the socket systemd kept for it, if it did: held again from now on
            slot.listener = life.ports.take(record.run_id, record.port)
        life.slots[record.run_id] = slot
        if record.ended_at is not None:  # released, and the daemon died before it was done
            if child is not None:
                await child.stop(grace_s=config.shutdown_timeout_ms / 1000)
                child.close()
            if record.token:
                await kill_tree(None, None, grace_s=0, tree=children.tree_mark(record.token))
            slot.record.reason = "released; finished after a daemon restart"
            await life.finish(slot)
            continue
        if record.run_id in unsaved or EVERY_RUN in unsaved:
            await _hold_unsaved(life, slot, child)
            await start(life.run_idle, slot)
            continue
        if child is not None and record.state == SlotState.RUNNING:
            slot.child = child
            adopted.add(child.pid)
            await start(life.run_adopted, slot)
            continue
        if child is not None:  # alive but the slot was not serving: stop it
            await child.stop(grace_s=config.shutdown_timeout_ms / 1000)
            child.close()
        if record.state in (SlotState.DISABLED, SlotState.DEGRADED):
            await start(life.run_idle, slot)
            continue
        if record.state in (SlotState.RUNNING, SlotState.STARTING):
            # The run still holds this endpoint: restart (or degrade) as if the
            # daemon had seen the child die, rather than drop the slot.
            await start(life.run_recovered, slot)
            continue
        slot.record.reason = "child gone while the daemon was down"
        await life.finish(slot)
    life.ports.close_unclaimed()  # kept for runs no record names any more
    await life.store.settle_unsaved()  # after their degraded records: a crash before still finds them
    await kill_strays(config, life.events, adopted)
    sweep_health_sockets(config, life.events, life.slots)


async def _hold_unsaved(life: SlotLifecycle, slot: Slot, child: children.Child | None) -> None:
    """A run whose record the last daemon could not save: the file's is stale (a release
    lost, say), so the run is degraded, its child and commands stopped, none started."""
    if child is not None:  # not adopted: its record is not to be trusted
        await child.stop(grace_s=life.config.shutdown_timeout_ms / 1000)
        child.close()
    if slot.record.token:
        await kill_tree(None, None, grace_s=0, tree=children.tree_mark(slot.record.token))
    previous = slot.record.state
    slot.record.state = SlotState.DEGRADED
    slot.record.reason = f"degraded: {UNSAVED_REASON}"
    await life.save(slot)
    life.events.publish("mcp_pruner.degraded", logging.WARNING, run_id=slot.run_id, state=str(SlotState.DEGRADED),
                        previous=previous, error=UNSAVED_REASON)


async def kill_strays(config: DaemonConfig, events: EventBus, adopted: set[int]) -> None:
    """Stop every child of ours that is not one of the `adopted`: a process marked as this
    daemon's (its state dir in the environment) and of the daemon's own uid. All at once,
    within one grace, since the API serves only after this."""
    marker = f"JEEVES_MCP_STATE_DIR={config.state_dir}".encode()
    found = await trio.to_thread.run_sync(processes_with_env, marker)
    me = os.getuid()
    strays: list[children.Child] = []
    skipped = 0
    for pid in found:
        if pid in adopted:
            continue
        start = children.process_start_ticks(pid)
        # The marker is public (`ps` shows the state dir): any user can carry it. Our children
        # run as our uid, which no other user can give a process; a setuid program keeps its
        # caller's real uid. Read after the start time: adopt() then checks it is the same process.
        if start is None or process_real_uid(pid) != me:
            skipped += start is not None
            continue
        stray = children.adopt(pid, 0, start)
        if stray is not None:
            strays.append(stray)
    if skipped:  # once, not per process: a user may plant thousands
        events.publish("mcp_pruner.strays_skipped", logging.INFO, count=skipped, reason="not our uid")
    if not strays:
        return
    events.publish("mcp_pruner.stray_killed", logging.WARNING, pids=[stray.pid for stray in strays])
    async with trio.open_nursery() as nursery:
        for stray in strays:
            nursery.start_soon(stray.stop, config.shutdown_timeout_ms / 1000)
    for stray in strays:
        stray.close()


def sweep_health_sockets(config: DaemonConfig, events: EventBus, run_ids: Iterable[str]) -> None:
    """Remove the health sockets no slot owns: a SIGKILLed child leaves its own, and once its
    record is gone nothing else would. A slot's own is kept, its child live or to come."""
    owned = {config.health_socket(run_id).name for run_id in run_ids}
    swept = 0
    for path in config.health_dir.glob("*.sock"):
        if path.name not in owned:
            with contextlib.suppress(OSError):
                path.unlink()
                swept += 1
    if swept:
        events.publish("health_socket.swept", count=swept)
