"""Block paths of the regression skill scores (:mod:`uqcore.regression.skill`).

Each is 1 − S/S_ref: the score S of the prediction is a weighted mean of its per-row terms
(one column of the block's matrix product, the base metric's own ``mean_terms``), and the
climatological reference S_ref is a function of the resample's weighted empirical
distribution of y:

- ``crps_skill``, ``check_score_skill``, ``interval_score_skill``: Σ_j g_j φ(F_j, G_j) over
  the gaps g_j of the sorted targets, with F_j the resample's cumulative weight fraction up to
  gap j (from the cumulative weights along the fixed order of y) and G_j = 1 − F_j;
- ``nll_skill``: the Gaussian fitted to the resample's targets, from two weighted row sums
  (the targets centred on their full-sample mean, so that the variance loses no digits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import argsort_host, to_numpy
from uqcore._compiled import kernels
from uqcore._validation import UQValidationError
from uqcore.registry import NO_TERMS, get
from uqcore.regression import scoring
from uqcore.regression._intervals import interval_at
from uqcore.stability.blocks.context import (
    CUM_TYPES,
    BlockContext,
    BlockEvaluator,
    FloatArray,
    IntArray,
    Keys,
)

__all__ = ["skill"]


class Phi:
    """φ(F, G) evaluated on the block's b × (N − 1) fractions: F·G (the CRPS, no levels), or
    the pinball sum Σ_k c_k min((1 − τ_k)F, τ_k G) = G·below[k] + F·above[k] with k the number
    of levels τ below F (as the implementation evaluates it)."""

    def __init__(self, taus: FloatArray | None = None, coefs: FloatArray | None = None) -> None:
        self.crps = taus is None
        if taus is None or coefs is None:
            self.taus = self.below = self.above = np.zeros(1)
            return
        order = np.argsort(taus)
        t, c = taus[order], coefs[order]
        self.taus = np.ascontiguousarray(t, dtype=np.float64)
        self.below = np.concatenate([[0.0], np.cumsum(c * t)])
        self.above = np.concatenate([np.cumsum((c * (1.0 - t))[::-1])[::-1], [0.0]])

    def __call__(self, f: FloatArray, g: FloatArray) -> FloatArray:
        if self.crps:
            return f * g
        k = np.searchsorted(self.taus, f, side="left")
        out: FloatArray = g * self.below[k] + f * self.above[k]
        return out

    def sums(self, ctx: BlockContext, order: IntArray, gaps: FloatArray) -> FloatArray:
        """Σ_j gaps_j φ(F_j, G_j) per resample of the block, F_j its cumulative weight
        fraction along the targets' order up to gap j and G_j = 1 − F_j (computed as
        (total − cum) / total): one compiled pass per resample
        (:func:`uqcore._jit.climatology_sums`), else numpy's b × (N − 1) temporaries and one
        matrix product (the two agree to rounding)."""
        total = ctx.total
        cum = ctx.cum("y", lambda: order)
        jit = kernels()
        if jit is not None and cum.flags.c_contiguous and cum.dtype in CUM_TYPES:
            out = np.empty(cum.shape[0])
            jit.climatology_sums(
                cum,
                np.ascontiguousarray(total, dtype=np.float64),
                self.taus,
                self.below,
                self.above,
                gaps,
                self.crps,
                out,
            )
            return out
        part = cum[:, :-1]
        f = part / total[:, None]
        g = (total[:, None] - part) / total[:, None]
        ref: FloatArray = self(f, g) @ gaps
        return ref


#: φ of the CRPS: F·G.
_CRPS = Phi()


def _pinball_phi(taus: FloatArray, coefs: FloatArray) -> Phi:
    """φ(F, G) = Σ_k c_k min((1 − τ_k)F, τ_k G), as the implementation evaluates it."""
    return Phi(taus, coefs)


def _terms(keys: Keys, name: str, params: Mapping[str, Any]) -> FloatArray | None:
    """The prediction's per-row score terms (None where the base metric has none here)."""
    batch = keys.batch
    base = {
        "crps_skill": "crps",
        "check_score_skill": "check_score",
        "interval_score_skill": "interval_score",
        "nll_skill": "nll",
    }[name]
    spec = get(base, "regression")
    opts = {k: v for k, v in params.items() if k in spec.defaults}
    if spec.mean_terms is None or spec.finalize is not None:
        return None
    terms = spec.mean_terms(batch, **opts)
    if terms is NO_TERMS or np.shape(terms) != (batch.n,):
        return None
    return np.asarray(to_numpy(terms), dtype=np.float64)


