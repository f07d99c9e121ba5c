"""What a marker's reason says: the units its block hides, the most relevant first."""

from __future__ import annotations

from collections.abc import Sequence

from jeeves_mcp.pruning.render import FOCUS_REASON

from ._code import GENERIC
from ._units import Layout

# A marker's reason names this many of the units it hides, the most relevant first,
# each cut to this many characters.
REASON_NAMES = 2
REASON_NAME_CHARS = 40


def block_reasons(layout: Layout, scores: Sequence[float], keep: list[bool]) -> list[str | None]:
    """Per pruned line, the reason of its block: the units it hides, most relevant to the
    question first ("hors focus: Pool.acquire, Pool.release +3"), so an agent knows what
    to recover."""
    n = len(keep)
    label: list[str | None] = [None] * n
    starts: dict[int, tuple[str, float]] = {}
    for u, score in zip(layout.units, scores, strict=True):
        for i in range(u.start, u.end + 1):
            label[i] = u.label
        if u.label and u.label != GENERIC:
            starts.setdefault(u.start, (u.label, score))
    reasons: list[str | None] = [None] * n
    i = 0
    while i < n:
        if keep[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and not keep[j + 1]:
            j += 1
        best: dict[str, float] = {}
        for k in range(i, j + 1):
            if k in starts:
                name, score = starts[k]
                best[name] = max(best.get(name, score), score)
        # sorted is stable: names of equal relevance keep the file's order
        hidden = sorted(best, key=lambda name: -best[name])
        if not hidden and label[i] and label[i] != GENERIC:
            hidden = [str(label[i])]
        reason = FOCUS_REASON
        if hidden:
            shown = ", ".join(h[:REASON_NAME_CHARS] for h in hidden[:REASON_NAMES])
            more = len(hidden) - REASON_NAMES
            reason += f": {shown}" + (f" +{more}" if more > 0 else "")
        reasons[i : j + 1] = [reason] * (j + 1 - i)
        i = j + 1
    return reasons


def innermost_name(layout: Layout, line: int) -> str | None:
    """The name a marker gives the innermost named unit holding `line`, if any."""
    holding = [u for u in layout.units if u.start <= line <= u.end and u.label and u.label != GENERIC]
    if not holding:
        return None
    return min(holding, key=lambda u: u.end - u.start).label[:REASON_NAME_CHARS]
