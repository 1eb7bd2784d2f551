"""The prediction interval an interval metric scores, and the nominal coverage it is judged at.

One rule for every metric that needs a nominal coverage c (``coverage``, ``mean_width``,
``interval_score``, ``cwc``, ``coverage_pvalue``, the skill scores, ...):

* an :class:`~uqcore.predictions.Interval` with ``level`` set: its bounds, c = its level (the
  metric's ``level`` option is ignored for it; the metric's details report ``"level": c``);
* an ``Interval`` without a level: its bounds, c = the ``level`` option;
* a distributional kind (every kind with quantiles): the central interval
  [F_i⁻¹(½ − c/2), F_i⁻¹(½ + c/2)] at c = the ``level`` option;
* a ``Quantiles`` prediction whose levels do not reach ½ ± c/2: undefined (it does not
  extrapolate), as ``coverage`` reports it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uqcore._backend import Array, to_numpy
from uqcore._validation import UQValidationError

__all__ = ["LEVEL_TOL", "interval_at", "nominal_level", "unspanned_why"]

#: Tolerance for matching a level to the levels a ``Quantiles`` prediction provides (as
#: :mod:`uqcore.regression.scoring`).
LEVEL_TOL = 1e-9


def nominal_level(prediction: Any, level: Any) -> float:
    """The nominal coverage c of ``prediction``'s intervals: an ``Interval``'s own level when
    set, else ``level`` (checked to lie in (0, 1))."""
    own = getattr(prediction, "level", None) if prediction.kind == "interval" else None
    if own is not None:
        return float(own)
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise UQValidationError(f"level must be a number in (0, 1), found {level!r}")
    c = float(level)
    if not 0.0 < c < 1.0:
        raise UQValidationError(f"level must lie in the open interval (0, 1), found {level!r}")
    return c


def unspanned_why(prediction: Any, c: float) -> str | None:
    """Why the central interval at c is undefined for ``prediction`` (``None`` when it is
    defined): only a ``Quantiles`` prediction whose levels do not reach ½ ± c/2."""
    if prediction.kind != "quantiles":
        return None
    known = to_numpy(prediction.levels)
    lo, hi = 0.5 - c / 2.0, 0.5 + c / 2.0
    if lo >= float(known[0]) - LEVEL_TOL and hi <= float(known[-1]) + LEVEL_TOL:
        return None
    return f"the quantiles prediction does not span the {c:g} central interval"


def interval_at(batch: Any, level: Any) -> tuple[Array, Array, float] | None:
    """(lower, upper, c): the intervals the metric scores and their nominal coverage c, by the
    rule of this module; ``None`` where they are undefined (:func:`unspanned_why` says why).

    >>> import numpy as np; from uqcore import predictions as P; from uqcore.batch import Batch
    >>> lo, hi, c = interval_at(Batch(P.Interval([0.0], [2.0], level=0.8), np.zeros(1)), 0.9)
    >>> float(lo[0]), float(hi[0]), c
    (0.0, 2.0, 0.8)
    >>> lo, hi, c = interval_at(Batch(P.Gaussian([0.0], [1.0]), np.zeros(1)), 0.5)
    >>> round(float(hi[0]), 6), c
    (0.67449, 0.5)
    """
    pred = batch.prediction
    c = nominal_level(pred, level)
    if pred.kind == "interval":
        return pred.lower, pred.upper, c
    if unspanned_why(pred, c) is not None:
        return None
    lv = np.asarray([0.5 - c / 2.0, 0.5 + c / 2.0])
    if pred.kind == "quantiles":
        known = to_numpy(pred.levels)
        cols = [int(np.argmin(np.abs(known - p))) for p in lv]
        if all(abs(float(known[k]) - p) <= LEVEL_TOL for k, p in zip(cols, lv, strict=True)):
            # the prediction's own quantiles, as given (no interpolation)
            return pred.values[:, cols[0]], pred.values[:, cols[1]], c
    lo, hi = pred.interval(c)
    return lo, hi, c
