"""`jeeves-mcp stats`: what pruning spared the agents, per run and in total."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from jeeves_mcp.cli._common import control_errors, print_table, settings, whole_when_piped

BAR_WIDTH = 20


def saved_bar(share: float, width: int = BAR_WIDTH) -> str:
    """A bar of `width` cells, filled in proportion to `share` (0..1)."""
    share = min(max(share, 0.0), 1.0)
    full = round(share * width)
    return "█" * full + "░" * (width - full)


def render(report: dict[str, Any], console: Console, run_id: str | None) -> None:
    runs = report["runs"]
    total = report["runs"][run_id] if run_id else report["total"]
    title = f"Run {run_id}" if run_id else f"All runs ({len(runs)})"
    table = Table(title=f"{title}: what pruning saved", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("tool", "left"), ("calls", "right"), ("pruned", "right"), ("tokens in", "right"),
        ("tokens out", "right"), ("saved", "right"), ("", "left"), ("fallbacks", "left"),
    )
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for tool, counts in sorted(total["tools"].items()):
        raw, returned = counts["raw_tokens"], counts["returned_tokens"]
        share = (raw - returned) / raw if raw else 0.0
        fallbacks = ", ".join(f"{reason} {n}" for reason, n in sorted(counts["fallbacks"].items())) or "-"
        table.add_row(tool, str(counts["calls"]), str(counts["prunings"]), f"{raw:,}", f"{returned:,}",
                      f"{share:.0%}", Text(saved_bar(share), style="green"), fallbacks)
    summary = total["summary"]
    print_table(console, table)
    console.print(
        f"Agents were spared [bold]{summary['saved_tokens']:,}[/bold] of {summary['raw_tokens']:,} estimated "
        f"tokens ({summary['saved_share']:.0%}) over {summary['calls']} calls, {summary['prunings']} pruned."
    )
    if not run_id and len(runs) > 1:
        per_run = Table(title="Per run", title_justify="left")
        for column in ("run", "calls", "tokens in", "tokens out", "saved"):
            per_run.add_column(column, justify="left" if column == "run" else "right", no_wrap=column == "run")
        for name, value in sorted(runs.items(), key=lambda item: -item[1]["summary"]["saved_tokens"]):
            s = value["summary"]
            per_run.add_row(name, str(s["calls"]), f"{s['raw_tokens']:,}", f"{s['returned_tokens']:,}",
                            f"{s['saved_share']:.0%}")
        print_table(console, per_run)


def stats(
    ctx: typer.Context,
    run_id: Annotated[str | None, typer.Argument(help="One run; all runs the daemon knows when left out.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON (stable shape).")] = False,
) -> None:
    """Show what pruning saved: per tool, calls, tokens produced and returned, and the share spared.

    Live runs are asked now; released runs are read from their slot records.
    """
    with control_errors(ctx, "cannot read the savings"), settings(ctx).client() as control:
        report = control.stats(run_id)
    if as_json:
        typer.echo(json.dumps(report["runs"][run_id] if run_id else report, indent=2))
        return
    render(report, whole_when_piped(Console()), run_id)

