"""bench/compare_engines.py: the engine at a revision against this tree, paired by case."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.compare_engines import ROOT, paired, sign_test


def test_sign_test_is_the_exact_binomial():
    assert sign_test(0, 0) == 1.0
    assert sign_test(5, 5) == 1.0
    assert sign_test(10, 0) == pytest.approx(2 / 1024)
    # 8 against 2: P(X <= 2) for n = 10 is 56/1024, doubled.
    assert sign_test(2, 8) == pytest.approx(112 / 1024)


def test_paired_counts_only_the_cases_both_runs_hold():
    before = {
        "a": {"recall": 0.0, "reduction": 0.8},
        "b": {"recall": 1.0, "reduction": 0.7},
        "gone": {"recall": 0.0, "reduction": 0.5},
    }
    after = {
        "a": {"recall": 1.0, "reduction": 0.7},
        "b": {"recall": 1.0, "reduction": 0.7},
        "new": {"recall": 1.0, "reduction": 0.9},
    }
    s = paired(before, after)
    assert (s["cases"], s["up"], s["down"]) == (2, 1, 0)
    assert s["difference"] == pytest.approx(0.5)
    assert s["reduction_change"] == pytest.approx(-0.05)


def _worktrees() -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(),
    reason="needs git and this tree's history",
)
def test_head_against_this_tree_pairs_every_case_and_leaves_no_worktree(tmp_path: Path):
    # Files too small to prune: every engine keeps them whole, so the comparison is exact
    # whatever is being edited in this tree.
    cases = [
        {
            "id": f"tiny{k}",
            "source": "example/tiny@0:a.py",
            "source_type": "code",
            "question": "where is the total computed?",
            "text": f"def total_{k}(values):\n    return sum(values)\n",
            "gold": [1, 2],
        }
        for k in range(3)
    ]
    data = tmp_path / "tiny.jsonl"
    data.write_text("".join(json.dumps(c) + "\n" for c in cases))
    worktrees = _worktrees()
    done = subprocess.run(
        [sys.executable, "bench/compare_engines.py", "HEAD", "--set", "tiny", "--extra", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("tiny "))
    fields = row.replace("|", " ").split()
    assert fields[1:5] == ["3", "1.000", "1.000", "+0.0000"]
    assert fields[6:8] == ["0", "0"]  # no case went up or down
    assert _worktrees() == worktrees


def test_an_unknown_revision_is_a_clear_error():
    done = subprocess.run(
        [sys.executable, "bench/compare_engines.py", "no-such-revision-anywhere", "--set", "logs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "cannot check out no-such-revision-anywhere" in done.stderr
