"""In-memory recovery store: original text behind every prune_id.

Bounded two ways: each entry lives `ttl_s`, and the total size stays under
`max_bytes` by evicting the least recently used entries. A text larger than
the whole bound is not kept; `put` still returns an id and `get` then says
the id is not found, which is seed 001's "explicit and actionable" error.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StoredText:
    prune_id: str
    lines: list[str]
    size: int
    expires_at: float
    first_line: int = 1  # original number of lines[0]: a window of a file keeps the file's numbers

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1


def new_prune_id() -> str:
    return f"prn_{secrets.token_hex(8)}"


class RecoveryStore:
    def __init__(
        self, ttl_s: float, max_bytes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[str, StoredText] = OrderedDict()  # least recently used first
        # Every entry lives the same ttl_s, so insertion order is expiry order: expiring
        # looks at the oldest insertions only, not at every entry on every call.
        self._by_expiry: deque[tuple[float, str]] = deque()
        self._bytes = 0

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, text: str, prune_id: str | None = None, first_line: int = 1) -> str:
        """Keep `text` (split on "\\n", the numbering seed 001 uses) and return its id."""
        prune_id = prune_id or new_prune_id()
        size = len(text.encode("utf-8", "surrogatepass"))
        self._expire()
        if prune_id in self._entries:
            self._drop(prune_id)
        if size > self._max_bytes:
            return prune_id
        while self._bytes + size > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
        expires_at = self._clock() + self._ttl_s
        self._entries[prune_id] = StoredText(prune_id, text.split("\n"), size, expires_at, first_line)
        self._by_expiry.append((expires_at, prune_id))
        self._bytes += size
        return prune_id

    def get(self, prune_id: str) -> StoredText | None:
        self._expire()
        entry = self._entries.get(prune_id)
        if entry is not None:
            self._entries.move_to_end(prune_id)
        return entry

    def _expire(self) -> None:
        now = self._clock()
        while self._by_expiry and self._by_expiry[0][0] <= now:
            expires_at, key = self._by_expiry.popleft()
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at == expires_at:  # not evicted or re-put since
                self._drop(key)

    def _drop(self, prune_id: str) -> None:
        entry = self._entries.pop(prune_id)
        self._bytes -= entry.size
