"""Turn a keep-mask into seed 001's pruned text, and fit text into a byte budget.

Both work on rows: a kept original line, or a marker standing for a block
of original lines. The response budget (seed 002) cuts middle rows into one
more marker, so a budget cut is recoverable exactly like a pruned block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

BUDGET_REASON = "budget de réponse"
FOCUS_REASON = "hors focus"
MARKER_OVERHEAD = 96  # bytes a marker line may take, reserved when cutting
MIN_CLIP_BYTES = 256  # below this, a clipped line shows too little to be worth its bytes
LINE_REASON_BYTES = 64  # what a cut inside a line adds to its marker's reason


@dataclass(frozen=True)
class Row:
    start: int  # 1-based original line numbers, inclusive
    end: int
    text: str  # the rendered line, without its newline
    marker: bool = False
    reason: str | None = None


# A reason names units of the text (a heading, a function): what the text could use to act on
# a terminal, reorder what is shown, hide characters (a file's name may hold them: a listing's
# markers name directories) or mimic a marker's brackets is left out. Hidden: controls, bidi
# marks and isolates, zero-width and invisible operators, the soft hyphen, tag characters (text
# some models read and no one sees), interlinear annotations, musical format characters, the
# grapheme joiner, private use.
_NOT_IN_REASONS = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u034f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u206f"
    "\ue000-\uf8ff\ufeff\ufff9-\ufffb\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000f0000-\U0010ffff]"
)
_BRACKETS = {ord("⟦"): "[", ord("⟧"): "]"}


def plain_reason(reason: str) -> str:
    """`reason` on one line, in characters that show as themselves."""
    return _NOT_IN_REASONS.sub("", " ".join(reason.split())).translate(_BRACKETS) or FOCUS_REASON


def marker_line(prune_id: str, start: int, end: int, reason: str) -> str:
    """Seed 001's marker; `reason` as plain_reason gives it."""
    return f"⟦PRUNÉ: prune_id={prune_id} lignes {start}-{end} ({end - start + 1}) raison={reason}⟧"


def annotation(prune_id: str, start: int, end: int, reason: str) -> dict[str, Any]:
    reason = plain_reason(reason)
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
        reason = reasons[i] or FOCUS_REASON
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
    if not rows or text_bytes(rows_text(rows)) <= max_bytes:
        return rows, None
    texts = [row.text for row in rows]
    head, tail = _head_tail(texts, max_bytes)
    if not head and not tail:
        return _cut_inside_line(rows[0], max(r.end for r in rows), max_bytes, prune_id)
    cut = rows[head : len(rows) - tail]
    start, end = min(r.start for r in cut), max(r.end for r in cut)
    block = annotation(prune_id, start, end, BUDGET_REASON)
    marker = Row(start, end, block["marker"], marker=True, reason=BUDGET_REASON)
    clipped = None if cut[0].marker else _clip_cut(texts, head, tail, max_bytes)
    opening = [] if clipped is None else [Row(cut[0].start, cut[0].end, clipped[0])]
    closing = [] if clipped is None or not clipped[1] else [Row(cut[0].start, cut[0].end, clipped[1])]
    return [*rows[:head], *opening, marker, *closing, *rows[len(rows) - tail :]], block


class _EndLines(Sequence[str]):
    """The lines of `text` ("\n"-split) as a sequence that splits only its two ends: a cut
    to a budget looks at the lines within `reach` characters of either end (and at most the
    one line beyond each). A file of 21 million short lines was split whole, several times,
    to show 10 KB of it: seconds of the event loop and gigabytes of line objects."""

    def __init__(self, text: str, reach: int) -> None:
        self._text = text
        self._count = text.count("\n") + 1
        self._head = text[:reach].split("\n")[:-1]  # the last part may go on past `reach`
        self._head_end = sum(len(line) + 1 for line in self._head)  # where the next line starts
        self._tail = text[len(text) - reach :].split("\n")[1:]
        self._tail_start = len(text) - sum(len(line) + 1 for line in self._tail)  # its "\n"

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._count))]
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("line index out of range")
        if index < len(self._head):
            return self._head[index]
        if index >= self._count - len(self._tail):
            return self._tail[index - (self._count - len(self._tail))]
        if index == len(self._head):  # the line the head stops at
            end = self._text.find("\n", self._head_end)
            return self._text[self._head_end : end if end >= 0 else len(self._text)]
        if index == self._count - len(self._tail) - 1:  # the one before the tail
            return self._text[self._text.rfind("\n", 0, self._tail_start) + 1 : self._tail_start]
        return self._text.split("\n")[index]  # not asked by a cut: whatever it costs


