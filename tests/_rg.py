"""ripgrep is optional: `grep` falls back to its built-in search without it."""

from __future__ import annotations

import shutil

import pytest

RG_MISSING = (
    "ripgrep (rg) is not on PATH: the grep tool uses its built-in search, which the "
    "[builtin] cases test; install ripgrep to run the [rg] ones"
)
needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason=RG_MISSING)
