"""Per-slot pruning savings, collected from the children's GET /stats.

A slot's record keeps `{"base": ..., "current": ...}`: `current` is what the
live child last reported (its counters only grow), `base` what earlier
children of the same slot reported before they died. A re-adopted child
keeps counting into `current`, so nothing is counted twice.
"""

from __future__ import annotations

from typing import Any

import httpx

from jeeves_mcp.supervisor.child import Child, request

COUNTERS = ("calls", "raw_bytes", "raw_tokens", "returned_bytes", "returned_tokens", "prunings")


def merge(*sources: dict[str, Any]) -> dict[str, Any]:
    """Sum `{"tools": {name: counts}}` documents."""
    tools: dict[str, dict[str, Any]] = {}
    for source in sources:
        for name, counts in (source or {}).get("tools", {}).items():
            into = tools.setdefault(name, {key: 0 for key in COUNTERS} | {"fallbacks": {}})
            for key in COUNTERS:
                into[key] += int(counts.get(key, 0))
            for reason, count in counts.get("fallbacks", {}).items():
                into["fallbacks"][reason] = into["fallbacks"].get(reason, 0) + int(count)
    return {"tools": tools}


def total(record_stats: dict[str, Any]) -> dict[str, Any]:
    return merge(record_stats.get("base", {}), record_stats.get("current", {}))


def fold_current(record_stats: dict[str, Any]) -> dict[str, Any]:
    """The child died: what it reported becomes part of the base."""
    return {"base": total(record_stats), "current": {}}


async def fetch(http: httpx.AsyncClient, child: Child, token: str, timeout_s: float) -> dict[str, Any] | None:
    """What `child` has counted (GET /stats, its token required), over its health socket when
    it has one: over a flooded TCP port the counts of a run's release were lost. None if it
    cannot say (OSError: the daemon out of descriptors, which a refresh must not crash on)."""
    try:
        response = await request(http, child, "GET", "/stats", timeout_s,
                                 headers={"Authorization": f"Bearer {token}"})
        if response.status_code == 200:
            body = response.json()
            if isinstance(body, dict) and isinstance(body.get("tools"), dict):
                return body
    except (httpx.HTTPError, OSError, ValueError):
        pass
    return None


def summarize(stats: dict[str, Any]) -> dict[str, Any]:
    """Totals over tools, with the share of tokens the agent was spared."""
    tools = stats.get("tools", {})
    raw = sum(t["raw_tokens"] for t in tools.values())
    returned = sum(t["returned_tokens"] for t in tools.values())
    return {
        "calls": sum(t["calls"] for t in tools.values()),
        "raw_tokens": raw,
        "returned_tokens": returned,
        "saved_tokens": raw - returned,
        "saved_share": round((raw - returned) / raw, 4) if raw else 0.0,
        "prunings": sum(t["prunings"] for t in tools.values()),
    }
