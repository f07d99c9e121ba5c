"""Pruning: seed 001's contract around an engine, and what serves it.

- `contract`: what an engine is asked and answers (`Selection`, `PruneOptions`), the invariants;
- `pruner`: `Pruner` checks a selection, renders markers, stores originals, fails open;
  `LocalEngine` runs the built-in `engine`; `make_engine` picks one from the config;
- `swe_client`: an external SWE-Pruner service as an engine; `swe_server`: our engine behind
  SWE-Pruner's own API; `swe_models`: the wire shapes (pydantic) both of them validate with;
- `render`: rows, markers and the response budget; `recovery`: the store `recover_text` reads;
  `counters`: what pruning saved, per tool.
"""

from .contract import (
    SOURCE_TYPES,
    Engine,
    EngineError,
    PruneOptions,
    Selection,
    estimate_tokens,
    protected_lines,
)
from .pruner import LocalEngine, PruneOutcome, Pruner, make_engine

__all__ = [
    "SOURCE_TYPES",
    "Engine",
    "EngineError",
    "LocalEngine",
    "PruneOptions",
    "PruneOutcome",
    "Pruner",
    "Selection",
    "estimate_tokens",
    "make_engine",
    "protected_lines",
]
