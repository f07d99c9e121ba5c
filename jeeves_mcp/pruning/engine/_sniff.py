"""Guessing whether a text is code, logs or documentation, and whether its lines are numbered."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["guess_source_type", "without_line_numbers"]

_DOCS_EXT = (".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc", ".org", ".textile", ".mdx")
_LOG_EXT = (".log", ".out", ".err", ".diff", ".patch")
_CODE_EXT = frozenset(
    """py pyi pyw pyx pxd js mjs cjs jsx ts tsx mts cts java kt kts scala groovy go rs c h cc cpp cxx
    hh hpp hxx m mm cs fs fsx vb swift rb php pl pm lua r jl dart ex exs erl hrl hs ml mli clj cljs
    sh bash zsh fish ps1 bat sql proto graphql gql vue svelte zig nim v sv vhd tf hcl toml yaml yml
    json ini cfg conf cmake mk gradle el lisp scm rkt elm cr d pas f f90 asm s css scss less html
    xml xsl""".split()
)
# The alternatives that need leading blanks come first, on their own: after `^\s*`, a `\s+`
# split a run of blanks every way (a line of 200,000 tabs and a letter: minutes).
_LOG_LINE = re.compile(
    r"^(?:\s+(?:File \".*\", line \d+|at [\w$.<>]+\()|"
    r"\s*(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[?\d\d:\d\d:\d\d|\[?(?:INFO|DEBUG|WARN(?:ING)?|ERROR|TRACE|FATAL|CRITICAL)\b"
    r"|Traceback \(most recent call last\)|E\s{3}|FAILED\b|PASSED\b|error(?:\[\w+\])?:|warning:|npm (?:ERR|WARN)"
    r"|\S+:\d+:\d+: (?:error|warning|note)|={5,}|make(?:\[\d+\])?: ))",
    re.IGNORECASE,
)
_DOC_LINE = re.compile(
    r"^(?:#{1,6} \S|[=\-~^\"'`*+#]{3,}\s*$|\s*[-*+] \S|\s*\d+\. \S|```|\.\. \w+::)"
)
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import|#include|function\b|func |fn |pub |public |private |"
    r"return\b|if\s*\(|for\s*\(|while\s*\(|const |let |var |package |using |[}{]\s*$)"
)


def _code_line(line: str) -> bool:
    # A line ending in `;` or `{` is tested apart: as `.*[;{]\s*$` after `^\s*` it
    # backtracked quadratically over leading blanks.
    return bool(_CODE_LINE.match(line)) or line.rstrip().endswith((";", "{"))


def guess_source_type(path: str | None, text: str) -> str:
    """ "code", "logs" or "docs", from the file name when it tells, else from the content."""
    if path:
        name = path.rsplit("/", 1)[-1].lower()
        if name.endswith(_DOCS_EXT) or name in (
            "readme",
            "changelog",
            "license",
            "copying",
            "authors",
            "news",
        ):
            return "docs"
        if name.endswith(_LOG_EXT):
            return "logs"
        ext = name.rsplit(".", 1)[-1] if "." in name else ""
        if ext in _CODE_EXT or name in (
            "makefile",
            "dockerfile",
            "justfile",
            "rakefile",
            "gemfile",
        ):
            return "code"
    sample = text[:200_000].split("\n")[:2000]
    counts = {"logs": 0, "docs": 0, "code": 0}
    for line in sample:
        if not line.strip():
            continue
        if _LOG_LINE.match(line):
            counts["logs"] += 1
        elif _DOC_LINE.match(line):
            counts["docs"] += 1
        elif _code_line(line):
            counts["code"] += 1
    if not any(counts.values()):
        return (
            "docs" if sample and sum(len(x) for x in sample) / max(1, len(sample)) > 60 else "logs"
        )
    # Command output is the common case for an agent: ties go to logs.
    return max(("logs", "code", "docs"), key=lambda k: counts[k])


# `cat -n` and `nl` put a line's number and a tab before it (`nl` leaves a blank line
# unnumbered, as blanks).
_NUMBERED = re.compile(r" *(\d{1,9})\t")
# Fewer numbered lines than this is no evidence of numbering.
MIN_NUMBERED = 3


def without_line_numbers(lines: Sequence[str]) -> list[str] | None:
    """The lines without the numbers `cat -n` or `nl` put before them, or None when the
    text is not numbered so: every line not blank numbered, one more than the last."""
    plain: list[str] = []
    last = None
    numbered = 0
    for line in lines:
        match = _NUMBERED.match(line)
        if match is None:
            if line.strip(" "):
                return None
            plain.append("")
            continue
        number = int(match.group(1))
        if last is not None and number != last + 1:
            return None
        last = number
        numbered += 1
        plain.append(line[match.end() :])
    return plain if numbered >= MIN_NUMBERED else None
