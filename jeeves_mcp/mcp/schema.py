"""A validator for the JSON Schema subset our tool schemas use.

The tool schemas are hand-written to keep `tools/list` small (seed 003), so
they are also the single source of truth for validation: no second model to
drift from them. Supported keywords: type, properties, required,
additionalProperties (false), enum, minimum, maximum, minLength, items,
maxItems, minItems.
"""

from __future__ import annotations

import math
from typing import Any

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


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Return the list of violations, each as `field: problem`; empty when valid."""
    errors: list[str] = []
    where = path or "arguments"
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_TYPES[name](value) for name in names):
            return [f"{where}: expected {' or '.join(names)}, got {_describe(value)}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: must be one of {', '.join(map(str, schema['enum']))}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: must be <= {schema['maximum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        errors.append(f"{where}: must not be empty")
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", math.inf):
            errors.append(f"{where}: at most {schema['maxItems']} items")
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: at least {schema['minItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                errors.extend(validate(item, schema["items"], f"{where}[{index}]"))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{_join(path, name)}: required")
        for name, item in value.items():
            if name in properties:
                errors.extend(validate(item, properties[name], _join(path, name)))
            elif schema.get("additionalProperties", True) is False:
                errors.append(f"{_join(path, name)}: unknown argument")
    return errors


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


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
