"""The daemon's Prometheus metrics (prometheus-client), on a registry of its own.

Counters only grow: each is incremented where its event happens, savings included
(by what a child reports beyond what it reported before), so a scrape never sees a
total go down. Gauges that describe the present (slots by state, fork server up)
are read at scrape time.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, Info, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from jeeves_mcp import __version__

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SAVINGS = (
    ("calls", "Tool calls."),
    ("raw_bytes", "Bytes the tools produced."),
    ("raw_tokens", "Estimated tokens the tools produced."),
    ("returned_bytes", "Bytes returned to agents."),
    ("returned_tokens", "Estimated tokens returned to agents."),
    ("prunings", "Outputs pruned to a focus question."),
)


class _Present(Collector):
    """Gauges read when scraped: slots by state, whether the fork server is up."""

    def __init__(self) -> None:
        self.slots: Callable[[], Mapping[str, int]] = dict
        self.states: list[str] = []
        self.fork_server_up: Callable[[], bool | None] = lambda: None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        slots = GaugeMetricFamily("jeeves_mcp_slots", "Slots by state.", labels=["state"])
        counts = self.slots()
        for state in self.states:
            slots.add_metric([state], counts.get(state, 0))
        yield slots
        up = self.fork_server_up()
        if up is not None:
            yield GaugeMetricFamily("jeeves_mcp_fork_server_up", "Whether the fork server is ready.", value=int(up))


class Metrics:
    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        Info("jeeves_mcp_build", "The running jeeves-mcp.", registry=registry).info(
            {"version": __version__, "python": platform.python_version()}
        )
        self.present = _Present()
        registry.register(self.present)
        self.acquire = Histogram("jeeves_mcp_acquire_seconds", "Acquire latency, request to healthy child.",
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self.release = Histogram("jeeves_mcp_release_seconds", "Release latency, request to child gone.",
                                 buckets=LATENCY_BUCKETS, registry=registry)
        self.restarts = Counter("jeeves_mcp_restarts", "Child restarts.", registry=registry)
        self.health_failures = Counter("jeeves_mcp_health_failures", "Failed child health checks.",
                                       registry=registry)
        self.health_passes = Counter("jeeves_mcp_health_passes", "Child health checks that passed.",
                                     registry=registry)
        self.start_failures = Counter("jeeves_mcp_start_failures", "Slots that could not start a child.",
                                      registry=registry)
        self.lease_expiries = Counter("jeeves_mcp_lease_expiries", "Slots released because their lease ran out.",
                                      registry=registry)
        self.task_failures = Counter("jeeves_mcp_slot_task_failures", "Slot tasks ended by an unexpected error.",
                                     registry=registry)
        self.spawns = Counter("jeeves_mcp_spawns", "Children started, by how.", ["mode"], registry=registry)
        for mode in ("fork", "cold"):
            self.spawns.labels(mode=mode)
        self.savings = {key: Counter(f"jeeves_mcp_tool_{key}", help_text, ["tool"], registry=registry)
                        for key, help_text in SAVINGS}
        self.fallbacks = Counter("jeeves_mcp_tool_fallbacks", "Prunings that fell back to raw output.",
                                 ["tool", "reason"], registry=registry)

    def watch(self, slots: Callable[[], Mapping[str, int]], states: list[str],
              fork_server_up: Callable[[], bool | None]) -> None:
        """Where the scrape-time gauges read the present."""
        self.present.slots, self.present.states, self.present.fork_server_up = slots, states, fork_server_up

    def count_savings(self, before: dict[str, Any], now: dict[str, Any]) -> None:
        """A child reported `now` after `before` (its previous report, {} for a new child):
        add what it counted since. A count below the previous one is a new child's."""
        grown: list[tuple[Counter, dict[str, str], int]] = []
        try:  # all of it checked before anything is counted
            for tool, counts in now.get("tools", {}).items():
                previous = before.get("tools", {}).get(tool, {})
                for key, _ in SAVINGS:
                    grown.append((self.savings[key], {"tool": tool}, _grown(counts.get(key, 0), previous.get(key, 0))))
                for reason, count in counts.get("fallbacks", {}).items():
                    since = _grown(count, previous.get("fallbacks", {}).get(reason, 0))
                    grown.append((self.fallbacks, {"tool": str(tool), "reason": str(reason)}, since))
        except (AttributeError, TypeError, ValueError):  # a malformed report counts for nothing
            return
        for counter, labels, amount in grown:
            counter.labels(**labels).inc(amount)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _grown(now: Any, before: Any) -> int:
    now, before = int(now), int(before)
    return now - before if now >= before else max(now, 0)
