"""The daemon's metrics object, read back with prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from jeeves_mcp.supervisor.metrics import Metrics


def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(metrics.render().decode())
            for sample in family.samples}


def report(calls: int, fallbacks: int, tool: str = "read", reason: str = "timeout") -> dict:
    return {"tools": {tool: {"calls": calls, "raw_bytes": 10 * calls, "fallbacks": {reason: fallbacks}}}}


def test_savings_add_what_a_child_counted_since_its_last_report() -> None:
    metrics = Metrics()
    metrics.count_savings({}, report(2, 1))
    metrics.count_savings(report(2, 1), report(5, 1))
    metrics.count_savings({}, report(1, 0))  # the slot's next child starts from zero again
    metrics.count_savings(report(5, 1), report(3, 0))  # a report below the last: a new child's
    found = samples(metrics)
    assert found[("jeeves_mcp_tool_calls_total", (("tool", "read"),))] == 5 + 1 + 3
    assert found[("jeeves_mcp_tool_raw_bytes_total", (("tool", "read"),))] == 90
    assert found[("jeeves_mcp_tool_fallbacks_total", (("reason", "timeout"), ("tool", "read")))] == 1


def test_label_values_are_escaped() -> None:
    """Tool names and fallback reasons come from children: quotes, backslashes and newlines
    must not break the exposition (they used to be written as they came)."""
    metrics = Metrics()
    odd_tool, odd_reason = 'we"ird\\tool\nx', 'a"b\\c\nd'
    metrics.count_savings({}, report(1, 1, odd_tool, odd_reason))
    found = samples(metrics)
    assert found[("jeeves_mcp_tool_calls_total", (("tool", odd_tool),))] == 1
    assert found[("jeeves_mcp_tool_fallbacks_total", (("reason", odd_reason), ("tool", odd_tool)))] == 1


def test_a_malformed_report_counts_nothing() -> None:
    metrics = Metrics()
    metrics.count_savings({}, {"tools": {"read": {"calls": "many"}}})
    metrics.count_savings({}, {"tools": {"read": ["x"]}})
    assert ("jeeves_mcp_tool_calls_total", (("tool", "read"),)) not in samples(metrics)
