"""The slot store's schema: versioned (`PRAGMA user_version`), migrated forward on open."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from jeeves_mcp.supervisor.store import (
    SCHEMA_VERSION,
    SlotRecord,
    SlotStore,
    StoreTooNew,
    StoreUnavailable,
)

# The slots table as the first release wrote it, before the schema had a version:
# spelled out here, not imported, so that a change to the code cannot change the old file.
UNVERSIONED_SCHEMA = """
CREATE TABLE slots (
    run_id TEXT PRIMARY KEY, state TEXT NOT NULL, root TEXT NOT NULL, token TEXT NOT NULL,
    pid INTEGER, pid_start INTEGER, port INTEGER, env TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '{}', pruner_endpoint TEXT, ttl_s REAL, started_at REAL NOT NULL,
    expires_at REAL, ended_at REAL, restarts INTEGER NOT NULL DEFAULT 0, reason TEXT,
    stats TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE quarantine (run_id TEXT, row TEXT NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL);
"""


def old_store(path: Path, user_version: int) -> None:
    """A store as an older daemon left it: a live slot and an ended one."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(UNVERSIONED_SCHEMA)
    now = time.time()
    db.execute(
        "INSERT INTO slots (run_id, state, root, token, pid, pid_start, port, env, labels, started_at, restarts)"
        " VALUES ('live', 'running', '/srv/run', 'tok', 4242, 99, 41000, ?, ?, ?, 1)",
        (json.dumps({"A": "1"}), json.dumps({"team": "x"}), now - 60),
    )
    db.execute(
        "INSERT INTO slots (run_id, state, root, token, started_at, ended_at, reason)"
        " VALUES ('done', 'shutdown', '/srv/old', 'tok2', ?, ?, 'released')",
        (now - 600, now - 300),
    )
    db.execute(f"PRAGMA user_version = {user_version}")
    db.commit()
    db.close()


async def start_daemon(state: Path, socket: Path) -> subprocess.CompletedProcess[bytes]:
    """`jeeves-mcp daemon` on `state`, expected to refuse to start: what it printed."""
    with trio.fail_after(60):
        return await trio.run_process(
            [sys.executable, "-m", "jeeves_mcp", "daemon", "--state-dir", str(state), "--socket", str(socket)],
            capture_stdout=True, capture_stderr=True, check=False,
        )


def indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


@pytest.mark.parametrize("user_version", [0, 1])  # before versions existed; the first versioned schema
async def test_a_store_written_by_an_older_schema_opens_migrated(tmp_path: Path, user_version: int) -> None:
    path = tmp_path / "slots.db"
    old_store(path, user_version)
    store = SlotStore(path)
    try:
        assert store.schema_version == SCHEMA_VERSION == 2
        (live,) = await store.live()
        assert (live.run_id, live.pid, live.port, live.env, live.labels, live.restarts) == (
            "live", 4242, 41000, {"A": "1"}, {"team": "x"}, 1)
        (done,) = await store.ended()
        assert done.run_id == "done" and done.reason == "released"
        assert await store.save(SlotRecord("new", "running", "/srv/new", "tok3", time.time())) is None
    finally:
        store.close()
    assert "slots_state_ended" in indexes(path)
    reopened = SlotStore(path)  # current now: opened without another migration
    try:
        assert reopened.schema_version == SCHEMA_VERSION
        assert {r.run_id for r in await reopened.live()} == {"live", "new"}
    finally:
        reopened.close()


def test_a_new_store_starts_at_the_current_version(tmp_path: Path) -> None:
    store = SlotStore(tmp_path / "slots.db")
    try:
        assert store.schema_version == SCHEMA_VERSION
    finally:
        store.close()


async def test_a_store_from_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A downgrade: the older daemon refuses to start rather than quarantine what it cannot read."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path = state / "slots.sqlite3"  # the name the daemon uses
    old_store(path, SCHEMA_VERSION + 1)
    with pytest.raises(StoreTooNew, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        SlotStore(path)
    daemon = await start_daemon(state, tmp_path / "d.sock")
    assert daemon.returncode == 1, daemon.stderr.decode()
    assert "[STORE_TOO_NEW]" in daemon.stderr.decode()
    assert not (tmp_path / "d.sock").exists()
    with sqlite3.connect(path) as db:  # untouched: both records, the newer version
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        assert db.execute("SELECT count(*) FROM slots").fetchone()[0] == 2
        assert db.execute("SELECT count(*) FROM quarantine").fetchone()[0] == 0


# -- a store that cannot be opened for a reason other than damage is left as it is -------------
# (the attack review of 2026-11-29: a full disk or a lock at start was taken for damage, the
# healthy file set aside, and with live restore every running child killed as a stray)


async def saved_store(path: Path) -> None:
    store = SlotStore(path)
    try:
        assert await store.save(SlotRecord("kept", "running", "/srv/kept", "tok", time.time())) is None
    finally:
        store.close()  # a clean stop: SQLite deletes its -wal and -shm, to be made again at the next open


def aside_files(state: Path) -> list[str]:
    return sorted(p.name for p in state.iterdir() if ".corrupt-" in p.name)


async def test_a_locked_store_is_refused_and_left_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jeeves_mcp.supervisor import store as store_module

    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "slots.sqlite3"
    await saved_store(path)
    holder = sqlite3.connect(path, isolation_level=None)  # a backup or a shell, holding it
    try:
        holder.execute("PRAGMA locking_mode=EXCLUSIVE")
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StoreUnavailable, match=r"locked.*\[STORE_LOCKED\]"):
            SlotStore(path)
    finally:
        holder.close()
    assert aside_files(tmp_path) == []
    store = SlotStore(path)
    try:
        assert [r.run_id for r in await store.live()] == ["kept"]
    finally:
        store.close()


async def test_a_full_state_disk_at_start_spends_the_reserve_then_refuses_and_loses_nothing(tmp_path: Path) -> None:
    from tests.test_faults import fill, small_tmpfs

    with small_tmpfs(tmp_path / "state", "16m") as state:
        path = state / "slots.sqlite3"  # the name the daemon uses
        await saved_store(path)  # and its 4 MiB reserve beside it
        assert (state / "space.reserve").exists()
        fill(state, "filler-1")
        store = SlotStore(path)  # the reserve given back: room for the -wal and -shm
        try:
            assert [r.run_id for r in await store.live()] == ["kept"]
        finally:
            store.close()
        fill(state, "filler-2")  # full again, and no reserve left
        with pytest.raises(StoreUnavailable, match=r"\[STATE_DISK_FULL\]"):
            SlotStore(path)
        daemon = await start_daemon(state, tmp_path / "d.sock")
        assert daemon.returncode == 1 and "[STATE_DISK_FULL]" in daemon.stderr.decode(), daemon.stderr.decode()
        assert aside_files(state) == []
        for filler in state.glob("filler-*"):
            filler.unlink()
        store = SlotStore(path)
        try:
            assert [r.run_id for r in await store.live()] == ["kept"]
        finally:
            store.close()
