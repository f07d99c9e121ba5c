"""`head -n 150` of several files, with a question, made from commit tasks and their bare clones.

    python bench/data/make_head_output.py COMMITS.jsonl OUT.jsonl --mirror MIRRORS [--max 150]

For each commit task (make_commits.py's: source OWNER/NAME@SHA:PATH, gold = the lines the fix
changed) whose fix lies within its file's first 150 lines: the fixed file and four others with its
extension (drawn by the case, at the fix's parent), sorted by path, each as `head -n 150 A B ...`
prints it (`==> path <==` over each, a blank line between). The question is the subject; the gold
is the fix's lines in that output. Outputs under 4 KB are left out.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
from pathlib import Path

HEAD_LINES = 150
OTHER_FILES = 4
MIN_CHARS = 4096


def head_case(case: dict, mirrors: Path) -> dict | None:
    repo, rest = case["source"].split("@", 1)
    sha, path = rest.split(":", 1)
    first, last = case["gold"]
    if last > HEAD_LINES:
        return None
    git_dir = str(mirrors / repo.replace("/", "+") / "repo")
    tree = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", f"{sha}^"],
                          capture_output=True, text=True, errors="replace").stdout.split("\n")
    same = [name for name in tree if name and name.endswith(Path(path).suffix) and name != path]
    draw = random.Random(f"{path}@{sha}")
    lines: list[str] = []
    gold = None
    for name in sorted([*draw.sample(same, min(OTHER_FILES, len(same))), path]):
        text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{sha}^:{name}"],
                              capture_output=True, text=True, errors="replace").stdout
        lines += ([""] if lines else []) + [f"==> {name} <=="]
        if name == path:
            gold = [len(lines) + first, len(lines) + last]
        lines += text.split("\n")[:HEAD_LINES]
    text = "\n".join(lines)
    if gold is None or len(text) < MIN_CHARS:
        return None
    return {"id": f"head-{repo}@{sha}", "text": text, "question": case["question"], "gold": gold,
            "source_type": "logs", "source": repo}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("commits", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--mirror", type=Path, required=True, help="bare clones, OWNER+NAME/repo")
    ap.add_argument("--max", type=int, default=150)
    args = ap.parse_args()
    cases = []
    for line in args.commits.read_text().splitlines():
        if line.strip() and (case := head_case(json.loads(line), args.mirror)) is not None:
            cases.append(case)
        if len(cases) >= args.max:
            break
    args.out.write_text("".join(json.dumps(c) + "\n" for c in cases))
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
