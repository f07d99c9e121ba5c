"""Units of source code: Python through `ast`, anything else through indentation."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ._units import Layout, Unit

__all__ = ["CONTROL", "GENERIC", "code_layout"]

# The label of a unit with no name (loose statements); reasons do not list it.
GENERIC = "code"

# Decorator and comment lines that may come along with a def kept for its body's sake.
HEAD_DECORATOR_LINES = 3
# Above this many lines `ast` costs more than the whole speed budget allows.
AST_MAX_LINES = 20_000

_IMPORT = re.compile(
    r"^\s*(?:import\s|from\s+\S+\s+import\s|#\s*include\b|using\s+[\w.:]+\s*;|use\s+[\w:{}, *]+;"
    r"|package\s+[\w.]+|extern\s+crate\b|require\s*\(|(?:const|let|var)\s+[\w{}, ]+=\s*require\s*\()"
)
CONTROL = re.compile(
    r"^\s*(?:if|for|while|switch|catch|else|try|do|return|with|elif|except|finally|foreach|"
    r"match|case|when|unless|until|loop|select|defer|go|throw|raise|yield|assert|print)\b"
)
_DECL = re.compile(
    r"\b(?:def|class|function|func|fn|sub|proc|struct|impl|trait|interface|enum|module|"
    r"namespace|object|record|protocol|extension|macro_rules!|test|describe|it)\b"
    r"|^\s*(?:[\w:<>\[\]*&,.$]+\s+)*[\w$:~]+\s*\([^;]*$"
    r"|=>\s*\{?\s*$"
)
# A unit's label copies its owner's name: a 1 MB class name over 1,500 methods took 1.5 GB
# (names of real code are far shorter).
MAX_NAME_CHARS = 200
_CLOSER = re.compile(r"^\s*(?:[}\])]+[;,)]*\s*(?://.*)?$|end\b|</|fi\b|done\b|esac\b)")
_NAME = re.compile(
    r"\b(?:def|class|function|func|fn|sub|proc|struct|impl|trait|interface|enum|module|"
    r"namespace|object|record|protocol|type)\s+(?:\([^)]*\)\s*)?([\w$.:<>]+)"
    r"|([\w$]+)\s*(?:=\s*(?:async\s*)?(?:function\b|\([^)]*\)\s*=>)|\()"
)


def code_layout(lines: list[str], path: str | None) -> Layout:
    is_python = path is None or path.endswith((".py", ".pyi", ".pyw"))
    if is_python and len(lines) <= AST_MAX_LINES:
        layout = _python_layout(lines)
        if layout is not None:
            return layout
    return _indent_layout(lines)


def _header(lines: list[str]) -> set[int]:
    """The first few lines that say what a file is: shebang, encoding, licence."""
    keep: set[int] = set()
    for i, line in enumerate(lines[:3]):
        s = line.strip()
        if s.startswith(("#!", "# -*-", "//", "/*", "*", "#", '"""', "'''", "<?", "--")):
            keep.add(i)
        else:
            break
    return keep


def _leading_comments(lines: list[str], start: int, floor: int) -> int:
    """Move a unit's start up over the comment lines glued to it."""
    i = start
    while i - 1 > floor and lines[i - 1].lstrip().startswith(("#", "//", "/*", "*")):
        i -= 1
    return i


# --------------------------------------------------------------------- Python


def _python_layout(lines: list[str]) -> Layout | None:
    text = "\n".join(lines)
    if "\r" in text.replace("\r\n", ""):
        return None  # ast would count lone CRs as line ends; our numbering would drift
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    units: list[Unit] = []
    always = _header(lines)
    body = tree.body
    floor = -1
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        always.add(body[0].lineno - 1)  # first line of the module docstring
        # A unit of its own, so that its lines are scored like any other docstring's (a link,
        # a note): held-out commit tasks 16 cases up and 3 down over four sets (+0.3 to +0.6
        # points), function needles level.
        end = body[0].end_lineno - 1  # type: ignore[operator]
        if len(body) == 1 or body[1].lineno - 1 > end:  # not `"""doc"""; x = 1`: units do not overlap
            units.append(Unit(body[0].lineno - 1, end, GENERIC))
            floor = end  # a def's leading comments stop at the docstring
        body = body[1:]
    imports: set[int] = set()
    _python_body(lines, body, [], units, imports, top=True, owner="", floor=floor)
    return Layout(units=units, always=always, context=imports, prose=_docstring_lines(tree))


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The lines of every docstring: the module's, each class's and each function's."""
    found: set[int] = set()
    for node in _statements(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
                and first.end_lineno is not None
            ):
                found.update(range(first.lineno - 1, first.end_lineno))
    return found


