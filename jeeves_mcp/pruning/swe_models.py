"""SWE-Pruner's wire shapes as pydantic models: the one definition that both the client
(`swe_client`, checking a service's answers) and the compatible server (`swe_server`,
checking requests and building answers) use.

The field names, defaults and JSON types are SWE-Pruner's own `PruneRequest` and
`PruneResponse` (see `jeeves_mcp.pruning.swe_client` for the protocol and where it comes
from). Scalars are strict, as the hand-written checks these replace were: `true` is not a
number and `"1"` is not an integer. Unknown fields are ignored both ways, as by SWE-Pruner.
Each field's `description` is what `problem` tells the other side when the value is wrong.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

__all__ = [
    "DEFAULT_CHUNK_OVERLAP_TOKENS",
    "DEFAULT_THRESHOLD",
    "HealthAnswer",
    "PruneRequest",
    "PruneResponse",
    "parse",
    "problem",
]

DEFAULT_THRESHOLD = 0.5  # SWE-Pruner's PruneRequest defaults
DEFAULT_CHUNK_OVERLAP_TOKENS = 50

# A JSON number: an int or a float, never a bool, never NaN or infinite.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PruneRequest(_Wire):
    """`POST /prune` body."""

    query: StrictStr = Field(description="a string")
    code: StrictStr = Field(description="a string")
    threshold: Number = Field(DEFAULT_THRESHOLD, ge=0, le=1, description="a number between 0 and 1")
    always_keep_first_frags: StrictBool = Field(False, description="a boolean")
    chunk_overlap_tokens: StrictInt = Field(
        DEFAULT_CHUNK_OVERLAP_TOKENS, ge=0, description="a non-negative integer"
    )


class PruneResponse(_Wire):
    """`POST /prune` answer. `kept_frags` are 1-based line numbers of `code.splitlines()`;
    whether they are in range depends on the request, so the caller checks that."""

    score: Number = Field(description="a finite number")
    pruned_code: StrictStr = Field(description="a string")
    token_scores: list[tuple[StrictStr, Number]] = Field(description="a list of [token, score] pairs")
    kept_frags: list[StrictInt] = Field(description="a list of integers")
    origin_token_cnt: StrictInt = Field(description="an integer")
    left_token_cnt: StrictInt = Field(description="an integer")
    model_input_token_cnt: StrictInt = Field(description="an integer")
    error_msg: StrictStr | None = Field(None, description="a string or null")


class HealthAnswer(_Wire):
    """`GET /health` answer (other fields are kept by the client, not checked)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    status: StrictStr = Field(description="a string")
    model_loaded: StrictBool = Field(description="a boolean")


def problem(model: type[BaseModel], exc: ValidationError) -> str:
    """One line for the first thing wrong: "missing field 'code'", "'threshold' must be a
    number between 0 and 1"; the field's description says what it must be."""
    error = exc.errors(include_url=False)[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    info = model.model_fields.get(field)
    if info is None:
        return str(error["msg"])
    if error["type"] == "missing":
        return f"missing field {field!r}"
    return f"{field!r} must be {info.description}"


W = TypeVar("W", bound=BaseModel)


def parse(model: type[W], value: Any) -> W:
    """`model.model_validate(value)`, its errors as `ValueError(problem(...))`."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise ValueError(problem(model, exc)) from None
