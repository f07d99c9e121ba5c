"""Package discovery with the folder mapping DESIGN.md fixes: `supervisor/` and `cli/` are
installed as `jeeves_mcp.supervisor` and `jeeves_mcp.cli`. Everything else is in pyproject.toml.

find_packages skips a folder without `__init__.py`, while an editable install still imports it
(as a namespace package): the wheel would lack it and only the installed product would fail.
So a folder of modules that is not a package stops the build instead.

An editable install of a mapped layout goes through setuptools' meta path finder, which always
ends with an "Editable installation." note that folders in the working directory named like the
package may take precedence during imports. Here they cannot mislead: `jeeves_mcp/` in the tree
is the package's own source, and `supervisor/` and `cli/` are only ever imported as
`jeeves_mcp.supervisor` and `jeeves_mcp.cli` (tests/test_build.py). So that note is not shown
on every `make dev`; any other warning still is."""

import warnings
from pathlib import Path

from setuptools import find_packages, setup

try:
    from setuptools.warnings import InformationOnly
except ImportError:  # an older setuptools, without the note
    pass
else:
    warnings.filterwarnings("ignore", message=r"Editable installation\.", category=InformationOnly)

MAPPED = {"jeeves_mcp.supervisor": "supervisor", "jeeves_mcp.cli": "cli"}
ROOTS = ("jeeves_mcp", *MAPPED.values())


def folders_not_packages() -> list[str]:
    here = Path(__file__).resolve().parent
    return sorted(
        str(folder.relative_to(here))
        for root in ROOTS
        for folder in [here / root, *(here / root).rglob("*")]
        if folder.is_dir() and any(folder.glob("*.py")) and not (folder / "__init__.py").exists()
    )


missing = folders_not_packages()
if missing:
    raise SystemExit(f"setup.py: these folders hold modules but no __init__.py, so the wheel would "
                     f"leave them out: {', '.join(missing)}")

packages = find_packages(include=["jeeves_mcp", "jeeves_mcp.*"])
package_dir = {}
for name, folder in MAPPED.items():
    package_dir[name] = folder
    packages.append(name)
    for sub in find_packages(where=folder):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

# The systemd units (systemd/, their one copy) ride in the wheel as jeeves_mcp/systemd/, data only
# (pyproject.toml's package-data), for `jeeves-mcp systemd-units` where there is no source tree.
packages.append("jeeves_mcp.systemd")
package_dir["jeeves_mcp.systemd"] = "systemd"

setup(packages=packages, package_dir=package_dir)
