"""Sets of git's output with a question, from bare clones with history (as the search tool's `fetch`
leaves them under MIRRORS/OWNER+NAME/repo).

    python bench/data/make_git_output.py OUT.jsonl --mirror MIRRORS --kind file|log|diff OWNER/NAME ...

- file: `git log -p -n 8 -- FILE` of a `.py` file; the question is one commit's subject, the
  gold that commit's block (header, message, diff);
- log: `git log -p -n 8` of the repository from a random commit, the same question and gold
  (commits of at most 400 lines);
- diff: `git diff X~8 X`; the question is the subject of a commit of that range that alone
  changed a file no other commit of it touched, the gold that file's diff.

Texts of 15 KB to 400 KB (smaller ones fit a result whole), 15 cases a repository, seeded, so a
set is made again the same from the same clones. `source_type` is logs: what `bash` gives.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

COMMIT = re.compile(r"commit [0-9a-f]{40}$")
LOG_COUNT = 8
MIN_CHARS, MAX_CHARS = 15_000, 400_000
MAX_COMMIT_LINES = 400


def git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(mirror), *args], capture_output=True, text=True,
                          errors="replace").stdout


def commit_case(log: str, rnd: random.Random, source: str) -> dict | None:
    """One commit of a `git log -p` output asked about by its subject."""
    if not MIN_CHARS <= len(log) <= MAX_CHARS:
        return None
    lines = log.split("\n")
    starts = [i for i, line in enumerate(lines) if COMMIT.match(line)]
    if len(starts) < LOG_COUNT:
        return None
    k = rnd.randrange(len(starts))
    a, b = starts[k], (starts[k + 1] if k + 1 < len(starts) else len(lines)) - 1
    subject = next((line.strip() for line in lines[a + 1 : b + 1] if line.startswith("    ") and line.strip()), "")
    if not subject or b - a > MAX_COMMIT_LINES:
        return None
    return {"text": log, "question": subject, "gold": [a + 1, b + 1], "source_type": "logs", "source": source}


def first_cases(logs: Iterator[str], rnd: random.Random, source: str, per: int) -> list[dict]:
    """A case from each of the first `logs` that make one, `per` at most."""
    out: list[dict] = []
    for log in logs:
        if case := commit_case(log, rnd, source):
            out.append(case)
            if len(out) >= per:
                break
    return out


def file_cases(mirror: Path, rnd: random.Random, source: str, per: int) -> list[dict]:
    files = sorted(f for f in git(mirror, "ls-tree", "-r", "--name-only", "HEAD").split() if f.endswith(".py"))
    rnd.shuffle(files)
    logs = (git(mirror, "log", "-p", f"-n{LOG_COUNT}", "--no-merges", "HEAD", "--", path) for path in files[:80])
    return first_cases(logs, rnd, source, per)


def log_cases(mirror: Path, rnd: random.Random, source: str, per: int) -> list[dict]:
    revs = git(mirror, "rev-list", "--no-merges", "-n", "600", "HEAD").split()
    rnd.shuffle(revs)
    logs = (git(mirror, "log", "-p", f"-n{LOG_COUNT}", "--no-merges", rev) for rev in revs[:60])
    return first_cases(logs, rnd, source, per)


def diff_cases(mirror: Path, rnd: random.Random, source: str, per: int) -> list[dict]:
    revs = git(mirror, "rev-list", "--first-parent", "-n", "800", "HEAD").split()
    rnd.shuffle(revs)
    out: list[dict] = []
    for rev in revs[:80]:
        commits = git(mirror, "rev-list", "--no-merges", f"{rev}~{LOG_COUNT}..{rev}").split()
        changed = {c: git(mirror, "diff-tree", "--no-commit-id", "--name-only", "-r", c).split() for c in commits}
        every = [path for paths in changed.values() for path in paths]
        alone = [(c, paths[0]) for c, paths in changed.items() if len(paths) == 1 and every.count(paths[0]) == 1]
        if len(commits) < 3 or not alone:
            continue
        commit, path = rnd.choice(alone)
        diff = git(mirror, "diff", f"{rev}~{LOG_COUNT}", rev)
        if not MIN_CHARS <= len(diff) <= MAX_CHARS:
            continue
        lines = diff.split("\n")
        heads = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
        at = next((i for i in heads if lines[i].startswith(f"diff --git a/{path} ")), None)
        if at is None:
            continue
        end = next((i for i in heads if i > at), len(lines)) - 1
        subject = git(mirror, "log", "-1", "--format=%s", commit).strip()
        out.append({"text": diff, "question": subject, "gold": [at + 1, end + 1], "source_type": "logs",
                    "source": source})
        if len(out) >= per:
            break
    return out


KINDS = {"file": file_cases, "log": log_cases, "diff": diff_cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("repos", nargs="+", metavar="OWNER/NAME")
    ap.add_argument("--mirror", type=Path, required=True, help="MIRRORS: OWNER+NAME/repo bare clones")
    ap.add_argument("--kind", choices=sorted(KINDS), required=True)
    ap.add_argument("--per-repo", type=int, default=15)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    cases: list[dict] = []
    for repo in args.repos:
        mirror = args.mirror / repo.replace("/", "+") / "repo"
        if not mirror.is_dir():
            raise SystemExit(f"{mirror}: no bare clone (fetch {repo} first)")
        made = KINDS[args.kind](mirror, rnd, repo, args.per_repo)
        print(f"{repo}: {len(made)} cases")
        cases.extend(made)
    prefix = f"git-{args.kind}"
    with args.out.open("w") as f:
        for k, case in enumerate(cases):
            f.write(json.dumps({"id": f"{prefix}{k:03d}", **case}) + "\n")
    print(f"{len(cases)} cases -> {args.out}")


if __name__ == "__main__":
    main()
