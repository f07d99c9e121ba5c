"""Relevance of units to a question: BM25F over the unit text plus a name match."""

from __future__ import annotations

import heapq
import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from itertools import accumulate

from ._indent import CONTROL
from ._text import _WORD, Matcher, is_word_char, name_text, terms
from ._units import Unit

__all__ = ["Scores", "line_owner", "score_units"]

W_SIG = 1.5  # a term in a signature line counts this many body terms
# A term in a docstring counts this share of one in code, as a docstring line is worth half a
# code line in the view (_plan.DOCSTRING_WEIGHT): prose names many things in common words.
# Function needles +1.2 points held out (+2.7 tuned on); commit tasks level (-0.03 held out,
# tuning set unchanged). Needles remove the asked function's own docstring, so part of their
# gain comes from how that set is made; the commit tasks, docstrings intact, are the check.
W_PROSE = 0.5
K1 = 1.2
B = 0.75
W_NAME = 2.0  # weight of the name score against the BM25F score
NAME_COVER = 0.5  # share of the name score that needs the whole name explained
# A term of the enclosing class's name counts as one of the unit's own name: a method's, and a
# nameless unit's (the class's fields, constants and tables between its methods). 0.5 before
# (and for the nameless, nothing): commits-fresh3 (tuned on) 0.837 -> 0.846, commits-dev 0.910
# -> 0.914, needles-dev 0.959 -> 0.962; held out, commit tasks +0.1 (five sets), function
# needles 0.920 -> 0.921 (share >= 0.9 0.892 -> 0.896), java +0.6.
W_OWNER = 1.0
W_IDENT = 1.0  # an identifier of the question spelled out, against one matched term
LINE_B = 0.5  # length normalisation of a line's own evidence
W_PRIOR = 2.0  # weight of a unit's question-independent relevance (errors in logs)
# Code: a unit that one of the REF_TOP best units names (a helper it calls), or that names
# one of them (a caller), gains REF_SHARE of that unit's score: what a question is about
# often sits one call away from the function whose words it shares (+0.5 points of recall
# on held-out commit tasks, +1.1 on held-out function needles, -0.6 on needles-dev).
REF_TOP = 10
REF_SHARE = 0.3
# A name spelled more often than this names no caller in particular (and would cost a
# bisection per mention: a crafted file could repeat it a million times).
REF_MAX_MENTIONS = 1000
# Docs: the units just before and after the best one (the sections beside it, or the chunks
# of a long section) gain NEXT_SHARE of its score: a document keeps what belongs together
# side by side, and a section often goes on from the one before it. Small enough that a
# section far ahead of the rest is still kept alone (+2.8 points of recall on docs from 20
# repositories' docs/, +1.8 on 19 others held out, the project's docs set unchanged; 0.45
# gained 1.6 more on the first and nothing on the rest).
NEXT_SHARE = 0.3
# A name as Python and most C-like languages spell it (not `$init` or `Foo::bar`).
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Scores:
    """A score per unit, and per line the evidence its own words give (line BM25)."""

    __slots__ = ("lines", "units")

    def __init__(self, units: list[float], lines: list[float]) -> None:
        self.units = units
        self.lines = lines


