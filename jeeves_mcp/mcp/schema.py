"""A validator for the JSON Schema subset our tool schemas use.

The tool schemas are hand-written to keep `tools/list` small (seed 003), so
they are also the single source of truth for validation: no second model to
drift from them. Supported keywords: type, properties, required,
additionalProperties (false), enum, minimum, maximum, minLength, items,
maxItems, minItems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jeeves_mcp import _log

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and math.isfinite(v) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
    "null": lambda v: v is None,
}


MAX_REPORTED = 10  # violations listed; a request can hold millions, each one costs a line
MAX_NAME_CHARS = 100  # of an argument name quoted in a violation: the client chose it

_Where = tuple[str | int, ...]


@dataclass
class Violations:
    """The first `limit` violations found, each as `field: problem`, and how many there were."""

    shown: list[str] = field(default_factory=list)
    total: int = 0
    limit: int = MAX_REPORTED

    def add(self, where: _Where, problem: str) -> None:
        self.total += 1
        if len(self.shown) < self.limit:
            self.shown.append(f"{_name(where)}: {problem}")

    @property
    def omitted(self) -> int:
        return self.total - len(self.shown)

    def __bool__(self) -> bool:
        return self.total > 0

    def __str__(self) -> str:
        more = f" (and {self.omitted} more)" if self.omitted else ""
        return "; ".join(self.shown) + more


def validate(value: Any, schema: dict[str, Any], limit: int = MAX_REPORTED) -> Violations:
    """What in `value` breaks `schema`: false when nothing does."""
    found = Violations(limit=limit)
    _check(value, schema, (), found)
    return found


def _check(value: Any, schema: dict[str, Any], where: _Where, found: Violations) -> None:
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_TYPES[name](value) for name in names):
            found.add(where, f"expected {' or '.join(names)}, got {_describe(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        found.add(where, f"must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            found.add(where, f"must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            found.add(where, f"must be <= {schema['maximum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        found.add(where, "must not be empty")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", math.inf):
            found.add(where, f"at most {schema['maxItems']} items")
        if len(value) < schema.get("minItems", 0):
            found.add(where, f"at least {schema['minItems']} items")
        if "items" in schema:
            _check_items(value, schema["items"], where, found)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                found.add((*where, name), "required")
        for name, item in value.items():
            if name in properties:
                _check(item, properties[name], (*where, name), found)
            elif schema.get("additionalProperties", True) is False:
                found.add((*where, name), "unknown argument")


def _check_items(items: list[Any], schema: dict[str, Any], where: _Where, found: Violations) -> None:
    expected = schema.get("type")
    if schema.keys() != {"type"} or not isinstance(expected, str):
        for index, item in enumerate(items):
            _check(item, schema, (*where, index), found)
        return
    # A list of strings (grep's paths) can hold millions: checked without a call per item.
    fits = _TYPES[expected]
    wrong = (index for index, item in enumerate(items) if not fits(item))
    for index in wrong:
        if len(found.shown) >= found.limit:
            found.total += 1 + sum(1 for _ in wrong)
            return
        found.add((*where, index), f"expected {expected}, got {_describe(items[index])}")


def _name(where: _Where) -> str:
    """`paths[3]`, `options.timeout_ms`; `arguments` for the arguments themselves."""
    name = ""
    for part in where:
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            part = _log.quoted(part, MAX_NAME_CHARS)
            name = f"{name}.{part}" if name else part
    return name if name and not name.startswith("[") else "arguments" + name


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
