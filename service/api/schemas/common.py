"""Pieces that the models of several resources share: the strict base of request models, the
JSON-value check, the constrained types, the prediction kinds and the error answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from service.kinds import KIND_FIELDS
from service.models import MetricName, StrictModel, check_json_value

__all__ = [
    "KINDS",
    "BenchmarkId",
    "BoolMatrix",
    "ErrorDetail",
    "ErrorResponse",
    "EstimatorName",
    "Estimators",
    "Groups",
    "Kind",
    "Labels",
    "Level",
    "Matrix",
    "MetricName",
    "StrictModel",
    "Tensor",
    "Vector",
    "Visibility",
    "check_json_value",
]

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

Vector = Annotated[list[float], Field(min_length=1)]
Matrix = Annotated[list[Annotated[list[float], Field(min_length=1)]], Field(min_length=1)]
Tensor = Annotated[list[Matrix], Field(min_length=1)]


def _bool_entry(value: Any) -> Any:
    """A JSON boolean as it is, an integer 0 or 1 as the boolean it stands for (uqcore reads
    0/1 as booleans too, and NPZ bodies may hold them); anything else is refused."""
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    raise ValueError("must be a boolean: true or false (or 1 or 0)")


#: One boolean: JSON true/false, or 1/0.
BoolEntry = Annotated[
    bool,
    BeforeValidator(_bool_entry),
    WithJsonSchema({"anyOf": [{"type": "boolean"}, {"type": "integer", "enum": [0, 1]}]}),
]
BoolMatrix = Annotated[list[Annotated[list[BoolEntry], Field(min_length=1)]], Field(min_length=1)]
#: A nominal coverage level 1 − α: one number strictly between 0 and 1.
Level = Annotated[float, Field(gt=0, lt=1)]

#: Bounds of the integer arrays, checked before anything is converted to a fixed-size integer
#: (a JSON integer has no size: 10**30 must be a 422, not an overflow). A class label indexes
#: one of C classes (n_classes is at most 1_000_000); a group label is any int64.
MAX_LABEL = 2**31 - 1
MIN_GROUP, MAX_GROUP = -(2**63), 2**63 - 1
Labels = Annotated[list[Annotated[int, Field(ge=0, le=MAX_LABEL)]], Field(min_length=1)]
Groups = Annotated[list[Annotated[int, Field(ge=MIN_GROUP, le=MAX_GROUP)]], Field(min_length=1)]

#: An estimator a benchmark ranks by: a built-in aggregator of uqcore or the name of an
#: estimate that submissions carry (``prediction.estimates`` / ``estimate:<name>``).
EstimatorName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")]
Estimators = Annotated[list[EstimatorName], Field(min_length=1, max_length=50)]


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


class PlotLink(BaseModel):
    """A plot of a document: GET ``url`` for the PNG (``format=svg``: SVG)."""

    name: str = Field(description="The plot's name (uqcore.plots.PLOTS).")
    title: str = Field(description="What it shows.")
    url: str = Field(description="Relative URL of the PNG.")
