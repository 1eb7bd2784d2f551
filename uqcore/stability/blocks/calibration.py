"""Block paths of the calibration metrics, along the PIT order.

- ``pit``: only the scalar ``value`` (the KS statistic sup |F̂_w − t|, invariant to repeating
  rows) is resampled, so the p-value is skipped: D = max(max_k(F̂_k − s_k), s_0,
  max_k(s_{k+1} − F̂_k)) along the PIT order, searched chunk by chunk with bounds from the
  chunk totals, so that only the few chunks near the maximum are summed (:func:`ks_row`).
- ``ece``, ``rmsce``, ``calibration_error``, ``miscalibration_area`` (a CDF, ``compat=None``)
  and ``adversarial_group_calibration``: the weight of the rows with PIT ≤ each bound of the
  level grid is the cumulative PIT weight at the bound's position in the sorted PIT values
  (one ``searchsorted`` per batch; read from the chunk totals and the rows of each bound's
  chunk); the observed proportions follow as in the implementation. Adversarial group
  calibration then draws its random groups from these category totals with its own seeded
  generator (:func:`uqcore.regression.group_calibration.group_scores`), exactly as the
  implementation does on the resampled arrays — in a helper thread
  (:data:`~uqcore.stability.blocks.tuning.BACKGROUND`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.regression import calibration as cal
from uqcore.regression import group_calibration as gc
from uqcore.stability.blocks import tuning
from uqcore.stability.blocks.background import Deferred, deferred
from uqcore.stability.blocks.context import (
    BlockContext,
    BlockEvaluator,
    FloatArray,
    IntArray,
    Keys,
)

__all__ = ["adversarial", "calibration", "ks_row", "pit", "tally_counts"]


def ks_row(w: Any, sums: Any, s: FloatArray, total: float) -> float:
    """W·D for one resample: the largest of C_k − W s_k and W s_k − C_{k−1} (C_{−1} = 0; the
    latter includes the term W s_0) over the sorted PIT values s, from the weights w in their
    order and their sums over chunks of :data:`tuning.CHUNK` rows, without the full cumulative
    sum.

    Per chunk [a, b) C is non-decreasing and s ascending, so C_k − W s_k ≤ C_{b−1} − W s_a and
    W s_k − C_{k−1} ≤ W s_{b−1} − C_{a−1}, while the values at k = b − 1 and k = a are known
    from the chunk sums alone. Only the chunks whose bound exceeds the best known value can
    hold the maximum; they are summed exactly (the empirical CDF stays within about √N of
    W s, so few chunks come near the maximum).
    """
    n, size = s.shape[0], tuning.CHUNK
    m = sums.shape[0]
    ends = np.cumsum(sums)  # C at the last row of each chunk
    starts = ends - sums  # C before the first row
    first = np.arange(m) * size
    last = np.minimum(first + size, n) - 1
    s_first, s_last = total * s[first], total * s[last]
    upper = (ends - s_first, s_last - starts)  # bounds of C_k − W s_k and W s_k − C_{k−1}
    best = max(float(np.max(ends - s_last)), float(np.max(s_first - starts)))  # values there
    for sign, bound in zip((1, -1), upper, strict=True):
        cand = np.flatnonzero(bound > best)
        if cand.shape[0] == 0:
            continue
        rows = cand[:, None] * size + np.arange(size)[None, :]
        inside = rows < n
        rows = np.minimum(rows, n - 1)
        wc = np.where(inside, w[rows], 0)
        c = starts[cand][:, None] + np.cumsum(wc, axis=1, dtype=sums.dtype)  # C_k
        ts = total * s[rows]
        v = c - ts if sign > 0 else ts - (c - wc)  # the latter: W s_k − C_{k−1}
        best = max(best, float(np.max(np.where(inside, v, -math.inf))))
    return best


def pit(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """The KS statistic of the PIT values (the ``value`` of ``pit``)."""
    s = keys.pit_sorted()

    def run(ctx: BlockContext) -> FloatArray:
        # D = max_k max(F̂_k − s_k, s_k − F̂_{k−1}) = W·D / W along the PIT order
        w = ctx.by("pit", keys.order_pit)
        sums = ctx.chunk_sums("pit", keys.order_pit)
        total = ctx.total
        out = np.array([ks_row(w[i], sums[i], s, float(total[i])) for i in range(ctx.rows)])
        return np.clip(out / ctx.total, 0.0, 1.0)

    return run


def tally_counts(
    keys: Keys, params: Mapping[str, Any], extend: bool = False
) -> Callable[[BlockContext], tuple[FloatArray, FloatArray]] | None:
    """(counts b × M, expected M) of the calibration tally of every resample, read off the
    cumulative PIT weights; None where the implementation does not count PIT values."""
    if params.get("compat") is not None or "cdf" not in keys.batch.prediction.capabilities:
        return None
    prop_type = params.get("prop_type")
    if prop_type not in ("interval", "quantile"):
        return None
    try:
        lv = cal.level_grid(params.get("levels"), None)
    except UQValidationError:
        return None  # the per-resample path reports it
    if extend:
        lv = np.unique(np.concatenate([[0.0], lv, [1.0]]))
    bounds = cal.pit_bounds(lv)
    digest = hashlib.sha1(bounds.tobytes()).hexdigest()
    grid = hashlib.sha1(lv.tobytes()).hexdigest()
    pos = keys.get(
        f"tally:pos:{digest}",
        lambda: np.searchsorted(keys.pit_sorted(), bounds, side="right").astype(np.int64),
    )

    def counts(ctx: BlockContext) -> tuple[FloatArray, FloatArray]:
        def compute() -> FloatArray:
            at = ctx.get(f"tally:at:{digest}", lambda: ctx.cum_at("pit", keys.order_pit, pos))
            out: FloatArray = cal.pit_counts_at(bounds, at, prop_type, lv)
            return out

        return ctx.get(f"tally:{grid}:{prop_type}", compute), lv

    return counts


def calibration(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """ece, rmsce, calibration_error and miscalibration_area from the resampled tally."""
    level_weights = params.get("level_weights", "uniform")
    if level_weights not in ("uniform", "mean"):
        return None
    tally = tally_counts(keys, params, extend=name == "miscalibration_area")
    if tally is None:
        return None

    def run(ctx: BlockContext) -> FloatArray:
        counts, lv = tally(ctx)
        obs = counts / ctx.total[:, None]
        d = obs - lv[None, :]
        if name == "ece":
            out: FloatArray = np.mean(np.abs(d), axis=1)
        elif name == "rmsce":
            out = np.sqrt(np.mean(d * d, axis=1))
        elif name == "calibration_error":
            out = np.sum(d * d, axis=1)
            if level_weights == "mean":
                out = out / d.shape[1]
        else:
            out = cal.areas_between(lv, d)
        return out

    return run


def adversarial(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """Adversarial group calibration: random groups drawn from the resampled tally."""
    tally = tally_counts(keys, params)
    if tally is None:
        return None
    try:
        opts = {
            "n_bins": gc.check_int(params.get("num_group_bins"), "num_group_bins", 1),
            "trials": gc.check_int(params.get("num_trials"), "num_trials", 1),
            "draws": gc.check_int(params.get("num_group_draws"), "num_group_draws", 1),
        }
    except UQValidationError:
        return None
    seed, cali_type = params.get("seed"), params.get("cali_type")
    if cali_type not in ("mean_abs", "root_mean_sq"):
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        return None

    def value(cats: IntArray, lv: FloatArray) -> float:
        return float(
            gc.group_scores(
                cats,
                lv,
                cali_type=cali_type,
                prop_type=params["prop_type"],
                draw_with_replacement=bool(params.get("draw_with_replacement")),
                seed=int(seed),
                **opts,
            )["value"]
        )

    def run(ctx: BlockContext) -> FloatArray | Deferred | None:
        if not ctx.integer:
            return None  # the implementation refuses non-integer weights
        counts, lv = tally(ctx)
        cats = [gc.category_totals(counts[i], float(ctx.total[i])) for i in range(ctx.rows)]
        # the random groups (≈ 7 ms per resample, without the GIL);
        # NaN (undefined) where the resample has more rows than groups can be drawn from
        with_replacement = bool(params.get("draw_with_replacement"))
        return deferred(
            [
                partial(value, c, lv)
                if gc.too_many_rows(float(ctx.total[i]), with_replacement) is None
                else partial(float, "nan")
                for i, c in enumerate(cats)
            ]
        )

    return run
