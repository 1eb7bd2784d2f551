"""Whole blocks of resamples at once for every metric that is not a plain mean (numpy batches).

A block of b dense resamples is a weight matrix W (b × N). Per resample, these metrics need
only two kinds of quantities, none of which needs a sort or a call of the metric:

- **weighted row sums** Σ_i w_i x_i of fixed per-row columns x (the engine's mean-type terms,
  moments for Pearson, corr and R², the coverage indicators and interval widths, σ and |e|):
  every column that any metric of the batch asks for goes into one N × K matrix X, built once
  (equal columns once), and a block costs one matrix product W·X (see :meth:`Keys.column`);
- **cumulative weights along fixed orders** of the rows (ascending uncertainty, |error|, PIT,
  |error|/σ; the argsorts are the batch's, computed once): W is gathered once per block into
  each order it is needed in (as bytes when the weights are small integers) and summed
  cumulatively, exactly, in integers — in full where a metric needs every row (latency-bound,
  ≈ 2 ns per row), else only where it is read: per-chunk totals plus a few chunks, or a window
  from the nearer end of the order.

The cost is a few O(b·N) passes per order and block, against O(b·N) plus per-call overhead,
digamma evaluations, bincounts and repeated gathers when each resample goes through the
metric's implementation. N-sized outputs are written into buffers reused by every block
(:meth:`Keys.scratch`).

Each evaluator reproduces its metric's implementation up to floating-point rounding (the
stability tests check both against the metric on the explicitly resampled arrays and against
the per-resample path) under conditions stated in its ``_prepare`` function; when they do not
hold (ties in a key, options other than those handled, non-integer weights where integer ones
are needed, a non-numpy backend) the metric is evaluated resample by resample through its
implementation, as before.

- ``spearman``: with C_k the cumulative weight along a key's order, the doubled weighted
  midrank of row k is C_k + C_{k−1} (exact for counts), centred a_k = C_k + C_{k−1} − W.
  ρ = Σ w a b / √(Σ w a² · Σ w b²), and without ties Σ_k w_k a_k² = (W³ − Σ w_k³)/3 for both
  keys (the midranks of a tie block of w copies are the integral of (x − W/2)² over its stretch
  minus w³/12), so only the cross term needs the |e| ranks gathered into the uncertainty order
  (and Σ w b = 0 lets the uncertainty ranks stay uncentred).
- ``ause``/``aurg`` (``error="mae"``, ``grid="exact"``, integer weights): along the ascending
  key a row of weight m, remaining weight R and remaining error S (both including the row) adds
  m·e + (S − R·e)(H_R − H_{R−m}) to the area (the implementation's digamma form; H the harmonic
  numbers). Summing by parts, Σ S(H_R − H_{R−m}) = Σ_k m_k e_k (H_W − H_{R_k−m_k}), so
  area = Σ m e + Σ m e (H_W − H_{R−m}) − Σ R e (H_R − H_{R−m}): one gather from the harmonic
  table and two dot products, no floating cumulative sum. Along the |e| order itself (the
  oracle) this is (1 + H_W) Σ m e − Σ_k R_k H_{R_k} (e_k − e_{k+1}), whose terms but the last
  share one sign: one gather from a table of k·H_k and one dot product with fixed steps.
- ``pit``: only the scalar ``value`` (the KS statistic sup |F̂_w − t|, invariant to repeating
  rows) is resampled, so the p-value is skipped: D = max(max_k(F̂_k − s_k), s_0,
  max_k(s_{k+1} − F̂_k)) along the PIT order, searched chunk by chunk with bounds from the
  chunk totals, so that only the few chunks near the maximum are summed (:func:`_ks_row`).
- ``ece``, ``rmsce``, ``calibration_error``, ``miscalibration_area`` (a CDF, ``compat=None``)
  and ``adversarial_group_calibration``: the weight of the rows with PIT ≤ each bound of the
  level grid is the cumulative PIT weight at the bound's position in the sorted PIT values
  (one ``searchsorted`` per batch; read from the chunk totals and the rows of each bound's
  chunk); the observed proportions follow as in the implementation. Adversarial group
  calibration then draws its random groups from these category totals with its own seeded
  generator (:func:`uqcore.regression.group_calibration._scores`), exactly as the
  implementation does on the resampled arrays — in a helper thread (:data:`BACKGROUND`).
- ``pearson``, ``corr``, ``r2``: weighted moments of centred per-row columns (no ties in the
  variables, so "constant" means fewer than two rows of positive weight).
- ``coverage``, ``mean_width``: the weighted mean of the per-row indicator or width at the
  chosen level (:func:`uqcore.regression.scoring.interval_value_terms`).
- ``mdae``, ``merci``, ``nmerci`` (``variant="paper"``, every σ > 0): weighted quantiles
  (:func:`~uqcore._stats.weighted_quantile`) from searches in the cumulative weights along the
  |e| and |e|/σ orders (:class:`_Local` where they were not computed); mean σ and MAE as
  weighted row sums.
- ``ence``, ``uce``: bins of σ (or σ²) are contiguous runs along the σ order, cut where the
  sorted key passes each bin edge; per-bin weights come from the cumulative weights at the cuts,
  per-bin Σwσ² and Σwe² from per-chunk dot products (see :func:`_binned_by_sigma`).
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError
from uqcore.batch import Batch

__all__ = [
    "UNDEFINED",
    "BlockContext",
    "BlockEvaluator",
    "Deferred",
    "Keys",
    "context",
    "prepare",
    "rows_per_block",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]

#: Elements of one block of the order-based paths (b·N): 2 MiB per float64 array. Measured at
#: N = 10⁵: blocks of 2¹⁸ weights were 2–4× faster than blocks of 2²³ (the derived arrays of a
#: block stay in the cache).
BLOCK_ELEMENTS = 2**18


#: Row sums of at most this many products (b·N·K) are computed by ``einsum`` rather than by
#: the BLAS matrix product: a multithreaded BLAS leaves its threads spinning after each call
#: (measured at N = 10⁴ with two columns: twice the CPU time of the whole bootstrap, taken from
#: the other jobs of a shared machine), while for a few columns numpy's loop costs little.
LINEAR_EINSUM_MAX = 2**25


def rows_per_block(n: int) -> int:
    """Resamples per block of the order-based paths (at least one)."""
    return max(1, BLOCK_ELEMENTS // max(n, 1))


def _has_ties(values: FloatArray) -> bool:
    s = np.sort(values)
    return bool(s.shape[0] > 1 and np.any(s[1:] == s[:-1]))


def _int_type(top: float) -> Any:
    """The narrowest signed integer type that holds values up to ``top``."""
    return np.int32 if top < 2**31 else np.int64


class Keys:
    """The weight-independent orders, arrays and row-sum columns of one batch (computed once,
    shared by every block)."""

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.n = batch.n
        self._cache: dict[str, Any] = {}
        self._columns: dict[str, int] = {}
        self._column_fns: list[Callable[[], Any]] = []
        self._x: FloatArray | None = None
        self._where: IntArray = np.zeros(0, dtype=np.int64)

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # -- weighted row sums -------------------------------------------------------------------
    def column(self, tag: str, compute: Callable[[], Any]) -> int:
        """Register a per-row column (length N) for the block's matrix product; its index in
        :attr:`BlockContext.lin`. Columns with the same ``tag`` are computed once."""
        if tag not in self._columns:
            self._columns[tag] = len(self._column_fns)
            self._column_fns.append(compute)
            self._x = None
        return self._columns[tag]

    def linear(self, w: FloatArray) -> FloatArray | None:
        """W·X for the registered columns (b × K), or None without columns. Equal columns
        (e.g. MAE's |e| and MeRCI's, RMSE's e² and R²'s) are multiplied once."""
        if not self._column_fns:
            return None
        if self._x is None:
            unique: dict[bytes, int] = {}
            cols: list[FloatArray] = []
            where = []
            for fn in self._column_fns:
                col = np.ascontiguousarray(to_numpy(fn()), dtype=np.float64)
                digest = hashlib.sha1(col.tobytes()).digest()
                if digest not in unique:
                    unique[digest] = len(cols)
                    cols.append(col)
                where.append(unique[digest])
            x = np.empty((self.n, len(cols)), order="F")
            for j, col in enumerate(cols):
                x[:, j] = col
            self._x, self._where = x, np.asarray(where, dtype=np.int64)
        x = self._x
        if w.shape[0] * x.shape[0] * x.shape[1] <= LINEAR_EINSUM_MAX:
            sums = np.einsum("ij,jk->ik", w, x)  # numpy's own loop, no BLAS threads
        else:
            sums = w @ x
        out: FloatArray = sums[:, self._where]
        return out

    # -- fixed orders (the same cached argsorts the metric implementations use) -------------
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

    def e_by_e(self) -> FloatArray:
        return self.get("e_by_e", lambda: self.e()[self.order_e()])  # type: ignore[no-any-return]

    def pit_sorted(self) -> FloatArray:
        return self.get(  # type: ignore[no-any-return]
            "pit_sorted",
            lambda: np.asarray(to_numpy(self.batch.pit), np.float64)[self.order_pit()],
        )

    def scratch(self, tag: str, shape: tuple[int, ...], dtype: Any) -> Any:
        """An output array reused by every block of this shape: a cumulative sum written into
        a fresh array was measured ~10× slower than into a reused one."""
        key = f"scratch:{tag}:{shape}:{np.dtype(dtype).str}"
        return self.get(key, lambda: np.empty(shape, dtype=dtype))

    def ties(self, name: str, values: Callable[[], FloatArray]) -> bool:
        return self.get(f"ties:{name}", lambda: _has_ties(values()))  # type: ignore[no-any-return]


class BlockContext:
    """One block's weight matrix W (b × N), its row sums ``lin`` (b × K, see
    :meth:`Keys.linear`) and the matrices derived from W, computed lazily and shared by every
    metric of the block."""

    def __init__(self, keys: Keys, w: FloatArray, lin: FloatArray | None = None) -> None:
        self.keys = keys
        self.w = w
        self.lin = lin
        self._cache: dict[str, Any] = {}

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def rows(self) -> int:
        return int(self.w.shape[0])

    def scratch(self, tag: str, dtype: Any, extra: int = 0) -> Any:
        """A reused b × (N + ``extra``) buffer (see :meth:`Keys.scratch`)."""
        return self.keys.scratch(tag, (self.rows, self.w.shape[1] + extra), dtype)

    def sums(self, col: int) -> FloatArray:
        """Σ_i w_i x_i of registered column ``col``, per resample."""
        assert self.lin is not None
        return self.lin[:, col]

    @property
    def total(self) -> FloatArray:
        def compute() -> FloatArray:
            small = self._small()
            if self.integer:  # exact, and one byte per weight for counts
                counts: IntArray = np.sum(small, axis=1, dtype=np.int64)
                return counts.astype(np.float64)
            return np.sum(self.w, axis=1)  # type: ignore[no-any-return]

        return self.get("total", compute)  # type: ignore[no-any-return]

    @property
    def top(self) -> float:
        """The largest total weight of the block."""
        return self.get("top", lambda: float(np.max(self.total)))  # type: ignore[no-any-return]

    @property
    def positive_rows(self) -> IntArray:
        def compute() -> IntArray:
            small = self._small()
            return np.array([np.count_nonzero(row) for row in small], dtype=np.int64)

        return self.get("positive", compute)  # type: ignore[no-any-return]

    def power_sum(self, p: int) -> FloatArray:
        """Σ_i w_i^p per resample."""
        w = self.w
        return self.get(  # type: ignore[no-any-return]
            f"power_sum:{p}",
            lambda: np.einsum("ij,ij,ij->i", w, w, w) if p == 3 else np.sum(w**p, axis=1),
        )

    @property
    def integer(self) -> bool:
        """Whether every weight is an integer (bootstrap counts times integer base weights)."""
        self._small()
        return self._cache["integer"]  # type: ignore[no-any-return]

    def _small(self) -> Any:
        """W as the narrowest integer type that holds it (gathers move fewer bytes), or W."""

        def compute() -> Any:
            w = self.w
            small = w.astype(np.uint8)  # wraps above 255: caught by the comparison
            if bool(np.all(small == w)):
                self._cache["integer"] = True
                return small
            integer = bool(np.all(w == np.floor(w)))
            self._cache["integer"] = integer
            if not integer:
                return w
            return w.astype(_int_type(float(np.max(w))))

        return self.get("small", compute)

    def by(self, name: str, order: Callable[[], IntArray]) -> Any:
        """W with its columns in a fixed order (one gather per block and order); integer
        weights stay in a narrow integer type."""

        def compute() -> Any:
            small = self._small()
            out = self.scratch(f"by:{name}", small.dtype)
            return np.take(small, order(), axis=1, out=out, mode="clip")

        return self.get(f"by:{name}", compute)

    def cum(self, name: str, order: Callable[[], IntArray]) -> Any:
        """Cumulative weights along a fixed order (exact integers for integer weights)."""

        def compute() -> Any:
            w = self.by(name, order)
            dtype = _int_type(self.top) if self.integer else np.float64
            out = self.scratch(f"cum:{name}", dtype)
            return np.cumsum(w, axis=1, dtype=dtype, out=out)

        return self.get(f"cum:{name}", compute)

    def cached_cum(self, name: str) -> Any:
        """The cumulative weights along ``name``'s order if already computed, else None."""
        return self._cache.get(f"cum:{name}")

    def harmonic(self, top: float) -> FloatArray:
        """H_0..H_K (H_k = Σ_{i ≤ k} 1/i) with K ≥ ``top``, kept across blocks in the keys."""
        return self._table("harmonic", top)

    def harmonic_times(self, top: float) -> FloatArray:
        """G_k = k·H_k for k = 0..K, K ≥ ``top`` (kept across blocks)."""
        return self._table("harmonic_times", top)

    def _table(self, name: str, top: float) -> FloatArray:
        t: FloatArray | None = self.keys._cache.get(name)
        if t is None or t.shape[0] <= top:
            k = max(int(top) + 1, 2 * (t.shape[0] if t is not None else 0), 1024)
            h = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, k + 1, dtype=np.float64))])
            self.keys._cache["harmonic"] = h
            self.keys._cache["harmonic_times"] = np.arange(k + 1, dtype=np.float64) * h
            t = self.keys._cache[name]
        return t

    def chunk_sums(self, name: str, order: Callable[[], IntArray]) -> Any:
        """The weights along ``name``'s order summed over chunks of :data:`CHUNK` rows
        (b × ⌈N/CHUNK⌉; int64 for integer weights): a vectorised pass, where the full
        cumulative sum is latency-bound."""

        def compute() -> Any:
            w = self.by(name, order)
            n = w.shape[1]
            full = n // CHUNK
            wide = np.int64 if self.integer else np.float64
            sums = w[:, : full * CHUNK].reshape(self.rows, full, CHUNK).sum(axis=2, dtype=wide)
            if full * CHUNK < n:
                tail: Any = np.sum(w[:, full * CHUNK :], axis=1, dtype=wide)
                sums = np.concatenate([sums, tail[:, None]], axis=1)
            return sums

        return self.get(f"chunks:{name}", compute)

    def cum_at(self, name: str, order: Callable[[], IntArray], pos: IntArray) -> FloatArray:
        """Σ of the weights at sorted positions < p along ``name``'s order, for each of the
        positions ``pos`` (b × len(pos)): read off the cumulative weights if the block has
        them, else from the chunk sums (:meth:`chunk_sums`) and the rows of each position's
        own chunk below it."""
        cached = self.cached_cum(name)
        if cached is not None:
            out = np.take(cached, np.maximum(pos - 1, 0), axis=1).astype(np.float64)
            out[:, pos == 0] = 0.0
            return out
        w = self.by(name, order)
        n = w.shape[1]
        chunk = pos // CHUNK
        before = np.cumsum(self.chunk_sums(name, order), axis=1)  # C at each chunk's end
        base = np.where(chunk > 0, np.take(before, np.maximum(chunk - 1, 0), axis=1), 0)
        rows = (chunk * CHUNK)[:, None] + np.arange(CHUNK)[None, :]
        below = rows < pos[:, None]
        part = np.where(below, np.take(w, np.minimum(rows, n - 1), axis=1), 0)
        return (base + np.sum(part, axis=2)).astype(np.float64)  # type: ignore[no-any-return]


