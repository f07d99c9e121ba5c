"""Units of code in any language but Python (or Python `ast` cannot read): blocks by
indentation and braces, signatures, labels and doc comments as the common styles write them."""

from __future__ import annotations

import re

from ._strings import spanned_lines
from ._units import Layout, Unit

__all__ = ["CONTROL", "GENERIC", "MAX_NAME_CHARS", "file_header", "indent_layout", "leading_comments"]

# The label of a unit with no name (loose statements); reasons do not list it.
GENERIC = "code"

_IMPORT = re.compile(
    r"^\s*(?:import\s|from\s+\S+\s+import\s|#\s*include\b|using\s+[\w.:]+\s*;|use\s+[\w:{}, *]+;"
    r"|package\s+[\w.]+|extern\s+crate\b|require\s*\(|(?:const|let|var)\s+[\w{}, ]+=\s*require\s*\()"
)
CONTROL = re.compile(
    r"^\s*(?:if|for|while|switch|catch|else|try|do|return|with|elif|except|finally|foreach|"
    r"match|case|when|unless|until|loop|select|defer|go|throw|raise|yield|assert|print)\b"
)
# A Rust module with a body (`mod tests {`): `mod` alone is a common name elsewhere.
_RUST_MOD = r"^\s*(?:pub(?:\([^)]{0,80}\))?\s+)?mod\s+\w+\s*\{"
# Blocks that declare and hold declarations, read only at the head of a line: RSpec's and
# mocha's `context 'when ...'`, a Rust module.
_HEAD_CONTAINERS = r"^\s*context\s*\(?\s*[\"']|" + _RUST_MOD
_KEYWORDS = (
    r"\b(?:def|class|function|func|fn|sub|proc|struct|impl|trait|interface|enum|module|"
    r"namespace|object|record|protocol|extension|test|describe|it)\b|\bmacro_rules!|"
    + _HEAD_CONTAINERS
)
_OPENS_ARROW = r"=>\s*+(?:\{\s*+)?$"  # possessive: `=>` and 8,000 spaces took 150 ms to refuse
_KEYWORD_DECL = _KEYWORDS + "|" + _OPENS_ARROW
_DECL = re.compile(
    _KEYWORD_DECL + r"|^\s*(?:[\w:<>\[\]*&,.$]+\s+)*[\w$:~]+\s*\([^;]*$"
    r"|[\w$]\s*=\s*(?:async\s*)?(?:<[^()=]{0,200}+)?\(\s*[{\[]?\s*$"  # `name = (` and parameters
)
# Inside a function's body a line `name(` left open is a call spread over lines (or
# `let (a, b) = ...`), and `=> {` a callback (`proc.on('error', (err) => {`), not a
# declaration: only keywords, and functions given a name, declare there.
_DECL_IN_BODY = re.compile(
    _KEYWORDS + r"|\b(?:const|let|var)\s+[\w$]+\s*=\s*(?:function\b|[^=\n]*" + _OPENS_ARROW + ")"
)
_CONTAINER = re.compile(
    r"\b(?:class|struct|impl|trait|interface|enum|union|module|namespace|object|record|protocol|"
    r"extension|describe)\b|" + _HEAD_CONTAINERS
)
# A unit's label copies its owner's name: a 1 MB class name over 1,500 methods took 1.5 GB
# (names of real code are far shorter).
MAX_NAME_CHARS = 200
# Possessive: a line of 40,000 `)` ending in another character took 29 s to refuse.
_CLOSER = re.compile(r"^\s*+(?:[}\])]++[;,)]*+\s*+(?://.*)?$|end\b|</|fi\b|done\b|esac\b)")
# A function assigned to a name (JS / TS): `name = function`, `name = async (a, b) =>`,
# `key: (x) =>`, `name = x =>`, `name = <T>(a: T): R =>`, parameters one a line (`name = (` or
# `name = ({` closing the line). Where a line starts with the name, a type
# (`const Row: Component<{ q: Query }> = (props) =>`) and type parameters with defaults
# (`handle = <E extends Env = Env>(`) too. Possessive quantifiers, and those read only at the
# head of a line: lazy ones made a line of `a:a:a:...` cost 0.7 ms (and `$:<` runs 0.2 ms).
def _function_value(type_parameters: str) -> str:
    return (
        r"\s*(?:async\s*)?(?:function\b|[\w$]+\s*=>|(?:<" + type_parameters + r"{0,200}+)?"
        r"\((?:[^)]*+\)(?:\s*:[^=]{0,200}+)?\s*=>|\s*[{\[]?\s*$))"
    )


