"""Turn a keep-mask into seed 001's pruned text, and fit text into a byte budget.

Both work on rows: a kept original line, or a marker standing for a block
of original lines. The response budget (seed 002) cuts middle rows into one
more marker, so a budget cut is recoverable exactly like a pruned block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BUDGET_REASON = "budget de réponse"
MARKER_OVERHEAD = 96  # bytes a marker line may take, reserved when cutting


@dataclass(frozen=True)
class Row:
    start: int  # 1-based original line numbers, inclusive
    end: int
    text: str  # the rendered line, without its newline
    marker: bool = False
    reason: str | None = None


def marker_line(prune_id: str, start: int, end: int, reason: str) -> str:
    reason = " ".join(reason.split()) or "hors focus"
    return f"⟦PRUNÉ: prune_id={prune_id} lignes {start}-{end} ({end - start + 1}) raison={reason}⟧"


def annotation(prune_id: str, start: int, end: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "pruned_block",
        "original_start_line": start,
        "original_end_line": end,
        "pruned_line_count": end - start + 1,
        "reason": reason,
        "marker": marker_line(prune_id, start, end, reason),
    }


def raw_rows(lines: list[str], first_line: int = 1) -> list[Row]:
    return [Row(n, n, line) for n, line in enumerate(lines, first_line)]


def pruned_rows(
    lines: list[str],
    keep: list[bool],
    reasons: list[str | None],
    prune_id: str,
    *,
    annotate_lines: bool,
    include_markers: bool,
    first_line: int = 1,
) -> tuple[list[Row], list[dict[str, Any]]]:
    """Rows of the pruned view, and one annotation per contiguous pruned block.

    Numbers are original line numbers: `lines[0]` is line `first_line` (a
    window of a file keeps the file's numbering).
    """
    base = first_line - 1
    rows: list[Row] = []
    annotations: list[dict[str, Any]] = []
    n = len(lines)
    i = 0
    while i < n:
        if keep[i]:
            number = base + i + 1
            text = f"{number}│ {lines[i]}" if annotate_lines else lines[i]
            rows.append(Row(number, number, text))
            i += 1
            continue
        j = i
        while j + 1 < n and not keep[j + 1]:
            j += 1
        reason = reasons[i] or "hors focus"
        block = annotation(prune_id, base + i + 1, base + j + 1, reason)
        annotations.append(block)
        if include_markers:
            rows.append(Row(base + i + 1, base + j + 1, block["marker"], marker=True, reason=reason))
        i = j + 1
    return rows, annotations


def rows_text(rows: list[Row]) -> str:
    return "\n".join(row.text for row in rows)


def fit_rows(
    rows: list[Row], max_bytes: int, prune_id: str
) -> tuple[list[Row], dict[str, Any] | None]:
    """Keep head and tail rows within `max_bytes`; the middle becomes one marker.

    Returns the rows and, when something was cut, the annotation of the cut.
    A single row longer than the budget is cut inside the line; that is the
    one case where the marker stands for part of a line.
    """
    sizes = [len(row.text.encode("utf-8", "surrogatepass")) + 1 for row in rows]
    if sum(sizes) - 1 <= max_bytes or not rows:
        return rows, None
    room = max(max_bytes - MARKER_OVERHEAD, 0)
    head_room = room * 6 // 10
    head: list[Row] = []
    used = 0
    for row, size in zip(rows, sizes, strict=True):
        if used + size > head_room:
            break
        head.append(row)
        used += size
    tail: list[Row] = []
    for row, size in zip(reversed(rows[len(head) :]), reversed(sizes[len(head) :]), strict=True):
        if used + size > room:
            break
        tail.append(row)
        used += size
    tail.reverse()
    if not head and not tail:
        return _cut_inside_line(rows, max_bytes, prune_id)
    cut = rows[len(head) : len(rows) - len(tail)]
    start, end = min(r.start for r in cut), max(r.end for r in cut)
    block = annotation(prune_id, start, end, BUDGET_REASON)
    marker = Row(start, end, block["marker"], marker=True, reason=BUDGET_REASON)
    return [*head, marker, *tail], block


def _cut_inside_line(
    rows: list[Row], max_bytes: int, prune_id: str
) -> tuple[list[Row], dict[str, Any] | None]:
    first = rows[0]
    room = max(max_bytes - MARKER_OVERHEAD, 16)
    text = first.text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
    end = max(r.end for r in rows)
    block = annotation(prune_id, first.start, end, BUDGET_REASON)
    clipped = Row(first.start, first.end, text + "…")
    marker = Row(first.start, end, block["marker"], marker=True, reason=BUDGET_REASON)
    return [clipped, marker], block