#: Whether work that runs in numpy without the GIL and does not touch the block (the random
#: groups of adversarial group calibration) goes to a helper thread while the main thread
#: computes the block's other metrics. The values are the same either way.
BACKGROUND = True

_EXECUTOR: tuple[int, ThreadPoolExecutor] | None = None


def _executor() -> ThreadPoolExecutor:
    """One helper thread per process (a forked child starts its own)."""
    global _EXECUTOR
    pid = os.getpid()
    if _EXECUTOR is None or _EXECUTOR[0] != pid:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uqcore-stability")
        _EXECUTOR = (pid, pool)
    return _EXECUTOR[1]


class Deferred:
    """The values of a block that are being computed by the helper thread."""

    def __init__(self, jobs: list[Future[float]]) -> None:
        self.jobs = jobs

    def result(self) -> FloatArray:
        """Wait for the values (re-raising an error of the computation)."""
        return np.array([job.result() for job in self.jobs], dtype=np.float64)


def _deferred(jobs: list[Callable[[], float]]) -> FloatArray | Deferred:
    """Run the per-resample ``jobs`` in the helper thread (:data:`BACKGROUND`), or now."""
    if not BACKGROUND:
        return np.array([job() for job in jobs], dtype=np.float64)
    pool = _executor()
    return Deferred([pool.submit(job) for job in jobs])


