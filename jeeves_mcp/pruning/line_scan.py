"""Which lines of an output its focus question names, for outputs the engine leaves whole.

An output over `max_prune_input_bytes` (or one the engine finds nothing to prune in, such as
plain data) would reach the agent as its head and tail around a budget marker, whatever the
question asked. `scan` looks for the question's identifiers and numbers, as whole words, in a
bounded pass per term (`str.find` in C, at most `MAX_CANDIDATES` occurrences looked at per term),
and `LineScan.rows` makes the view for a byte budget: the lines naming the rarest terms first,
then as much of the head and tail as is left, every other block behind a recoverable marker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from jeeves_mcp.pruning.engine import is_word_char
from jeeves_mcp.pruning.render import (
    FOCUS_REASON,
    LINE_REASON_BYTES,
    MARKER_OVERHEAD,
    Row,
    annotation,
    numbered_line_bytes,
)

MAX_TERMS = 8
MAX_CANDIDATES = 20_000  # occurrences of one term looked at (whole word or not)
MAX_LINES_PER_TERM = 1_000  # matching lines kept per term
MAX_SHOWN_CHARS = 400  # a longer matching line shows this much around its first match
_MARKER_BYTES = MARKER_OVERHEAD + 14
_TERM = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?![\w.])|[A-Za-z_]\w*")
STOPWORDS = frozenset(
    "a an and any are as at be been but by can could did do does done for from had has have how i "
    "if in into is it its me my no not of on or our out over shall should so some than that the "
    "their them then there these they this those to under up was we were what when where which "
    "while who whom whose why will with would you your line lines show find output file files "
    "value values number numbers happen happened get got".split()
)


def question_terms(question: str) -> list[str]:
    """The question's numbers and identifiers (3+ characters, not English glue), in order."""
    terms: list[str] = []
    for match in _TERM.finditer(question):  # a question may be a pasted blob: stop at the cap
        token = match.group()
        key = token.lower()
        if not token[0].isdigit() and (len(token) < 3 or key in STOPWORDS):
            continue
        if key not in terms:
            terms.append(key)
            if len(terms) == MAX_TERMS:
                break
    return terms


@dataclass
class _Hit:
    start: int  # offsets of the line in the text
    end: int
    at: int  # offset of the first match in the line
    terms: set[str] = field(default_factory=set)


# A line as the view shows it, and the reason of the marker after it when only part is shown.
_Shown = tuple[str, str | None]


