"""In-memory recovery store: original text behind every prune_id.

Bounded two ways: each entry lives `ttl_s`, and the total size stays under
`max_bytes` by evicting the least recently used entries. A text larger than
the whole bound is not kept; `put` still returns an id and `get` then says
the id is not found, which is seed 001's "explicit and actionable" error.

Sizes are what an entry really holds in memory: the text as one string and a
count of newlines per 64 Ki characters, not a list of line strings, which cost
~57 bytes a line and let many short lines take ten times the bound.
"""

from __future__ import annotations

import bisect
import itertools
import secrets
import sys
import time
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import overload

_ENTRY_OVERHEAD = 256  # the entry object, its id, its place in the dict and the deque
_BLOCK = 64 * 1024  # characters per block of a Lines' newline counts


class Lines(Sequence[str]):
    """The lines of one string ("\n"-split), each cut out only when asked for.

    What it keeps beside the text is a count of newlines per block of characters: found in
    milliseconds, and 8 bytes a block. An array of every line's end cost 8 bytes a line (a
    60 MB file of 2-letter lines did not fit the store's 64 MiB) and splitting the text to
    build it held the event loop for seconds. A line is found from its block's count; the next
    one from where the last ended, so a range is read in one pass."""

    __slots__ = ("_count", "_cursor", "_newlines_before", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        # _newlines_before[k]: newlines in text[: k * _BLOCK]
        blocks = (text.count("\n", start, start + _BLOCK) for start in range(0, len(text), _BLOCK))
        self._newlines_before = array("q", itertools.accumulate(blocks, initial=0))
        self._count = self._newlines_before[-1] + 1
        self._cursor = (0, 0)  # (n, where the n-th newline ends): where line n starts

    @property
    def nbytes(self) -> int:
        return sys.getsizeof(self._text) + self._newlines_before.itemsize * len(self._newlines_before)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("line index out of range")
        start = self.start(index)
        end = self._text.find("\n", start)
        end = len(self._text) if end < 0 else end
        self._cursor = (index + 1, end + 1)
        return self._text[start:end]

    def start(self, index: int) -> int:
        """Where line `index` (0-based) starts, past the index-th newline; one past the end
        of the text when it has no such line."""
        if index >= self._count:
            return len(self._text) + 1
        done, position = self._cursor
        if not done <= index < done + _BLOCK // 8:  # far: start from the block holding it
            block = max(0, bisect.bisect_left(self._newlines_before, index) - 1)
            done, position = self._newlines_before[block], block * _BLOCK
        for _ in range(index - done):
            position = self._text.find("\n", position) + 1
        return position

    def __iter__(self) -> Iterator[str]:
        return iter(self._text.split("\n"))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Lines):
            return self._text == other._text
        if isinstance(other, list):
            return self._text.split("\n") == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class StoredText:
    prune_id: str
    lines: Lines
    size: int
    expires_at: float
    first_line: int = 1  # original number of lines[0]: a window of a file keeps the file's numbers

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1

    def line(self, number: int) -> str:
        """The line with original number `number`."""
        return self.lines[number - self.first_line]


# Each marker carries its id, up to 25 of them a view: 8 hex digits, not 16, give a view's bytes
# to its lines and the names of what markers hide. A store counts its ids on from a random
# start, so none comes twice in a child's life (a dropped entry's id never names another
# text); an id of a previous child's reaches this one's by chance once in 2**32.
PRUNE_ID_SPACE = 1 << 32


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
        self._next_id = secrets.randbelow(PRUNE_ID_SPACE)

    def new_id(self) -> str:
        """An id this store has never handed out."""
        self._next_id = (self._next_id + 1) % PRUNE_ID_SPACE
        return f"prn_{self._next_id:08x}"

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, text: str, prune_id: str | None = None, first_line: int = 1) -> str:
        """Keep `text` (split on "\\n", the numbering seed 001 uses) and return its id: `prune_id`
        (replacing what it named), else a new one (new_id)."""
        prune_id = prune_id or self.new_id()
        self._expire()
        if prune_id in self._entries:
            self._drop(prune_id)
        lines = Lines(text)
        size = self.cost(lines)
        if size > self._max_bytes:
            return prune_id
        while self._bytes + size > self._max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
        expires_at = self._clock() + self._ttl_s
        self._entries[prune_id] = StoredText(prune_id, lines, size, expires_at, first_line)
        self._by_expiry.append((expires_at, prune_id))
        self._bytes += size
        if len(self._by_expiry) > 2 * len(self._entries) + 64:
            self._forget_dropped()
        return prune_id

    def _forget_dropped(self) -> None:
        """Drop the expiry places of entries evicted or re-put since: under a flood of puts a
        full store evicts as fast as it stores, and their places would pile up for ttl_s.
        Amortized: this runs once the places outnumber the live entries twice."""
        live = self._entries
        self._by_expiry = deque(
            (at, key) for at, key in self._by_expiry if (e := live.get(key)) is not None and e.expires_at == at
        )

    @staticmethod
    def cost(text: str | Lines) -> int:
        """Bytes of memory an entry for `text` takes, as the bound counts them."""
        lines = text if isinstance(text, Lines) else Lines(text)
        return lines.nbytes + _ENTRY_OVERHEAD

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
