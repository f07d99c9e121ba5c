"""Function needles in other languages: can the pruned view find a function from its doc comment?

    python bench/data/make_needles_lang.py OUT.jsonl --lang go|js|rust|java|csharp --mirror MIRRORS
                                           [--per-repo 15] [--seed 7] [--prefix g] OWNER/NAME ...

make_needles.py's rule, read for languages whose functions carry doc comments and a braced
body. In each library file (make_commits_lang.py's rule for the language) of 400 to 3,000 lines
at the repository's HEAD, a function qualifies when its declaration line is directly under a
doc comment (`///`, `/** ... */`, or for Go the `//` lines right above it; C#'s XML tags
read as text, `<see cref="X"/>` as X) and its body runs
from the first `{` of the declaration to the matching `}` (braces counted outside strings
and comments):
  question = the comment's first sentence (markup as make_needles.py unwraps it; Go's leading
             name dropped, "Open opens the file." -> "Opens the file.");
  text     = the file with that one doc comment removed;
  gold     = [first, last] 1-based lines of the function in `text`, declaration to closing brace.
Spans as make_needles.py's (8 to 64 lines, a question of 5 words or more, unique in its
file). At most 3 per file and --per-repo per repository, a seeded sample; shuffled with --seed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from make_commits_lang import LANGS, fetched, library_file, load_shared

MIN_FILE, MAX_FILE = 400, 3000
MIN_SPAN, MAX_SPAN = 8, 64
MIN_WORDS = 5
PER_FILE = 3
DECL = re.compile(r"^\s*(?:[\w<>\[\](),.*&:'\"@ ]*\s)?(?:func|fn|function|class|def)\b"
                  r"|^\s*(?:public|private|protected|static|final|async|export|pub|override)\b"
                  r"|^\s*internal\b(?=.*\()")  # C#'s; added with it, no other set has one
KEYWORDS = frozenset(("func", "fn", "function", "if", "for", "while", "switch", "return", "new"))
SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def unwrap(text: str) -> str:
    text = re.sub(r"\{@\w+\s+([^}]*)\}", r"\1", text)  # {@link Foo}
    text = re.sub(r"\[`?([^\]`]+)`?\](?:\([^)]*\)|\[[^\]]*\])?", r"\1", text)  # [`Foo`](x)
    text = re.sub(r"`+([^`]*)`+", r"\1", text)
    return re.sub(r"\*+([^*]+)\*+", r"\1", text)


# C#'s XML doc: a reference reads as its name, other tags go (`<summary>` lines end up blank).
XML_REFERENCE = re.compile(r'<(?:see|paramref|typeparamref)\s+\w+="([^"]*)"\s*/>')
XML_TAG = re.compile(r"</?\w+[^>]*>")


def doc_above(lines: list[str], decl: int, lang: str) -> tuple[int, list[str]] | None:
    """The doc comment glued above line `decl`: its first line and its text lines."""
    i = decl - 1
    attributes = ("@", "#[", "[") if lang == "csharp" else ("@", "#[")
    while i >= 0 and lines[i].lstrip().startswith(attributes):  # annotations, attributes
        i -= 1
    end = i
    if i < 0:
        return None
    s = lines[i].strip()
    if s.endswith("*/"):
        while i >= 0 and not lines[i].lstrip().startswith("/**"):
            if lines[i].lstrip().startswith("/*") or i < end - 80:
                return None
            i -= 1
        if i < 0:
            return None
        body = [re.sub(r"^\s*(?:/\*\*|\*/|\*)\s?", "", x).replace("*/", "") for x in lines[i:end + 1]]
        return i, body
    prefix = "///" if s.startswith("///") else ("//" if lang == "go" and s.startswith("//") else None)
    if prefix is None:
        return None
    while i - 1 >= 0 and lines[i - 1].lstrip().startswith(prefix):
        i -= 1
    text = [x.lstrip()[len(prefix):].strip() for x in lines[i:end + 1]]
    if lang == "csharp":
        text = [XML_TAG.sub("", XML_REFERENCE.sub(r"\1", x)).strip() for x in text]
    return i, text


# Literals whose braces do not count: strings, and quoted characters (in Rust only a
# character is quoted: `'a` is a lifetime, not the start of a string).
LITERALS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
RUST_LITERALS = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])\'')


def body_end(lines: list[str], decl: int, lang: str) -> int | None:
    """The line of the `}` that closes the first `{` from line `decl` on."""
    depth, started = 0, False
    for k in range(decl, min(len(lines), decl + 400)):
        literals = RUST_LITERALS if lang == "rust" else LITERALS
        line = re.sub(r"//.*$", "", literals.sub('""', lines[k]))
        for ch in line:
            if ch == "{":
                depth += 1
                started = True
            elif ch == "}" and started:
                depth -= 1
                if depth == 0:
                    return k
        if not started and line.rstrip().endswith(";") and (k > decl or "=>" in line):
            return None  # a declaration without a body, or C#'s `=> expression;`
    return None


def name_of(line: str) -> str | None:
    m = re.search(r"\b(?:func|fn|function|def)\s+(?:\([^)]*\)\s*)?(\w+)", line)
    if m:
        return m.group(1)
    names = [n for n in re.findall(r"(\w+)\s*[(<]", line) if n not in KEYWORDS]
    return names[0] if names else None


def question_of(doc: list[str], name: str | None) -> str | None:
    paragraph = []
    for x in doc:
        if not x.strip() or x.strip().startswith("@"):
            if paragraph:
                break
            continue
        paragraph.append(x.strip())
    text = unwrap(" ".join(paragraph))
    text = SENTENCE_END.split(text, maxsplit=1)[0].strip()
    if name and text.split(" ", 1)[0] == name and " " in text:
        rest = text.split(" ", 1)[1]
        text = rest[:1].upper() + rest[1:]
    return text if len(text.split()) >= MIN_WORDS else None


def cases_in(lines: list[str], lang: str) -> list[tuple[str, list[str], list[int]]]:
    """(question, text without the doc comment, gold) for each qualifying function."""
    found = []
    for decl, line in enumerate(lines):
        if not DECL.match(line) or ("(" not in line and "{" not in line):
            continue
        doc = doc_above(lines, decl, lang)
        end = body_end(lines, decl, lang)
        if doc is None or end is None or not MIN_SPAN <= end - decl + 1 <= MAX_SPAN:
            continue
        first, text_lines = doc
        q = question_of(text_lines, name_of(line))
        if q is None:
            continue
        removed = decl - first
        kept = lines[:first] + lines[decl:]
        found.append((q, kept, [decl - removed + 1, end - removed + 1]))
    questions = [q for q, _, _ in found]
    return [c for c in found if questions.count(c[0]) == 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--lang", required=True, choices=sorted(LANGS))
    ap.add_argument("--mirror", required=True, type=pathlib.Path)
    ap.add_argument("--per-repo", type=int, default=15)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--prefix", default="x")
    ap.add_argument("repos", nargs="+")
    args = ap.parse_args()
    git = load_shared().git  # make_commits.py's: `git --git-dir REPO ...`, its stdout
    library = library_file(args.lang)

    def is_lib(path: str) -> bool:
        return library(path) and not {"_examples"} & set(pathlib.PurePosixPath(path).parts[:-1])
    rows = []
    for name, repo in fetched(args.mirror, args.repos):
        head = git(repo, "rev-parse", "HEAD").strip()
        got = []
        for path in sorted(p for p in git(repo, "ls-tree", "-r", "--name-only", head).split("\n") if is_lib(p)):
            source = git(repo, "show", f"{head}:{path}")
            lines = source.split("\n")
            if not MIN_FILE <= len(lines) <= MAX_FILE:
                continue
            here = cases_in(lines, args.lang)
            random.Random(f"{args.seed}:{name}:{path}").shuffle(here)
            for q, text, gold in here[:PER_FILE]:
                got.append({"source": f"{name}@{head[:10]}:{path}", "source_type": "code", "path": path,
                            "question": q, "text": "\n".join(text), "gold": gold})
        random.Random(f"{args.seed}:{name}").shuffle(got)
        print(f"{name}: {len(got[:args.per_repo])} cases", file=sys.stderr)
        rows += got[:args.per_repo]
    random.Random(args.seed).shuffle(rows)
    with open(args.out, "w") as f:
        for k, r in enumerate(rows):
            f.write(json.dumps({"id": f"{args.prefix}{k:03d}", **r}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