def score_units(
    lines: Sequence[str],
    units: list[Unit],
    question_terms: list[str],
    identifiers: Sequence[str] = (),
    *,
    by_line: bool = True,
    compound: bool = False,
    references: bool = False,
    neighbours: bool = False,
    prose: AbstractSet[int] = frozenset(),
    match: Matcher | None = None,
) -> Scores:
    """One score per unit, and (if `by_line`) the evidence of each line; `compound`: names
    run together match the question terms spelled inside them (code); `references`: units
    one name reference away from the best ones share their score (code); `neighbours`: the
    units beside the best one share its score (docs); `prose`: docstring lines, whose terms
    count W_PROSE; `match`: a Matcher of the same terms and `compound` that texts scored
    one after another share (the words it has matched already are not matched again)."""
    if not units or not (question_terms or identifiers):
        return Scores([0.0] * len(units), [0.0] * len(lines))
    line_tf: dict[int, list[float]] = {}
    line_len: dict[int, int] = {}
    if match is None:
        match = Matcher(question_terms, compound=compound)
    word = match.word
    findall = _WORD.findall
    nq = len(question_terms)
    n = len(units)

    tfs: list[list[float] | None] = []  # None: no term of the question in the unit
    lens: list[int] = []
    names: list[
        tuple[list[float], float] | None
    ] = []  # best weight per term, share of name parts matched
    # Words known to match nothing, and to match something (with their matches): most lines
    # hold none of the latter, found by set operations in C rather than a lookup per word.
    known: set[str] = set()
    matching: set[str] = set()
    hits_of: dict[str, tuple[tuple[int, float], ...]] = {}
    for u in units:
        tf = None
        length = 0
        sig = u.sig
        for k in range(u.start, u.end + 1):
            words = findall(lines[k])
            length += len(words)
            if not known.issuperset(words):
                for w in set(words).difference(known):
                    if hits := word(w):
                        matching.add(w)
                        hits_of[w] = hits
                known.update(words)
            if matching.isdisjoint(words):
                continue
            ltf = None
            for w in words:
                if w in matching:
                    hits = hits_of[w]
                    if tf is None:
                        tf = [0.0] * nq
                    if sig is not None and sig[0] <= k <= sig[1]:
                        w_line = W_SIG
                    else:
                        w_line = W_PROSE if k in prose else 1.0
                    for qi, wt in hits:
                        tf[qi] += w_line * wt
                    if by_line:
                        if ltf is None:
                            ltf = line_tf.setdefault(k, [0.0] * nq)
                            line_len[k] = len(words)
                        for qi, wt in hits:
                            ltf[qi] += wt
        tfs.append(tf)
        lens.append(length)
        if not u.name and not u.owner:
            names.append(None)
            continue
        nm = [0.0] * nq
        parts = terms(name_text(u.name)) if u.name else []
        hit_parts = 0
        for p in parts:
            hits = match.name_part(p)
            if hits:
                hit_parts += 1
            for qi, wt in hits:
                nm[qi] = max(nm[qi], wt)
        if u.owner:
            for p in terms(u.owner):
                for qi, wt in match.name_part(p):
                    nm[qi] = max(nm[qi], W_OWNER * wt)
        names.append((nm, hit_parts / len(parts) if parts else 0.0))

    avg = max(1.0, sum(lens) / n)
    df = [0] * nq
    ndf = [0] * nq
    for tf, name in zip(tfs, names, strict=True):
        for qi in range(nq):
            if tf is not None and tf[qi]:
                df[qi] += 1
            if name is not None and name[0][qi]:
                ndf[qi] += 1
    idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df]
    nidf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in ndf]
    scores = []
    for u, tf, length, name in zip(units, tfs, lens, names, strict=True):
        s = W_PRIOR * u.prior
        if tf is not None:
            norm = 1.0 - B + B * length / avg
            for qi in range(nq):
                f = tf[qi]
                if f:
                    f /= norm
                    s += idf[qi] * f * (K1 + 1) / (K1 + f)
        if name is not None and any(name[0]):
            nm, cover = name
            ns = sum(nidf[qi] * nm[qi] for qi in range(nq))
            s += W_NAME * ns * ((1 - NAME_COVER) + NAME_COVER * cover)
        scores.append(s)
    evidence = _line_evidence(len(lines), line_tf, line_len, nq)
    owner = line_owner(units, len(lines)) if identifiers or references else []
    if identifiers:
        _identifier_evidence(lines, owner, len(units), identifiers, scores, evidence)
    if references:
        scores = _spread_along_references(lines, units, owner, scores)
    if neighbours:
        best = max(range(n), key=lambda k: scores[k])
        for k in (best - 1, best + 1):
            if 0 <= k < n:
                scores[k] += NEXT_SHARE * scores[best]
    return Scores(scores, evidence)


