"""The package's shape (#13): no import cycle, the core below supervisor and cli, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Folders and the package name each is installed under (setup.py maps them so).
PACKAGES = {"jeeves_mcp": ROOT / "jeeves_mcp", "jeeves_mcp.supervisor": ROOT / "supervisor",
            "jeeves_mcp.cli": ROOT / "cli"}
MAX_LINES = 450


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` is, or lives in (an imported function or class)."""
    for candidate in (name, name.rpartition(".")[0]):
        for prefix, real in (("supervisor", "jeeves_mcp.supervisor"), ("cli", "jeeves_mcp.cli")):
            if candidate == prefix or candidate.startswith(prefix + "."):
                candidate = real + candidate[len(prefix):]
        if candidate in known:
            return candidate
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every project module `module` imports, at top level or inside functions."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            target = resolve(name, known)
            if target is not None and target != module:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def is_package_init_edge(src: str, dst: str) -> bool:
    """A package's __init__ re-exporting its own modules is not a cycle that matters."""
    return dst.startswith(src + ".") or src.startswith(dst + ".")


def test_no_import_cycles() -> None:
    edges = {src: {dst for dst in dsts if not is_package_init_edge(src, dst)} for src, dsts in graph().items()}
    assert cycles(edges) == []


# `python -m jeeves_mcp` is the command line: the one core module that may start it.
ENTRY_POINT = "jeeves_mcp.__main__"


def is_upper(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in ("jeeves_mcp.supervisor", "jeeves_mcp.cli"))


def test_core_never_imports_supervisor_or_cli() -> None:
    leaks = sorted(
        (src, dst) for src, dsts in graph().items() if not is_upper(src) and src != ENTRY_POINT
        for dst in dsts if is_upper(dst)
    )
    assert leaks == []


def test_no_import_of_another_packages_private_module() -> None:
    leaks = []
    for src, dsts in graph().items():
        for dst in dsts:
            owner, _, leaf = dst.rpartition(".")
            if leaf.startswith("_") and not leaf.startswith("__") and not (src + ".").startswith(owner + "."):
                leaks.append((src, dst))
    assert sorted(leaks) == []


def test_modules_stay_small() -> None:
    big = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert big == {}
