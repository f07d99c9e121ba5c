"""The recovery store: TTL, byte bound with least-recently-used eviction."""

from __future__ import annotations

import re
import tracemalloc

from jeeves_mcp.pruning.recovery import RecoveryStore

cost = RecoveryStore.cost


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_expire_after_their_ttl() -> None:
    clock = Clock()
    store = RecoveryStore(ttl_s=10, max_bytes=10_000, clock=clock)
    first = store.put("a\nb")
    clock.now = 5
    second = store.put("c")
    assert store.get(first) is not None  # a get does not extend the ttl...
    clock.now = 10
    assert store.get(first) is None
    assert store.get(second) is not None
    clock.now = 15
    assert store.get(second) is None
    assert len(store) == 0 and store.total_bytes == 0


def test_least_recently_used_goes_first_when_full() -> None:
    store = RecoveryStore(ttl_s=100, max_bytes=2 * cost("aaaa"), clock=Clock())
    a, b = store.put("aaaa"), store.put("bbbb")
    assert store.get(a) is not None  # a is now the most recently used
    c = store.put("cccc")
    assert store.get(b) is None
    assert store.get(a) is not None and store.get(c) is not None
    assert store.total_bytes == 2 * cost("aaaa")


def test_a_text_larger_than_the_bound_is_not_kept_but_gets_an_id() -> None:
    store = RecoveryStore(ttl_s=100, max_bytes=cost("x" * 10), clock=Clock())
    kept = store.put("small")
    big = store.put("x" * 11)
    assert big.startswith("prn_") and store.get(big) is None
    assert store.get(kept) is not None


def test_an_id_is_short_and_never_handed_out_twice_by_a_store() -> None:
    """8 hex digits (a marker carries its id, up to 25 markers a view); an entry that was
    dropped, expired or too large to keep leaves its id unused, so recovering an old id can
    only say it is gone, never return another text."""
    clock = Clock()
    store = RecoveryStore(ttl_s=1, max_bytes=2 * cost("aaaa"), clock=clock)
    ids = []
    for k in range(20_000):
        clock.now = k / 100  # expiries and evictions all along
        ids.append(store.put("x" * 200 if k % 7 == 0 else "aaaa"))
    assert all(re.fullmatch(r"prn_[0-9a-f]{8}", prune_id) for prune_id in ids), ids[:3]
    assert len(set(ids)) == len(ids)
    assert RecoveryStore(ttl_s=1, max_bytes=100).put("a") != RecoveryStore(ttl_s=1, max_bytes=100).put("a")


def test_putting_an_id_again_replaces_it_and_its_expiry() -> None:
    clock = Clock()
    store = RecoveryStore(ttl_s=10, max_bytes=10_000, clock=clock)
    store.put("old", prune_id="prn_x")
    clock.now = 8
    store.put("new\ntext", prune_id="prn_x", first_line=5)
    clock.now = 12  # past the first expiry, before the second
    entry = store.get("prn_x")
    assert entry is not None and entry.lines == ["new", "text"]
    assert (entry.first_line, entry.last_line) == (5, 6)
    assert store.total_bytes == cost("new\ntext")


def test_the_bound_counts_the_memory_entries_really_take() -> None:
    """Many short lines: a list of line strings took ~57 bytes a line against 3 counted."""
    text = "ab\n" * 200_000
    store = RecoveryStore(ttl_s=100, max_bytes=64 * 1024 * 1024, clock=Clock())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        prune_id = store.put(text)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    entry = store.get(prune_id)
    assert entry is not None and entry.line(2) == "ab" and len(entry.lines) == 200_001
    assert held <= store.total_bytes * 1.1, (held, store.total_bytes)
    assert store.total_bytes < 5 * len(text)  # and the representation stays compact


def test_evicted_entries_leave_nothing_behind_until_their_expiry() -> None:
    """A flood of puts into a full store evicts as fast as it stores: what the store keeps to
    expire its entries is bounded by the entries it holds, not by the puts of the last hour
    (3 M puts held about 600 MiB past a 64 MiB bound)."""
    store = RecoveryStore(ttl_s=3600, max_bytes=50 * cost("x" * 40), clock=lambda: 0.0)
    tracemalloc.start()
    try:
        for n in range(2_000):
            store.put(f"{n:040d}")
        settled, _ = tracemalloc.get_traced_memory()
        for n in range(2_000, 200_000):
            store.put(f"{n:040d}")
        flooded, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(store) == 50
    assert flooded - settled < 64 * 1024, (settled, flooded)
