"""Rebuild bench/data/docs.jsonl from Markdown and reStructuredText found on this machine.

    python bench/data/make_docs.py [--out bench/data/docs.jsonl] [--root DIR ...] [--max N]

--root replaces the default roots (the documentation this machine has): a set from other
documents, e.g. the docs/ of repositories checked out under one directory, is held out
from the one the engine was tuned on.

Rule, mirroring needles-dev.jsonl: in a real document of at least 150 lines, pick
one section (heading to the line before the next heading of any level) whose body
has 6 to 80 lines and opens with a prose paragraph of at least 6 words. The
question is the first sentence of that paragraph; the paragraph is removed from
the text (as needles-dev removes the docstring), so the question must be matched
against the rest. gold = [heading line, last line of the section], 1-based, over
text.split("\\n") of the stored text. At most 3 cases per directory, one per file,
files and sections chosen by a hash, so the set is spread and reproducible on a
machine with the same files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

ROOTS = [
    "/usr/share/doc",
    "/usr/share/cmake-3.25/Help",
    "/usr/lib/node_modules/npm",
    "/usr/lib/google-cloud-sdk/platform/gsutil/third_party",
    "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages",
    "/work/main/.venv/lib/python3.11/site-packages",
]
ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
UNDER = re.compile(r"^([=\-~^\"'`#*+])\1{2,}\s*$")
FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
MAX_CASES = 40
PER_DIR = 3


def h(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "big")


def headings(lines: list[str]) -> list[tuple[int, int]]:
    """(first line, last line) of each heading, outside fenced blocks."""
    out = []
    fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            fence = not fence
        elif not fence:
            if ATX.match(line):
                out.append((i, i))
            elif (
                i + 1 < len(lines)
                and line.strip()
                and not UNDER.match(line)
                and UNDER.match(lines[i + 1])
                and len(lines[i + 1].strip()) >= len(line.strip())
            ):
                over = i > 0 and lines[i - 1].strip() == lines[i + 1].strip()
                out.append((i - 1 if over else i, i + 1))
                i += 2
                continue
        i += 1
    return out


def candidate(path: Path) -> dict | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    lines = text.split("\n")
    if len(lines) < 150 or "\r" in text:
        return None
    hs = headings(lines)
    if len(hs) < 5:
        return None
    options = []
    for k, (a, b) in enumerate(hs):
        end = (hs[k + 1][0] - 1) if k + 1 < len(hs) else len(lines) - 1
        body = range(b + 1, end + 1)
        if not 6 <= len(body) <= 80:
            continue
        i = b + 1
        while i <= end and not lines[i].strip():
            i += 1
        j = i
        while j <= end and lines[j].strip():
            j += 1
        para = " ".join(x.strip() for x in lines[i:j])
        if (
            not para
            or para[0] in "`|*-+.:<>[!#="
            or re.match(r"^\d+\.", para)
            or any(FENCE.match(x) or x.startswith("    ") for x in lines[i:j])
        ):
            continue
        sentence = re.split(r"(?<=[.!?])\s", para, maxsplit=1)[0].strip()
        if len(sentence.split()) < 6 or len(sentence) > 300:
            continue
        rest = [x for x in lines[j : end + 1] if x.strip()]
        if len(rest) < 3:
            continue
        options.append((a, end, i, j, sentence))
    if not options:
        return None
    a, end, i, j, sentence = options[h(str(path)) % len(options)]
    new = lines[:i] + lines[j:]
    removed = j - i
    return {
        "source": str(path),
        "question": sentence,
        "source_type": "docs",
        "text": "\n".join(new),
        "gold": [a + 1, end + 1 - removed],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="the set to write (default: bench/data/docs.jsonl, "
                    "required with --root, so a held-out set never replaces the tuned one)")
    ap.add_argument("--root", action="append", help="a directory to search (repeatable)")
    ap.add_argument("--max", type=int, default=MAX_CASES, help="stop once this many cases are made (the directory being read may add "
                    f"up to {PER_DIR - 1} more)")
    args = ap.parse_args()
    if args.root and not args.out:
        ap.error("--root needs --out")
    missing = [r for r in args.root or [] if not Path(r).is_dir()]
    if missing:
        ap.error(f"not a directory: {', '.join(missing)}")
    args.out = args.out or str(Path(__file__).with_name("docs.jsonl"))
    files: dict[str, list[Path]] = {}
    for root in args.root or ROOTS:
        for p in Path(root).rglob("*"):
            if (
                p.suffix.lower() in (".md", ".rst")
                and p.is_file()
                and 8_000 <= p.stat().st_size <= 300_000
            ):
                files.setdefault(str(p.parent), []).append(p)
    cases = []
    for d in sorted(files, key=h):
        picked = 0
        for p in sorted(files[d], key=lambda x: h(str(x))):
            c = candidate(p)
            if c:
                cases.append(c)
                picked += 1
            if picked >= PER_DIR:
                break
        if len(cases) >= args.max:
            break
    with open(args.out, "w") as f:
        for k, c in enumerate(cases):
            f.write(json.dumps({"id": f"d{k:03d}", **c}) + "\n")
    print(f"{len(cases)} cases, {sum(len(c['text']) for c in cases)} chars -> {args.out}")


if __name__ == "__main__":
    main()
