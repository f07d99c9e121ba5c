"""Slot records in SQLite (WAL), so a restarted daemon finds the children it left."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import trio

from jeeves_mcp import _log
from jeeves_mcp.supervisor.records import JSON_COLUMNS, BadRecord, SlotRecord, record_from_row
from jeeves_mcp.supervisor.reserve import RESERVE_NAME, SpaceReserve, out_of_space
from jeeves_mcp.supervisor.unsaved import UNSAVED_NAME, UnsavedNote

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
QUARANTINE_SCHEMA = """
CREATE TABLE IF NOT EXISTS quarantine (
    run_id TEXT,
    row TEXT NOT NULL,
    reason TEXT NOT NULL,
    at REAL NOT NULL
)
"""
# Forward migrations: step N brings a file at `PRAGMA user_version` N-1 to N, in one
# transaction. A file written before versions existed reads 0 and holds step 1's tables
# already (IF NOT EXISTS). Only ever append: a shipped step is never edited.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (SCHEMA, QUARANTINE_SCHEMA),
    # ended() and live() filter on state and sort on ended_at; ended records pile up.
    ("CREATE INDEX IF NOT EXISTS slots_state_ended ON slots (state, ended_at)",),
)
SCHEMA_VERSION = len(MIGRATIONS)

log = logging.getLogger("jeeves_mcp.supervisor.store")


class StateDirInUse(Exception):
    """Another live daemon holds the state dir's lock."""


class StoreTooNew(Exception):
    """The records were written by a newer jeeves-mcp (a downgrade): left untouched."""


class StoreUnavailable(Exception):
    """The records' file could not be opened for a reason that is no damage to it (a full
    disk, a lock another process holds, an I/O error): left as it is."""


# How long opening the records waits for a lock another process holds (a backup, a shell).
BUSY_TIMEOUT_S = 5.0


def lock_state_dir(state_dir: Path) -> int:
    """Hold `state_dir/daemon.lock` (flock) for this process's life; the fd to close at exit.

    Two daemons on one state dir would each take the other's children for
    strays or adopt them; the second one refuses instead. The lock dies with
    the process (a crash leaves nothing to clean), and its fd is close-on-exec
    so neither the zygote nor a child keeps it.
    """
    fd = os.open(state_dir / "daemon.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StateDirInUse(
            f"state dir {state_dir} is in use by another daemon (pid {holder}); "
            "stop it, or give this daemon a --state-dir of its own"
        ) from None
    # The pid only names the holder to a daemon refused: on a full disk it may not fit, and the
    # start goes on (the records' store says what is wrong) rather than fail with ENOSPC here.
    pid = f"{os.getpid()}\n".encode()
    try:
        os.pwrite(fd, pid, 0)  # over the last holder's pid, in place: no new block needed
        os.ftruncate(fd, len(pid))
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # no stale pid: the holder is then "unknown"
    return fd


def _private(path: Path) -> None:
    """The database 0600 before SQLite opens it (tokens live there): SQLite gives its
    -wal and -shm the database's mode, whatever the umask and the directory's mode."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600))
    os.chmod(path, 0o600, follow_symlinks=False)
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError, PermissionError):  # an immutable -shm: see _shm_usable
            os.chmod(f"{path}{suffix}", 0o600, follow_symlinks=False)


def _shm_usable(path: Path) -> bool:
    """Whether SQLite can write the -shm file it maps: a write to a mapped immutable
    file is a SIGBUS, which kills the daemon where no handler can catch it."""
    try:
        os.close(os.open(f"{path}-shm", os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION; refuse one written by a newer schema.

    A file already current is only read: a full disk must not stop a daemon from
    starting on the records it has.
    """
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > SCHEMA_VERSION:
        raise StoreTooNew(
            f"{path} has schema version {found}, newer than this jeeves-mcp's {SCHEMA_VERSION}: "
            "run the newer jeeves-mcp, or give this daemon a --state-dir of its own"
        )
    if found == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                db.execute(statement)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    _log.event(log, "store.migrated", path=str(path), from_version=found, to_version=SCHEMA_VERSION)


