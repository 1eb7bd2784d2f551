"""The pydantic building blocks shared by the API's models and the analyses contract: the strict
base of request models, the JSON-value check, and metric names.

Below :mod:`service.api` (the worker imports :mod:`service.analyses`, which is built on these)
so that nothing outside the API imports the API package.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

#: A metric name as the registry spells them (lower case, digits, underscores).
MetricName = Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[a-z0-9_]+$")]


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
