"""Search output with a question, made from commit tasks and the bare clones they came from.

    python bench/data/make_search_output.py COMMITS.jsonl OUT.jsonl --mirror MIRRORS [--max 150]
                                            [--no-line-numbers]

For each commit task (make_commits.py's: source OWNER/NAME@SHA:PATH, text = the file before the fix,
gold = the lines the fix changed) whose subject holds a word of four letters or more that a changed
line holds too: `git grep -I -n -w -i WORD SHA^` over the whole repository (text files), as an agent's search for
that word. The question is the subject; the gold is the output's lines of the fixed file within the
fix's range, first to last. Outputs of 10 KB to 400 KB only (smaller ones fit a result whole).
--no-line-numbers makes the same cases with `path:text` rows, as `rg WORD` and `grep -r WORD`
print to a pipe.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
MIN_CHARS, MAX_CHARS = 10_000, 400_000


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
    found = subprocess.run(["git", "--git-dir", str(git_dir), "grep", "-I", "-n", "-w", "-i", words[0], f"{sha}^", "--"],
                           capture_output=True, text=True, errors="replace").stdout
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
    ap.add_argument("--no-line-numbers", action="store_true", help="rows `path:text`, as rg prints to a pipe")
    args = ap.parse_args()
    out: list[dict] = []
    for line in args.commits.read_text().splitlines():
        if line.strip() and (case := search_case(json.loads(line), args.mirror, not args.no_line_numbers)):
            out.append(case)
            if len(out) >= args.max:
                break
    args.out.write_text("".join(json.dumps(case) + "\n" for case in out))
    print(f"{len(out)} cases -> {args.out}")


if __name__ == "__main__":
    main()
