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


#: The integers a JSON value may hold: those of a signed 64-bit integer. JSON itself has no
#: bound, but NumPy, Redis clients and the readers of our answers (JavaScript, orjson) do, and a
#: float option given 10**400 would overflow where uqcore converts it.
MIN_JSON_INT, MAX_JSON_INT = -(2**63), 2**63 - 1


def _first_bad_number(value: Any, path: str) -> str | None:
    """What is wrong with the first NaN/inf float or out-of-range integer inside a JSON value
    (its path and the rule), or ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if MIN_JSON_INT <= value <= MAX_JSON_INT:
            return None
        return (
            f"{path} must be an integer in [-2**63, 2**63 - 1]; found a "
            f"{value.bit_length()}-bit integer"
        )
    if isinstance(value, float):
        if math.isfinite(value):
            return None
        return f"{path} must be a finite number (NaN and infinity are not JSON)"
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _first_bad_number(v, f"{path}.{k}")
            if bad:
                return bad
    if isinstance(value, list):
        for i, v in enumerate(value):
            bad = _first_bad_number(v, f"{path}[{i}]")
            if bad:
                return bad
    return None


def check_json_value(value: Any, what: str, limit: int) -> Any:
    """``value`` as it is; a ValueError when it holds NaN, ±inf or an integer beyond 64 bits,
    or its JSON is longer than ``limit`` bytes (``what`` names it in the message)."""
    bad = _first_bad_number(value, what)
    if bad:
        raise ValueError(bad)
    size = len(json.dumps(value, separators=(",", ":")))
    if size > limit:
        raise ValueError(f"{what} must be at most {limit} bytes as JSON; found {size}")
    return value