_NAME = re.compile(
    r"\b(?:def|class|function|func|fn|sub|proc|struct|impl|trait|interface|enum|module|"
    r"namespace|object|record|protocol|extension|type|mod|macro_rules!)\s+(?:\([^)]*\)\s*)?([\w$.:<>]+)"
    r"|(?<![\w$])(?!function\b)([\w$]+)\s*(?:[=:]" + _function_value("[^()=:]") + r"|\()"
    r"|^(?:(?:export|const|let|var|readonly|private|public|protected|static|declare|override)\s+)*"
    r"([\w$]+)\s*(?:(?::[^=()]{0,200}+)?=|:)" + _function_value("[^()]")
)


def file_header(lines: list[str]) -> set[int]:
    """The first few lines that say what a file is: shebang, encoding, licence."""
    keep: set[int] = set()
    for i, line in enumerate(lines[:3]):
        s = line.strip()
        if s.startswith(("#!", "# -*-", "//", "/*", "*", "#", '"""', "'''", "<?", "--")):
            keep.add(i)
        else:
            break
    return keep


def leading_comments(
    lines: list[str], start: int, floor: int, in_comments: frozenset[int] | set[int] = frozenset()
) -> int:
    """Move a unit's start up over the comment lines glued to it (`in_comments`: lines inside
    a block comment, whatever they begin with)."""
    i = start
    while i - 1 > floor and (
        i - 1 in in_comments or lines[i - 1].lstrip().startswith(("#", "//", "/*", "*"))
    ):
        i -= 1
    return i


# A jump label on a line of its own (`walk:`, `retry:`): gofmt and C style set it one level
# out, so read for indentation it would end the function it is in. Only in languages that
# have them: in YAML or a Makefile `key:` and `target:` are the structure. `default:` sits
# where `case x:` does.
_JUMP_LABEL = re.compile(r"^\s*([A-Za-z_]\w*):\s*(?://.*|/\*.*)?$")
_NOT_LABELS = frozenset(("else", "try", "finally", "except", "default"))
LABEL_SUFFIXES = (".go", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".java", ".js", ".mjs",
                  ".cjs", ".jsx", ".ts", ".tsx", ".cs", ".kt", ".scala", ".swift", ".php", ".m")
# A signature whose parameters sit one a line goes on past them (rustfmt, gofmt, prettier):
# a line that closes their brackets and opens the body (`) -> Fragment {`, `) error {`,
# `): Promise<void> {`, `]` after Swift / Kotlin lists, `>` after a template's parameters),
# or a `{` or Rust `where` on a line of its own under the signature.
_CLOSES_PARAMETERS = re.compile(r"^\s*[)\]>]")
# A brace that closes a block and goes on with the same statement: destructured parameters
# (`}: Props): Element => {`), `} else {`, `} catch (e) {`, a second callback (`}, () => {`).
_GOES_ON = re.compile(r"^\s*\}\s*(?:[):,]|(?:else|catch|finally)\b)")
_OWN_LINE_OPENER = re.compile(r"^\s*(?:\{|where)\s*$")


def _is_jump_label(line: str) -> bool:
    m = _JUMP_LABEL.match(line)
    return m is not None and m.group(1) not in _NOT_LABELS


def _indent(line: str) -> int | None:
    s = line.lstrip(" \t")
    if not s:
        return None
    lead = len(line) - len(s)
    return lead + 3 * line.count("\t", 0, lead)  # a tab counts four


