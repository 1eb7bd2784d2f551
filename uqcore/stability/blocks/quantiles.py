"""Block paths of the metrics that are weighted quantiles: MdAE, MeRCI and n-MeRCI.

- ``mdae``, ``merci``, ``nmerci`` (``variant="paper"``, every σ > 0): weighted quantiles
  (:func:`~uqcore._stats.weighted_quantile`) from searches in the cumulative weights along the
  |e| and |e|/σ orders (along |e| those the rank metrics' kernel writes where they run first
  in the block; :class:`~uqcore.stability.blocks.search.Local` where they were not computed);
  mean σ and MAE as weighted row sums.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import argsort_host
from uqcore.stability.blocks.context import BlockContext, BlockEvaluator, FloatArray, Keys
from uqcore.stability.blocks.search import check_method, weighted_quantiles

__all__ = ["mdae", "merci"]


def mdae(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """The median absolute error: the weighted median along the |e| order."""
    method = params.get("method")
    if not check_method(method):
        return None

    def run(ctx: BlockContext) -> FloatArray:
        return weighted_quantiles(ctx, "e", keys.order_e, keys.e_by_e(), 0.5, str(method))

    return run


def merci(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """MeRCI and n-MeRCI (``variant="paper"``): λ^α, the weighted α-quantile of |e|/σ, from the
    cumulative weights along the ratio order; Q_α(|e|) along the |e| order (both as the
    implementation's :func:`~uqcore._stats.weighted_quantile`); mean σ and MAE as weighted row
    sums. Needs every σ > 0 (finite ratios)."""
    alpha, method = params.get("alpha"), params.get("quantile_method")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        return None
    if not check_method(method):
        return None
    if name == "nmerci" and params.get("variant") != "paper":
        return None
    u, e = keys.u(), keys.e()
    if not bool(np.all(u > 0)):
        return None
    order_r = keys.get("order_ratio", lambda: argsort_host(e / u, stable=True).astype(np.int64))
    r_sorted = keys.get("ratio_sorted", lambda: (e / u)[order_r])
    col_u = keys.column("u", lambda: u)
    col_e = keys.column("e", lambda: e)
    a, how = float(alpha), str(method)

    def run(ctx: BlockContext) -> FloatArray:
        total = ctx.total
        lam = ctx.get(
            f"merci:lambda:{a}:{how}",
            lambda: weighted_quantiles(ctx, "ratio", lambda: order_r, r_sorted, a, how),
        )
        mean_u = ctx.sums(col_u) / total
        if name == "merci":
            out: FloatArray = lam * mean_u
            return out
        q = weighted_quantiles(ctx, "e", keys.order_e, keys.e_by_e(), a, how)
        mae = ctx.sums(col_e) / total
        denom = q - mae
        ok = denom > 0
        return np.where(ok, (lam * mean_u - mae) / np.where(ok, denom, 1.0), np.nan)

    return run
