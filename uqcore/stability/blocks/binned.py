"""Block paths of the metrics computed in bins of σ: ENCE and UCE.

- ``ence``, ``uce``: bins of σ (or σ²) are contiguous runs along the σ order, cut where the
  sorted key passes each bin edge; per-bin weights come from the cumulative weights at the cuts,
  per-bin Σwσ² and Σwe² from per-chunk dot products (see :func:`binned_by_sigma`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import argsort_host, to_numpy
from uqcore._scaling import exponent, max_abs, rescaled
from uqcore.stability.blocks import tuning
from uqcore.stability.blocks.context import BlockContext, BlockEvaluator, FloatArray, IntArray, Keys
from uqcore.stability.blocks.search import search_cum, search_cum_many

__all__ = ["binned_by_sigma"]


def binned_by_sigma(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """ENCE (equal-weight or equal-width bins of σ) and UCE (equal-width bins of σ²) of every
    resample.

    Along the ascending σ order the bins are contiguous runs of rows, cut where the sorted key
    passes each bin edge (``searchsorted(..., side="right")``: a bin holds the keys in
    (edge_{j−1}, edge_j], tied keys together, as in the implementation). The per-bin weights
    are differences of the cumulative weights at the cuts; Σwσ² and Σwe² per bin are sums of
    per-chunk dot products (one pass each, shared by both metrics) plus the partial chunks at
    the cuts. The edges follow the implementation:
    ENCE's are σ at the weighted lower quantiles j/K (the first row whose cumulative weight
    reaches W·j/K), or with ``binning="width"`` equally spaced between the smallest and the
    largest σ of the rows of positive weight, bins [edge_{j−1}, edge_j)
    (``searchsorted(..., side="left")``); UCE's are equally spaced between the smallest and
    the largest σ² of the rows of positive weight.
    """
    k = params.get("n_bins")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        return None
    k = int(k)
    binning = params.get("binning", "count") if name == "ence" else "count"
    if binning not in ("count", "width"):
        return None
    width = binning == "width"
    b = keys.batch
    sigma = np.asarray(to_numpy(b.std), np.float64)

    # the ranking order when the uncertainty is σ itself (shared gathers), else σ's own
    shared = "uncertainty" in b.prediction.capabilities and np.array_equal(sigma, keys.u())
    key = "u" if shared else "sigma"

    def order() -> IntArray:
        if shared:
            return keys.order_u()
        return keys.get(  # type: ignore[no-any-return]
            "order_sigma", lambda: argsort_host(sigma, stable=True).astype(np.int64)
        )

    r = np.asarray(to_numpy(b.residual), np.float64)
    # σ and e divided by 2^scale (exactly) where their squares would leave float64's range, as
    # the implementation does: the same bins, sums of squares times 4^−scale
    scale = keys.get("sigma_exponent", lambda: exponent(max_abs(np, sigma), max_abs(np, r)))
    s_sorted = keys.get("sigma_sorted", lambda: rescaled(sigma, scale)[order()])
    var_sorted = keys.get("var_sorted", lambda: s_sorted * s_sorted)
    r2_sorted = keys.get("r2_by_sigma", lambda: np.square(rescaled(r, scale))[order()])
    n = s_sorted.shape[0]

    def chunk_sums(ctx: BlockContext) -> tuple[Any, FloatArray, FloatArray]:
        """The weights along σ and, per resample, Σ wσ² and Σ we² over each full chunk of
        :data:`tuning.PREFIX_CHUNK` rows along σ (one pass each, shared by ENCE and UCE)."""

        def compute() -> tuple[Any, FloatArray, FloatArray]:
            w = ctx.by(key, order)
            size = tuning.PREFIX_CHUNK
            m = n // size
            # σ² and e² side by side per chunk (m × size × 2), and the weights as float64: one
            # stack of (1 × size)·(size × 2) products reads the weights once (two mixed-type
            # einsums read them twice, measured 1.7× slower at N = 10⁶)
            ve = keys.get(
                f"binned:ve:{size}",
                lambda: np.ascontiguousarray(
                    np.stack(
                        [
                            var_sorted[: m * size].reshape(m, size),
                            r2_sorted[: m * size].reshape(m, size),
                        ],
                        axis=-1,
                    )
                ),
            )
            wf = ctx.scratch("binned:wf", np.float64)[:, : m * size]
            np.copyto(wf, w[:, : m * size], casting="unsafe")
            sums = np.matmul(wf.reshape(ctx.rows, m, 1, size), ve[None])
            return w, sums[:, :, 0, 0].copy(), sums[:, :, 0, 1].copy()

        return ctx.get("binned:chunks", compute)  # type: ignore[no-any-return]

    def prefix_sums(ctx: BlockContext, cuts: IntArray) -> tuple[FloatArray, FloatArray]:
        """Σ_{k < c} w_k σ_k² and Σ_{k < c} w_k e_k² along σ at every cut c (rows × cuts)."""
        size = tuning.PREFIX_CHUNK
        if n < 8 * size:  # small: cumulative sums of the products, all rows at once
            w = ctx.by(key, order)
            out = []
            for tag, values in (("v", var_sorted), ("e", r2_sorted)):
                prod = np.multiply(w, values, out=ctx.scratch(f"binned:{tag}", np.float64))
                cum = np.cumsum(prod, axis=1, out=prod)
                at = np.take_along_axis(cum, np.maximum(cuts - 1, 0), axis=1)
                out.append(np.where(cuts > 0, at, 0.0))
            return out[0], out[1]
        # large: the sums of the full chunks below the cut, plus the chunk the cut is in
        w, sv, se = chunk_sums(ctx)
        cv, ce = np.cumsum(sv, axis=1), np.cumsum(se, axis=1)
        pv, pe = np.zeros(cuts.shape), np.zeros(cuts.shape)
        for i in range(ctx.rows):
            for j, c in enumerate(cuts[i].tolist()):
                full = c // size
                a = full * size
                part = w[i, a:c]
                below_v = cv[i, full - 1] if full else 0.0
                below_e = ce[i, full - 1] if full else 0.0
                pv[i, j] = below_v + float(np.einsum("i,i->", part, var_sorted[a:c]))
                pe[i, j] = below_e + float(np.einsum("i,i->", part, r2_sorted[a:c]))
        return pv, pe

    def cuts_of(cw: Any, total: float) -> IntArray:
        """[0, cuts between the bins..., N] of one resample."""
        if width:
            first = search_cum(cw, 0.0, "right")  # first positive weight
            last = search_cum(cw, float(cw[-1]), "left")
            lo, hi = float(s_sorted[first]), float(s_sorted[last])
            # One bin when every weighted σ is equal: k − 1 cuts at lo leave the bins below
            # it without weight (dropped), so each resample has k + 1 cuts.
            edges = np.linspace(lo, hi, k + 1)[1:-1] if hi > lo else np.full(k - 1, lo)
            inner = np.searchsorted(s_sorted, edges, side="left")
        elif name == "ence":
            if k > 1:
                targets = np.array([total * j / k for j in range(1, k)])
                pos = np.minimum(search_cum_many(cw, targets, "left"), n - 1)
                edges = s_sorted[pos]
            else:
                edges = np.empty(0)
            inner = np.searchsorted(s_sorted, edges, side="right")
        else:
            first = search_cum(cw, 0.0, "right")  # first positive weight
            last = search_cum(cw, float(cw[-1]), "left")
            lo, hi = float(var_sorted[first]), float(var_sorted[last])
            if hi > lo:
                edges = np.array([lo + (hi - lo) * j / k for j in range(1, k)])
            else:  # one bin, as above: the cuts at lo leave the bins above it without weight
                edges = np.full(k - 1, lo)
            inner = np.searchsorted(var_sorted, edges, side="right")
        return np.concatenate([[0], inner, [n]]).astype(np.int64)

    def run(ctx: BlockContext) -> FloatArray:
        cw = ctx.cum(key, order)
        total = ctx.total
        cuts = np.stack([cuts_of(cw[i], float(total[i])) for i in range(ctx.rows)])
        at = np.take_along_axis(cw, np.maximum(cuts - 1, 0), axis=1)
        wk = np.diff(np.where(cuts > 0, at, 0).astype(np.float64), axis=1)
        pv, pe = prefix_sums(ctx, cuts)
        vk, ek = np.diff(pv, axis=1), np.diff(pe, axis=1)
        keep = wk > 0
        if name == "uce":
            out: FloatArray = np.sum(np.where(keep, np.abs(ek - vk), 0.0), axis=1) / total
            if scale != 0:  # beyond float64's range: undefined (NaN), as the implementation
                with np.errstate(over="ignore"):
                    out = np.ldexp(out, 2 * scale)
                out[np.isinf(out)] = np.nan
            return out
        safe = np.where(keep, wk, 1.0)
        rmv = np.sqrt(np.where(keep, vk, 1.0) / safe)
        rmse = np.sqrt(np.where(keep, ek, 0.0) / safe)
        ratio = np.where(keep, np.abs(rmv - rmse) / rmv, 0.0)
        return np.asarray(np.sum(ratio, axis=1) / np.sum(keep, axis=1), dtype=np.float64)

    return run
