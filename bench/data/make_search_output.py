"""Search output with a question, made from commit tasks and the bare clones they came from.

    python bench/data/make_search_output.py COMMITS.jsonl OUT.jsonl --mirror MIRRORS [--max 150]
                                            [--no-line-numbers | --listing find|grep|tree|lsr | --head]

For each commit task (make_commits.py's: source OWNER/NAME@SHA:PATH, text = the file before the fix,
gold = the lines the fix changed) whose subject holds a word of four letters or more that a changed
line holds too: `git grep -I -n -w -i WORD SHA^` over the whole repository (text files), as an agent's search for
that word. The question is the subject; the gold is the output's lines of the fixed file within the
fix's range, first to last. Outputs of 10 KB to 400 KB only (smaller ones fit a result whole).
--no-line-numbers makes the same cases with `path:text` rows, as `rg WORD` and `grep -r WORD`
print to a pipe. --listing makes file listings instead, the gold the fixed file's line: `find
. -name '*.EXT'` (every file with the fixed file's extension, `./path`, as `find` and `fd` print
them) or `grep -rl WORD` (the files holding the word); listings of 2 KB to 400 KB. `--listing
tree` makes find's cases as GNU `tree` prints those files (UTF-8, no-break spaces in its columns),
`--listing lsr` as `ls -R` prints them to a pipe (`./dir:` headings, one name a line). --head
makes `head -n 150` of several files instead, for a task whose fix lies within its file's first 150
lines: the fixed file and four others with its extension (drawn by the case, at the fix's parent),
sorted by path, each under `==> path <==` with a blank line between; the gold is the fix's lines in
that output; outputs under 4 KB are left out.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
from pathlib import Path

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
MIN_CHARS, MAX_CHARS = 10_000, 400_000
MIN_LISTING_CHARS = 2_048
HEAD_LINES, HEAD_OTHER_FILES, MIN_HEAD_CHARS = 150, 4, 4_096


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True,
                          errors="replace").stdout


def _parent_files(git_dir: str, sha: str) -> list[str]:
    """The files of the fix's parent, as `git ls-tree -r` names them."""
    return _git(git_dir, "ls-tree", "-r", "--name-only", f"{sha}^").split("\n")


def listing_case(case: dict, mirrors: Path, kind: str) -> dict | None:
    repo, rest = case["source"].split("@", 1)
    sha, path = rest.split(":", 1)
    git_dir = str(mirrors / repo.replace("/", "+") / "repo")
    if kind in ("find", "tree", "lsr"):
        suffix = Path(path).suffix
        rows = [f"./{name}" for name in _parent_files(git_dir, sha) if suffix and name.endswith(suffix)]
        fixed = f"./{path}"
    else:
        changed = " ".join(case["text"].split("\n")[case["gold"][0] - 1 : case["gold"][1]]).lower()
        words = [w for w in WORD.findall(case["question"]) if w.lower() in changed]
        if not words:
            return None
        found = _git(git_dir, "grep", "-l", "-I", "-w", "-i", words[0], f"{sha}^", "--")
        rows = [row.split(":", 1)[1] for row in found.split("\n") if ":" in row]
        fixed = path
    text = "\n".join(rows)
    if fixed not in rows or not MIN_LISTING_CHARS <= len(text) < MAX_CHARS:
        return None
    at = rows.index(fixed) + 1
    if kind in ("tree", "lsr"):
        lines, line_of = (tree_of if kind == "tree" else ls_recursive_of)([row[2:] for row in rows])
        text, at = "\n".join(lines), line_of[path] + 1
    return {"id": f"grep-{case['id']}", "text": text, "question": case["question"], "gold": [at, at],
            "source_type": "logs", "source": repo}


def head_case(case: dict, mirrors: Path) -> dict | None:
    repo, rest = case["source"].split("@", 1)
    sha, path = rest.split(":", 1)
    first, last = case["gold"]
    if last > HEAD_LINES:
        return None
    git_dir = str(mirrors / repo.replace("/", "+") / "repo")
    same = [name for name in _parent_files(git_dir, sha) if name and name.endswith(Path(path).suffix) and name != path]
    draw = random.Random(f"{path}@{sha}")
    lines: list[str] = []
    gold = None
    for name in sorted([*draw.sample(same, min(HEAD_OTHER_FILES, len(same))), path]):
        lines += ([""] if lines else []) + [f"==> {name} <=="]
        if name == path:
            gold = [len(lines) + first, len(lines) + last]
        lines += _git(git_dir, "show", f"{sha}^:{name}").split("\n")[:HEAD_LINES]
    text = "\n".join(lines)
    if gold is None or len(text) < MIN_HEAD_CHARS:
        return None
    return {"id": f"head-{repo}@{sha}", "text": text, "question": case["question"], "gold": gold,
            "source_type": "logs", "source": repo}


