"""When memory runs out, the kernel kills a run's commands first: a run's bash that filled the
host's memory got the daemon and every run's child killed before its own processes."""

from __future__ import annotations

from pathlib import Path

from jeeves_mcp.proc.runner import FIRST_TO_KILL
from tests._child import running_child
from tests.test_isolation import child_bash, owned_root  # noqa: F401 (a fixture)

CAP_SYS_RESOURCE = 24
SCORES = (
    "cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'; "
    "{ echo 0 >/proc/self/oom_score_adj; } 2>/dev/null && echo lowered || echo kept"
)


def score_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def holds_sys_resource(pid: int) -> bool:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


async def test_another_users_commands_are_the_first_to_kill_and_stay_so(tmp_path: Path, owned_root: Path) -> None:  # noqa: F811
    """The pruner sets the score before the command runs; holding CAP_SYS_RESOURCE (root on a
    host) that is also the lowest the command may go back to, so that a run cannot hide its
    processes behind the daemon's. Without it (a container's root, this suite's machine) the
    command may lower it again, as the kernel lets any process."""
    async with running_child(owned_root, tmp_path) as child:
        ran = await child_bash(child, SCORES)
        locked = "kept" if holds_sys_resource(child.process.pid) else "lowered"
        assert ran["stdout"] == f"{FIRST_TO_KILL}\n{FIRST_TO_KILL}\n{locked}\n", ran
        assert score_of(child.process.pid) < FIRST_TO_KILL  # the pruner itself is not marked


async def test_commands_of_the_pruners_own_user_are_the_first_to_kill(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    async with running_child(root, tmp_path) as child:
        ran = await child_bash(child, "cat /proc/self/oom_score_adj; cd / && pwd")
        assert ran["stdout"] == f"{FIRST_TO_KILL}\n/\n", ran
        assert score_of(child.process.pid) < FIRST_TO_KILL