class SlotStore:
    """One connection, used from worker threads one call at a time.

    A write that fails (a full disk, a read-only or broken file) does not raise:
    the record is kept as pending, reads see it, and the next write retries it
    first. The daemon's memory stays the truth; the file catches up. A write that
    fails for lack of space first spends the reserve (reserve.py) and is tried again.
    The runs whose records are pending are named in a note written in place (unsaved.py),
    which a store opened later reads as `unsaved_before`.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _private(path)
        self.reserve = SpaceReserve(path.with_name(RESERVE_NAME))
        try:
            self._db = self._open_sound(path)
        except sqlite3.DatabaseError as exc:  # not a database, or damaged: keep it aside, start empty
            aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
            _log.event(log, "store.corrupt", logging.ERROR, path=str(path), moved_to=str(aside), error=str(exc))
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
            _private(path)
            self._db = self._open_sound(path)
        self._lock = threading.Lock()
        self._pending: dict[str, SlotRecord] = {}  # failed writes, newest record per run
        self.write_failures = 0
        self.reserve.make()
        self.note = UnsavedNote(path.with_name(UNSAVED_NAME))
        self._noted: frozenset[str] | None = frozenset()  # what the note may say; None: refused at start
        self._note_sure = True  # False after a failed write: rewrite it whatever it may say
        self._note_failed_for: tuple[frozenset[str], frozenset[str]] | None = None  # (wanted, stale) said
        self.unsaved_before = self._read_note()
        self._carried = self.unsaved_before  # named in the note too, until _settle_unsaved()
        self.note.make()

    def _read_note(self) -> frozenset[str]:
        """The runs the last daemon could not save, from the note (none if it cannot be trusted)."""
        try:
            found = self.note.read()
        except OSError as exc:  # NoteRefused among them
            _log.event(log, "store.unsaved_note_unreadable", logging.ERROR, path=str(self.note.path),
                       error=f"{type(exc).__name__}: {exc}",
                       consequence="runs whose records the last daemon could not save restart from the file")
            self._noted = None
            return frozenset()
        self._noted = found
        if found:
            _log.event(log, "store.unsaved_found", logging.WARNING, path=str(self.note.path), run_ids=sorted(found),
                       remedy="these runs are restored degraded, not restarted: release them (or acquire anew)")
        return found

    def _open_sound(self, path: Path) -> sqlite3.Connection:
        """_open, where a failure that is no damage (sqlite3.OperationalError: a full disk, a
        lock, an I/O error) is StoreUnavailable, the file left as it is: a healthy file was
        taken for a damaged one and set aside, and every live run killed as a stray (the attack
        review of 2026-11-29: a run filled the disk while the daemon restarted). Out of space,
        the reserve is given back and the open tried once more: after a clean stop SQLite
        needs room for its -wal and -shm."""
        try:
            return self._open(path)
        except sqlite3.OperationalError as exc:
            problem = exc
            if self._spend_reserve(exc):
                try:
                    return self._open(path)
                except sqlite3.OperationalError as again:
                    problem = again
        if getattr(problem, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            why = ("another process holds it locked (a backup, an sqlite3 shell?): let it finish, then "
                   "start again [STORE_LOCKED]")
        elif out_of_space(problem, path.parent):
            why = "the state dir's filesystem is full: free space there, then start again [STATE_DISK_FULL]"
        else:
            why = "[STORE_UNAVAILABLE]"
        raise StoreUnavailable(f"cannot open the slot records {path}, left as they are: {problem}; {why}") from None

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)
        try:
            if not _shm_usable(path):
                # Set before the first access, exclusive locking keeps the WAL index in
                # this process's memory: the -shm file is never mapped. The state dir
                # is locked to one daemon anyway; other readers wait until it stops.
                _log.event(log, "store.shm_unusable", logging.ERROR, path=f"{path}-shm",
                           remedy="the database is locked to this daemon until the -shm file is writable")
                db.execute("PRAGMA locking_mode=EXCLUSIVE")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            _migrate(db, path)
        except BaseException:
            db.close()
            raise
        return db

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @property
    def schema_version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def unsaved_noted(self) -> bool:
        """Whether the note names every run whose record is pending."""
        return self._note_sure and self._noted is not None and self._noted.issuperset(self._pending)

    def _settle_unsaved(self) -> None:
        """The runs of `unsaved_before` are restored and their records saved (or pending):
        the note now names only the pending ones."""
        with self._lock:
            self._carried = frozenset()
            self._sync_note()

    def _sync_note(self) -> None:
        """Have the note name the runs with pending records (and those carried from the last
        daemon); a failure is logged once per set of runs, and the note tried again next time.
        The names it may still hold needlessly are logged too, unless it was refused at start
        (said then). The lock held."""
        wanted = self._carried.union(self._pending)
        if self._note_sure and wanted == self._noted:
            return
        problem = self.note.write(wanted) if self.note.make() else OSError(f"cannot make {self.note.path}")
        if problem is None:
            self._noted, self._note_sure, self._note_failed_for = wanted, True, None
            return
        if self.note.held:  # it was opened, so the write may have landed (in part or whole)
            self._noted, self._note_sure = (self._noted or frozenset()) | wanted, False
        stale = (self._noted or frozenset()) - wanted
        if (wanted, stale) == self._note_failed_for:
            return
        self._note_failed_for = (wanted, stale)
        error = f"{type(problem).__name__}: {problem}"
        if wanted:
            _log.event(log, "store.unsaved_note_failed", logging.ERROR, path=str(self.note.path),
                       run_ids=sorted(wanted), error=error,
                       consequence="a restart before these records are saved restarts these runs from the file")
        if stale:
            _log.event(log, "store.unsaved_note_not_cleared", logging.ERROR, path=str(self.note.path),
                       run_ids=sorted(stale), error=error,
                       consequence="a restart before the note is cleared restores these runs degraded, "
                                   "their children stopped, though their records are saved")

    def _save(self, record: SlotRecord) -> Exception | None:
        """Write the record (and any pending ones); the error if it could not."""
        with self._lock:
            self._pending[record.run_id] = record
            return self._flush()

    def flush(self) -> list[str]:
        """Write the pending records now (at shutdown); the run ids still unsaved."""
        with self._lock:
            if self._pending:
                self._flush()
            return sorted(self._pending)

    def _spend_reserve(self, problem: BaseException, **extra: Any) -> bool:
        """Give the reserve back when `problem` is a lack of space; whether there was one to give
        (the failed open or write is then worth trying once more)."""
        if not out_of_space(problem, self.reserve.path.parent) or not self.reserve.give_back():
            return False
        _log.event(log, "store.reserve_used", logging.WARNING, path=str(self.reserve.path),
                   bytes=self.reserve.size, error=f"{type(problem).__name__}: {problem}", **extra)
        return True

    def _flush(self) -> Exception | None:
        """Write every pending record, spending the reserve if the disk is full; the lock held."""
        problem = self._write_pending()
        if problem is not None and self._spend_reserve(problem, pending=sorted(self._pending)):
            problem = self._write_pending()
        if problem is not None:
            self.write_failures += 1
            self._sync_note()
            return problem
        self._pending.clear()
        self._sync_note()
        if not self.reserve.held and self.reserve.make():
            _log.event(log, "store.reserve_restored", path=str(self.reserve.path), bytes=self.reserve.size)
        return None

    def _write_pending(self) -> Exception | None:
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
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            return exc
        return None

    def _load(self, where: str = "", *args: Any) -> list[SlotRecord]:
        with self._lock:
            cursor = self._db.execute(f"SELECT * FROM slots {where}", args)
            names = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
        records = []
        for values in rows:
            row = dict(zip(names, values, strict=True))
            try:
                records.append(record_from_row(dict(row)))
            except BadRecord as exc:
                self._quarantine(row, str(exc))
        return records

    def _quarantine(self, row: dict[str, Any], reason: str) -> None:
        """Move a bad row out of `slots` into `quarantine`, with a log line."""
        run_id = row.get("run_id")
        _log.event(log, "store.quarantined", logging.ERROR, run_id=run_id, reason=reason)
        text = json.dumps(row, default=repr)
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT INTO quarantine (run_id, row, reason, at) VALUES (?, ?, ?, ?)",
                                 (str(run_id), text, reason, time.time()))
                self._db.execute("DELETE FROM slots WHERE run_id IS ?", (run_id,))
                self._db.execute("COMMIT")
            except sqlite3.Error:
                self._db.execute("ROLLBACK")
                raise

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

    async def settle_unsaved(self) -> None:
        """Once the runs of `unsaved_before` are restored: the note rewritten (pwrite, fsync)."""
        await trio.to_thread.run_sync(self._settle_unsaved)

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
