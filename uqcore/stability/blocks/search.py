"""Searches in the cumulative weights of a block along a fixed order, and the weighted
quantiles read from them (:func:`~uqcore._stats.weighted_quantile`, resample by resample):
from the full cumulative sums where the block has them, else from a window summed from the
nearer end of the order (:class:`Local`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from uqcore.stability.blocks import tuning
from uqcore.stability.blocks.context import BlockContext, FloatArray, IntArray

__all__ = [
    "Local",
    "Search",
    "check_method",
    "quantile_row",
    "search_cum",
    "search_cum_many",
    "weighted_quantiles",
]


def _int_keys(dtype: Any, targets: Any, side: str) -> Any:
    """Integer keys equivalent to float ``targets`` for a search in integer cumulative weights:
    C ≥ t ⇔ C ≥ ⌈t⌉ and C > t ⇔ C > ⌊t⌋ (clipped to the type's range)."""
    keys = np.ceil(targets) if side == "left" else np.floor(targets)
    info = _INT_RANGE.get(np.dtype(dtype))
    if info is None:
        info = _INT_RANGE.setdefault(
            np.dtype(dtype), (float(np.iinfo(dtype).min), float(np.iinfo(dtype).max))
        )
    return np.clip(keys, *info).astype(dtype)


_INT_RANGE: dict[Any, tuple[float, float]] = {}


def search_cum(cum: Any, target: float, side: str) -> int:
    """``searchsorted(cum, target, side)`` for one row of cumulative weights; an integer row is
    searched with an integer key (a float key would convert the whole row)."""
    if cum.dtype.kind == "f":
        return int(cum.searchsorted(target, side=side))
    return int(cum.searchsorted(_int_keys(cum.dtype, target, side), side=side))


def search_cum_many(cum: Any, targets: FloatArray, side: str) -> IntArray:
    """:func:`search_cum` for several targets."""
    if cum.dtype.kind == "f":
        return cum.searchsorted(targets, side=side)  # type: ignore[no-any-return]
    return cum.searchsorted(_int_keys(cum.dtype, targets, side), side=side)  # type: ignore[no-any-return]


Search = Callable[[float, str], int]


class Local:
    """Searches in the cumulative weights C_k of one resample along an order without computing
    them all (integer weights): the weights from the nearer end of the order up to a little
    past the expected position k ≈ t·N/W are gathered and summed (from the far end,
    C_k = W − Σ_{j>k} w_j, exact in integers), and the window is doubled until it decides the
    search. A quantile at level α costs about min(α, 1 − α)·N gathered rows instead of a
    gather and a latency-bound cumulative sum of all N; every result equals ``searchsorted``
    on the full cumulative sum."""

    def __init__(self, w: Any, order: IntArray, total: float) -> None:
        self.w = w  # the resample's weights in row order
        self.order = order
        self.total = total
        n = order.shape[0]
        # > 16 standard deviations of C_k for bootstrap counts
        self.margin = tuning.LOCAL_MARGIN_FACTOR * math.isqrt(n) + tuning.LOCAL_MARGIN
        self.start = self.stop = 0
        self.cum: Any = np.zeros(0, dtype=np.int64)  # C_k for k in [start, stop)
        self.before = 0  # C_{start − 1}

    def _window(self, start: int, stop: int) -> None:
        part = np.take(self.w, self.order[start:stop]).astype(np.int64)
        if start == 0:
            self.cum = np.cumsum(part)
            self.before = 0
        else:  # a tail: C_k = W − Σ_{j > k} w_j
            after = np.cumsum(part[::-1])[::-1]  # Σ_{j ≥ k}
            self.before = round(self.total) - int(after[0])
            self.cum = self.before + np.cumsum(part)
        self.start, self.stop = start, stop

    def _decides(self, target: float, side: str) -> bool:
        n = self.order.shape[0]
        if self.stop <= self.start:
            return False

        def holds(c: float) -> bool:
            return c >= target if side == "left" else c > target

        last_ok = self.stop == n or holds(float(self.cum[-1]))
        first_ok = self.start == 0 or not holds(float(self.before))
        return last_ok and first_ok

    def search(self, target: float, side: str) -> int:
        """``searchsorted`` in the resample's cumulative weights (:func:`search_cum`)."""
        n = self.order.shape[0]
        if not self._decides(target, side):
            guess = min(max(int(target / self.total * n) if self.total > 0 else 0, 0), n)
            size = self.margin
            while True:
                if guess <= n // 2:
                    self._window(0, min(n, guess + size))
                else:
                    self._window(max(0, guess - size), n)
                if self._decides(target, side):
                    break
                size *= 2
        return self.start + search_cum(self.cum, target, side)


def quantile_row(values: FloatArray, search: Search, total: float, q: float, method: str) -> float:
    """:func:`~uqcore._stats.weighted_quantile` of the sorted ``values`` of one resample, from
    searches in its cumulative weights along their order (the same searches, so the same
    value); ``total`` is the last cumulative weight."""
    n = values.shape[0]
    if method == "inverted_cdf":
        if q == 0:
            return float(values[search(0.0, "right")])  # the first row of positive weight
        k = search(q * total, "left")
        return float(values[min(k, n - 1)])
    h = q * (total - 1.0)
    if h <= 0:
        return float(values[search(0.0, "right")])
    lo_t = float(int(h))
    frac = h - lo_t
    k0 = min(search(lo_t, "right"), n - 1)
    k1 = min(search(min(lo_t + 1.0, total - 1.0), "right"), n - 1)
    a, b = float(values[k0]), float(values[k1])
    return a + frac * (b - a)


def weighted_quantiles(
    ctx: BlockContext,
    name: str,
    order: Callable[[], IntArray],
    values: FloatArray,
    q: float,
    method: str,
) -> FloatArray:
    """The weighted quantile of ``values`` (sorted by ``order``) for every resample of the
    block: from the cumulative weights if the block has them already, else (integer weights)
    through :class:`Local`."""
    out = np.empty(ctx.rows)
    cached = ctx.cached_cum(name)
    if cached is None and ctx.integer:
        small, idx = ctx.small(), order()
        for i in range(ctx.rows):
            total = float(ctx.total[i])
            local = Local(small[i], idx, total)
            out[i] = quantile_row(values, local.search, total, q, method)
        return out
    cum = ctx.cum(name, order) if cached is None else cached
    for i in range(ctx.rows):
        row = cum[i]

        def search(t: float, side: str, row: Any = row) -> int:
            return search_cum(row, t, side)

        out[i] = quantile_row(values, search, float(row[-1]), q, method)
    return out


def check_method(method: Any) -> bool:
    """Whether the block paths compute weighted quantiles by ``method``."""
    return method in ("linear", "inverted_cdf")
