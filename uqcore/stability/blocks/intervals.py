"""Block paths of the interval metrics that are functions of weighted row sums
(:mod:`uqcore.regression.intervals`):

- ``cwc``: PICP and the mean width as row sums of the fixed coverage indicator and width
  columns; the range R of each resample's targets from the first and last rows of positive
  weight along the fixed order of y (:func:`uqcore._jit.kept_ends`: a walk from each end,
  with the compiled kernels; else the block's weights gathered along the order);
- ``coverage_pvalue``: the covered count and the total count as row sums (integer weights),
  then the exact binomial test of each resample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import argsort_host, to_numpy
from uqcore._binomial import binomtest_pvalue
from uqcore._compiled import kernels
from uqcore._validation import UQValidationError
from uqcore.regression._intervals import interval_at, nominal_level
from uqcore.stability.blocks.context import BlockContext, BlockEvaluator, FloatArray, Keys

__all__ = ["interval_arrays", "interval_sums"]


def interval_arrays(keys: Keys, level: Any) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """(lower, upper, y) of the batch's intervals at ``level`` (float64, host): None where the
    level is invalid or the metric is undefined on every resample (the per-resample path
    then says why)."""
    try:
        got = interval_at(keys.batch, level)
    except UQValidationError:
        return None
    if got is None:
        return None
    lo, hi = (np.asarray(to_numpy(v), dtype=np.float64) for v in got[:2])
    return lo, hi, np.asarray(to_numpy(keys.batch.y), dtype=np.float64)


def interval_sums(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """``cwc`` and ``coverage_pvalue`` of each resample."""
    batch = keys.batch
    level = params.get("level")
    got = interval_arrays(keys, level)
    if got is None:
        return None
    lo, hi, y = got
    try:
        c = nominal_level(batch.prediction, level)
    except UQValidationError:
        return None
    covered = ((y >= lo) & (y <= hi)).astype(np.float64)
    col_cov = keys.column(f"intervals:covered:{c!r}", lambda: covered)
    if name == "coverage_pvalue":
        return _pvalue(col_cov, c)
    width = hi - lo
    col_width = keys.column(f"intervals:width:{c!r}", lambda: width)
    eta = float(params.get("eta", 50.0))
    order = keys.get("skill:order_y", lambda: argsort_host(y, stable=True).astype(np.int64))
    y_sorted = keys.get("intervals:y_sorted", lambda: y[order])

    def run(ctx: BlockContext) -> FloatArray:
        total = ctx.total
        jit = kernels()
        if jit is not None:  # a walk from each end of the order (about 1.6 steps each)
            ends = np.empty((ctx.rows, 2), dtype=np.int64)
            jit.kept_ends(ctx.compiled_weights(), order, ends)
            first, last = ends[:, 0], ends[:, 1]
        else:  # the weights gathered along the order, and their first and last positive
            positive = ctx.by("y", lambda: order) > 0
            first = np.argmax(positive, axis=1)
            last = positive.shape[1] - 1 - np.argmax(positive[:, ::-1], axis=1)
        r = y_sorted[last] - y_sorted[first]
        ok = r > 0
        picp = ctx.sums(col_cov) / total
        mean_width = ctx.sums(col_width) / total
        pinaw = mean_width / np.where(ok, r, 1.0)
        with np.errstate(over="ignore"):
            penalty = np.where(picp < c, np.exp(-eta * (picp - c)), 0.0)
        return np.where(ok, pinaw * (1.0 + penalty), np.nan)

    return run


def _pvalue(col_cov: int, c: float) -> BlockEvaluator:
    def run(ctx: BlockContext) -> FloatArray:
        # counts rounded as the implementation rounds them (integer weights are exact)
        k = np.rint(ctx.sums(col_cov)).astype(np.int64)
        n = np.rint(ctx.total).astype(np.int64)
        out = np.empty(ctx.rows)
        for i in range(ctx.rows):
            p = binomtest_pvalue(int(k[i]), int(n[i]), c)
            out[i] = min(max(p, 0.0), 1.0) if math.isfinite(p) else np.nan
        return out

    return run
