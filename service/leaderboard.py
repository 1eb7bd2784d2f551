"""The sort key of leaderboards, shared by the worker (which writes boards) and the API.

A metric's *badness* is lower-is-better whatever its direction: the value for "lower",
−value for "higher", and |value − best| for "target" metrics (the best value under the
submission's parameters, :func:`uqcore.stability.compare.target_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uqcore import registry
from uqcore.stability.compare import target_value

__all__ = ["badness"]


def badness(metric: str, value: float, params: Mapping[str, Any] | None = None) -> float:
    """The sort key of ``value`` for ``metric`` (lower is better).

    >>> badness("mae", 0.5), badness("r2", 0.5)
    (0.5, -0.5)
    """
    spec = registry.get(metric)
    if spec.direction == "lower":
        return float(value)
    if spec.direction == "higher":
        return -float(value)
    return abs(float(value) - target_value(spec, dict(params or {})))
