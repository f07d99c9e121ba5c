"""The distribution declares what its code imports (deferred imports included), as installed.

Read from the installed metadata (`importlib.metadata.requires`), not from pyproject.toml, so the
same test holds for the editable tree and for the wheel under `make test-installed`. A module
imported but declared by nobody installs fine here (the test extra or a neighbour brings it)
and breaks the first venv that has only the wheel.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import jeeves_mcp
import jeeves_mcp.cli
import jeeves_mcp.supervisor

FIRST_PARTY = {"jeeves_mcp", "tests", "bench"}


def imported_top_levels(folders: list[Path]) -> dict[str, str]:
    """Top-level module name -> first file importing it, for every absolute import."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path))
    return found


def third_party(found: dict[str, str]) -> dict[str, str]:
    return {name: where for name, where in found.items()
            if name not in FIRST_PARTY and name not in sys.stdlib_module_names and name != "__future__"}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(extra: str | None = None) -> set[str]:
    """Distributions jeeves-mcp requires (with `extra`: those the extra adds too)."""
    names = set()
    for requirement in metadata.requires("jeeves-mcp") or []:
        marker = requirement.partition(";")[2]
        if marker and (extra is None or f'extra == "{extra}"' not in marker):
            continue
        names.add(canonical(re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0]))
    return names


def undeclared(found: dict[str, str], allowed: set[str]) -> list[str]:
    providers = metadata.packages_distributions()
    problems = []
    for name, where in sorted(third_party(found).items()):
        dists = {canonical(dist) for dist in providers.get(name, [])}
        if not dists:
            problems.append(f"{name} (imported by {where}) is not installed at all")
        elif not dists & allowed:
            problems.append(f"{name} (imported by {where}) comes from {sorted(dists)}, which is not declared")
    return problems


def package_folders() -> list[Path]:
    # The three roots as this interpreter imports them: the tree's folders under an editable
    # install, site-packages/jeeves_mcp (holding supervisor/ and cli/) under a wheel.
    return [Path(module.__file__).parent for module in (jeeves_mcp, jeeves_mcp.supervisor, jeeves_mcp.cli)
            if module.__file__]


def test_every_distribution_the_package_imports_is_a_dependency() -> None:
    assert undeclared(imported_top_levels(package_folders()), declared()) == []


def test_every_distribution_the_tests_import_is_in_the_test_extra() -> None:
    found = imported_top_levels([Path(__file__).resolve().parent])
    assert undeclared(found, declared() | declared("test")) == []


# Dependencies that ship a program rather than a module, and what runs it.
PROGRAMS = {"ripgrep": "rg, run by the grep tool (jeeves_mcp/tools/grep.py find_rg) and bash commands "
            "(tools/bash.py bundled_rg_dir)"}


def test_every_dependency_is_imported() -> None:
    """The other way round: a dependency nothing imports is one to drop (or to say why)."""
    providers = metadata.packages_distributions()
    used = {canonical(dist) for name in third_party(imported_top_levels(package_folders()))
            for dist in providers.get(name, [])}
    assert declared() - used == set(PROGRAMS)


def test_the_version_has_one_source() -> None:
    assert metadata.version("jeeves-mcp") == jeeves_mcp.__version__
