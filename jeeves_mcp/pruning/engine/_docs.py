"""Units of documentation: Markdown and reStructuredText sections."""

from __future__ import annotations

import re

from ._units import Layout, Unit

__all__ = ["docs_layout"]

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_UNDERLINE = re.compile(r"^\s{0,3}([=\-~^\"'`#*+:.<>_])\1{2,}\s*$")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
# Paragraph chunks of a section longer than this become units of their own.
LONG_SECTION = 80


def docs_layout(lines: list[str]) -> Layout:
    n = len(lines)
    atoms: list[tuple[int, int]] = []
    in_fence = [False] * n
    i = 0
    while i < n:
        m = _FENCE.match(lines[i])
        if m and not _is_underline(lines, i):
            mark = m.group(1)
            j = i + 1
            while j < n and not (
                lines[j].strip().startswith(mark) and not lines[j].strip().strip(mark[0])
            ):
                j += 1
            if j >= n:  # never closed: not worth treating the rest of the text as one block
                i += 1
                continue
            atoms.append((i, j))
            for k in range(i, j + 1):
                in_fence[k] = True
            i = j + 1
            continue
        i += 1
    atoms.extend(_literal_blocks(lines, in_fence))

    # headings: (first line, last line, level, title)
    heads: list[tuple[int, int, int, str]] = []
    rst_levels: dict[str, int] = {}
    i = 0
    while i < n:
        if in_fence[i]:
            i += 1
            continue
        line = lines[i]
        m = _ATX.match(line)
        if m and not line.startswith("    "):
            heads.append((i, i, len(m.group(1)), m.group(2)))
            i += 1
            continue
        if i + 1 < n and line.strip() and not in_fence[i + 1] and not _UNDERLINE.match(line):
            u = _UNDERLINE.match(lines[i + 1])
            if (
                u
                and len(lines[i + 1].strip()) >= min(len(line.strip()), 3)
                and not _LIST.match(line)
            ):
                ch = u.group(1)
                over = (
                    i > 0 and lines[i - 1].strip() and lines[i - 1].strip() == lines[i + 1].strip()
                )
                key = ("o" if over else "") + ch
                level = rst_levels.setdefault(key, len(rst_levels) + 1)
                heads.append((i - 1 if over else i, i + 1, level, line.strip()))
                i += 2
                continue
        i += 1

    always: set[int] = set()
    for a, b, _, _ in heads:
        always.update(range(a, b + 1))
    units: list[Unit] = []
    path: list[tuple[int, tuple[int, int]]] = []  # (level, heading range) of the enclosing sections
    first = heads[0][0] if heads else n
    if first > 0:
        _section_units(lines, 0, first - 1, "préambule", "", [], units, atoms)
    for k, (a, b, level, title) in enumerate(heads):
        end = heads[k + 1][0] - 1 if k + 1 < len(heads) else n - 1
        while path and path[-1][0] >= level:
            path.pop()
        enclosing = [r for _, r in path]
        path.append((level, (a, b)))
        if end > b:
            _section_units(
                lines,
                b + 1,
                end,
                f"section {title[:60]}",
                title,
                [*enclosing, (a, b)],
                units,
                atoms,
            )
    return Layout(units=units, always=always, atoms=atoms)


def _is_underline(lines: list[str], i: int) -> bool:
    """A line of backticks or tildes under a title is a reStructuredText underline, not a fence."""
    s = lines[i].strip()
    prev = lines[i - 1].strip() if i > 0 else ""
    return bool(prev) and len(set(s)) == 1 and len(s) >= max(4, len(prev))


def _section_units(
    lines: list[str],
    lo: int,
    hi: int,
    label: str,
    title: str,
    heads: list[tuple[int, int]],
    units: list[Unit],
    atoms: list[tuple[int, int]],
) -> None:
    if hi - lo + 1 <= LONG_SECTION:
        units.append(Unit(lo, hi, label, name=title, heads=heads))
        return
    # a long section: one unit per run of paragraphs of about 30 lines, never splitting an atom
    inside: set[int] = set()
    for a, b in atoms:
        inside.update(range(a, b))
    start = lo
    for i in range(lo, hi + 1):
        if i - start >= 30 and not lines[i].strip() and i not in inside:
            units.append(Unit(start, i, label, name=title, heads=heads))
            start = i + 1
    if start <= hi:
        units.append(Unit(start, hi, label, name=title, heads=heads))


def _literal_blocks(lines: list[str], in_fence: list[bool]) -> list[tuple[int, int]]:
    """reStructuredText literal blocks: a paragraph ending in '::' and the indented block after it."""
    out = []
    n = len(lines)
    i = 0
    while i < n:
        s = lines[i].rstrip()
        if not in_fence[i] and (s.endswith("::") or s.lstrip().startswith(".. code")):
            base = len(s) - len(s.lstrip())
            j = i + 1
            while j < n and not lines[j].strip():
                j += 1
            if j < n and len(lines[j]) - len(lines[j].lstrip()) > base:
                k = j
                last = j
                while k < n and (
                    not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) > base
                ):
                    if lines[k].strip():
                        last = k
                    k += 1
                out.append((i, last))
                i = last + 1
                continue
        i += 1
    return out
