"""Block paths of the metrics that are functions of weighted row sums of fixed per-row columns
(one matrix product per block, shared with the engine's mean-type metrics).

- ``pearson``, ``corr``, ``r2``: weighted moments of centred per-row columns (no ties in the
  variables, so "constant" means fewer than two rows of positive weight).
- ``coverage``, ``mean_width``: the weighted mean of the per-row indicator or width at the
  chosen level (:func:`uqcore.regression.scoring.interval_value_terms`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from uqcore._backend import to_numpy
from uqcore._scaling import exponent, max_abs, rescaled
from uqcore._validation import UQValidationError
from uqcore.regression.scoring import interval_value_terms
from uqcore.stability.blocks.context import BlockContext, BlockEvaluator, FloatArray, Keys, has_ties

__all__ = ["interval", "moments"]


def moments(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """Pearson correlation (``pearson``: the uncertainty and |e|; ``corr``: the point
    prediction and y) or R² (``r2``) from weighted moments."""
    a, b = _COLUMNS[name](keys)
    if name == "pearson":  # the uncertainty and |e|: from their orders
        if keys.ties("u", keys.u) or keys.ties("e", keys.e):
            return None
    elif has_ties(a) or (name != "r2" and has_ties(b)):
        return None
    # the moments square the columns: divided by a power of two (exactly) where their squares
    # would leave float64's range; R² and the correlations do not change (R² needs one factor)
    if name == "r2":
        e_a = e_b = exponent(max_abs(np, a), max_abs(np, b))
    else:
        e_a, e_b = exponent(max_abs(np, a)), exponent(max_abs(np, b))
    a, b = rescaled(a, e_a), rescaled(b, e_b)
    if name == "r2":
        yc = a - np.mean(a)
        x = [yc, yc * yc, b * b]  # y − ȳ, (y − ȳ)², residual²
    else:
        ac, bc = a - np.mean(a), b - np.mean(b)
        x = [ac, bc, ac * ac, bc * bc, ac * bc]
    cols = [keys.column(f"{name}:{j}", partial(_identity, v)) for j, v in enumerate(x)]

    def run(ctx: BlockContext) -> FloatArray:
        t = ctx.total
        mom = [ctx.sums(c) / t for c in cols]
        ok = ctx.positive_rows >= 2
        if name == "r2":
            ss_tot = mom[1] - mom[0] ** 2
            ok &= ss_tot > 0
            return np.where(ok, 1.0 - mom[2] / np.where(ok, ss_tot, 1.0), np.nan)
        va = mom[2] - mom[0] ** 2
        vb = mom[3] - mom[1] ** 2
        cov = mom[4] - mom[0] * mom[1]
        ok &= (va > 0) & (vb > 0)
        r = np.where(ok, cov / np.sqrt(np.where(ok, va * vb, 1.0)), np.nan)
        return np.clip(r, -1.0, 1.0)

    return run


def interval(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """``coverage`` and ``mean_width``: the weighted mean of the terms at the chosen level."""
    try:
        got = interval_value_terms(
            keys.batch, params.get("levels"), params.get("level"), name == "coverage"
        )
    except UQValidationError:
        return None
    if got is None:
        return None  # undefined: the per-resample path reports it
    terms, factor = got
    col = keys.column(f"{name}:{params.get('level')}:{params.get('levels')}", lambda: terms)

    def run(ctx: BlockContext) -> FloatArray:
        out: FloatArray = factor * (ctx.sums(col) / ctx.total)
        return out

    return run


def _identity(v: FloatArray) -> FloatArray:
    return v


def _point_y(keys: Keys) -> tuple[FloatArray, FloatArray]:
    b = keys.batch
    return np.asarray(to_numpy(b.point), np.float64), np.asarray(to_numpy(b.y), np.float64)


def _y_residual(keys: Keys) -> tuple[FloatArray, FloatArray]:
    b = keys.batch
    return np.asarray(to_numpy(b.y), np.float64), np.asarray(to_numpy(b.residual), np.float64)


def _u_e(keys: Keys) -> tuple[FloatArray, FloatArray]:
    return keys.u(), keys.e()


#: The two per-row variables of each metric of :func:`moments`.
_COLUMNS: dict[str, Callable[[Keys], tuple[FloatArray, FloatArray]]] = {
    "pearson": _u_e,
    "corr": _point_y,
    "r2": _y_residual,
}
