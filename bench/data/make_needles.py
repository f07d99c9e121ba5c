#!/usr/bin/env python3
"""Function needles from installed packages: can the pruned view find a function from what it does?

For every function (def / async def, at module level or directly in a class) with a docstring,
in a .py module of an installed package (no path containing "test" or "_vendor"):
  question = the docstring's first sentence: ast.get_docstring's first paragraph, whitespace
             joined, Sphinx roles / backticks / *emphasis* unwrapped (":func:`~a.b`" -> "a.b",
             "``x``" -> "x", "`x`" -> "x", "*x*" -> "x"), cut after the first [.!?] that is
             followed by whitespace;
  text     = the module source with that one function's docstring lines removed (the whole
             lines the docstring statement spans; nothing else changes, other docstrings stay);
  gold     = [first, last] 1-based lines of the function in `text`: its first decorator (or the
             def line if it has none) through its last line.
A function qualifies when the module has 400..3000 lines (len(source.split("\\n"))), the function
spans >= 8 lines as written and >= 6 once its docstring is gone, at most 64 lines, has at least
one statement besides the docstring, the docstring sits on lines of its own, the question has
>= 5 words and no other function in the module has the same question.
At most --per-file (default 3) qualifying functions are taken per module, a seeded sample keyed by
package and module path (0 = all); --per-package caps a package likewise (default: no cap).
All cases are then shuffled with --seed and numbered PREFIX000, PREFIX001, ... (--prefix, "n").
Fields: id, source "pkg==version:module.py" (the module's file name only), question,
source_type "code", text, gold.  Deterministic for a given set of installed packages.
stdlib only.
usage: make_needles.py OUT.jsonl [--per-file N] [--per-package N] [--seed S] [--prefix P] pkg [pkg ...]
A pkg is an import name (markdown_it) or a distribution name (markdown-it-py); it is written into
`source` as given, lower-cased.
"""
import ast
import importlib.metadata as md
import json
import random
import re
import sys

MIN_FILE, MAX_FILE = 400, 3000
MIN_SPAN, MIN_LEFT, MAX_LEFT = 8, 6, 64
MIN_WORDS = 5


def question(doc):
    para = doc.strip().split("\n\n")[0]
    s = " ".join(para.split())
    s = re.sub(r":[\w:.-]+:`~?([^`]*)`", r"\1", s)      # :role:`~target` -> target
    s = re.sub(r"``([^`]*)``", r"\1", s)                # ``literal`` -> literal
    s = re.sub(r"`~?([^`]*)`", r"\1", s)                # `ref` -> ref
    s = re.sub(r"\*+([^*\s][^*]*?)\*+", r"\1", s)       # *emphasis* -> emphasis
    m = re.search(r"[.!?](?=\s)", s)
    return s[:m.end()] if m else s


def resolve(pkg):
    """(distribution, top-level package names) for an import or distribution name."""
    pmap = md.packages_distributions()
    if pkg in pmap:
        return md.distribution(pmap[pkg][0]), {pkg}
    dist = md.distribution(pkg)
    tops = set()
    for f in dist.files or []:
        parts = f.parts
        if len(parts) > 1 and parts[-1].endswith(".py") and not parts[0].endswith((".dist-info", ".egg-info")):
            tops.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py"):
            tops.add(parts[0][:-3])
    return dist, tops


def functions(tree):
    """Functions at module level or directly inside a class (at any class nesting)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield child
            elif isinstance(child, ast.ClassDef):
                todo.append(child)


def module_cases(src):
    lines = src.split("\n")
    if not MIN_FILE <= len(lines) <= MAX_FILE:
        return []
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in functions(tree):
        doc = ast.get_docstring(node)
        if not doc:
            continue
        found.append((node, question(doc)))
    counts = {}
    for _, q in found:
        counts[q] = counts.get(q, 0) + 1
    out = []
    for node, q in found:
        ds = node.body[0]
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        ndoc = ds.end_lineno - ds.lineno + 1
        span, left = node.end_lineno - start + 1, node.end_lineno - start + 1 - ndoc
        if (len(node.body) < 2 or span < MIN_SPAN or not MIN_LEFT <= left <= MAX_LEFT
                or len(q.split()) < MIN_WORDS or counts[q] > 1 or ds.lineno == node.lineno
                or lines[ds.lineno - 1][:ds.col_offset].strip()
                or lines[ds.end_lineno - 1][ds.end_col_offset:].strip()):
            continue
        text = "\n".join(lines[:ds.lineno - 1] + lines[ds.end_lineno:])
        out.append({"line": node.lineno, "question": q, "text": text,
                    "gold": [start, node.end_lineno - ndoc]})
    return out


def package_cases(pkg, per_file, per_package, seed):
    dist, tops = resolve(pkg)
    label = f"{pkg.lower()}=={dist.version}"
    rows = []
    for f in sorted(dist.files or [], key=str):
        path = str(f).replace("\\", "/")
        if not path.endswith(".py") or (f.parts[0] not in tops and path[:-3] not in tops):
            continue
        if "test" in path or "_vendor" in path:
            continue
        try:
            src = f.locate().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        cases = module_cases(src)
        if per_file and len(cases) > per_file:
            cases = sorted(random.Random(f"{label}:{path}:{seed}").sample(cases, per_file),
                           key=lambda c: c["line"])
        for c in cases:
            rows.append({"source": f"{label}:{f.name}", "question": c["question"], "source_type": "code",
                         "text": c["text"], "gold": c["gold"]})
    if per_package and len(rows) > per_package:
        keep = set(random.Random(f"{label}:{seed}").sample(range(len(rows)), per_package))
        rows = [r for i, r in enumerate(rows) if i in keep]
    return rows


def main():
    argv = sys.argv[1:]
    opts = {"--per-file": "3", "--per-package": "0", "--seed": "0", "--prefix": "n"}
    for k in opts:
        if k in argv:
            i = argv.index(k)
            opts[k] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) < 2:
        sys.exit(__doc__)
    dest, pkgs = argv[0], argv[1:]
    rows = []
    for pkg in pkgs:
        got = package_cases(pkg, int(opts["--per-file"]), int(opts["--per-package"]), opts["--seed"])
        print(f"{pkg}: {len(got)} cases", file=sys.stderr)
        rows += got
    random.Random(opts["--seed"]).shuffle(rows)
    with open(dest, "w") as f:
        for i, r in enumerate(rows):
            f.write(json.dumps({"id": f"{opts['--prefix']}{i:03d}", **r}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
