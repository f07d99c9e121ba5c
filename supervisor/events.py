"""Slot transitions as events (log line, /v1/events stream) and Prometheus metrics."""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from jeeves_mcp import _log

log = logging.getLogger("jeeves_mcp.supervisor")

SUBSCRIBER_BUFFER = 256
BACKLOG = 1024
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)


class EventBus:
    """Fan-out of events to `/v1/events` subscribers.

    The last BACKLOG events are kept, so a subscriber can ask for what it
    missed (a restarted daemon re-adopts before its API serves; a client
    reconnects after a blip). Event ids are `<boot>-<seq>`: an id from an
    earlier daemon replays this daemon's whole backlog. A subscriber that
    falls behind by SUBSCRIBER_BUFFER events is dropped rather than slowing
    the daemon.
    """

    def __init__(self) -> None:
        self._subscribers: set[trio.MemorySendChannel[dict[str, Any]]] = set()
        self._sequence = 0
        self.boot = secrets.token_hex(4)
        self._backlog: deque[dict[str, Any]] = deque(maxlen=BACKLOG)

    def publish(self, name: str, level: int = logging.INFO, **fields: Any) -> dict[str, Any]:
        self._sequence += 1
        event = {"seq": self._sequence, "id": f"{self.boot}-{self._sequence}", "ts": round(time.time(), 3),
                 "event": name, **fields}
        _log.event(log, name, level, **fields)
        self._backlog.append(event)
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(event)
            except trio.WouldBlock:
                self._subscribers.discard(channel)
                channel.close()
            except trio.BrokenResourceError:
                self._subscribers.discard(channel)
        return event

    def missed_since(self, last_id: str | None) -> list[dict[str, Any]]:
        """Backlog events after `last_id` (all of them for an id of another boot; none for None)."""
        if last_id is None:
            return []
        boot, _, seq = last_id.partition("-")
        if boot != self.boot or not seq.isdigit():
            return list(self._backlog)
        return [event for event in self._backlog if event["seq"] > int(seq)]

    @asynccontextmanager
    async def subscribe(
        self, last_id: str | None = None
    ) -> AsyncIterator[trio.MemoryReceiveChannel[dict[str, Any]]]:
        send, receive = trio.open_memory_channel[dict[str, Any]](SUBSCRIBER_BUFFER + BACKLOG)
        for event in self.missed_since(last_id):
            send.send_nowait(event)
        self._subscribers.add(send)
        try:
            yield receive
        finally:
            self._subscribers.discard(send)
            send.close()
            receive.close()


class Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(LATENCY_BUCKETS)
        self.total = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        for index, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.counts[index] += 1


class Metrics:
    def __init__(self) -> None:
        self.acquire = Histogram()
        self.release = Histogram()
        self.restarts = 0
        self.health_failures = 0
        self.start_failures = 0
        self.lease_expiries = 0
        self.task_failures = 0  # slot tasks stopped by their error boundary
        self.spawns: Counter[str] = Counter()  # "fork" (from the fork server) or "cold"

    def render(self, states: Counter[str], all_states: list[str]) -> str:
        lines = [
            "# HELP jeeves_mcp_slots Slots by state.",
            "# TYPE jeeves_mcp_slots gauge",
            *(f'jeeves_mcp_slots{{state="{state}"}} {states.get(state, 0)}' for state in all_states),
        ]
        for name, value, help_text in (
            ("jeeves_mcp_restarts_total", self.restarts, "Child restarts."),
            ("jeeves_mcp_health_failures_total", self.health_failures, "Failed child health checks."),
            ("jeeves_mcp_start_failures_total", self.start_failures, "Slots that could not start a child."),
            ("jeeves_mcp_lease_expiries_total", self.lease_expiries, "Slots released because their lease ran out."),
            ("jeeves_mcp_slot_task_failures_total", self.task_failures, "Slot tasks ended by an unexpected error."),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name} {value}"]
        lines += ["# HELP jeeves_mcp_spawns_total Children started, by how.",
                  "# TYPE jeeves_mcp_spawns_total counter"]
        lines += [f'jeeves_mcp_spawns_total{{mode="{mode}"}} {self.spawns.get(mode, 0)}' for mode in ("fork", "cold")]
        for name, histogram, help_text in (
            ("jeeves_mcp_acquire_seconds", self.acquire, "Acquire latency, request to healthy child."),
            ("jeeves_mcp_release_seconds", self.release, "Release latency, request to child gone."),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
            for bound, count in zip(LATENCY_BUCKETS, histogram.counts, strict=True):
                label = "+Inf" if math.isinf(bound) else f"{bound:g}"
                lines.append(f'{name}_bucket{{le="{label}"}} {count}')
            lines += [f"{name}_sum {histogram.total:.6f}", f"{name}_count {histogram.count}"]
        return "\n".join(lines) + "\n"
