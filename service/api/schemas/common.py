"""Pieces that the models of several resources share: the strict base of request models, the
JSON-value check, the constrained types, the prediction kinds and the error answer."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.kinds import KIND_FIELDS

#: The prediction kinds, in the order of KIND_FIELDS.
KINDS: tuple[str, ...] = tuple(KIND_FIELDS)
if TYPE_CHECKING:
    Kind = str
else:
    # Built from service.kinds, where the kinds are named once; their order there is the order
    # of the OpenAPI enums.
    Kind = Literal[KINDS]

Visibility = Literal["private", "public"]
BenchmarkId = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")]
MetricName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9_]+$")]

Vector = Annotated[list[float], Field(min_length=1)]
Matrix = Annotated[list[Annotated[list[float], Field(min_length=1)]], Field(min_length=1)]
Tensor = Annotated[list[Matrix], Field(min_length=1)]

#: An estimator a benchmark ranks by: a built-in aggregator of uqcore or the name of an
#: estimate that submissions carry (``prediction.estimates`` / ``estimate:<name>``).
EstimatorName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
Estimators = Annotated[list[EstimatorName], Field(min_length=1, max_length=50)]


class StrictModel(BaseModel):
    """Base of request models: no unknown fields, no strings as numbers, no NaN/inf."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _first_non_finite(value: Any, path: str) -> str | None:
    """Path of the first NaN/inf float inside a JSON value, or ``None``."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _first_non_finite(v, f"{path}.{k}")
            if bad:
                return bad
    if isinstance(value, list):
        for i, v in enumerate(value):
            bad = _first_non_finite(v, f"{path}[{i}]")
            if bad:
                return bad
    return None


def check_json_value(value: Any, what: str, limit: int) -> Any:
    """``value`` as it is; a ValueError when it holds NaN or ±inf or its JSON is longer than
    ``limit`` bytes (``what`` names it in the message)."""
    bad = _first_non_finite(value, what)
    if bad:
        raise ValueError(f"{bad} must be a finite number (NaN and infinity are not JSON)")
    size = len(json.dumps(value, separators=(",", ":")))
    if size > limit:
        raise ValueError(f"{what} must be at most {limit} bytes as JSON; found {size}")
    return value


class ErrorDetail(BaseModel):
    """What went wrong."""

    code: str = Field(description="Stable machine-readable code, e.g. validation_error.")
    message: str = Field(description="What was wrong and what was expected.")
    field: str | None = Field(description="The offending field (dotted path), if one.")
    index: int | None = Field(description="The first offending row, if one.")


class ErrorResponse(BaseModel):
    """Every error answer has this shape."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "validation_error",
                        "message": "std must be > 0; std[17] = -0.3",
                        "field": "prediction.std",
                        "index": 17,
                    }
                }
            ]
        }
    )

    error: ErrorDetail
