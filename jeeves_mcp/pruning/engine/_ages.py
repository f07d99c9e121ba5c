"""How many commits ago a file changed, as a prior for the files a search or a listing names.

The file a fix lands in is far more often one the last commits changed than any other file a
search names: on 650 search tasks the newest commit's files held it 5 to 7 times their share,
files no commit of the last 300 changed a tenth of theirs. The tools tell the engine each file's
age (pruning.history.file_ages, one `git log` per HEAD).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ._git import short_path
from ._matches import LISTED_DIRECTORY, is_path_list, listed_line, tree_paths
from ._units import Layout

__all__ = [
    "LISTED_WEIGHT", "RECENT_DECAY", "RECENT_WEIGHT", "listed_file_ages", "listed_paths", "name_directories",
    "with_file_ages",
]

# A file the last commits changed is the one asked about more often (pruning.history.file_ages):
# its chance is weighed by 1 + RECENT_WEIGHT x RECENT_DECAY ** its age in commits. Chosen on
# search-fresh3 and fresh4 (weights 4 to 256, decays 0.5 to 0.9: recall 0.718 -> 0.790 at 64 and
# 0.7, level reduction); the likelihood ratio measured there, the newest commit's files against
# files no commit of the last 300 changed, is about 80.
RECENT_WEIGHT = 64.0
RECENT_DECAY = 0.7
# A file listing's line (`find`, `git ls-files`, `grep -rl`) is a log record, scored by its words:
# a path's age adds LISTED_WEIGHT x RECENT_DECAY ** age to its relevance beside the question (as
# an error line's does, W_PRIOR). Chosen on listfind-fresh3 and fresh4 (1 / 3 / 5 / 10: recall
# 0.347 -> 0.627 / 0.710 / 0.720 / 0.707 at level reduction; a decay of 0.85 0.767 for 2 to 3
# points of reduction).
LISTED_WEIGHT = 5.0


def listed_paths(lines: list[str]) -> tuple[list[str | None], bool] | None:
    """The path each line of a file listing names (None: a line that names none), and whether
    the listing is `tree`'s; None when `lines` is no listing."""
    if (tree := tree_paths(lines)) is not None:
        return tree, True
    if not is_path_list(lines):
        return None
    paths: list[str | None] = []
    where = ""  # the directory `ls -R` names before its entries (`./src:`)
    for i, line in enumerate(lines):
        if line.endswith(":") and (directory := ls_heading(lines, i)) is not None:
            where = directory
            paths.append(None)
        elif not listed_line(line):  # past the lines the listing was told by, anything (`find …; make`)
            paths.append(None)
        else:
            paths.append(os.path.join(where, line) if where else line)
    return paths, False


def ls_heading(lines: list[str], i: int) -> str | None:
    """The directory `ls -R` names over its entries on line `i` (`./src:`; `./Team Area:`, a
    line ending in a colon, first or after a blank line), or None."""
    line = lines[i]
    if (directory := LISTED_DIRECTORY.fullmatch(line)) is not None:
        return directory.group(1)
    if len(line) > 1 and line.endswith(":") and (i == 0 or not lines[i - 1]):
        return line[:-1]
    return None


def name_directories(layout: Layout, lines: list[str]) -> None:
    """Each record of a file listing named by the directory of its first path (`src/pkg/`), so
    that a marker says which directories the paths it hides are in; under `ls -R`'s `./dir:`
    heading, a record brings the heading along (a name shown without it is no path)."""
    listed = layout.listed or []
    heading = [-1] * len(lines)
    if not layout.tree:
        last = -1
        for i, line in enumerate(lines):
            if listed[i] is None and line.endswith(":") and ls_heading(lines, i) is not None:
                last = i
            heading[i] = last
    labels: dict[str, str] = {}  # a directory's label, made once
    for unit in layout.units:
        path = next((p for p in listed[unit.start : unit.end + 1] if p), None)
        if path is not None:
            where, _, name = path.removeprefix("./").rpartition("/")
            if (label := labels.get(where)) is None:
                label = labels[where] = short_path(f"{where}/") if where else ""
            unit.label = label or short_path(name)
        if 0 <= heading[unit.start] < unit.start:
            unit.heads.append((heading[unit.start], heading[unit.start]))


def listed_file_ages(layout: Layout, paths: Sequence[str | None], ages: Callable[[str], int | None]) -> None:
    """The records of a file listing whose lines name `paths` made worth more, the more lately
    their file changed (`ages`)."""
    worth = [0.0 if path is None or (age := ages(path)) is None else LISTED_WEIGHT * RECENT_DECAY**age
             for path in paths]
    for unit in layout.units:
        unit.prior = max(unit.prior, *worth[unit.start : unit.end + 1])


def with_file_ages(chances: list[float], layout: Layout, ages: Callable[[str], int | None] | None) -> list[float]:
    """The unit `chances` of search output weighed by how lately their files changed (`ages`);
    when the question matches no row (every chance 0), the files with an age by it alone."""
    if ages is None or layout.paths is None:
        return chances
    paths = layout.paths
    age_of: dict[str, int | None] = {}
    for unit in layout.units:
        if (path := paths[unit.start]) is not None and path not in age_of:
            age_of[path] = ages(path)
    if all(age is None for age in age_of.values()):
        return chances
    matched = any(chances)
    weights = []
    for chance, unit in zip(chances, layout.units, strict=True):
        path = paths[unit.start]
        age = None if path is None else age_of[path]
        if age is None:
            weights.append(chance)
        else:
            weights.append(chance * (1 + RECENT_WEIGHT * RECENT_DECAY**age) if matched else RECENT_DECAY**age)
    total = sum(weights)
    return [w / total for w in weights]
