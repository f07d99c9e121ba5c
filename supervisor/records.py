"""A slot's record as the store keeps it, and the check of a row read back into one."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

JSON_COLUMNS = ("env", "labels", "stats")
STATES = frozenset({"init", "disabled", "starting", "running", "degraded", "shutdown"})
_NUMBERS = {"pid": int, "pid_start": int, "port": int, "restarts": int,
            "started_at": float, "ttl_s": float, "expires_at": float, "ended_at": float}
_TEXTS = ("run_id", "state", "root", "token")


class BadRecord(ValueError):
    """A row that does not make a SlotRecord; it is quarantined, never fatal."""


def record_from_row(row: dict[str, Any]) -> SlotRecord:
    """A SlotRecord from a row as stored, checked column by column (BadRecord if not)."""
    for name in _TEXTS:
        if not isinstance(row.get(name), str):
            raise BadRecord(f"{name} is not text")
    if row["state"] not in STATES:
        raise BadRecord(f"unknown state {row['state']!r}")
    for name, kind in _NUMBERS.items():
        value = row.get(name)
        if value is None:
            if name in ("started_at", "restarts"):
                raise BadRecord(f"{name} is missing")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
            raise BadRecord(f"{name} is not a number: {value!r}"[:200])
        if not math.isfinite(value):
            raise BadRecord(f"{name} is not finite")
    for column in JSON_COLUMNS:
        try:
            value = json.loads(row[column])
        except (TypeError, ValueError, RecursionError) as exc:
            raise BadRecord(f"{column} is not JSON") from exc
        if not isinstance(value, dict):
            raise BadRecord(f"{column} is not a JSON object")
        if column != "stats" and not all(isinstance(v, str) for v in value.values()):
            raise BadRecord(f"{column} values are not all text")
        row[column] = value
    for name in ("pruner_endpoint", "reason"):
        if row.get(name) is not None and not isinstance(row[name], str):
            raise BadRecord(f"{name} is not text")
    try:
        return SlotRecord(**row)
    except TypeError as exc:  # a column too many or too few
        raise BadRecord(str(exc)) from exc


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
