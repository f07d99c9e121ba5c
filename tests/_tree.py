"""The source tree, for the tests that check its files (README, .ci/run, systemd units, Makefile).

`make test-installed` runs a copy of tests/ from a temporary directory against the installed
wheel and names the tree in JEEVES_SOURCE_TREE; code is never imported from there.
"""

from __future__ import annotations

import os
from pathlib import Path

SOURCE_TREE = Path(os.environ.get("JEEVES_SOURCE_TREE") or Path(__file__).resolve().parent.parent)