# What a statement list may hold: a docstring's owner (a def, a class) is a statement, so a walk
# need not enter expressions, most of a module's nodes (ast.walk took a third of a 2,000-line read).
_BLOCK_PARTS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module) -> Iterator[ast.AST]:
    """The module and every statement in it, nested blocks included."""
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                todo.extend(x for x in value if isinstance(x, _BLOCK_PARTS))


def _sig_range(
    lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
) -> tuple[int, int]:
    """Decorators through the line before the body (a one-line def is its own signature),
    without the comment and blank lines that open the body: they are not the signature, and
    every unit of a class carries its signature (a class opened by 70 lines of comments
    made each method shown bring them along)."""
    start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
    end = node.body[0].lineno - 2
    while end > node.lineno - 1 and (not lines[end].strip() or lines[end].lstrip().startswith("#")):
        end -= 1
    return start, max(node.lineno - 1, end)


def _python_body(
    lines: list[str],
    stmts: list[ast.stmt],
    heads: list[tuple[int, int]],
    units: list[Unit],
    always: set[int],
    *,
    top: bool,
    owner: str,
    floor: int = -1,
) -> None:
    """`floor`: the last line before `stmts` that belongs to something else."""
    group: list[ast.stmt] = []
    prev_end = floor

    def flush() -> None:
        if not group:
            return
        s, e = group[0].lineno - 1, group[-1].end_lineno - 1  # type: ignore[operator]
        label = owner or GENERIC
        units.append(Unit(s, e, label, heads=list(heads)))
        group.clear()

    for st in stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            flush()
            s, sig_end = _sig_range(lines, st)
            s = _leading_comments(lines, s, prev_end)
            # Decorators and comments come along with the def only when short: a function
            # under fifty @click.option lines must not bring them all to show one line.
            sig = (s if st.lineno - 1 - s <= HEAD_DECORATOR_LINES else st.lineno - 1, sig_end)
            name = st.name[:MAX_NAME_CHARS]
            if isinstance(st, ast.ClassDef):
                qual = f"{owner}.{name}" if owner else name
                _python_body(lines, st.body, [*heads, sig], units, always, top=False, owner=qual)
            else:
                end = st.end_lineno if st.end_lineno is not None else st.lineno
                units.append(
                    Unit(
                        s,
                        end - 1,
                        f"{owner}.{name}" if owner else name,
                        name=name,
                        owner=owner,
                        sig=sig,
                        heads=[*heads, sig],
                    )
                )
        else:
            if top and _python_imports(st, always):
                flush()
            else:
                if (
                    group
                    and st.lineno - 1 > prev_end + 1
                    and not any(lines[k].strip() for k in range(prev_end + 1, st.lineno - 1))
                ):
                    flush()  # a blank line separates statement groups
                group.append(st)
        prev_end = st.end_lineno - 1  # type: ignore[operator]
    flush()


def _python_imports(st: ast.stmt, always: set[int]) -> bool:
    """Record the import lines of a module-level statement; True if it is only imports."""
    if isinstance(st, (ast.Import, ast.ImportFrom)):
        always.update(range(st.lineno - 1, st.end_lineno))  # type: ignore[arg-type]
        return True
    if isinstance(st, (ast.If, ast.Try)):
        inner = list(st.body) + list(getattr(st, "orelse", []))
        found = False
        for sub in inner:
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                always.update(range(sub.lineno - 1, sub.end_lineno))  # type: ignore[arg-type]
                found = True
        if found:
            always.add(st.lineno - 1)
        return False
    return False


# ----------------------------------------------------------------- indentation


# A jump label on a line of its own (`walk:`, `retry:`): gofmt and C style set it one level
# out, so read for indentation it would end the function it is in. Not Python's `else:`.
_JUMP_LABEL = re.compile(r"^\s*([A-Za-z_]\w*):\s*(?://.*|/\*.*)?$")
_NOT_LABELS = frozenset(("else", "try", "finally", "except"))


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
    __slots__ = ("body", "children", "end", "start")

    def __init__(self, start: int, body: int) -> None:
        self.start = start  # opener line
        self.body = body  # first line of the body
        self.end = start
        self.children: list[_Block] = []


