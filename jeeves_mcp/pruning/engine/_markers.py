"""What a marker's reason says: the units its block hides, the most relevant first."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from jeeves_mcp.pruning.render import FOCUS_REASON

from ._indent import GENERIC
from ._units import Layout

# A marker's reason names this many of the units it hides, the most relevant first,
# each cut to this many characters.
REASON_NAMES = 2
REASON_NAME_CHARS = 40
# A block the response budget cut names one (`budget de réponse: Pool.acquire +3`): such
# markers come by the dozen where the budget binds, and a second name's bytes cost lines
# (held out, 5,223 commit tasks: 8 cases up, none down, against two names).
BUDGET_REASON_NAMES = 1


def block_reasons(
    layout: Layout, scores: Sequence[float], keep: list[bool], names: int = REASON_NAMES
) -> list[str | None]:
    """Per pruned line, the reason of its block: the units it hides, most relevant to the
    question first ("hors focus: Pool.acquire, Pool.release +3"), `names` of them, so an
    agent knows what to recover."""
    n = len(keep)
    label: list[str | None] = [None] * n
    starts: dict[int, tuple[str, float]] = {}
    for u, score in zip(layout.units, scores, strict=True):
        label[u.start : u.end + 1] = [u.label] * (u.end + 1 - u.start)
        if u.label and u.label != GENERIC:
            starts.setdefault(u.start, (u.label, score))
    start_lines = sorted(starts)
    reasons: list[str | None] = [None] * n
    i = _next(keep, False, 0)
    while i < n:
        j = _next(keep, True, i) - 1  # the pruned block i..j
        best: dict[str, float] = {}
        for k in start_lines[bisect_left(start_lines, i) : bisect_right(start_lines, j)]:
            name, score = starts[k]
            best[name] = max(best.get(name, score), score)
        # sorted is stable: names of equal relevance keep the file's order
        hidden = sorted(best, key=lambda name: -best[name])
        if not hidden and label[i] and label[i] != GENERIC:
            hidden = [str(label[i])]
        reason = FOCUS_REASON
        if hidden:
            shown = ", ".join(h[:REASON_NAME_CHARS] for h in hidden[:names])
            more = len(hidden) - names
            reason += f": {shown}" + (f" +{more}" if more > 0 else "")
        reasons[i : j + 1] = [reason] * (j + 1 - i)
        i = _next(keep, False, j + 1)
    return reasons


def _next(keep: list[bool], value: bool, start: int) -> int:
    """The first line from `start` whose keep is `value`, else len(keep)."""
    try:
        return keep.index(value, start)
    except ValueError:
        return len(keep)


def innermost_name(layout: Layout, line: int) -> str | None:
    """The name a marker gives the innermost named unit holding `line`, if any."""
    holding = [u for u in layout.units if u.start <= line <= u.end and u.label and u.label != GENERIC]
    if not holding:
        return None
    return min(holding, key=lambda u: u.end - u.start).label[:REASON_NAME_CHARS]
