"""Units of source code: Python through `ast`, anything else by indentation (_indent)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ._indent import GENERIC, MAX_NAME_CHARS, file_header, indent_layout, leading_comments
from ._units import Layout, Unit

__all__ = ["code_layout"]

# Decorator and comment lines that may come along with a def kept for its body's sake.
HEAD_DECORATOR_LINES = 3
# Above this many lines `ast` costs more than the whole speed budget allows.
AST_MAX_LINES = 20_000
# ... and above this many commas and opening brackets: `ast` holds the interpreter (the child's
# event loop with it) about 8 ms per thousand, and a run may write a file of nothing else (a
# 535 KB file of calls: 2.3 s, 264 MiB). The 535 real modules of 2,000 to 20,000 lines on this
# machine hold 48,000 at most.
AST_MAX_TOKENS = 100_000


def code_layout(lines: list[str], path: str | None, text: str | None = None) -> Layout:
    """`text`: the lines joined by newlines, when the caller has it already."""
    if text is None:
        text = "\n".join(lines)
    is_python = path is None or path.endswith((".py", ".pyi", ".pyw"))
    if is_python and len(lines) <= AST_MAX_LINES and _nesting_tokens(text) <= AST_MAX_TOKENS:
        layout = _python_layout(lines, text)
        if layout is not None:
            return layout
    return indent_layout(lines, path, text)


def _nesting_tokens(text: str) -> int:
    """Commas and opening brackets: what the number of `ast` nodes grows with."""
    return text.count(",") + text.count("(") + text.count("[") + text.count("{")


# --------------------------------------------------------------------- Python


def _python_layout(lines: list[str], text: str) -> Layout | None:
    if "\r" in text.replace("\r\n", ""):
        return None  # ast would count lone CRs as line ends; our numbering would drift
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    units: list[Unit] = []
    always = file_header(lines)
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
        units.append(Unit(s, e, label, owner=owner, heads=list(heads)))
        group.clear()

    for st in stmts:
        if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            flush()
            s, sig_end = _sig_range(lines, st)
            s = leading_comments(lines, s, prev_end)
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