def fit_text(
    text: str, first_line: int, max_bytes: int, prune_id: str
) -> tuple[str, dict[str, Any] | None]:
    """`fit_rows(raw_rows(text.split("\n"), first_line), ...)` as text, without a row per line.

    For the raw output of a tool: the text comes back unchanged when it fits,
    and only the head and tail lines it keeps become rows when it does not.
    """
    if text_bytes(text) <= max_bytes:
        return text, None
    # A character takes a byte or more: past max_bytes characters from an end, no line is kept.
    reach = max_bytes + 1
    lines: Sequence[str] = text.split("\n") if len(text) <= 4 * reach else _EndLines(text, reach)
    head, tail = _head_tail(lines, max_bytes)
    last = first_line + len(lines) - 1
    if not head and not tail:
        rows, block = _cut_inside_line(Row(first_line, first_line, lines[0]), last, max_bytes, prune_id)
        return rows_text(rows), block
    start, end = first_line + head, last - tail
    block = annotation(prune_id, start, end, BUDGET_REASON)
    clipped = _clip_cut(lines, head, tail, max_bytes)
    opening = [] if clipped is None else [clipped[0]]
    closing = [] if clipped is None or not clipped[1] else [clipped[1]]
    kept = [*lines[:head], *opening, block["marker"], *closing, *lines[len(lines) - tail :]]
    return "\n".join(kept), block


def trim_by_order(
    lines: list[str],
    keep: list[bool],
    order: list[int],
    max_bytes: int,
    *,
    first_line: int = 1,
    marker_bytes: int = MARKER_OVERHEAD + 14,
) -> list[bool] | None:
    """A smaller keep-mask whose view fits `max_bytes`: the kept lines that come first in
    `order` (most worth showing first), or None when the view already fits.

    The budget then drops the least useful lines instead of the middle of the text.
    """
    n = len(lines)
    cost = 0
    blocks = 0
    for i in range(n):
        if keep[i]:
            cost += numbered_line_bytes(first_line + i, lines[i])
        elif i == 0 or keep[i - 1]:
            blocks += 1
    if cost + blocks * marker_bytes <= max_bytes:
        return None
    out = [False] * n
    used = marker_bytes
    huge = None  # the first line that no view could hold whole
    for i in order:
        if not keep[i] or out[i]:
            continue
        size = numbered_line_bytes(first_line + i, lines[i])
        if size > max_bytes - marker_bytes:
            # Passed over, not the end of the view: a 30 KB line ranked first hid every line
            # after it, and a one-line file showed only its marker (the review of 2026-11-29).
            huge = i if huge is None else huge
            continue
        c = size + marker_change(out, i, marker_bytes)
        if used + c > max_bytes:
            break
        out[i] = True
        used += c
    if huge is not None and not any(out):
        out[huge] = True  # the view's one line: fit_rows shows its head and tail
    fill_cheap_gaps(lines, out, marker_bytes, first_line)
    return out


def numbered_line_bytes(number: int, line: str) -> int:
    """Bytes of a kept line in a line-numbered view: 'N│ ' + text + newline."""
    size = len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
    return len(str(number)) + 5 + size


