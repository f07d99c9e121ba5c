"""`make dev` on a fresh clone builds the editable wheel quietly: no setuptools warning about
folders named like the package (the tree's folders are the package's own sources)."""

from __future__ import annotations

import shutil
import subprocess
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests._tree import SOURCE_TREE

PACKAGING = ("pyproject.toml", "setup.py", "README.md", "LICENSE")
SOURCES = ("jeeves_mcp", "supervisor", "cli", "systemd")


def build_editable(tmp_path: Path) -> tuple[Path, str]:
    """An editable wheel of a copy of the tree, built as pip builds it (PEP 517, isolated
    build environment); returns it and everything the build printed."""
    output: list[str] = []
    return build(tmp_path, "editable", output), "\n".join(output)


def build(tmp_path: Path, distribution: str, output: list[str] | None = None) -> Path:
    """A wheel ("wheel" or "editable") of a copy of the tree, as pip builds it; what the
    build printed goes to `output`."""
    from build import ProjectBuilder
    from build.env import DefaultIsolatedEnv

    project = tmp_path / "project"
    project.mkdir()
    for name in PACKAGING:
        shutil.copy2(SOURCE_TREE / name, project / name)
    for name in SOURCES:
        shutil.copytree(SOURCE_TREE / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
    output = [] if output is None else output

    def runner(cmd: Sequence[str], cwd: str | None = None, extra_environ: Mapping[str, str] | None = None) -> None:
        import os

        done = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(extra_environ or {})},
                              capture_output=True, text=True, check=False)
        output.append(done.stdout + done.stderr)
        if done.returncode:
            raise RuntimeError(f"{cmd[:3]} failed: {output[-1][-3000:]}")

    # build re-emits the backend's warnings here (BuildBackendWarning): record them.
    with warnings.catch_warnings(record=True) as caught, DefaultIsolatedEnv() as env:
        warnings.simplefilter("always")
        builder = ProjectBuilder.from_isolated_env(env, project, runner=runner)
        env.install(builder.build_system_requires)
        env.install(builder.get_requires_for_build(distribution))
        wheel = Path(builder.build(distribution, tmp_path / "dist"))
    output.extend(str(warning.message) for warning in caught)
    return wheel


def test_the_editable_build_prints_no_warning_and_maps_every_package(tmp_path: Path) -> None:
    wheel, printed = build_editable(tmp_path)
    assert "same name as your package" not in printed, printed[-3000:]
    assert "Editable installation." not in printed, printed[-3000:]
    with zipfile.ZipFile(wheel) as archive:
        finder = next(name for name in archive.namelist() if name.endswith("finder.py"))
        mapping = archive.read(finder).decode()
    project = tmp_path / "project"
    for package, folder in [("jeeves_mcp", "jeeves_mcp"), ("jeeves_mcp.supervisor", "supervisor"),
                            ("jeeves_mcp.cli", "cli")]:
        assert f"{package!r}: {str(project / folder)!r}" in mapping, mapping[:2000]


def test_no_module_imports_supervisor_or_cli_as_a_top_level_package() -> None:
    """Why the editable install's note about same-named folders is left out (setup.py): the
    tree's `supervisor/` and `cli/` are reached only as jeeves_mcp.supervisor and jeeves_mcp.cli."""
    import ast

    found = []
    for folder in ("jeeves_mcp", "supervisor", "cli", "tests", "bench"):
        for path in (SOURCE_TREE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                found += [f"{path.relative_to(SOURCE_TREE)}: {name}" for name in names
                          if name.split(".")[0] in ("supervisor", "cli")]
    assert found == []