def tree_of(files: list[str]) -> tuple[list[str], dict[str, int]]:
    """`files` as `tree` prints them from `.`, and the line of each file."""
    root: dict = {}
    for name in files:
        node = root
        for part in name.split("/"):
            node = node.setdefault(part, {})
    lines, line_of, counts = ["."], {}, [0, 0]

    def walk(node: dict, prefix: str, path: str) -> None:
        for k, name in enumerate(sorted(node)):
            last = k == len(node) - 1
            line_of[path + name] = len(lines)
            lines.append(prefix + ("\u2514\u2500\u2500 " if last else "\u251c\u2500\u2500 ") + name)
            counts[bool(node[name])] += 1
            if node[name]:
                walk(node[name], prefix + ("    " if last else "\u2502\u00a0\u00a0 "), f"{path}{name}/")

    walk(root, "", "")
    return [*lines, "", f"{counts[1]} directories, {counts[0]} files"], line_of


def ls_recursive_of(files: list[str]) -> tuple[list[str], dict[str, int]]:
    """`files` as `ls -R` prints them from `.` to a pipe (a `./dir:` heading over each
    directory's names, one a line, sorted as C's locale sorts), and the line of each file."""
    entries: dict[str, set[str]] = {".": set()}
    for name in files:
        parts = name.split("/")
        for depth in range(len(parts)):
            where = "/".join([".", *parts[:depth]])
            entries.setdefault(where, set()).add(parts[depth])
    lines: list[str] = []
    line_of: dict[str, int] = {}
    pending = ["."]
    while pending:
        where = pending.pop(0)
        if lines:
            lines.append("")
        lines.append(f"{where}:")
        below = []
        for name in sorted(entries[where]):
            line_of[f"{where}/{name}".removeprefix("./")] = len(lines)
            lines.append(name)
            if f"{where}/{name}" in entries:
                below.append(f"{where}/{name}")
        pending[:0] = below  # depth first, as ls -R goes
    return lines, line_of


def search_case(case: dict, mirrors: Path, numbered: bool = True) -> dict | None:
    repo, rest = case["source"].split("@", 1)
    sha, path = rest.split(":", 1)
    lines = case["text"].split("\n")
    first, last = case["gold"]
    changed = " ".join(lines[first - 1 : last]).lower()
    words = [w for w in WORD.findall(case["question"]) if w.lower() in changed]
    if not words:
        return None
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    found = _git(str(git_dir), "grep", "-I", "-n", "-w", "-i", words[0], f"{sha}^", "--")
    if not MIN_CHARS < len(found) < MAX_CHARS:
        return None
    # git grep names the tree first (SHA^:path:line:text): the path, as a search in a checkout shows it.
    named = found.rstrip("\n").split("\n")
    if not all(":" in row for row in named):  # a matched line holding a line break of its own
        return None
    rows = [row.split(":", 1)[1] for row in named]
    hits = [i for i, row in enumerate(rows)
            if row.startswith(path + ":") and first <= int(row[len(path) + 1 :].split(":", 1)[0]) <= last]
    if not hits:
        return None
    if not numbered:
        rows = [row.split(":", 1)[0] + ":" + row.split(":", 2)[2] for row in rows]
    return {"id": f"grep-{case['id']}", "text": "\n".join(rows), "question": case["question"],
            "gold": [hits[0] + 1, hits[-1] + 1], "source_type": "logs", "source": repo}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("commits", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mirror", type=Path, required=True, help="MIRRORS: OWNER+NAME/repo bare clones")
    ap.add_argument("--max", type=int, default=150)
    shape = ap.add_mutually_exclusive_group()
    shape.add_argument("--no-line-numbers", action="store_true", help="rows `path:text`, as rg prints to a pipe")
    shape.add_argument("--listing", choices=("find", "grep", "tree", "lsr"),
                       help="file listings: find's, grep -rl's, or find's as tree or ls -R prints them")
    shape.add_argument("--head", action="store_true", help="head -n 150 of the fixed file and four others")
    args = ap.parse_args()
    out: list[dict] = []
    for line in args.commits.read_text().splitlines():
        if not line.strip():
            continue
        task = json.loads(line)
        case = (listing_case(task, args.mirror, args.listing) if args.listing
                else head_case(task, args.mirror) if args.head
                else search_case(task, args.mirror, not args.no_line_numbers))
        if case:
            out.append(case)
            if len(out) >= args.max:
                break
    args.out.write_text("".join(json.dumps(case) + "\n" for case in out))
    print(f"{len(out)} cases -> {args.out}")


if __name__ == "__main__":
    main()
