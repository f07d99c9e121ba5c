"""What the child says about itself: GET /health, the `health` method and tool."""

from __future__ import annotations

import datetime
from typing import Any

from jeeves_mcp import __version__


def health_payload() -> dict[str, Any]:
    return {
        "status": "healthy",
        "server": "mcp-pruner",
        "version": __version__,
        "capabilities": ["prune_text", "recover_text", "annotations", "markers"],
        "timestamp": datetime.datetime.now(datetime.UTC).astimezone().isoformat(timespec="seconds"),
    }
