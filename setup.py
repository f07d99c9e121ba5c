"""Package discovery with the folder mapping DESIGN.md fixes: `supervisor/` and `cli/` are
installed as `jeeves_mcp.supervisor` and `jeeves_mcp.cli`. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

MAPPED = {"jeeves_mcp.supervisor": "supervisor", "jeeves_mcp.cli": "cli"}

packages = find_packages(include=["jeeves_mcp", "jeeves_mcp.*"])
package_dir = {}
for name, folder in MAPPED.items():
    package_dir[name] = folder
    packages.append(name)
    for sub in find_packages(where=folder):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