def _blocks(lines: list[str]) -> list[_Block]:
    """Top-level indentation blocks with their nested blocks."""
    n = len(lines)
    ind = [None if _is_jump_label(x) else _indent(x) for x in lines]
    nxt = [n] * n  # next non-blank line after i
    j = n
    for i in range(n - 1, -1, -1):
        nxt[i] = j
        if ind[i] is not None:
            j = i
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
            blk.end = _close(lines, ind, blk, lvl, i)
            closed = (lvl, blk)
        j = nxt[i]
        if j < n:
            dj = ind[j]
            opener = dj is not None and dj > d
            if not opener and dj == d and _HEAD_GOES_ON.match(lines[j]):
                opener = True  # `{` or `where` on its own line under a signature
            if opener and closed is not None and closed[0] == d and _GOES_ON.match(lines[i]):
                # `) -> T {` after a signature's parameters, one a line: the signature goes on.
                blk = closed[1]
                blk.body = j
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
        blk.end = _close(lines, ind, blk, lvl, n)
    return root.children


# A line that closes the brackets of the lines above and opens a body: `) -> Fragment {`,
# `) error {`, `): Promise<void> {`, a lone `{`.
_GOES_ON = re.compile(r"^\s*(?:[)\]>]|\{\s*$|where\s*$)")
_HEAD_GOES_ON = re.compile(r"^\s*(?:\{|where)\s*$")


def _close(lines: list[str], ind: list[int | None], blk: _Block, lvl: int, nxt: int) -> int:
    """Last line of a block that ends before line `nxt`; takes a closing brace line along."""
    end = nxt - 1
    while end > blk.start and ind[end] is None:
        end -= 1
    if nxt < len(lines) and ind[nxt] == lvl and _CLOSER.match(lines[nxt]):
        end = nxt
    return end


# A declaration names itself early in its line; _NAME searched further backtracks
# quadratically (an 8,000-character line of `a_a_a_...` took 1.4 s). Where it starts is
# looked for in the first LABEL_CHARS after the indent; the name is then read whole there.
LABEL_CHARS = 400


def _label(line: str) -> str:
    text = line.lstrip()
    m = _NAME.search(text, 0, LABEL_CHARS)
    if m:
        m = _NAME.match(text, m.start()) or m
    if m:
        return (m.group(1) or m.group(2) or "")[:MAX_NAME_CHARS]
    return ""


def _is_decl(line: str) -> bool:
    return bool(_DECL.search(line)) and not CONTROL.match(line)


def _indent_layout(lines: list[str]) -> Layout:
    always = _header(lines)
    imports = {i for i, line in enumerate(lines) if _IMPORT.match(line)} - always
    units: list[Unit] = []
    _emit(lines, _blocks(lines), 0, len(lines) - 1, [], units, always | imports, owner="")
    return Layout(units=units, always=always, context=imports, prose=_doc_comments(lines))


def _doc_comments(lines: list[str]) -> set[int]:
    """Lines of documentation comments (`///`, `//!`, `/** ... */`): what a docstring is to
    Python, so they weigh as prose."""
    prose: set[int] = set()
    open_block = False
    for i, line in enumerate(lines):
        s = line.lstrip()
        if open_block:
            prose.add(i)
            open_block = "*/" not in s
        elif s.startswith(("///", "//!")):
            prose.add(i)
        elif s.startswith("/**") and not s.startswith("/**/"):
            prose.add(i)
            open_block = "*/" not in s[3:]
    # `//` lines glued above a declaration document it (Go's doc comments, and C's, Java's).
    run: list[int] = []
    for i, line in enumerate(lines):
        s = line.lstrip()
        if s.startswith("//") and i not in prose:
            run.append(i)
            continue
        if run and s and _is_decl(line):
            prose.update(run)
        run = []
    return prose


def _emit(
    lines: list[str],
    blocks: list[_Block],
    lo: int,
    hi: int,
    heads: list[tuple[int, int]],
    units: list[Unit],
    always: set[int],
    owner: str,
) -> None:
    """Units for the lines lo..hi: each block a unit (or a container of units), gaps as chunks."""
    pos = lo
    for blk in blocks:
        _gap_units(lines, pos, blk.start - 1, heads, units, always, owner)
        sig = (blk.start, blk.body - 1 if blk.body - 1 >= blk.start else blk.start)
        name = _label(lines[blk.start])
        decl_children = sum(1 for c in blk.children if _is_decl(lines[c.start]))
        if decl_children >= 2 and blk.end - blk.start > 20:
            _emit(
                lines,
                blk.children,
                blk.body,
                blk.end,
                [*heads, sig],
                units,
                always,
                owner=name or owner,
            )
        else:
            start = _leading_comments(lines, blk.start, pos - 1)
            label = (f"{owner}.{name}" if owner else name) if name else GENERIC
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
                units.append(Unit(start, i - 1, owner or GENERIC, heads=list(heads)))
                start = None
        elif start is None:
            start = i
