"""Pieces that the models of several resources share: the strict base of request models, the
JSON-value check, the constrained types, the prediction kinds and the error answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.kinds import KIND_FIELDS
from service.models import MetricName, StrictModel, check_json_value

__all__ = [
    "KINDS",
    "BenchmarkId",
    "ErrorDetail",
    "ErrorResponse",
    "EstimatorName",
    "Estimators",
    "Groups",
    "Kind",
    "Labels",
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
