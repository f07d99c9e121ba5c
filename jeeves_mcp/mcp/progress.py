"""Throttled `notifications/progress` for one tool call (seed 004, section 9).

Tools call `report(message)` as often as they like; at most `rate_hz`
notifications per second leave, coalesced to the latest message, and none
after `close()` (the final response is about to be written).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]


class ProgressReporter:
    def __init__(self, token: Any, notify: Notify | None, rate_hz: float = 4.0) -> None:
        self._token = token
        self._notify = notify if token is not None else None
        self._interval = 1.0 / rate_hz
        self._pending: str | None = None
        self._wakeup = trio.Event()
        self._closed = False
        self._last_sent = -float("inf")
        self.sent = 0

    @property
    def enabled(self) -> bool:
        return self._notify is not None and not self._closed

    def report(self, message: str) -> None:
        if self.enabled:
            self._pending = message[:200]
            self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def run(self) -> None:
        """Deliver pending reports until `close()`; runs in the call's nursery."""
        if self._notify is None:
            return
        while not self._closed:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            if self._closed:
                return
            await trio.sleep_until(self._last_sent + self._interval)
            if self._closed or self._pending is None:
                continue
            message, self._pending = self._pending, None
            self.sent += 1
            self._last_sent = trio.current_time()
            await self._notify(
                "notifications/progress",
                {"progressToken": self._token, "progress": self.sent, "message": message},
            )


class NullProgress(ProgressReporter):
    def __init__(self) -> None:
        super().__init__(None, None)