#: b values (NaN where undefined) from a block, a :class:`Deferred` of them, or None: not
#: applicable to this block.
BlockEvaluator = Callable[[BlockContext], "FloatArray | Deferred | None"]


def _dot(a: Any, b: Any) -> FloatArray:
    """Row-wise Σ_j a_ij b_ij."""
    return np.einsum("ij,ij->i", a, b)  # type: ignore[no-any-return]


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


def _search(cum: Any, target: float, side: str) -> int:
    """``searchsorted(cum, target, side)`` for one row of cumulative weights; an integer row is
    searched with an integer key (a float key would convert the whole row)."""
    if cum.dtype.kind == "f":
        return int(cum.searchsorted(target, side=side))
    return int(cum.searchsorted(_int_keys(cum.dtype, target, side), side=side))


def _search_many(cum: Any, targets: FloatArray, side: str) -> IntArray:
    """:func:`_search` for several targets."""
    if cum.dtype.kind == "f":
        return cum.searchsorted(targets, side=side)  # type: ignore[no-any-return]
    return cum.searchsorted(_int_keys(cum.dtype, targets, side), side=side)  # type: ignore[no-any-return]


#: Rows per chunk of the chunked sums (ENCE/UCE bin sums).
PREFIX_CHUNK = 4096

#: Rows per chunk of :meth:`BlockContext.chunk_sums` (the PIT KS search, the calibration
#: tally): at N = 10⁶ 128 was the fastest of 64–1024 for the KS search.
CHUNK = 128

