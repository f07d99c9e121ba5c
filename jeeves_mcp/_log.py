"""One JSON object per line on stderr, with seed 000's event names."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from logging.handlers import RotatingFileHandler
from typing import Any

_RESERVED = frozenset(vars(logging.makeLogRecord({})))


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RESERVED and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["stack"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class _PrivateFileHandler(RotatingFileHandler):
    """Log files (and their rotations) created 0600 whatever the umask: they live in
    the daemon's state dir, which may be looser than it should be."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return os.fdopen(fd, self.mode, encoding=self.encoding, errors=self.errors)


def configure(
    level: int = logging.INFO, stream: Any = None, *, file: str | None = None, file_bytes: int = 0
) -> None:
    """Route the `jeeves_mcp` loggers to `stream` (stderr), or to a size-bounded `file`."""
    handler: logging.Handler
    if file is not None:
        handler = _PrivateFileHandler(file, maxBytes=max(file_bytes // 2, 1024), backupCount=1)
    else:
        handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger("jeeves_mcp")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log the event `name` with structured `fields` (kept as top-level JSON keys)."""
    if logger.isEnabledFor(level):
        clean = {k if k not in _RESERVED else f"{k}_": v for k, v in fields.items()}
        logger.log(level, name, extra=clean)


def monotonic_ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
