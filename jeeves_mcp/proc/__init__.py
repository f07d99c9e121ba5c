"""Processes: the bounded command runner, process-tree kill, /proc and prctl helpers.

Used by the tools (`bash`, `grep`) and by the supervisor alike; Linux only.
"""

from .procfs import (
    become_subreaper,
    can_switch_users,
    capabilities,
    clear_ambient_capabilities,
    is_subreaper,
    prepare_process_title,
    proc_stat,
    process_alive,
    process_real_uid,
    processes_with_env,
    set_dumpable,
    set_process_name,
    set_process_title,
    user_name,
)
from .reaper import reap_orphans, spawning, sweep_zombies
from .runner import (
    COMMAND_MAX_PROCESSES,
    CommandResult,
    command_user,
    new_tag,
    pin_root,
    pinned_root,
    run_command,
)
from .tree import TAG_VAR, TREE_VAR, kill_descendants, kill_tree

__all__ = [
    "COMMAND_MAX_PROCESSES",
    "TAG_VAR",
    "TREE_VAR",
    "CommandResult",
    "become_subreaper",
    "can_switch_users",
    "capabilities",
    "clear_ambient_capabilities",
    "command_user",
    "is_subreaper",
    "kill_descendants",
    "kill_tree",
    "new_tag",
    "pin_root",
    "pinned_root",
    "prepare_process_title",
    "proc_stat",
    "process_alive",
    "process_real_uid",
    "processes_with_env",
    "reap_orphans",
    "run_command",
    "set_dumpable",
    "set_process_name",
    "set_process_title",
    "spawning",
    "sweep_zombies",
    "user_name",
]
