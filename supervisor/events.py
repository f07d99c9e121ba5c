"""Slot transitions as events: a log line and the /v1/events stream (metrics: metrics.py)."""

from __future__ import annotations

import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from jeeves_mcp import _log

log = logging.getLogger("jeeves_mcp.supervisor")

SUBSCRIBER_BUFFER = 256
BACKLOG = 1024


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