def _reference(keys: Keys, name: str, params: Mapping[str, Any]) -> Phi | None:
    batch = keys.batch
    if name == "crps_skill":
        return _CRPS
    if name == "check_score_skill":
        levels, _own = scoring._check_grid(batch, params.get("levels"))
        factor = 1.0 / levels.shape[0] if params.get("scaled", True) else 1.0
        return _pinball_phi(levels, np.full(levels.shape[0], factor))
    grid = scoring._interval_grid(batch, params.get("levels"))
    if grid is None:
        return None
    alphas = grid[2]
    factor = 1.0 / alphas.shape[0] if params.get("scaled", True) else 1.0
    coef = factor * 2.0 / alphas
    return _pinball_phi(np.concatenate([alphas / 2.0, 1.0 - alphas / 2.0]), np.tile(coef, 2))


def _interval_terms(keys: Keys, params: Mapping[str, Any]) -> tuple[FloatArray, Phi] | None:
    """An ``Interval`` prediction's interval-score terms at its level and the reference's φ."""
    got = interval_at(keys.batch, params.get("level", 0.9))
    if got is None:
        return None
    lower, upper, c = got
    alpha = 1.0 - c
    lo, hi = (np.asarray(to_numpy(v), dtype=np.float64) for v in (lower, upper))
    y = np.asarray(to_numpy(keys.batch.y), dtype=np.float64)
    pen = np.clip(lo - y, 0.0, None) + np.clip(y - hi, 0.0, None)
    terms = (hi - lo) + (2.0 / alpha) * pen
    coef = np.array([2.0 / alpha, 2.0 / alpha])
    return terms, _pinball_phi(np.array([alpha / 2.0, 1.0 - alpha / 2.0]), coef)


def skill(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """1 − S/S_ref per resample; NaN where S_ref = 0 (constant targets: undefined)."""
    batch = keys.batch
    phi: Phi | None
    try:
        if name == "interval_score_skill" and batch.prediction.kind == "interval":
            got = _interval_terms(keys, params)
            if got is None:
                return None
            terms, phi = got
        else:
            found = _terms(keys, name, params)
            if found is None:
                return None
            terms = found
            phi = None if name == "nll_skill" else _reference(keys, name, params)
            if phi is None and name != "nll_skill":
                return None
    except UQValidationError:
        return None  # undefined or refused: the per-resample path says why
    if not bool(np.all(np.isfinite(terms))):
        return None
    col = keys.column(f"skill:{name}:{sorted(params.items())!r}", lambda: terms)
    y = np.asarray(to_numpy(batch.y), dtype=np.float64)
    order = keys.get("skill:order_y", lambda: argsort_host(y, stable=True).astype(np.int64))
    gaps = keys.get("skill:gaps", lambda: np.diff(y[order]))
    if name == "nll_skill":
        return _nll(keys, col, y, order, gaps)
    assert phi is not None

    def run(ctx: BlockContext) -> FloatArray:
        total = ctx.total
        ref = phi.sums(ctx, order, gaps)
        score = ctx.sums(col) / total
        ok = ref > 0.0
        return np.where(ok, 1.0 - score / np.where(ok, ref, 1.0), np.nan)

    return run


def _spread(ctx: BlockContext, order: IntArray, gaps: FloatArray) -> FloatArray:
    """Σ_j g_j F_j G_j per resample: 0 exactly where the resample's targets are constant."""
    return _CRPS.sums(ctx, order, gaps)


def _nll(
    keys: Keys, col: int, y: FloatArray, order: IntArray, gaps: FloatArray
) -> BlockEvaluator | None:
    m = float(np.max(np.abs(y)))
    if m == 0.0:
        return None
    u = y / m
    uc = u - float(np.mean(u))
    c1 = keys.column("skill:y_centred", lambda: uc)
    c2 = keys.column("skill:y_centred_sq", lambda: uc * uc)
    const = 0.5 * math.log(2.0 * math.pi) + math.log(m) + 0.5

    def run(ctx: BlockContext) -> FloatArray:
        total = ctx.total
        mean = ctx.sums(c1) / total
        var = ctx.sums(c2) / total - mean * mean
        ok = (var > 0.0) & (_spread(ctx, order, gaps) > 0.0)
        ref = const + 0.5 * np.log(np.where(ok, var, 1.0))
        nll = ctx.sums(col) / total
        return np.where(ok, 1.0 - np.exp(nll - ref), np.nan)

    return run
