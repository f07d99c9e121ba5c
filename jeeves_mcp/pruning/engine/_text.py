"""Turning text into search terms: identifier splitting, light stemming, stop words."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["is_word_char", "query_identifiers", "query_terms", "terms"]

# Runs of letters/digits; identifiers are then split on case changes and digits.
# A plural acronym ("URLs", "IDs") is one part, not "UR" + "Ls".
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_PART = re.compile(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

# English function words and words so common in code or in docstrings that they
# carry no signal about *which* part of a text a question is about.
STOP = frozenset(
    """
    a an the and or but if then else elif of in on at to for from by with without
    into onto over under as is are was were be been being it its this that these
    those there here which who whom whose what when where why how not no nor so
    than too very can could should would will shall may might must do does did
    done has have had having i we you he she they them their our your my me us
    all any each every some such only own same other also just about above below
    up down out off again further once both few more most s t
    self cls def return returns returned none true false pass lambda async await
    given use used using uses new value values object objects function functions
    fix fixes fixed bug bugs issue issues
    method methods argument arguments param params parameter parameters
    """.split()
)


def is_word_char(char: str) -> bool:
    """Whether `char` may be part of an identifier: a match next to one is not a whole word."""
    return char.isalnum() or char == "_"


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A deliberately light suffix stripper: plurals, -ing, -ed, -ly, final e."""
    w = word
    n = len(w)
    if n <= 3:
        return w
    if w.endswith("ies") and n > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    elif w.endswith("ly") and len(w) > 4:
        w = w[:-2]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # running -> runn -> run
    return w


@lru_cache(maxsize=65536)
def _split_word(word: str) -> tuple[str, ...]:
    parts = _PART.findall(word)
    out = []
    for p in parts:
        p = p.lower()
        if p.isdigit() or p in STOP or len(p) < 2:
            continue
        out.append(stem(p))
    return tuple(out)


def terms(text: str) -> list[str]:
    """All search terms of `text`, in order, with repetitions."""
    out: list[str] = []
    for w in _WORD.findall(text):
        out.extend(_split_word(w))
    return out


# A question is a sentence or two (the benchmark sets' longest: 32 terms, 11 identifiers); past
# these it is a pasted blob, and scoring costs the text's distinct words times the question's
# terms: 5,000 words of one took 2 s of a 1 s deadline in one pass that does not check it. The
# first of them are kept (the asker's words usually lead) and the last, more of them (in a
# pasted traceback the innermost frames and the error come last).
MAX_QUESTION_TERMS = 128
MAX_QUESTION_IDENTIFIERS = 32
HEAD_SHARE = 0.25


def _head_and_tail(items: list[str], most: int) -> list[str]:
    if len(items) <= most:
        return items
    head = int(most * HEAD_SHARE)
    return items[:head] + items[len(items) - (most - head) :]


# Reading a question is linear in its length, before any deadline check: a 2 MB one (the
# child takes a 4 MiB body) took 2.5 s. Past this many characters its head and tail are read.
MAX_QUESTION_CHARS = 32 * 1024


_UP_TO_LAST_SPACE = re.compile(r".*\s", re.S)
_UP_TO_FIRST_SPACE = re.compile(r"\S*\s")


def bounded_question(question: str) -> str:
    """The question, or for a pasted blob its first quarter and last three quarters of
    MAX_QUESTION_CHARS, each cut at a space so no word is read in half."""
    if len(question) <= MAX_QUESTION_CHARS:
        return question
    head_end = int(MAX_QUESTION_CHARS * HEAD_SHARE)
    tail_start = len(question) - (MAX_QUESTION_CHARS - head_end)
    head, tail = question[:head_end], question[tail_start:]
    if not question[head_end].isspace() and (before := _UP_TO_LAST_SPACE.match(head)):
        head = before.group()
    if not question[tail_start - 1].isspace() and (first := _UP_TO_FIRST_SPACE.match(tail)):
        tail = tail[first.end() :]
    return f"{head}\n{tail}"


def query_terms(question: str) -> list[str]:
    """Distinct terms of a question, in first-seen order (at most MAX_QUESTION_TERMS)."""
    seen: dict[str, None] = {}
    for t in terms(question):
        seen.setdefault(t, None)
    return _head_and_tail(list(seen), MAX_QUESTION_TERMS)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
