"""The note of unsaved runs when writing it fails: what it may still name is never trusted
as cleared, and the names it may hold needlessly are said."""

from __future__ import annotations

import errno
import logging
import os
import time
from pathlib import Path

import pytest

from jeeves_mcp.supervisor.store import SlotRecord, SlotStore
from jeeves_mcp.supervisor.unsaved import UNSAVED_NAME, UnsavedNote
from tests.test_faults import store_log


def state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    return state


def record(run_id: str) -> SlotRecord:
    return SlotRecord(run_id=run_id, state="running", root="/", token="t", started_at=time.time())


def broken_disk(monkeypatch: pytest.MonkeyPatch, store: SlotStore) -> None:
    """Records cannot be written and an fsync fails after its data may have reached the file."""
    monkeypatch.setattr(store, "_write_pending", lambda: OSError(errno.EIO, "I/O error"))

    def fsync(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_note_whose_write_failed_is_rewritten_once_the_record_saves(tmp_path: Path) -> None:
    """The failed write may have landed: had the store kept believing the note empty, it would
    never clear it, and a restart would restore the healthy run degraded."""
    state = state_dir(tmp_path)
    store = SlotStore(state / "slots.sqlite3")
    try:
        with pytest.MonkeyPatch.context() as patch:
            broken_disk(patch, store)
            assert store._save(record("a")) is not None
            assert not store.unsaved_noted  # not known to be on disk
        assert store._save(record("a")) is None
    finally:
        store.close()
    assert UnsavedNote(state / UNSAVED_NAME).read() == frozenset()
    again = SlotStore(state / "slots.sqlite3")
    try:
        assert again.unsaved_before == frozenset()
    finally:
        again.close()


def test_names_a_note_that_cannot_be_written_still_holds_are_logged_while_others_are_unsaved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run the last daemon lost is restored while another run's record is unsaved: the note
    (now a directory) can neither name the unsaved run nor drop the restored one. Both are said."""
    state = state_dir(tmp_path)
    left = UnsavedNote(state / UNSAVED_NAME)
    assert left.make() and left.write(["lost"]) is None
    with store_log() as seen:
        store = SlotStore(state / "slots.sqlite3")
        try:
            left.path.unlink()
            left.path.mkdir()
            monkeypatch.setattr(store, "_write_pending", lambda: OSError(errno.EIO, "I/O error"))
            assert store._save(record("r")) is not None
            store._settle_unsaved()
            store._settle_unsaved()
        finally:
            store.close()
    events = [(r.getMessage(), r.levelno, r.run_ids) for r in seen  # type: ignore[attr-defined]
              if r.getMessage() in ("store.unsaved_note_failed", "store.unsaved_note_not_cleared")]
    assert events == [
        ("store.unsaved_note_failed", logging.ERROR, ["lost", "r"]),
        ("store.unsaved_note_failed", logging.ERROR, ["r"]),
        ("store.unsaved_note_not_cleared", logging.ERROR, ["lost"]),
    ], events