#: The first window of :class:`_Local` reaches this far past the expected position:
#: ``LOCAL_MARGIN_FACTOR``·√N + ``LOCAL_MARGIN`` rows.
LOCAL_MARGIN_FACTOR = 8
LOCAL_MARGIN = 1024

Search = Callable[[float, str], int]


class _Local:
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
        self.margin = LOCAL_MARGIN_FACTOR * math.isqrt(n) + LOCAL_MARGIN
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
        return self.start + _search(self.cum, target, side)


def _quantile_row(values: FloatArray, search: Search, total: float, q: float, method: str) -> float:
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


def _quantiles(
    ctx: BlockContext,
    name: str,
    order: Callable[[], IntArray],
    values: FloatArray,
    q: float,
    method: str,
) -> FloatArray:
    """The weighted quantile of ``values`` (sorted by ``order``) for every resample of the
    block: from the cumulative weights if the block has them already, else (integer weights)
    through :class:`_Local`."""
    out = np.empty(ctx.rows)
    cached = ctx.cached_cum(name)
    if cached is None and ctx.integer:
        small, idx = ctx._small(), order()
        for i in range(ctx.rows):
            total = float(ctx.total[i])
            local = _Local(small[i], idx, total)
            out[i] = _quantile_row(values, local.search, total, q, method)
        return out
    cum = ctx.cum(name, order) if cached is None else cached
    for i in range(ctx.rows):
        row = cum[i]

        def search(t: float, side: str, row: Any = row) -> int:
            return _search(row, t, side)

        out[i] = _quantile_row(values, search, float(row[-1]), q, method)
    return out


