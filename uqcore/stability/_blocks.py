"""Whole blocks of resamples at once for the order-based metrics (numpy batches).

A block of b dense resamples is a weight matrix W (b × N). The metrics that rank or sort the
rows need, per resample, only cumulative sums of the weights along orders of the rows that do
not depend on the weights (the uncertainty order, the |error| order, the PIT order). These are
computed once per batch; per block, W is gathered once into each order and cumulatively summed
along the rows of the matrix, and every metric below reads the shared matrices. The cost is
O(b·N) per block (a few passes over W), against O(b·N) plus per-call overhead, the digamma
function and repeated gathers when each resample goes through the metric's implementation.

Each evaluator reproduces its metric's implementation exactly (the stability tests check this
to 1e-10 against the metric on the explicitly resampled arrays) under conditions stated in its
``prepare`` function; when they do not hold (ties in a key, options other than the defaults,
non-integer weights where integer ones are needed, a non-numpy backend) the metric is
evaluated resample by resample through its implementation, as before.

- ``spearman``: weighted midranks are C_k − w_k/2 along each key's order (no ties in either
  key); ρ is the weighted Pearson correlation of the two rank vectors, both centred at their
  weighted mean Σw/2.
- ``ause``/``aurg`` (``error="mae"``, ``grid="exact"``): the closed-form sum of the exact
  sparsification curve, block by block along the ascending key: a row of weight m with
  remaining error S and remaining weight R (both including the row) contributes
  m·e + (S − R·e)·(H_R − H_{R−m}) (H the harmonic numbers, from one table; = S/R for m = 1),
  which is the implementation's digamma form for integer weights. No ties in the uncertainty.
- ``pit``: only the scalar ``value`` (the KS statistic sup |F̂_w − t|, invariant to repeating
  rows) is needed for resampling, so the p-value (an O(N) special-function evaluation per
  resample) is skipped: D = max(max_k(F̂_k − s_k), s_0, max_k(s_{k+1} − F̂_k)) along the PIT
  order.
- ``pearson``, ``corr``, ``r2``: weighted moments of centred per-row columns, one matrix
  product per block (no ties in the variables, so "constant" means fewer than two rows of
  positive weight).
- ``mdae``: the weighted median of the sorted |e| with the block's weights in that order.
- ``merci``, ``nmerci`` (``variant="paper"``, every σ > 0): the weighted quantiles of |e|/σ
  and |e| from the block's weights in those fixed orders.
- ``ence``, ``uce``: bins of σ (or σ²) are contiguous runs along the σ order; per-bin sums are
  differences of cumulative sums at the bin cuts (see :func:`_binned_by_sigma`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from uqcore._backend import to_numpy
from uqcore._stats import weighted_quantile
from uqcore.batch import Batch

__all__ = ["UNDEFINED", "BlockContext", "BlockEvaluator", "Keys", "context", "prepare"]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]


def _has_ties(values: FloatArray) -> bool:
    s = np.sort(values)
    return bool(s.shape[0] > 1 and np.any(s[1:] == s[:-1]))


class Keys:
    """The weight-independent orders and arrays of one batch (computed once, shared)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self._cache: dict[str, Any] = {}

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # the same cached argsorts the metric implementations use (batch.order keys)
    def order_u(self) -> IntArray:
        b = self.batch
        return self.get(  # type: ignore[no-any-return]
            "order_u",
            lambda: np.ascontiguousarray(
                to_numpy(b.order("uncertainty", lambda: b.uncertainty, descending=True))[::-1]
            ),
        )

    def order_e(self) -> IntArray:
        b = self.batch
        return self.get(  # type: ignore[no-any-return]
            "order_e", lambda: to_numpy(b.order("abs_error", lambda: b.abs_error))
        )

    def order_pit(self) -> IntArray:
        b = self.batch
        return self.get("order_pit", lambda: to_numpy(b.order("pit", lambda: b.pit)))  # type: ignore[no-any-return]

    def u(self) -> FloatArray:
        return self.get("u", lambda: np.asarray(to_numpy(self.batch.uncertainty), np.float64))  # type: ignore[no-any-return]

    def e(self) -> FloatArray:
        return self.get("e", lambda: np.asarray(to_numpy(self.batch.abs_error), np.float64))  # type: ignore[no-any-return]

    def scratch(self, tag: str, shape: tuple[int, ...], dtype: Any) -> Any:
        """An output array reused by every block of this shape: a cumulative sum written into
        a fresh array was measured ~10× slower than into a reused one."""
        key = f"scratch:{tag}:{shape}:{np.dtype(dtype).str}"
        return self.get(key, lambda: np.empty(shape, dtype=dtype))

    def ties(self, name: str, values: Callable[[], FloatArray]) -> bool:
        return self.get(f"ties:{name}", lambda: _has_ties(values()))  # type: ignore[no-any-return]


