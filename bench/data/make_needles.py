"""Function needles from installed Python libraries, in the shape of needles-dev.jsonl.

    python bench/data/make_needles.py OUT.jsonl PACKAGE [PACKAGE ...] [--per-package 30] [--per-module 2]

Rule: in a module of the package (an installed distribution, found with importlib.metadata)
of at least 200 lines, take a function or method whose docstring opens with a sentence of
at least 6 words and whose body without the docstring has at least 3 lines. The question
is that first sentence (lines joined); the docstring is removed from the module (a
question must be matched against the code, not against its own words); gold = [def
line, last line] of the function in the stored text, 1-based over text.split("\\n").
Modules under tests/ and private vendored copies are skipped; at most --per-module cases per
module and --per-package per package, chosen by a hash of the function's qualified name, so the
set is spread and reproducible for the same installed versions.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.metadata as md
import json
import re
import sys
from pathlib import Path

SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


def h(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "big")


def first_sentence(doc: str) -> str | None:
    para = " ".join(doc.strip().split("\n\n")[0].split())
    m = SENTENCE.match(para)
    s = (m.group(1) if m else para).strip()
    if len(s.split()) < 6 or len(s) > 300 or s.startswith((":", ">>>", "..")):
        return None
    return s


def functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    out = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")

    walk(tree, "")
    return out


def cases_for_module(package: str, version: str, rel: str, source: str, per_module: int) -> list[dict]:
    lines = source.split("\n")
    if len(lines) < 200:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    picked = []
    for qual, fn in functions(tree):
        body = fn.body
        if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            continue
        question = first_sentence(body[0].value.value)
        if question is None or len(body) < 2:
            continue
        doc_start, doc_end = body[0].lineno, body[0].end_lineno or body[0].lineno
        if doc_start == fn.lineno or fn.end_lineno is None:
            continue  # a one-line def with its docstring on the same line
        if fn.end_lineno - doc_end < 3:
            continue
        removed = doc_end - doc_start + 1
        text = "\n".join(lines[: doc_start - 1] + lines[doc_end:])
        gold = [min([d.lineno for d in fn.decorator_list] + [fn.lineno]), fn.end_lineno - removed]
        picked.append((h(f"{package}:{rel}:{qual}"), qual, question, text, gold))
    picked.sort()
    return [
        {"id": f"{package}:{rel}:{qual}", "source": f"{package}=={version}:{rel}",
         "question": question, "source_type": "code", "text": text, "gold": gold}
        for _, qual, question, text, gold in picked[:per_module]
    ]


def cases_for_package(package: str, per_package: int, per_module: int) -> list[dict]:
    dist = md.distribution(package)
    found = []
    for f in dist.files or []:
        rel = str(f)
        parts = set(Path(rel).parts)
        if not rel.endswith(".py") or parts & {"tests", "test", "testing", "_vendor", "vendor"}:
            continue
        path = Path(str(dist.locate_file(f)))
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found.extend(cases_for_module(package, dist.version, rel, source, per_module))
    found.sort(key=lambda c: h(c["id"]))
    return found[:per_package]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("packages", nargs="+")
    ap.add_argument("--per-package", type=int, default=30)
    ap.add_argument("--per-module", type=int, default=2)
    args = ap.parse_args()
    rows = []
    for package in args.packages:
        try:
            got = cases_for_package(package, args.per_package, args.per_module)
        except md.PackageNotFoundError:
            print(f"{package}: not installed, skipped", file=sys.stderr)
            continue
        print(f"{package}: {len(got)} cases", file=sys.stderr)
        rows.extend(got)
    with args.out.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
