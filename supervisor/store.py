"""Slot records in SQLite (WAL), so a restarted daemon finds the children it left."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

SCHEMA = """
CREATE TABLE IF NOT EXISTS slots (
    run_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    root TEXT NOT NULL,
    token TEXT NOT NULL,
    pid INTEGER,
    pid_start INTEGER,
    port INTEGER,
    env TEXT NOT NULL DEFAULT '{}',
    labels TEXT NOT NULL DEFAULT '{}',
    pruner_endpoint TEXT,
    ttl_s REAL,
    started_at REAL NOT NULL,
    expires_at REAL,
    ended_at REAL,
    restarts INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    stats TEXT NOT NULL DEFAULT '{}'
)
"""
JSON_COLUMNS = ("env", "labels", "stats")


@dataclass
class SlotRecord:
    run_id: str
    state: str
    root: str
    token: str
    started_at: float
    pid: int | None = None
    pid_start: int | None = None
    port: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    pruner_endpoint: str | None = None
    ttl_s: float | None = None
    expires_at: float | None = None
    ended_at: float | None = None
    restarts: int = 0
    reason: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)


class SlotStore:
    """One connection, used from worker threads one call at a time.

    A write that fails (a full disk, a read-only or broken file) does not raise:
    the record is kept as pending, reads see it, and the next write retries it
    first. The daemon's memory stays the truth; the file catches up.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SCHEMA)
        path.chmod(0o600)  # tokens live here
        self._lock = threading.Lock()
        self._pending: dict[str, SlotRecord] = {}  # failed writes, newest record per run
        self.write_failures = 0

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _save(self, record: SlotRecord) -> Exception | None:
        """Write the record (and any pending ones); the error if it could not."""
        with self._lock:
            self._pending[record.run_id] = record
            try:
                self._db.execute("BEGIN IMMEDIATE")
                for pending in self._pending.values():
                    row = asdict(pending)
                    for column in JSON_COLUMNS:
                        row[column] = json.dumps(row[column])
                    columns = ", ".join(row)
                    marks = ", ".join(f":{name}" for name in row)
                    self._db.execute(f"INSERT OR REPLACE INTO slots ({columns}) VALUES ({marks})", row)
                self._db.execute("COMMIT")
            except (sqlite3.Error, OSError) as exc:
                self.write_failures += 1
                if self._db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                return exc
            self._pending.clear()
            return None

    def _load(self, where: str = "", *args: Any) -> list[SlotRecord]:
        with self._lock:
            cursor = self._db.execute(f"SELECT * FROM slots {where}", args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        records = []
        for values in rows:
            row = dict(zip(names, values, strict=True))
            for column in JSON_COLUMNS:
                row[column] = json.loads(row[column])
            records.append(SlotRecord(**row))
        return records

    def _delete(self, run_id: str) -> None:
        with self._lock:
            self._pending.pop(run_id, None)
            self._db.execute("DELETE FROM slots WHERE run_id = ?", (run_id,))

    def _overlay(self, records: list[SlotRecord], keep: Any) -> list[SlotRecord]:
        """Records read from the file, with pending writes in their place."""
        with self._lock:
            pending = dict(self._pending)
        merged = [pending.pop(r.run_id, r) for r in records]
        merged += pending.values()
        return [r for r in merged if keep(r)]

    async def save(self, record: SlotRecord) -> Exception | None:
        """None once written; else the error, and the record stays pending."""
        return await trio.to_thread.run_sync(self._save, record)

    async def live(self) -> list[SlotRecord]:
        """Records of slots not yet shut down."""
        return await trio.to_thread.run_sync(self._load, "WHERE state != 'shutdown'")

    async def get(self, run_id: str) -> SlotRecord | None:
        if run_id in self._pending:
            return self._pending[run_id]
        found = await trio.to_thread.run_sync(self._load, "WHERE run_id = ?", run_id)
        return found[0] if found else None

    async def ended(self, limit: int = 1000) -> list[SlotRecord]:
        found = await trio.to_thread.run_sync(
            self._load, "WHERE state = 'shutdown' ORDER BY ended_at DESC LIMIT ?", limit
        )
        return self._overlay(found, lambda r: r.state == "shutdown")[:limit]

    async def delete(self, run_id: str) -> None:
        await trio.to_thread.run_sync(self._delete, run_id)
