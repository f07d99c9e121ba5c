"""What pruning saved, per tool: counted by each child, collected by the supervisor."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from jeeves_mcp.pruning.contract import estimate_tokens


@dataclass
class ToolCounts:
    calls: int = 0
    raw_bytes: int = 0
    raw_tokens: int = 0
    returned_bytes: int = 0
    returned_tokens: int = 0
    prunings: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "raw_bytes": self.raw_bytes,
            "raw_tokens": self.raw_tokens,
            "returned_bytes": self.returned_bytes,
            "returned_tokens": self.returned_tokens,
            "prunings": self.prunings,
            "fallbacks": dict(self.fallbacks),
        }


class SavingsStats:
    def __init__(self) -> None:
        self.tools: dict[str, ToolCounts] = {}

    def record(
        self, tool: str, raw: str, returned: str, *, pruned: bool = False, fallback: str | None = None
    ) -> None:
        counts = self.tools.setdefault(tool, ToolCounts())
        counts.calls += 1
        counts.raw_bytes += len(raw.encode("utf-8", "surrogatepass"))
        counts.raw_tokens += estimate_tokens(raw)
        counts.returned_bytes += len(returned.encode("utf-8", "surrogatepass"))
        counts.returned_tokens += estimate_tokens(returned)
        counts.prunings += int(pruned)
        if fallback:
            counts.fallbacks[fallback] += 1

    def to_json(self) -> dict[str, Any]:
        return {"tools": {name: counts.to_json() for name, counts in sorted(self.tools.items())}}