# A special name (`__module__`, `Key.__str__`) keeps its underscores: without them it is a word.
_SPECIAL_NAME = re.compile(r"(?:^|\.)__[A-Za-z]\w*__$")
# A word of letters and digits names one thing (an error code `E722`, `RFC2217`, `sha256`,
# `django22`); split into terms its digits would be dropped. Commit tasks: 4 cases up of
# 5,748, none down. Not before `.word` (`Python3.11` is not `python3`).
_CODE = re.compile(r"(?<![\w.])(?=[A-Za-z]*\d)[A-Za-z][A-Za-z0-9]{2,}(?!\w|\.\w)")


def query_identifiers(question: str) -> list[str]:
    """The identifiers a question names verbatim (snake_case, camelCase, dotted, quoted in
    backticks, a word of letters and digits, or a number), lower-cased: a line that spells one
    out is stronger evidence than one that has its words apart. Names come before numbers, at
    most MAX_QUESTION_IDENTIFIERS of them."""
    names: dict[str, None] = {}
    quoted = {
        _ident_token(word)
        for text in re.findall(r"`+([^`]+)`+", question)
        for word in _IDENT.findall(text)
    }
    for word in _IDENT.findall(question):
        tok = _ident_token(word)
        if len(tok) < 4:
            continue
        if "_" in tok or "." in tok or _CAMEL.search(tok) or tok in quoted:
            names.setdefault(tok.lower(), None)
    for code in _CODE.findall(question):
        names.setdefault(code.lower(), None)
    found = _head_and_tail(list(names), MAX_QUESTION_IDENTIFIERS)
    # Numbers of three digits or more name one thing (a port, an id, a line of output).
    for number in re.findall(r"(?<![\w.])\d{3,}(?![\w.])", question):
        if len(found) == MAX_QUESTION_IDENTIFIERS:
            break
        if number not in found:
            found.append(number)
    return found


def _ident_token(word: str) -> str:
    """An identifier as a question spells it, without the dots and underscores around it (a
    special name such as `__module__` keeps its underscores)."""
    word = word.strip(".")
    return word if _SPECIAL_NAME.search(word) else word.strip("._")


# Words that name the same thing in code: abbreviations and common verb synonyms.
# A question term matches a text term of its group at a lower weight.
_GROUPS = """
remove delete pop del discard drop erase clear unset
get fetch retrieve obtain lookup find
create make build construct generate instantiate new
show display print echo render
check validate verify ensure
start begin launch
stop end close finish terminate shutdown halt
add append insert push register attach put
update replace modify change assign
send emit dispatch post
receive recv
parse decode deserialize unmarshal
serialize encode dump marshal
copy clone duplicate
compare equal eq
length len size
iterate iter loop each walk traverse
error err exception exc failure fail
argument arg args parameter param params
configuration config cfg conf settings
directory dir folder
environment env environ
application app
request req
response resp
message msg
context ctx
object obj
attribute attr
function func fn callable callback cb
temporary tmp temp
information info
number num
string str
dictionary dict mapping
index idx
position pos
buffer buf
source src
destination dst dest
address addr
authentication auth
database db
specification spec
process proc
command cmd
representation repr
asynchronous async
value val
variable var
character char
previous prev
current cur curr
maximum max
minimum min
initialize init
execute exec run invoke call
connection conn
certificate cert
password passwd pwd
library lib
package pkg
utility util
reference ref
document doc
description desc
sequence seq
element elem item
token tok
statistic stat stats
allocate alloc
boolean bool flag
"""

_DUNDER = {
    "init": "initialize create construct",
    "new": "create construct",
    "getitem": "get item",
    "setitem": "set item",
    "delitem": "delete item",
    "getattr": "get attribute",
    "getattribute": "get attribute",
    "setattr": "set attribute",
    "delattr": "delete attribute",
    "repr": "representation string",
    "str": "string",
    "iter": "iterate",
    "aiter": "iterate asynchronous",
    "next": "next",
    "anext": "next asynchronous",
    "len": "length",
    "contains": "contains",
    "eq": "equal",
    "ne": "equal",
    "lt": "less compare",
    "le": "less compare",
    "gt": "greater compare",
    "ge": "greater compare",
    "hash": "hash",
    "bool": "boolean",
    "call": "call",
    "enter": "enter context",
    "exit": "exit context",
    "aenter": "enter context asynchronous",
    "aexit": "exit context asynchronous",
}