class _Block:
    __slots__ = ("body", "children", "decls", "end", "start")

    def __init__(self, start: int, body: int) -> None:
        self.start = start  # opener line
        self.body = body  # first line of the body
        self.end = start
        self.children: list[_Block] = []
        self.decls: list[_Block] | None = None  # the children that declare (_declarations)


def _blocks(
    lines: list[str], labels: bool = False, in_strings: set[int] | None = None
) -> list[_Block]:
    """Top-level indentation blocks with their nested blocks; `labels`: the language has jump
    labels, which take no part in indentation, nor do the lines `in_strings` (inside a string
    literal that spans lines)."""
    n = len(lines)
    skip = in_strings or set()
    ind = [
        None if (labels and _is_jump_label(x)) or i in skip else _indent(x)
        for i, x in enumerate(lines)
    ]
    nxt = [n] * n  # next non-blank line after i
    j = n
    for i in range(n - 1, -1, -1):
        nxt[i] = j
        if ind[i] is not None:
            j = i
    prev = [-1] * n  # last non-blank line up to i
    j = -1
    for i in range(n):
        if ind[i] is not None:
            j = i
        prev[i] = j
    root = _Block(-1, 0)
    stack: list[tuple[int, _Block]] = [(-1, root)]
    i = 0
    while i < n:
        d = ind[i]
        if d is None:
            i += 1
            continue
        closed = None
        while len(stack) > 1 and d <= stack[-1][0]:
            lvl, blk = stack.pop()
            blk.end = _close(lines, ind, prev, blk, lvl, i)
            closed = (lvl, blk)
        j = nxt[i]
        if j < n:
            dj = ind[j]
            opener = dj is not None and dj > d
            if not opener and dj == d and _OWN_LINE_OPENER.match(lines[j]) and not _CLOSER.match(lines[i]):
                opener = True  # `{` or `where` on its own line under a signature
            if opener and closed is not None and closed[0] == d:
                goes_on = _GOES_ON.match(lines[i])
                if goes_on or _CLOSES_PARAMETERS.match(lines[i]) or _OWN_LINE_OPENER.match(lines[i]):
                    # The statement above goes on; a signature's parameters are part of its head.
                    blk = closed[1]
                    if not goes_on:
                        blk.body = j
                        blk.children = [c for c in blk.children if c.start >= j]
                    stack.append((d, blk))
                    i += 1
                    continue
            if opener:
                blk = _Block(i, j)
                stack[-1][1].children.append(blk)
                stack.append((d, blk))
        i += 1
    while len(stack) > 1:
        lvl, blk = stack.pop()
        blk.end = _close(lines, ind, prev, blk, lvl, n)
    return root.children


def _close(
    lines: list[str], ind: list[int | None], prev: list[int], blk: _Block, lvl: int, nxt: int
) -> int:
    """Last line of a block that ends before line `nxt`; takes a closing brace line along."""
    end = max(prev[nxt - 1], blk.start)
    if nxt < len(lines) and ind[nxt] == lvl and _CLOSER.match(lines[nxt]):
        end = nxt
    return end


# A declaration names itself early in its line; _NAME searched further backtracks
# quadratically (an 8,000-character line of `a_a_a_...` took 1.4 s). Where it starts is
# looked for in the first LABEL_CHARS after the indent; the name is then read whole there.
LABEL_CHARS = 400
# ... and among the line's first NAME_WORDS words (`public static final <T extends
# Comparable<? super T>> List<T> sortedCopy(` names itself at the 12th): tried at every
# character, a 400-character head of `a:a:a:` cost 45 us. Every match of _NAME starts at a
# word (or at the line's start), so trying the words in order finds the match search would.
NAME_WORDS = 16
_WORD_START = re.compile(r"(?<!\w)[\w$]")