def _spread_along_references(
    lines: Sequence[str], units: list[Unit], owner: list[int], scores: list[float]
) -> list[float]:
    """Scores raised by REF_SHARE of the best score among the top units a unit names or is
    named by. Ignored: names under three characters, dunder names, blocks named by a
    control keyword (`for`, `if` in an indentation layout), a unit naming itself."""
    top = [
        k
        for k in heapq.nlargest(REF_TOP, range(len(units)), key=scores.__getitem__)
        if scores[k] > 0
    ]
    if not top:
        return scores
    by_name: dict[str, list[int]] = {}
    for k, u in enumerate(units):
        if (
            len(u.name) >= 3
            and not u.name.startswith("__")
            and not (u.sig is not None and CONTROL.match(lines[u.sig[0]]))
        ):
            by_name.setdefault(u.name, []).append(k)
    gain = [0.0] * len(units)
    for k in top:  # what the top units name: their helpers
        u = units[k]
        named = {w for i in range(u.start, u.end + 1) for w in _IDENTIFIER.findall(lines[i])}
        for w in named - {u.name}:
            for j in by_name.get(w, ()):
                gain[j] = max(gain[j], REF_SHARE * scores[k])
    text = "\n".join(lines)
    starts = _line_starts(lines)
    for k in top:  # what names the top units: their callers
        name = units[k].name
        if name not in by_name or text.count(name) > REF_MAX_MENTIONS:
            continue
        at = text.find(name)
        while at >= 0:
            end = at + len(name)
            if not (at and is_word_char(text[at - 1])) and not (
                end < len(text) and is_word_char(text[end])
            ):
                j = owner[bisect_right(starts, at) - 1]
                if j >= 0 and units[j].name != name:
                    gain[j] = max(gain[j], REF_SHARE * scores[k])
            at = text.find(name, end)
    return [s + g for s, g in zip(scores, gain, strict=True)]


def line_owner(units: Sequence[Unit], n: int) -> list[int]:
    """Per line, the index of the unit holding it (-1: none)."""
    owner = [-1] * n
    for k, u in enumerate(units):
        owner[u.start : u.end + 1] = [k] * (u.end - u.start + 1)
    return owner


def _line_starts(lines: Sequence[str]) -> list[int]:
    """Per line, its offset in the lines joined by newlines."""
    return list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))


def _identifier_evidence(
    lines: Sequence[str],
    owner: list[int],
    n_units: int,
    identifiers: Sequence[str],
    scores: list[float],
    evidence: list[float],
) -> None:
    """Lines (and units) that spell out an identifier of the question gain its idf;
    `owner` is the unit of each line (-1: none)."""
    n = len(lines)
    lowered = [line.lower() for line in lines]  # lower() may change a line's length
    text = "\n".join(lowered)
    starts = _line_starts(lowered)
    for ident in identifiers:
        # A dotted name may be spelled by its last part in the code.
        hits_set: set[int] = set()
        for form in {ident, ident.rsplit(".", 1)[-1]}:
            at = text.find(form)
            while at >= 0:
                line = bisect_right(starts, at) - 1
                hits_set.add(line)
                at = text.find(form, starts[line + 1] if line + 1 < n else len(text))
        hits = sorted(hits_set)
        if not hits:
            continue
        idf = math.log(1.0 + (n - len(hits) + 0.5) / (len(hits) + 0.5))
        hit_units = {owner[i] for i in hits if owner[i] >= 0}
        uidf = math.log(1.0 + (n_units - len(hit_units) + 0.5) / (len(hit_units) + 0.5))
        for i in hits:
            evidence[i] += W_IDENT * idf
        for k in hit_units:
            scores[k] += W_IDENT * uidf


def _line_evidence(
    n: int, line_tf: dict[int, list[float]], line_len: dict[int, int], nq: int
) -> list[float]:
    """BM25 of each line alone, lines as documents (idf over the lines of the text)."""
    evidence = [0.0] * n
    if not line_tf:
        return evidence
    df = [0] * nq
    for tf in line_tf.values():
        for qi in range(nq):
            if tf[qi]:
                df[qi] += 1
    idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in df]
    avg = max(1.0, sum(line_len.values()) / len(line_len))
    for k, tf in line_tf.items():
        norm = 1.0 - LINE_B + LINE_B * line_len[k] / avg
        s = 0.0
        for qi in range(nq):
            f = tf[qi]
            if f:
                f /= norm
                s += idf[qi] * f * (K1 + 1) / (K1 + f)
        evidence[k] = s
    return evidence