class BlockContext:
    """One block's weight matrix W (b × N) and the matrices derived from it, computed lazily and
    shared by every metric of the block."""

    def __init__(self, keys: Keys, w: FloatArray) -> None:
        self.keys = keys
        self.w = w
        self._cache: dict[str, Any] = {}

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def total(self) -> FloatArray:
        return self.get("total", lambda: np.sum(self.w, axis=1))  # type: ignore[no-any-return]

    @property
    def positive_rows(self) -> IntArray:
        return self.get("positive", lambda: np.count_nonzero(self.w, axis=1))  # type: ignore[no-any-return]

    @property
    def integer(self) -> bool:
        """Whether every weight is an integer (bootstrap counts times integer base weights)."""
        return self.get("integer", lambda: bool(np.all(self.w == np.floor(self.w))))  # type: ignore[no-any-return]

    def _small(self) -> Any:
        """W as the narrowest integer type that holds it (gathers move fewer bytes), or W."""

        def compute() -> Any:
            if not self.integer:
                return self.w
            top = float(np.max(self.w)) if self.w.size else 0.0
            dtype = np.uint8 if top < 2**8 else np.int32 if top < 2**31 else np.int64
            return self.w.astype(dtype)

        return self.get("small", compute)

    def by(self, name: str, order: Callable[[], IntArray]) -> Any:
        """W with its columns in a fixed order (one gather per block and order); integer
        weights stay in a narrow integer type."""
        return self.get(f"by:{name}", lambda: np.take(self._small(), order(), axis=1))

    def by_float(self, name: str, order: Callable[[], IntArray]) -> FloatArray:
        """:meth:`by` as float64."""
        return self.get(  # type: ignore[no-any-return]
            f"byf:{name}", lambda: np.asarray(self.by(name, order), dtype=np.float64)
        )

    def cum(self, name: str, order: Callable[[], IntArray]) -> Any:
        """Cumulative weights along a fixed order (exact int64 for integer weights)."""

        def compute() -> Any:
            w = self.by(name, order)
            dtype = np.int64 if self.integer else np.float64
            out = self.keys.scratch(f"cum:{name}", w.shape, dtype)
            return np.cumsum(w, axis=1, dtype=dtype, out=out)

        return self.get(f"cum:{name}", compute)

    def harmonic(self, top: float) -> FloatArray:
        """H_0..H_K (H_k = Σ_{i ≤ k} 1/i) with K ≥ ``top``, kept across blocks in the keys."""
        h: FloatArray | None = self.keys._cache.get("harmonic")
        if h is None or h.shape[0] <= top:
            k = max(int(top) + 1, 2 * (h.shape[0] if h is not None else 0), 1024)
            h = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, k + 1, dtype=np.float64))])
            self.keys._cache["harmonic"] = h
        return h


#: b values (NaN where undefined) from a block, or None: not applicable to this block.
BlockEvaluator = Callable[[BlockContext], "FloatArray | None"]


