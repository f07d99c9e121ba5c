"""One slot: its state, the task's handles on it, and the view the API gives of it.

States follow seed 000's runner lifecycle:

    init → disabled | starting → running ⇄ starting (restart) → degraded → shutdown
"""

from __future__ import annotations

import datetime
import enum
import socket
from typing import Any

import trio

from jeeves_mcp.supervisor.child import Child
from jeeves_mcp.supervisor.records import SlotRecord


class SlotState(enum.StrEnum):
    INIT = "init"
    DISABLED = "disabled"
    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"
    SHUTDOWN = "shutdown"


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    moment = datetime.datetime.fromtimestamp(timestamp, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Slot:
    def __init__(self, record: SlotRecord) -> None:
        self.record = record
        self.child: Child | None = None
        # The slot's TCP port, held from its first start to its end and handed to each child it
        # starts: nobody else can listen at the agent's URL while a child restarts (attack-
        # seventh M1). None until then, and for a re-adopted child, which holds its own.
        self.listener: socket.socket | None = None
        self.scope = trio.CancelScope()
        self.ready = trio.Event()  # acquire may answer
        self.done = trio.Event()  # the task is over, the child gone
        self.lease_changed = trio.Event()
        self.detach = False  # live restore: leave the child running at daemon exit
        self.install_problem: str | None = None  # no child of this installation can start
        self.overloaded: str | None = None  # why and what to do: the host was short starting it (429)

    @property
    def state(self) -> SlotState:
        return SlotState(self.record.state)

    @property
    def run_id(self) -> str:
        return self.record.run_id

    def view(self) -> dict[str, Any]:
        record = self.record
        serving = self.state in (SlotState.RUNNING,) and record.port is not None
        return {
            "run_id": record.run_id,
            "state": record.state,
            "mcp": {
                "url": f"http://127.0.0.1:{record.port}/mcp",
                "headers": {"Authorization": f"Bearer {record.token}"},
            }
            if serving
            else None,
            "pid": record.pid if self.child is not None else None,
            "port": record.port,
            "root": record.root,
            "labels": record.labels,
            "restarts": record.restarts,
            "reason": record.reason,
            "started_at": iso(record.started_at),
            "expires_at": iso(record.expires_at),
            "ended_at": iso(record.ended_at),
        }


def record_view(record: SlotRecord) -> dict[str, Any]:
    """The view of a slot that is over, from its record alone."""
    slot = Slot(record)
    return slot.view()