@dataclass
class LineScan:
    """A scanned text: its matching lines, best first, and how to show them in a budget."""

    text: str  # without its final newline
    line_count: int
    first_line: int
    prune_id: str
    terms: list[str]
    ranked: list[tuple[int, _Hit]]  # (0-based line index, hit), most worth showing first

    def rows(self, budget: int) -> list[Row]:
        """The view in `budget` bytes: ranked lines, then head and tail, markers between."""
        shown: dict[int, _Shown] = {}
        room = budget - _MARKER_BYTES
        for index, hit in self.ranked:
            line = self._shown_line(hit)
            cost = self._cost(index, line) + _MARKER_BYTES
            if cost > room:
                break
            shown[index] = line
            room -= cost
        head_room = room * 6 // 10
        for index, line in self._lines_from_start():
            cost = self._cost(index, line)
            if cost > head_room or cost > room:
                break
            if index not in shown:
                shown[index] = line
                room -= cost
                head_room -= cost
        for index, line in self._lines_from_end():
            cost = self._cost(index, line)
            if cost > room or index in shown:
                break
            shown[index] = line
            room -= cost
        return self._render(shown)

    def _cost(self, index: int, line: _Shown) -> int:
        text, hidden = line
        return numbered_line_bytes(self.first_line + index, text) + (
            0 if hidden is None else _MARKER_BYTES + LINE_REASON_BYTES)

    def _render(self, shown: dict[int, _Shown]) -> list[Row]:
        rows: list[Row] = []
        base = self.first_line
        previous = -1
        for index in [*sorted(shown), self.line_count]:
            if index > previous + 1:
                start, end = base + previous + 1, base + index - 1
                block = annotation(self.prune_id, start, end, FOCUS_REASON)
                rows.append(Row(start, end, block["marker"], marker=True, reason=FOCUS_REASON))
            if index < self.line_count:
                number = base + index
                text, hidden = shown[index]
                rows.append(Row(number, number, f"{number}│ {text}"))
                if hidden is not None:
                    # The rest of the line, which recovering it would clip again: the bytes to print.
                    block = annotation(self.prune_id, number, number, hidden)
                    rows.append(Row(number, number, block["marker"], marker=True, reason=hidden))
            previous = index
        return rows

    def _shown_line(self, hit: _Hit) -> _Shown:
        """The line, or MAX_SHOWN_CHARS of it around its first match between "…" and the
        reason of a marker naming the bytes of the line left out."""
        if hit.end - hit.start <= MAX_SHOWN_CHARS:
            return self.text[hit.start : hit.end], None
        begin = max(hit.start, hit.at - MAX_SHOWN_CHARS // 3)
        end = min(hit.end, begin + MAX_SHOWN_CHARS)
        shown = ("…" if begin > hit.start else "") + self.text[begin:end] + ("…" if end < hit.end else "")
        first = len(self.text[hit.start : begin].encode("utf-8", "surrogatepass"))
        last = first + len(self.text[begin:end].encode("utf-8", "surrogatepass"))
        size = last + len(self.text[end : hit.end].encode("utf-8", "surrogatepass"))
        spans = ([f"1-{first}"] if first else []) + ([f"{last + 1}-{size}"] if last < size else [])
        return shown, f"{FOCUS_REASON}: octets {' et '.join(spans)} de la ligne, trop longue (cut -b)"

    def _lines_from_start(self) -> Iterator[tuple[int, _Shown]]:
        start = 0
        for index in range(self.line_count):
            end = self.text.find("\n", start)
            end = len(self.text) if end < 0 else end
            yield index, self._shown_line(_Hit(start, end, start))
            start = end + 1

    def _lines_from_end(self) -> Iterator[tuple[int, _Shown]]:
        end = len(self.text)
        for index in range(self.line_count - 1, -1, -1):
            start = self.text.rfind("\n", 0, end) + 1
            yield index, self._shown_line(_Hit(start, end, start))
            end = start - 1


def scan(text: str, question: str, prune_id: str, first_line: int = 1) -> LineScan | None:
    """The lines of `text` that name the question's terms, or None when none does (or the
    question names nothing to look for). Bounded: MAX_TERMS passes of `str.find`."""
    terms = question_terms(question)
    if not terms:
        return None
    text = text.removesuffix("\n")
    folded = text.lower() if any(not term[0].isdigit() for term in terms) else text
    if len(folded) != len(text):  # a few characters change length in lower(): offsets would not match
        folded, terms = text, [term for term in terms if term[0].isdigit() or term in text]
    hits: dict[int, _Hit] = {}
    counts: dict[str, int] = {}
    for term in terms:
        counts[term] = _find_term(text if term[0].isdigit() else folded, term, hits)
    if not hits:
        return None

    def score(item: tuple[int, _Hit]) -> tuple[float, int]:
        return -sum(1 / counts[term] for term in item[1].terms), item[0]

    ranked = sorted(hits.items(), key=score)
    return LineScan(text, text.count("\n") + 1, first_line, prune_id, terms, ranked)


def _find_term(haystack: str, term: str, hits: dict[int, _Hit]) -> int:
    """Record the lines where `term` is a whole word; returns how many lines that is."""
    lines = 0
    at = haystack.find(term)
    line, counted_to = 0, 0
    for _ in range(MAX_CANDIDATES):
        if at < 0 or lines >= MAX_LINES_PER_TERM:
            break
        after = at + len(term)
        if (at == 0 or not is_word_char(haystack[at - 1])) and (
            after == len(haystack) or not is_word_char(haystack[after])
        ):
            line += haystack.count("\n", counted_to, at)
            counted_to = at
            hit = hits.get(line)
            if hit is None:
                start = haystack.rfind("\n", 0, at) + 1
                end = haystack.find("\n", at)
                hit = hits[line] = _Hit(start, len(haystack) if end < 0 else end, at)
            if term not in hit.terms:
                hit.terms.add(term)
                lines += 1
        at = haystack.find(term, after)
    return max(lines, 1)
