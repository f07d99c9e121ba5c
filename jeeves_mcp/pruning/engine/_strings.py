"""Lines that begin inside a string literal spanning lines (Rust's `r"..."` help texts, Go's
backquoted usage, JS templates, Java and Kotlin text blocks) or inside a block comment (a
Javadoc's ` * ` lines): their indentation is the string's or the comment's, not the code's, so
the indentation layout must not read it as structure."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import NamedTuple

__all__ = ["Spans", "spanned_lines"]

# Tokens are read left to right; comments and one-line strings are matched so that a quote
# inside them opens nothing. A token that spans lines runs to its closer or to the end of the
# text: an opener with no closer (or read wrongly, as a quote in a regex literal) ends the scan
# in one pass, where a failed match retried at every such opener would cost the text's length
# each time. Such a last token marks nothing.
_END = r"|\Z)"
_LINE_COMMENT = r"//[^\n]*"
_BLOCK_COMMENT = r"/\*.*?(?:\*/" + _END
# Not after a backslash: in a run of `\"` each quote would start a scan that fails at the
# line's end (a 10,000-line text took 7 s).
_DQ_LINE = r'(?<!\\)"(?:[^"\\\n]|\\.)*+"'
_SQ_LINE = r"(?<!\\)'(?:[^'\\\n]|\\.)*+'"
_TRIPLE = r'"""(?:[^"\\]|\\.|"(?!""))*+(?:"""' + _END
_C_FAMILY = (_LINE_COMMENT, _BLOCK_COMMENT)
# A JS regex literal, where one may start (after an operator, `=>` or `return`, or where no
# operand stands before it: a line may begin with one): its quotes, backquotes and `/*` open
# nothing (axios' `/^[-_a-zA-Z0-9^`|~,!#$%&'*+.]+$/`; a `[\w{}/*\s,]` at the head of a line opened
# a comment that ran 33 lines to a `'src/**/*'`). Bounded, so that a long line of unclosed ones
# costs no more than a short one. Not after a backslash (`\/` is not code), and 16 classes at most:
# a slash one scan passed over then starts another only inside a class, and that one goes the
# same way from the class's end, so a character is scanned at most 17 times (a line of
# slash-backslash pairs, or of `[=/]`, once scanned 2,000 items from each slash: 21 s).
_JS_REGEX = (
    r"(?:(?<=[(,=:\[!&|?{};>])|(?<=[(,=:\[!&|?{};>] )|(?<=return )|(?<![\w)\]$] )(?<![\w)\]$]))"
    r"(?<!\\)/(?![/*])(?:[^/\\\n\[]|\\.)*+(?:\[(?:[^\]\\\n]|\\.){0,200}+\](?:[^/\\\n\[]|\\.)*+){0,16}+/"
)

_SPANNING = {
    # Rust: every string may span lines; raw strings close on `"` and as many `#` as opened;
    # `'a` is a lifetime, `'"'` a character.
    "rust": (
        *_C_FAMILY,
        r'(?<!\w)[bc]?r(?P<hashes>#*)".*?(?:"(?P=hashes)' + _END,
        r'(?<!\w)[bc]?"(?:[^"\\]|\\.)*+(?:"' + _END,
        r"(?<!\w)b?'(?:[^'\\\n]|\\[^\n]{1,10}?)'",
    ),
    "go": (*_C_FAMILY, r"`[^`]*+(?:`" + _END, _DQ_LINE, _SQ_LINE),
    "js": (*_C_FAMILY, _JS_REGEX, r"`(?:[^`\\]|\\.)*+(?:`" + _END, _DQ_LINE, _SQ_LINE),
    "jvm": (*_C_FAMILY, _TRIPLE, _DQ_LINE, _SQ_LINE),
    "csharp": (
        *_C_FAMILY,
        r'"""+.*?(?:"""' + _END,
        r'(?<!\$)\$*+@\$*+"(?:[^"]|"")*+(?:"' + _END,
        _DQ_LINE,
        _SQ_LINE,
    ),
    "cpp": (
        *_C_FAMILY,
        r'(?<!\w)(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?(?:\)(?P=delim)"' + _END,
        _DQ_LINE,
        _SQ_LINE,
    ),
    # PHP's strings may span lines; only its comments are read (a quote that fails to close on
    # its line opens nothing).
    "php": (*_C_FAMILY, r"#[^\n]*", _DQ_LINE, _SQ_LINE),
    "python": (
        r"#[^\n]*",
        _TRIPLE,
        r"'''(?:[^'\\]|\\.|'(?!''))*+(?:'''" + _END,
        _DQ_LINE,
        _SQ_LINE,
    ),
}
_LANGUAGES = {
    ".rs": "rust",
    ".go": "go",
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".mts", ".cts"), "js"),
    **dict.fromkeys((".java", ".kt", ".kts", ".scala", ".swift", ".groovy"), "jvm"),
    ".cs": "csharp",
    ".php": "php",
    **dict.fromkeys((".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".c", ".h"), "cpp"),
    **dict.fromkeys((".py", ".pyi", ".pyw"), "python"),
}
# What a language writes only where a string or a comment may span lines: a text without it
# has none.
_OPENERS = {
    "rust": re.compile(r'/\*|"[^"\n]*$', re.MULTILINE),
    "go": re.compile(r"/\*|`"),
    "js": re.compile(r"/\*|`"),
    "jvm": re.compile(r'/\*|"""'),
    "csharp": re.compile(r'/\*|@"|"""'),
    "cpp": re.compile(r'/\*|R"'),
    "php": re.compile(r"/\*"),
    "python": re.compile("\"\"\"|'''"),
}
_NEWLINE = re.compile("\n")
# Where a token may begin, tested first: trying every alternative at every character took
# a 50,000-line Rust text 0.2 s, four times the scan's cost with it.
_FIRST = {
    "rust": "[/\"']|[bc]?r#*\"|b'|[bc]\"",
    "go": r"[/\"'`]",
    "js": r"[/\"'`]",
    "jvm": r"[/\"']",
    "csharp": r"[/\"'$@]",
    "cpp": r"""[/"']|(?:u8|[uUL])?R\"""",
    "php": r"[/#\"']",
    "python": r"[#\"']",
}
_TOKENS = {
    lang: re.compile(f"(?={_FIRST[lang]})(?:{'|'.join(f'(?:{t})' for t in tokens)})", re.DOTALL)
    for lang, tokens in _SPANNING.items()
}


class Spans(NamedTuple):
    strings: set[int]  # lines that begin inside a string literal
    comments: set[int]  # lines that begin inside a block comment


def spanned_lines(text: str, path: str | None) -> Spans:
    """0-based numbers of the lines of `text` whose start lies inside a string literal or a
    block comment that began on an earlier line, for the language `path`'s suffix names (none
    if unknown)."""
    spans = Spans(set(), set())
    if path is None:
        return spans
    lang = _LANGUAGES.get(path[path.rfind(".") :].lower()) if "." in path else None
    if lang is None or not _OPENERS[lang].search(text):
        return spans
    starts: list[int] | None = None
    text += "\n"  # a lone backslash at the end escapes this, not the end of the text
    for m in _TOKENS[lang].finditer(text):
        start, end = m.span()
        if end == len(text) or text.count("\n", start, end) == 0:
            continue  # unclosed, or on one line
        if text[start] == "/":
            if text[start + 1] != "*":
                continue  # a line comment or a regex literal
            inside = spans.comments
        elif text[start] == "#":
            continue
        else:
            inside = spans.strings
        if starts is None:
            starts = [n.end() for n in _NEWLINE.finditer(text)]
        first = bisect_right(starts, start)  # the line the token opens on
        last = bisect_right(starts, end - 1)
        inside.update(range(first + 1, last + 1))
    return spans