def _check_method(method: Any) -> bool:
    return method in ("linear", "inverted_cdf")


# -- rank metrics ------------------------------------------------------------------------------
def _spearman(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    if keys.ties("u", keys.u) or keys.ties("e", keys.e):
        return None
    perm = keys.get(
        "perm_e_to_u",
        lambda: np.argsort(keys.order_e())[keys.order_u()],  # position in |e| order, u order
    )

    def run(ctx: BlockContext) -> FloatArray:
        top = 2.0 * ctx.top

        def doubled(key: str, order: Callable[[], IntArray]) -> Any:
            """2C_k − w_k = C_k + C_{k−1} along the key's order (exact for integer weights)."""
            c = ctx.cum(key, order)
            dtype = c.dtype if c.dtype.kind == "f" else _int_type(top)
            out = ctx.scratch(f"spearman:{key}", dtype)
            np.add(c[:, 1:], c[:, :-1], out=out[:, 1:])
            out[:, 0] = c[:, 0]
            return out

        du = doubled("u", keys.order_u)
        de = doubled("e", keys.order_e)
        de_u = np.take(de, perm, axis=1, out=ctx.scratch("spearman:e_u", de.dtype), mode="clip")
        b = np.subtract(de_u, ctx.total[:, None], out=ctx.scratch("spearman:b", np.float64))
        # Σ w a b with a = du − W centred; Σ w b = W² − W² = 0, so du need not be centred
        sab = np.einsum("ij,ij,ij->i", ctx.by("u", keys.order_u), du, b)
        # Σ w a² = Σ w b² = (W³ − Σ w³)/3 without ties (see the module docstring)
        saa = (ctx.total**3 - ctx.power_sum(3)) / 3.0
        ok = (ctx.positive_rows >= 2) & (saa > 0)
        r = np.where(ok, sab / np.where(ok, saa, 1.0), np.nan)
        return np.clip(r, -1.0, 1.0)

    return run


def _sparsification(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    if params.get("error") != "mae" or params.get("grid") != "exact":
        return None
    if keys.ties("u", keys.u):
        return None
    normalize = bool(params.get("normalize", True))
    e_u = keys.get("e_by_u", lambda: keys.e()[keys.order_u()])
    col_e = keys.column("e", keys.e)
    step_e = keys.get("e_steps", lambda: keys.e_by_e() - np.append(keys.e_by_e()[1:], 0.0))

    def area(ctx: BlockContext, key: str, order: Callable[[], IntArray], e: FloatArray) -> Any:
        def compute() -> FloatArray:
            m = ctx.by(key, order)  # integer weights along the key
            r = ctx.cum(key, order)  # remaining weight R (including the row), exact
            h = ctx.harmonic(ctx.top)
            hh = ctx.scratch(f"area:h:{key}", np.float64, extra=1)
            hh[:, 0] = 0.0
            np.take(h, r, out=hh[:, 1:], mode="clip")
            h_prev, h_cur = hh[:, :-1], hh[:, 1:]  # H_{R−m} (the row before) and H_R
            err = ctx.sums(col_e)  # Σ m e
            h_total = np.take(h, np.rint(ctx.total).astype(np.int64))
            # Σ S·ΔH by parts: Σ m e (H_W − H_{R−m})
            s_dh = h_total * err - np.einsum("ij,j,ij->i", m, e, h_prev)
            dh = np.subtract(h_cur, h_prev, out=ctx.scratch(f"area:dh:{key}", np.float64))
            out: FloatArray = err + s_dh - np.einsum("ij,j,ij->i", r, e, dh)
            return out

        return ctx.get(f"area:{key}", compute)

    def sorted_area(ctx: BlockContext) -> FloatArray:
        """The area along the |e| order itself (the oracle): with g_k = R_k·H_{R_k},
        X − Y = H_W Σme − Σ_k e_k (g_k − g_{k−1}) = H_W Σme − Σ_k g_k (e_k − e_{k+1})
        (e_{N+1} = 0); along ascending e every term but the last has one sign, so one gather
        from the table of k·H_k and one dot product suffice."""
        r = ctx.cum("e", keys.order_e)
        g = np.take(
            ctx.harmonic_times(ctx.top), r, out=ctx.scratch("area:g", np.float64), mode="clip"
        )
        err = ctx.sums(col_e)
        h_total = np.take(ctx.harmonic(ctx.top), np.rint(ctx.total).astype(np.int64))
        out: FloatArray = (1.0 + h_total) * err - np.einsum("ij,j->i", g, step_e)
        return out

    def run(ctx: BlockContext) -> FloatArray | None:
        if not ctx.integer:
            return None
        total = ctx.total
        model = area(ctx, "u", keys.order_u, e_u) / total
        full = ctx.sums(col_e) / total
        if name == "ause":
            oracle = sorted_area(ctx) / total
            value = np.maximum(model - oracle, 0.0)
        else:
            value = full - model
        if not normalize:
            return np.asarray(value, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(full > 0, value / np.where(full > 0, full, 1.0), np.nan)

    return run


# -- calibration along the PIT order -----------------------------------------------------------
def _ks_row(w: Any, sums: Any, s: FloatArray, total: float) -> float:
    """W·D for one resample: the largest of C_k − W s_k and W s_k − C_{k−1} (C_{−1} = 0; the
    latter includes the term W s_0) over the sorted PIT values s, from the weights w in their
    order and their sums over chunks of :data:`CHUNK` rows, without the full cumulative sum.

    Per chunk [a, b) C is non-decreasing and s ascending, so C_k − W s_k ≤ C_{b−1} − W s_a and
    W s_k − C_{k−1} ≤ W s_{b−1} − C_{a−1}, while the values at k = b − 1 and k = a are known
    from the chunk sums alone. Only the chunks whose bound exceeds the best known value can
    hold the maximum; they are summed exactly (the empirical CDF stays within about √N of
    W s, so few chunks come near the maximum).
    """
    n = s.shape[0]
    m = sums.shape[0]
    ends = np.cumsum(sums)  # C at the last row of each chunk
    starts = ends - sums  # C before the first row
    first = np.arange(m) * CHUNK
    last = np.minimum(first + CHUNK, n) - 1
    s_first, s_last = total * s[first], total * s[last]
    upper = (ends - s_first, s_last - starts)  # bounds of C_k − W s_k and W s_k − C_{k−1}
    best = max(float(np.max(ends - s_last)), float(np.max(s_first - starts)))  # values there
    for sign, bound in zip((1, -1), upper, strict=True):
        cand = np.flatnonzero(bound > best)
        if cand.shape[0] == 0:
            continue
        rows = cand[:, None] * CHUNK + np.arange(CHUNK)[None, :]
        inside = rows < n
        rows = np.minimum(rows, n - 1)
        wc = np.where(inside, w[rows], 0)
        c = starts[cand][:, None] + np.cumsum(wc, axis=1, dtype=sums.dtype)  # C_k
        ts = total * s[rows]
        v = c - ts if sign > 0 else ts - (c - wc)  # the latter: W s_k − C_{k−1}
        best = max(best, float(np.max(np.where(inside, v, -math.inf))))
    return best


def _pit(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    s = keys.pit_sorted()

    def run(ctx: BlockContext) -> FloatArray:
        # D = max_k max(F̂_k − s_k, s_k − F̂_{k−1}) = W·D / W along the PIT order
        w = ctx.by("pit", keys.order_pit)
        sums = ctx.chunk_sums("pit", keys.order_pit)
        total = ctx.total
        out = np.array([_ks_row(w[i], sums[i], s, float(total[i])) for i in range(ctx.rows)])
        return np.clip(out / ctx.total, 0.0, 1.0)

    return run


def _tally(
    keys: Keys, params: Mapping[str, Any], extend: bool = False
) -> Callable[[BlockContext], tuple[FloatArray, FloatArray]] | None:
    """(counts b × M, expected M) of the calibration tally of every resample, read off the
    cumulative PIT weights; None where the implementation does not count PIT values."""
    from uqcore.regression import calibration as cal

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


def _calibration(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """ece, rmsce, calibration_error and miscalibration_area from the resampled tally."""
    from uqcore.regression import calibration as cal

    level_weights = params.get("level_weights", "uniform")
    if level_weights not in ("uniform", "mean"):
        return None
    tally = _tally(keys, params, extend=name == "miscalibration_area")
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


def _adversarial(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    from uqcore.regression import group_calibration as gc

    tally = _tally(keys, params)
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
        # the random groups (≈ 9 ms per resample, in numpy's samplers, which release the GIL)
        return _deferred([partial(value, c, lv) for c in cats])

    return run


# -- weighted row sums -------------------------------------------------------------------------
def _moments(
    keys: Keys, name: str, columns: Callable[[], tuple[FloatArray, FloatArray]]
) -> BlockEvaluator | None:
    """Pearson correlation (``pearson``, ``corr``) or R² (``r2``) from weighted moments."""
    a, b = columns()
    if _has_ties(a) or (name != "r2" and _has_ties(b)):
        return None
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


def _interval(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """``coverage`` and ``mean_width``: the weighted mean of the terms at the chosen level."""
    from uqcore.regression.scoring import interval_value_terms

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


# -- weighted quantiles ------------------------------------------------------------------------
def _mdae(keys: Keys, params: Mapping[str, Any]) -> BlockEvaluator | None:
    method = params.get("method")
    if not _check_method(method):
        return None

    def run(ctx: BlockContext) -> FloatArray:
        return _quantiles(ctx, "e", keys.order_e, keys.e_by_e(), 0.5, str(method))

    return run


def _merci(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """MeRCI and n-MeRCI (``variant="paper"``): λ^α, the weighted α-quantile of |e|/σ, from the
    cumulative weights along the ratio order; Q_α(|e|) along the |e| order (both as the
    implementation's :func:`~uqcore._stats.weighted_quantile`); mean σ and MAE as weighted row
    sums. Needs every σ > 0 (finite ratios)."""
    alpha, method = params.get("alpha"), params.get("quantile_method")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
        return None
    if not _check_method(method):
        return None
    if name == "nmerci" and params.get("variant") != "paper":
        return None
    u, e = keys.u(), keys.e()
    if not bool(np.all(u > 0)):
        return None
    order_r = keys.get("order_ratio", lambda: np.argsort(e / u, kind="stable").astype(np.int64))
    r_sorted = keys.get("ratio_sorted", lambda: (e / u)[order_r])
    col_u = keys.column("u", lambda: u)
    col_e = keys.column("e", lambda: e)
    a, how = float(alpha), str(method)

    def run(ctx: BlockContext) -> FloatArray:
        total = ctx.total
        lam = ctx.get(
            f"merci:lambda:{a}:{how}",
            lambda: _quantiles(ctx, "ratio", lambda: order_r, r_sorted, a, how),
        )
        mean_u = ctx.sums(col_u) / total
        if name == "merci":
            out: FloatArray = lam * mean_u
            return out
        q = _quantiles(ctx, "e", keys.order_e, keys.e_by_e(), a, how)
        mae = ctx.sums(col_e) / total
        denom = q - mae
        ok = denom > 0
        return np.where(ok, (lam * mean_u - mae) / np.where(ok, denom, 1.0), np.nan)

    return run


# -- bins of σ ---------------------------------------------------------------------------------
def _binned_by_sigma(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """ENCE (equal-weight bins of σ) and UCE (equal-width bins of σ²) of every resample.

    Along the ascending σ order the bins are contiguous runs of rows, cut where the sorted key
    passes each bin edge (``searchsorted(..., side="right")``: a bin holds the keys in
    (edge_{j−1}, edge_j], tied keys together, as in the implementation). The per-bin weights
    are differences of the cumulative weights at the cuts; Σwσ² and Σwe² per bin are sums of
    per-chunk dot products (one pass each, shared by both metrics) plus the partial chunks at
    the cuts. The edges follow the implementation:
    ENCE's are σ at the weighted lower quantiles j/K (the first row whose cumulative weight
    reaches W·j/K), UCE's are equally spaced between the smallest and the largest σ² of the
    rows of positive weight.
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
    n = s_sorted.shape[0]

    def chunk_sums(ctx: BlockContext) -> tuple[Any, FloatArray, FloatArray]:
        """The weights along σ and, per resample, Σ wσ² and Σ we² over each full chunk of
        :data:`PREFIX_CHUNK` rows along σ (one pass each, shared by ENCE and UCE)."""

        def compute() -> tuple[Any, FloatArray, FloatArray]:
            w = ctx.by(key, order)
            m = n // PREFIX_CHUNK
            head = w[:, : m * PREFIX_CHUNK].reshape(ctx.rows, m, PREFIX_CHUNK)
            v = var_sorted[: m * PREFIX_CHUNK].reshape(m, PREFIX_CHUNK)
            e = r2_sorted[: m * PREFIX_CHUNK].reshape(m, PREFIX_CHUNK)
            return w, np.einsum("icl,cl->ic", head, v), np.einsum("icl,cl->ic", head, e)

        return ctx.get("binned:chunks", compute)  # type: ignore[no-any-return]

    def prefix_sums(ctx: BlockContext, cuts: IntArray) -> tuple[FloatArray, FloatArray]:
        """Σ_{k < c} w_k σ_k² and Σ_{k < c} w_k e_k² along σ at every cut c (rows × cuts)."""
        if n < 8 * PREFIX_CHUNK:  # small: cumulative sums of the products, all rows at once
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
                full = c // PREFIX_CHUNK
                a = full * PREFIX_CHUNK
                part = w[i, a:c]
                below_v = cv[i, full - 1] if full else 0.0
                below_e = ce[i, full - 1] if full else 0.0
                pv[i, j] = below_v + float(np.einsum("i,i->", part, var_sorted[a:c]))
                pe[i, j] = below_e + float(np.einsum("i,i->", part, r2_sorted[a:c]))
        return pv, pe

    def cuts_of(cw: Any, total: float) -> IntArray:
        """[0, cuts between the bins..., N] of one resample."""
        if name == "ence":
            if k > 1:
                targets = np.array([total * j / k for j in range(1, k)])
                pos = np.minimum(_search_many(cw, targets, "left"), n - 1)
                edges = s_sorted[pos]
            else:
                edges = np.empty(0)
            inner = np.searchsorted(s_sorted, edges, side="right")
        else:
            first = _search(cw, 0.0, "right")  # first positive weight
            last = _search(cw, float(cw[-1]), "left")
            lo, hi = float(var_sorted[first]), float(var_sorted[last])
            if k > 1 and hi > lo:
                edges = np.array([lo + (hi - lo) * j / k for j in range(1, k)])
            else:
                edges = np.empty(0)
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
            return out
        safe = np.where(keep, wk, 1.0)
        rmv = np.sqrt(np.where(keep, vk, 1.0) / safe)
        rmse = np.sqrt(np.where(keep, ek, 0.0) / safe)
        ratio = np.where(keep, np.abs(rmv - rmse) / rmv, 0.0)
        return np.asarray(np.sum(ratio, axis=1) / np.sum(keep, axis=1), dtype=np.float64)

    return run


def _identity(v: FloatArray) -> FloatArray:
    return v


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
    "ece": lambda k, p: _calibration(k, "ece", p),
    "rmsce": lambda k, p: _calibration(k, "rmsce", p),
    "calibration_error": lambda k, p: _calibration(k, "calibration_error", p),
    "miscalibration_area": lambda k, p: _calibration(k, "miscalibration_area", p),
    "adversarial_group_calibration": _adversarial,
    "pearson": lambda k, p: _moments(k, "pearson", lambda: (k.u(), k.e())),
    "corr": lambda k, p: _moments(k, "corr", lambda: _point_y(k)),
    "r2": lambda k, p: _moments(k, "r2", lambda: _y_residual(k)),
    "coverage": lambda k, p: _interval(k, "coverage", p),
    "mean_width": lambda k, p: _interval(k, "mean_width", p),
    "mdae": _mdae,
    "ence": lambda k, p: _binned_by_sigma(k, "ence", p),
    "uce": lambda k, p: _binned_by_sigma(k, "uce", p),
    "merci": lambda k, p: _merci(k, "merci", p),
    "nmerci": lambda k, p: _merci(k, "nmerci", p),
}


#: Evaluators that run first in a block: adversarial group calibration, whose random groups
#: then overlap everything else (:data:`BACKGROUND`), and those that need the full cumulative
#: weights along an order, so that the others (weighted quantiles) read them instead of
#: searching.
_FULL_CUMSUMS = ("adversarial_group_calibration", "spearman", "ause", "aurg", "ence", "uce")


def prepare(
    batch: Any, chosen: Sequence[tuple[str, Mapping[str, Any]]]
) -> tuple[Keys | None, dict[str, BlockEvaluator]]:
    """Block evaluators for the metrics of ``chosen`` (label, name, params) that have one and
    whose conditions hold on this batch (regression batches of numpy arrays only)."""
    if not isinstance(batch, Batch) or not isinstance(getattr(batch, "y", None), np.ndarray):
        return None, {}
    keys = Keys(batch)
    out: dict[str, BlockEvaluator] = {}
    first = [c for c in chosen if c[0] in _FULL_CUMSUMS]
    rest = [c for c in chosen if c[0] not in _FULL_CUMSUMS]
    for name, params in sorted(first, key=lambda c: _FULL_CUMSUMS.index(c[0])) + rest:
        make = _PREPARE.get(name)
        if make is None:
            continue
        ev = make(keys, params)
        if ev is not None:
            out[name] = ev
    return keys, out


def context(keys: Keys, w: FloatArray, lin: FloatArray | None = None) -> BlockContext:
    """The shared context of one block of dense weights and its row sums."""
    return BlockContext(keys, w, lin)