def _spearman(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    if keys.ties("u", keys.u) or keys.ties("e", keys.e):
        return None
    perm = keys.get(
        "perm_e_to_u",
        lambda: np.argsort(keys.order_e())[keys.order_u()],  # position in |e| order, u order
    )

    def run(ctx: BlockContext) -> FloatArray:
        # twice the midranks minus the total, 2C_k − w_k − Σw: centred, exact for integers
        def centred(key: str, order: Callable[[], IntArray]) -> FloatArray:
            c = ctx.cum(key, order)
            c2 = c + c
            c2 -= ctx.by(key, order)
            out = np.asarray(c2, dtype=np.float64)
            out -= ctx.total[:, None]
            return out

        ru = centred("u", keys.order_u)
        re = np.take(centred("e", keys.order_e), perm, axis=1)
        wa = ctx.by_float("u", keys.order_u) * ru
        sab = np.einsum("ij,ij->i", wa, re)
        saa = np.einsum("ij,ij->i", wa, ru)
        re *= re
        sbb = np.einsum("ij,ij->i", ctx.by_float("u", keys.order_u), re)
        ok = (ctx.positive_rows >= 2) & (saa > 0) & (sbb > 0)
        r = np.where(ok, sab / np.sqrt(np.where(ok, saa * sbb, 1.0)), np.nan)
        return np.clip(r, -1.0, 1.0)

    return run


def _sparsification(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    if params.get("error") != "mae" or params.get("grid") != "exact":
        return None
    if keys.ties("u", keys.u):
        return None
    normalize = bool(params.get("normalize", True))
    e_u = keys.get("e_by_u", lambda: keys.e()[keys.order_u()])
    e_e = keys.get("e_by_e", lambda: keys.e()[keys.order_e()])

    def area(ctx: BlockContext, key: str, order: Callable[[], IntArray], e: FloatArray) -> Any:
        def compute() -> tuple[FloatArray, FloatArray]:
            m = ctx.by(key, order)  # integer weights along the key
            r = ctx.cum(key, order)  # remaining weight R (including the row), exact
            h = ctx.harmonic(float(np.max(ctx.total)))
            dh = np.take(h, r)
            dh -= np.take(h, r - m)  # H_R − H_{R−m} = Σ_{j<m} 1/(R − j)
            me = ctx.by_float(key, order) * e
            s = ctx.keys.scratch(f"area:{key}", me.shape, np.float64)
            np.cumsum(me, axis=1, out=s)  # remaining error S (including the row)
            s -= np.asarray(r, dtype=np.float64) * e
            s *= dh
            err = np.sum(me, axis=1)
            return np.sum(s, axis=1) + err, err

        return ctx.get(f"area:{key}", compute)

    def run(ctx: BlockContext) -> FloatArray | None:
        if not ctx.integer:
            return None
        total = ctx.total
        model, err = area(ctx, "u", keys.order_u, e_u)
        model = model / total
        full = err / total
        if name == "ause":
            oracle = area(ctx, "e", keys.order_e, e_e)[0] / total
            value = np.maximum(model - oracle, 0.0)
        else:
            value = full - model
        if not normalize:
            return np.asarray(value, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(full > 0, value / np.where(full > 0, full, 1.0), np.nan)

    return run


def _pit(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    s = keys.get(
        "pit_sorted", lambda: np.asarray(to_numpy(keys.batch.pit), np.float64)[keys.order_pit()]
    )

    def run(ctx: BlockContext) -> FloatArray:
        after: FloatArray = ctx.cum("pit", keys.order_pit) / ctx.total[:, None]
        d: FloatArray = np.max(after - s, axis=1)
        d = np.maximum(d, s[0])
        if s.shape[0] > 1:
            d = np.maximum(d, np.max(s[1:] - after[:, :-1], axis=1))
        return np.clip(d, 0.0, 1.0)

    return run


def _moments(
    keys: Keys, name: str, columns: Callable[[], tuple[FloatArray, FloatArray]]
) -> BlockEvaluator | None:
    """Pearson correlation (``pearson``, ``corr``) or R² (``r2``) from weighted moments."""
    a, b = columns()
    if _has_ties(a) or (name != "r2" and _has_ties(b)):
        return None
    if name == "r2":
        yc = a - np.mean(a)
        x = np.stack([yc, yc * yc, b * b], axis=1)  # y − ȳ, (y − ȳ)², residual²
    else:
        ac, bc = a - np.mean(a), b - np.mean(b)
        x = np.stack([ac, bc, ac * ac, bc * bc, ac * bc], axis=1)

    def run(ctx: BlockContext) -> FloatArray:
        t = ctx.total
        mom = (ctx.w @ x) / t[:, None]
        ok = ctx.positive_rows >= 2
        if name == "r2":
            ss_tot = mom[:, 1] - mom[:, 0] ** 2
            ok &= ss_tot > 0
            return np.where(ok, 1.0 - mom[:, 2] / np.where(ok, ss_tot, 1.0), np.nan)
        va = mom[:, 2] - mom[:, 0] ** 2
        vb = mom[:, 3] - mom[:, 1] ** 2
        cov = mom[:, 4] - mom[:, 0] * mom[:, 1]
        ok &= (va > 0) & (vb > 0)
        r = np.where(ok, cov / np.sqrt(np.where(ok, va * vb, 1.0)), np.nan)
        return np.clip(r, -1.0, 1.0)

    return run


def _mdae(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    method = params.get("method")
    if method not in ("linear", "inverted_cdf"):
        return None
    sv = keys.get("e_by_e", lambda: keys.e()[keys.order_e()])

    def run(ctx: BlockContext) -> FloatArray:
        we = ctx.by_float("e", keys.order_e)
        out = np.empty(we.shape[0])
        for i in range(we.shape[0]):
            if ctx.total[i] > 0:
                out[i] = weighted_quantile(keys.batch.xp, sv, we[i], 0.5, method)
            else:
                out[i] = math.nan
        return out

    return run


def _binned_by_sigma(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """ENCE (equal-weight bins of σ) and UCE (equal-width bins of σ²) of every resample.

    Along the ascending σ order the bins are contiguous runs of rows, cut where the sorted key
    passes each bin edge (``searchsorted(..., side="right")``: a bin holds the keys in
    (edge_{j−1}, edge_j], tied keys together, as in the implementation). The per-bin weight,
    Σwσ² and Σwe² are differences of cumulative sums at the cuts. The edges follow the
    implementation: ENCE's are σ at the weighted lower quantiles j/K (the first row whose
    cumulative weight reaches W·j/K), UCE's are equally spaced between the smallest and the
    largest σ² of the rows of positive weight.
    """
    k = params.get("n_bins")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        return None
    k = int(k)
    b = keys.batch
    sigma = np.asarray(to_numpy(b.std), np.float64)

    # the ranking order when the uncertainty is σ itself (shared gathers), else σ's own
    shared = "uncertainty" in b.prediction.capabilities and np.array_equal(sigma, keys.u())
    key = "u" if shared else "sigma"

    def order() -> IntArray:
        if shared:
            return keys.order_u()
        return keys.get(  # type: ignore[no-any-return]
            "order_sigma", lambda: np.argsort(sigma, kind="stable").astype(np.int64)
        )

    s_sorted = keys.get("sigma_sorted", lambda: sigma[order()])
    var_sorted = keys.get("var_sorted", lambda: s_sorted * s_sorted)
    r = np.asarray(to_numpy(b.residual), np.float64)
    r2_sorted = keys.get("r2_by_sigma", lambda: (r * r)[order()])

    def prefix(cum: Any, cuts: IntArray) -> FloatArray:
        """Σ over the positions < cut, per row (cuts: b × (bins + 1))."""
        at = np.take_along_axis(cum, np.maximum(cuts - 1, 0), axis=1)
        return np.where(cuts > 0, np.asarray(at, dtype=np.float64), 0.0)

    def run(ctx: BlockContext) -> FloatArray:
        n = s_sorted.shape[0]
        cw = ctx.cum(key, order)
        total = ctx.total
        rows = cw.shape[0]
        if name == "ence":
            targets = total[:, None] * (np.arange(1, k) / k)[None, :] if k > 1 else None
            sorted_key = s_sorted
        else:
            sorted_key = var_sorted
        cut_list = []
        for i in range(rows):
            if name == "ence":
                if targets is None:
                    edges = np.empty(0)
                else:
                    pos = np.minimum(np.searchsorted(cw[i], targets[i], side="left"), n - 1)
                    edges = s_sorted[pos]
            else:
                first = int(np.searchsorted(cw[i], 0, side="right"))  # first positive weight
                last = int(np.searchsorted(cw[i], cw[i, -1], side="left"))
                lo, hi = float(var_sorted[first]), float(var_sorted[last])
                if k > 1 and hi > lo:
                    edges = np.array([lo + (hi - lo) * j / k for j in range(1, k)])
                else:
                    edges = np.empty(0)
            inner = np.searchsorted(sorted_key, edges, side="right")
            cut_list.append(np.concatenate([[0], inner, [n]]))
        width = max(c.shape[0] for c in cut_list)
        cuts = np.stack([np.pad(c, (0, width - c.shape[0]), constant_values=n) for c in cut_list])
        wv = ctx.by_float(key, order) * var_sorted
        cv = ctx.keys.scratch("binned:v", wv.shape, np.float64)
        np.cumsum(wv, axis=1, out=cv)
        we = ctx.by_float(key, order) * r2_sorted
        ce = ctx.keys.scratch("binned:e", we.shape, np.float64)
        np.cumsum(we, axis=1, out=ce)
        wk = np.diff(prefix(cw, cuts), axis=1)
        vk = np.diff(prefix(cv, cuts), axis=1)
        ek = np.diff(prefix(ce, cuts), axis=1)
        keep = wk > 0
        safe = np.where(keep, wk, 1.0)
        if name == "uce":
            uce: FloatArray = np.sum(np.where(keep, np.abs(ek - vk), 0.0), axis=1) / total
            return uce
        rmv = np.sqrt(np.where(keep, vk, 1.0) / safe)
        rmse = np.sqrt(np.where(keep, ek, 0.0) / safe)
        ratio = np.where(keep, np.abs(rmv - rmse) / rmv, 0.0)
        return np.asarray(np.sum(ratio, axis=1) / np.sum(keep, axis=1), dtype=np.float64)

    return run


def _merci(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """MeRCI and n-MeRCI (``variant="paper"``): λ^α, the weighted α-quantile of |e|/σ, from the
    block's weights in the ratio order; Q_α(|e|) from the weights in the |e| order (both with
    the implementation's :func:`~uqcore._stats.weighted_quantile`); mean σ and MAE as weighted
    row sums. Needs every σ > 0 (finite ratios)."""
    alpha, method = params.get("alpha"), params.get("quantile_method")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        return None
    if method not in ("linear", "inverted_cdf"):
        return None
    if name == "nmerci" and params.get("variant") != "paper":
        return None
    u, e = keys.u(), keys.e()
    if not bool(np.all(u > 0)):
        return None
    ratio = e / u
    order_r = keys.get("order_ratio", lambda: np.argsort(ratio, kind="stable").astype(np.int64))
    r_sorted = keys.get("ratio_sorted", lambda: ratio[order_r])
    e_sorted = keys.get("e_by_e", lambda: e[keys.order_e()])
    xp = keys.batch.xp
    a = float(alpha)

    def run(ctx: BlockContext) -> FloatArray:
        wr = ctx.by_float("ratio", lambda: order_r)
        total = ctx.total
        mean_u = (ctx.w @ u) / total
        lam = np.array([weighted_quantile(xp, r_sorted, row, a, method) for row in wr])
        if name == "merci":
            out: FloatArray = lam * mean_u
            return out
        we = ctx.by_float("e", keys.order_e)
        q = np.array([weighted_quantile(xp, e_sorted, row, a, method) for row in we])
        mae = (ctx.w @ e) / total
        denom = q - mae
        ok = denom > 0
        return np.where(ok, (lam * mean_u - mae) / np.where(ok, denom, 1.0), np.nan)

    return run


def _point_y(keys: Keys) -> tuple[FloatArray, FloatArray]:
    b = keys.batch
    return np.asarray(to_numpy(b.point), np.float64), np.asarray(to_numpy(b.y), np.float64)


def _y_residual(keys: Keys) -> tuple[FloatArray, FloatArray]:
    b = keys.batch
    return np.asarray(to_numpy(b.y), np.float64), np.asarray(to_numpy(b.residual), np.float64)


#: The message of an undefined value, as the implementation words it.
UNDEFINED = {
    "spearman": "spearman is undefined: the uncertainty or the absolute errors are constant",
    "ause": "ause is undefined: every error is zero, so the normalising full-set error is 0",
    "aurg": "aurg is undefined: every error is zero, so the normalising full-set error is 0",
    "pearson": "pearson is undefined: the uncertainty or the absolute errors are constant",
    "corr": "corr is undefined: the predictions or the targets are constant",
    "r2": "r2 is undefined: the targets are constant (zero variance)",
    "nmerci": "nmerci is undefined: the normaliser Q_alpha(|e|) - MAE is not positive",
}

_PREPARE: dict[str, Callable[[Keys, Mapping[str, Any]], BlockEvaluator | None]] = {
    "spearman": _spearman,
    "ause": lambda k, p: _sparsification(k, "ause", p),
    "aurg": lambda k, p: _sparsification(k, "aurg", p),
    "pit": _pit,
    "pearson": lambda k, p: _moments(k, "pearson", lambda: (k.u(), k.e())),
    "corr": lambda k, p: _moments(k, "corr", lambda: _point_y(k)),
    "r2": lambda k, p: _moments(k, "r2", lambda: _y_residual(k)),
    "mdae": _mdae,
    "ence": lambda k, p: _binned_by_sigma(k, "ence", p),
    "uce": lambda k, p: _binned_by_sigma(k, "uce", p),
    "merci": lambda k, p: _merci(k, "merci", p),
    "nmerci": lambda k, p: _merci(k, "nmerci", p),
}


def prepare(
    batch: Any, chosen: Sequence[tuple[str, Mapping[str, Any]]]
) -> tuple[Keys | None, dict[str, BlockEvaluator]]:
    """Block evaluators for the metrics of ``chosen`` (name, params) that have one and whose
    conditions hold on this batch (regression batches of numpy arrays only)."""
    if not isinstance(batch, Batch) or not isinstance(getattr(batch, "y", None), np.ndarray):
        return None, {}
    keys = Keys(batch)
    out: dict[str, BlockEvaluator] = {}
    for name, params in chosen:
        make = _PREPARE.get(name)
        if make is None:
            continue
        ev = make(keys, params)
        if ev is not None:
            out[name] = ev
    return keys, out


def context(keys: Keys, w: FloatArray) -> BlockContext:
    """The shared context of one block of dense weights."""
    return BlockContext(keys, w)