def numbered_view_bytes(lines: Sequence[str], first_line: int = 1) -> list[int]:
    """numbered_line_bytes of every line, numbered from `first_line`, in one pass."""
    return [
        len(str(number)) + 5 + (len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass")))
        for number, line in enumerate(lines, first_line)
    ]


def marker_change(shown: list[bool], i: int, marker_bytes: int) -> int:
    """Bytes of markers that showing hidden line `i` adds (+1 marker: it splits a pruned
    block) or saves (-1: it was a block of its own); 0 when it extends a kept block."""
    left = i == 0 or shown[i - 1]
    right = i == len(shown) - 1 or shown[i + 1]
    if left and right:
        return -marker_bytes
    return 0 if left or right else marker_bytes


def fill_cheap_gaps(lines: list[str], keep: list[bool], limit: int, first_line: int = 1) -> None:
    """Show the lines of a pruned block whose marker would cost more than they do."""
    n = len(keep)
    i = 0
    while i < n:
        if keep[i]:
            i += 1
            continue
        j, size = i, 0
        while j < n and not keep[j]:
            if size <= limit:
                size += numbered_line_bytes(first_line + j, lines[j])
            j += 1
        if size <= limit:
            keep[i:j] = [True] * (j - i)
        i = j


def text_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _head_tail(texts: Sequence[str], max_bytes: int) -> tuple[int, int]:
    """How many leading and trailing lines stay when the middle is cut.

    Sizes are computed only for the lines looked at: a long output costs the
    lines of its budget, not all of its lines.
    """
    room = max(max_bytes - MARKER_OVERHEAD, 0)
    head_room = room * 6 // 10
    used = 0
    head = 0
    for text in texts:
        size = text_bytes(text) + 1
        if used + size > head_room:
            break
        head += 1
        used += size
    tail = 0
    for index in range(len(texts) - 1, head - 1, -1):
        size = text_bytes(texts[index]) + 1
        if used + size > room:
            break
        tail += 1
        used += size
    return head, tail


def _clip_cut(texts: Sequence[str], head: int, tail: int, max_bytes: int) -> tuple[str, str] | None:
    """The parts of a long line shown around the cut's marker, when the cut starts at a line
    that did not fit whole but the room the head and tail leave holds a useful part of it
    (a 40 KiB JSON line between two short ones). A cut of that one line shows its head and
    its tail ("head…", marker, "…tail"); a longer cut shows the first line's head only. The
    marker still recovers the line whole. None when there is no such room."""
    room = max(max_bytes - MARKER_OVERHEAD, 0)
    used = sum(text_bytes(t) + 1 for t in texts[:head]) + sum(
        text_bytes(t) + 1 for t in texts[len(texts) - tail :]
    )
    # 32: a marker may be longer than MARKER_OVERHEAD; two "…" and newlines.
    left = room - used - 32 - 2 * (len("…".encode()) + 1)
    if left < MIN_CLIP_BYTES:
        return None
    data = texts[head].encode("utf-8", "surrogatepass")
    if len(data) <= left:
        return None  # it would have fit whole: the head stopped for another reason
    if len(texts) - tail - head != 1:
        return data[:left].decode("utf-8", "ignore") + "…", ""
    return _ends(data, left)


def _cut_inside_line(
    first: Row, end: int, max_bytes: int, prune_id: str
) -> tuple[list[Row], dict[str, Any] | None]:
    room = max(max_bytes - MARKER_OVERHEAD - 2 * (len("…".encode()) + 1) - LINE_REASON_BYTES, 16)
    data = first.text.encode("utf-8", "surrogatepass")
    if end != first.end:  # more lines follow: the first one's head, the rest behind the marker
        block = annotation(prune_id, first.start, end, BUDGET_REASON)
        marker = Row(first.start, end, block["marker"], marker=True, reason=BUDGET_REASON)
        text = data[:room].decode("utf-8", "ignore")
        return [Row(first.start, first.end, text + "…"), marker], block
    # The one line of the text (a minified JSON file): its head and its tail, as in the middle.
    # Recovering the line again would give the same cut: the reason says which bytes are out of
    # reach, for a command to print (an agent following the marker looped on it).
    head, tail = _ends(data, room)
    shown_head = len(head.encode("utf-8", "surrogatepass")) - len("…".encode())
    shown_tail = len(tail.encode("utf-8", "surrogatepass")) - len("…".encode())
    reason = f"{BUDGET_REASON}: octets {shown_head + 1}-{len(data) - shown_tail} de la ligne, trop longue (cut -b)"
    block = annotation(prune_id, first.start, end, reason)
    marker = Row(first.start, end, block["marker"], marker=True, reason=reason)
    return [Row(first.start, first.end, head), marker, Row(first.start, first.end, tail)], block


def _ends(data: bytes, room: int) -> tuple[str, str]:
    """The head ("…"-ended) and tail ("…"-started) of a line too long to show, in `room`
    bytes: 60% to the head, as the budget's head/tail cut shares its room."""
    front = room * 6 // 10
    return (data[:front].decode("utf-8", "ignore") + "…",
            "…" + data[-(room - front):].decode("utf-8", "ignore"))


def line_count(text: str) -> int:
    """Lines of `text`; a final newline ends the last line, it does not start one."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """"1 line", "2 lines"."""
    return f"{count} {noun if count == 1 else plural_form or noun + 's'}"


def human_bytes(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
