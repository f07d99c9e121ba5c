"""When memory runs out, the kernel kills a run's commands first: a run's bash that filled the
host's memory got the daemon and every run's child killed before its own processes."""

from __future__ import annotations

from pathlib import Path

from jeeves_mcp.proc.runner import FIRST_TO_KILL
from tests._child import running_child
from tests.test_isolation import child_bash, owned_root  # noqa: F401 (a fixture)

SCORES = "cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"


def score_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


async def test_another_users_commands_are_the_first_to_kill(tmp_path: Path, owned_root: Path) -> None:  # noqa: F811
    """The command's wrapper raises its score before it runs anything, and what the command
    starts inherits it; the pruner keeps its own."""
    async with running_child(owned_root, tmp_path) as child:
        ran = await child_bash(child, SCORES)
        assert ran["stdout"] == f"{FIRST_TO_KILL}\n{FIRST_TO_KILL}\n", ran
        assert score_of(child.process.pid) < FIRST_TO_KILL


async def test_commands_of_the_pruners_own_user_are_the_first_to_kill(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    async with running_child(root, tmp_path) as child:
        ran = await child_bash(child, "cat /proc/self/oom_score_adj; cd / && pwd")
        assert ran["stdout"] == f"{FIRST_TO_KILL}\n/\n", ran
        assert score_of(child.process.pid) < FIRST_TO_KILL