def _build_groups() -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for gid, row in enumerate(x for x in _GROUPS.strip().split("\n") if x.strip()):
        for w in row.split():
            out.setdefault(stem(w), set()).add(gid)
    return {k: frozenset(v) for k, v in out.items()}


_SYN = _build_groups()
SYN_WEIGHT = 0.6
PREFIX_WEIGHT = 0.6
PREFIX_MIN = 4
# In code, a name run together ("legcompanion", "rpartition", "abspath") matches a question
# term of at least COMPOUND_TERM letters spelled inside it, when nothing else matched it
# (not in prose, where "work" is not what "networking" is about):
# +1.2 points of recall on function needles from the standard library (never tuned on),
# +1.1 on held-out needles, commit tasks level.
COMPOUND_WEIGHT = 0.6
COMPOUND_MIN = 6
COMPOUND_TERM = 4
# In code, a name part of at least ABBREVIATION_MIN letters that begins a longer question term
# of at least ABBREVIATED_MIN (`div` for "divides", `mag` for "magnitude", `calc`) matches it
# at PREFIX_WEIGHT. Names
# only: in a body, three letters begin too many unrelated words. Held out, function needles
# +0.2 to +0.6 points, commit tasks level to +0.3 (every set level or up).
ABBREVIATION_MIN = 3
ABBREVIATED_MIN = 5


def name_text(name: str) -> str:
    """The words a unit's name stands for (dunder methods spelled out)."""
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        return _DUNDER.get(name[2:-2], name[2:-2])
    return name


class Matcher:
    """Maps text terms to the question terms they match, with a weight."""

    def __init__(self, question_terms: list[str], *, compound: bool = False) -> None:
        self.qterms = question_terms
        self.compound = compound
        self.index = {t: i for i, t in enumerate(question_terms)}
        self.qgroups = [_SYN.get(t, frozenset()) for t in question_terms]
        # A prefix match needs the first PREFIX_MIN letters in common: the terms by those.
        self._by_head: dict[str, set[int]] = {}
        for qi, t in enumerate(question_terms):
            if len(t) >= PREFIX_MIN:
                self._by_head.setdefault(t[:PREFIX_MIN], set()).add(qi)
        self._cache: dict[str, tuple[tuple[int, float], ...]] = {}
        self._names: dict[str, tuple[tuple[int, float], ...]] = {}
        self._words: dict[str, tuple[tuple[int, float], ...]] = {}

    def part(self, p: str) -> tuple[tuple[int, float], ...]:
        hit = self._cache.get(p)
        if hit is not None:
            return hit
        qi = self.index.get(p)
        if qi is not None:
            hit = ((qi, 1.0),)
        else:
            found: list[tuple[int, float]] = []
            groups = _SYN.get(p)
            heads = self._by_head.get(p[:PREFIX_MIN], ()) if len(p) >= PREFIX_MIN else ()
            for qi, q in enumerate(self.qterms) if groups or heads else ():
                if groups and groups & self.qgroups[qi]:
                    found.append((qi, SYN_WEIGHT))
                elif qi in heads and (p.startswith(q) or q.startswith(p)):
                    found.append((qi, PREFIX_WEIGHT))
            if not found and self.compound and len(p) >= COMPOUND_MIN:
                found = [
                    (qi, COMPOUND_WEIGHT)
                    for qi, q in enumerate(self.qterms)
                    if len(q) >= COMPOUND_TERM and q in p
                ]
            hit = tuple(found)
        self._cache[p] = hit
        return hit

    def name_part(self, p: str) -> tuple[tuple[int, float], ...]:
        """Matches of a part of a unit's name: as `part`, and in code an abbreviation too."""
        hit = self.part(p)
        if hit or not self.compound or len(p) < ABBREVIATION_MIN:
            return hit
        found = self._names.get(p)
        if found is None:
            found = tuple(
                (qi, PREFIX_WEIGHT)
                for qi, q in enumerate(self.qterms)
                if len(q) > len(p) and len(q) >= ABBREVIATED_MIN and q.startswith(p)
            )
            self._names[p] = found
        return found

    def word(self, w: str) -> tuple[tuple[int, float], ...]:
        """Matches of a raw word of the text (an identifier or an English word)."""
        hit = self._words.get(w)
        if hit is None:
            parts = _split_word(w)
            if len(parts) == 1:
                hit = self.part(parts[0])
            else:
                hit = tuple(m for p in parts for m in self.part(p))
            self._words[w] = hit
        return hit