def _name_match(text: str) -> re.Match[str] | None:
    """_NAME's leftmost match that starts at one of the first NAME_WORDS words of `text`."""
    for k, start in enumerate(_WORD_START.finditer(text, 0, LABEL_CHARS)):
        if k == NAME_WORDS:
            break
        m = _NAME.match(text, start.start(), LABEL_CHARS)
        if m:
            return m
    return None


# Rust's `pub(crate)` reads as a call named `pub`; generics end no name (`StructForm<'a>`).
_VISIBILITY = re.compile(r"pub\s*\([^)]{0,80}\)\s*")


# A test named by its title (`it('returns 404 when missing', ...)`, RSpec's `describe "x" do`,
# Go's `t.Run("x", ...)`): called `it` or `describe`, every test of a file had one name.
_TEST_TITLE = re.compile(
    r"""^\s*+(?:(?:describe|context|it|test|specify|suite)(?:\.\w+(?:\([^()\n]{0,200}\))?){0,3}\s*+\(?+"""
    r"""|[\w$]+\.Run\()\s*+(["'`])((?:(?!\1)[^\\\n]|\\.){1,200})\1"""
)
_ESCAPED = re.compile(r"\\(.)")
_KEY = re.compile(r"^\s*\w+\s*:(?!:)")
_SPEC_OF = re.compile(r"^\s*(?:RSpec\.)?describe\s+([A-Z][\w:]{0,200})")  # `describe Router do`


def _is_control(line: str) -> bool:
    """`if (x) {` is control; an object key spelled as a control word (`select: function`) is not."""
    return bool(CONTROL.match(line)) and not _KEY.match(line)


def _label(line: str) -> str:
    if _is_control(line):
        return ""  # `if (x) {` names nothing
    title = _TEST_TITLE.match(line)
    if title:
        return " ".join(_ESCAPED.sub(r"\1", title.group(2)).split())
    spec = _SPEC_OF.match(line)
    if spec:
        return spec.group(1)
    text = line.lstrip()
    if text.startswith("pub"):
        text = _VISIBILITY.sub("", text, count=1)
    m = _name_match(text)
    if m:
        m = _NAME.match(text, m.start()) or m
    if m:
        name = (m.group(1) or m.group(2) or m.group(3) or "").rstrip("<:.")
        # Type parameters are no part of a name (`HonoRequest<P extends string = '/'>`); an
        # impl's type arguments tell `impl From<io::Error>` from `impl From<Utf8Error>`.
        angle = name.find("<")
        if angle > 0 and not text.startswith("impl", m.start()):
            name = name[:angle]
        return name[:MAX_NAME_CHARS]
    return ""


def _is_decl(line: str, decl: re.Pattern[str] = _DECL) -> bool:
    return bool(decl.search(line)) and not _is_control(line)


def indent_layout(lines: list[str], path: str | None = None, text: str | None = None) -> Layout:
    """`text`: the lines joined by newlines, when the caller has it already."""
    always = file_header(lines)
    imports = {i for i, line in enumerate(lines) if _IMPORT.match(line)} - always
    units: list[Unit] = []
    spans = spanned_lines("\n".join(lines) if text is None else text, path)
    blocks = _blocks(
        lines,
        labels=path is not None and path.endswith(LABEL_SUFFIXES),
        in_strings=spans.strings | spans.comments,
    )
    _emit(lines, blocks, 0, len(lines) - 1, [], units, always | imports, "", spans.comments)
    openers: set[int] = set()
    todo = list(blocks)
    while todo:
        blk = todo.pop()
        openers.add(blk.start)
        todo += blk.children
    return Layout(units=units, always=always, context=imports, prose=_doc_comments(lines, openers))


