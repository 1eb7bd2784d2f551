"""Block path of the size-stratified coverage of intervals (:mod:`uqcore.regression.intervals`).

- ``size_stratified_coverage`` (``strata="quantile"``): the strata of each resample are
  k = ⌈bins · F(width)⌉ − 1 with F the resample's weighted distribution function of the widths,
  read from the cumulative weights along the fixed (stable) order of the widths at the last
  row of each tie; the covered and total weight of each stratum are differences of cumulative
  sums along that order (exact integers for integer weights): one compiled pass per resample
  (:func:`uqcore._jit.strata_worst_coverage`, the weights from the cumulative weights'
  differences), else numpy's b × N passes. MAPIE's equal-count strata
  (``strata="mapie"``) split the resample's distinct rows, not its weights, and are evaluated
  resample by resample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import argsort_host
from uqcore._compiled import kernels
from uqcore.stability.blocks.context import (
    CUM_TYPES,
    BlockContext,
    BlockEvaluator,
    FloatArray,
    Keys,
)
from uqcore.stability.blocks.intervals import interval_arrays

__all__ = ["size_stratified"]


def size_stratified(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """The worst stratum's coverage of each resample (``strata="quantile"``)."""
    if params.get("strata", "quantile") != "quantile":
        return None
    bins = params.get("bins", 3)
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins <= 1000:
        return None
    got = interval_arrays(keys, params.get("level"))
    if got is None:
        return None
    lo, hi, y = got
    width = hi - lo
    order = keys.get("ssc:order", lambda: argsort_host(width, stable=True).astype(np.int64))
    ws = width[order]
    n = ws.shape[0]
    covered = ((y >= lo) & (y <= hi))[order].astype(np.float64)
    # the last sorted position of each position's tie (F is read there: ties share a stratum)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ws[1:], ws[:-1], out=new[1:])
    last = np.append(np.flatnonzero(new[1:]), n - 1)[np.cumsum(new) - 1]
    strata = np.arange(bins)

    def run(ctx: BlockContext) -> FloatArray:
        cum = ctx.cum("ssc", lambda: order)
        jit = kernels()
        if jit is not None and cum.flags.c_contiguous and cum.dtype in CUM_TYPES:
            out = np.empty(ctx.rows)
            jit.strata_worst_coverage(cum, covered, last, bins, out, np.empty(bins), np.empty(bins))
            return out
        w = ctx.by("ssc", lambda: order)
        total = cum[:, -1].astype(np.float64)
        f = cum[:, last] / total[:, None]
        f *= bins
        f -= 1e-9
        codes = np.clip(np.ceil(f).astype(np.int64) - 1, 0, bins - 1)
        del f
        hit = np.cumsum(w * covered, axis=1)
        out = np.empty(ctx.rows)
        for i in range(ctx.rows):
            ends = np.searchsorted(codes[i], strata, side="right") - 1
            tw = np.where(ends >= 0, cum[i, ends], 0).astype(np.float64)
            hw = np.where(ends >= 0, hit[i, ends], 0.0)
            tw = np.diff(tw, prepend=0.0)
            hw = np.diff(hw, prepend=0.0)
            keep = tw > 0
            out[i] = float(np.min(hw[keep] / tw[keep]))
        return out

    return run
