"""Can this installation start a pruner child? Asked in a fresh interpreter, as a child is.

    python -m jeeves_mcp.preflight     # exit 0, or 1 with one line saying what is broken

The daemon asks before it serves (and before systemd hears READY=1), and again when a
child fails to start, to tell a broken installation (every run would fail: an error the
runner sees) from a failure of one run (that slot is `disabled`, seed 000). `jeeves-mcp
doctor` asks too. A fresh interpreter, because the daemon has its own modules loaded
already and would not notice one missing on disk.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import trio

# What `jeeves-mcp pruner` and the fork server import, then every other module of the core.
CHILD_ENTRY_MODULES = (
    "jeeves_mcp.cli._pruner",
    "jeeves_mcp.mcp.server",
    "jeeves_mcp.pruning.engine",
    "jeeves_mcp.pruning.swe_client",
    "jeeves_mcp.zygote",
)
NOT_IN_CHILDREN = ("jeeves_mcp.supervisor", "jeeves_mcp.cli", "jeeves_mcp.__main__", "jeeves_mcp.preflight")
TIMEOUT_S = 60.0


def import_child_modules(*, with_cli: bool = True) -> int:
    """Import everything a pruner child runs; returns how many modules that was.
    `with_cli=False`: not the `jeeves-mcp pruner` command itself (the fork server's children
    start from `zygote`, and need neither Typer nor Rich)."""
    import jeeves_mcp

    count = 0
    for name in CHILD_ENTRY_MODULES:
        if with_cli or not name.startswith("jeeves_mcp.cli"):
            importlib.import_module(name)
            count += 1
    for info in pkgutil.walk_packages(jeeves_mcp.__path__, "jeeves_mcp."):
        if not info.name.startswith(NOT_IN_CHILDREN):
            importlib.import_module(info.name)
            count += 1
    return count


async def child_start_problem(env: dict[str, str] | None = None) -> str | None:
    """None if a fresh interpreter can import a pruner child, else why not (one line)."""
    from jeeves_mcp.proc import spawning  # not at the top: the check's own process needs none of it

    stderr = bytearray()
    try:
        with trio.fail_after(TIMEOUT_S):
            # Not trio.run_process, which spawns out of reach: the daemon's sweep (kill_tree's,
            # in a thread) leaves this status to trio only while the spawn says so (proc/reaper.py).
            with spawning():
                process = await trio.lowlevel.open_process(
                    [sys.executable, "-I", "-m", "jeeves_mcp.preflight"],  # as a cold child starts
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                )
            assert process.stderr is not None
            try:
                async for chunk in process.stderr:
                    stderr += chunk
                code = await process.wait()
            finally:
                if process.returncode is None:  # cancelled, or too slow
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
                await trio.aclose_forcefully(process.stderr)
    except trio.TooSlowError:
        return f"importing a pruner child took over {TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"cannot run {sys.executable}: {exc.strerror or exc}"
    if code == 0:
        return None
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"{sys.executable} -m jeeves_mcp.preflight exited {code}"


def main() -> None:
    try:
        count = import_child_modules()
    except Exception as exc:  # the answer to give, not a crash: any import error
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"ok: {count} modules a pruner child needs import")


if __name__ == "__main__":
    main()