def _doc_comments(lines: list[str], openers: set[int]) -> set[int]:
    """Lines of documentation comments, what a docstring is to Python (so they weigh as prose):
    `///`, `//!`, `/** ... */`, and the `//` lines glued above a declaration that opens a block
    (Go's doc comments, and C's, Java's)."""
    prose: set[int] = set()
    block_start = -1  # the open `/**` line, if any
    run: list[int] = []  # `//` lines just above
    for i, line in enumerate(lines):
        s = line.lstrip()
        if block_start >= 0:
            if "*/" in s:
                prose.update(range(block_start, i + 1))
                block_start = -1
            continue
        if s.startswith(("///", "//!")):
            prose.add(i)
        elif s.startswith("/**") and not s.startswith("/**/"):
            if "*/" in s[3:]:
                prose.add(i)
            else:
                block_start = i
        elif s.startswith("//"):
            run.append(i)
            continue
        elif run and i in openers and _is_decl(line[:LABEL_CHARS]):
            prose.update(run)
        run = []
    if block_start >= 0:
        prose.add(block_start)  # never closed: only its first line is known to be one
    return prose


# Blocks nested deeper than this are units whole (the layout recurses once a level).
MAX_NESTING = 32


def _declarations(lines: list[str], blk: _Block) -> list[_Block]:
    """The children of `blk` that declare something, counted once a block (the layout asks at
    every level it reads down). A function's body is cut only at what a keyword declares."""
    if blk.decls is None:
        opener = lines[blk.start][:LABEL_CHARS]
        in_body = "(" in opener and _is_decl(opener) and not _CONTAINER.search(opener)
        decl = _DECL_IN_BODY if in_body else _DECL
        blk.decls = [c for c in blk.children if _is_decl(lines[c.start][:LABEL_CHARS], decl)]
    return blk.decls


def _holds_units(lines: list[str], blk: _Block, levels: int) -> bool:
    """A block is read as units when it holds two declarations or more, or one container that
    does (C#'s `namespace X { class Y { ... } }` was one unit of the whole file), within
    `levels` levels. A function around one call of a closure stays whole."""
    for _ in range(levels):
        if blk.end - blk.start <= 20:
            return False
        decls = _declarations(lines, blk)
        if len(decls) != 1:
            return len(decls) >= 2
        child = decls[0]
        if not (_CONTAINER.search(lines[blk.start][:LABEL_CHARS])
                or _CONTAINER.search(lines[child.start][:LABEL_CHARS])):
            return False
        blk = child
    return False


def _emit(
    lines: list[str],
    blocks: list[_Block],
    lo: int,
    hi: int,
    heads: list[tuple[int, int]],
    units: list[Unit],
    always: set[int],
    owner: str,
    in_comments: set[int],
) -> None:
    """Units for the lines lo..hi: each block a unit (or a container of units), gaps as chunks."""
    pos = lo
    for blk in blocks:
        sig = (blk.start, blk.body - 1 if blk.body - 1 >= blk.start else blk.start)
        name = _label(lines[blk.start])
        if _holds_units(lines, blk, MAX_NESTING - len(heads)):
            _gap_units(lines, pos, blk.start - 1, heads, units, always, owner)
            _emit(
                lines,
                blk.children,
                blk.body,
                blk.end,
                [*heads, sig],
                units,
                always,
                name or owner,
                in_comments,
            )
        else:
            # The comments glued above are the block's, not a chunk of their own as well.
            start = leading_comments(lines, blk.start, pos - 1, in_comments)
            _gap_units(lines, pos, start - 1, heads, units, always, owner)
            label = (f"{owner}.{name}" if owner else name) if name else (owner or GENERIC)
            units.append(
                Unit(start, blk.end, label, name=name, owner=owner, sig=sig, heads=[*heads, sig])
            )
        pos = blk.end + 1
    _gap_units(lines, pos, hi, heads, units, always, owner)


def _gap_units(
    lines: list[str],
    lo: int,
    hi: int,
    heads: list[tuple[int, int]],
    units: list[Unit],
    always: set[int],
    owner: str,
) -> None:
    """Loose lines between blocks, cut into chunks at blank lines."""
    start = None
    for i in range(lo, hi + 2):
        blank = i > hi or not lines[i].strip() or i in always
        if blank:
            if start is not None:
                units.append(Unit(start, i - 1, owner or GENERIC, owner=owner, heads=list(heads)))
                start = None
        elif start is None:
            start = i
