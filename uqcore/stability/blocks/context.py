"""The state the block evaluators share: per batch (:class:`Keys`: fixed orders, per-row
columns and reused buffers) and per block of resamples (:class:`BlockContext`: the weight
matrix, its row sums and the matrices derived from it, computed lazily)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from uqcore._backend import sort_host, to_numpy
from uqcore.batch import Batch
from uqcore.stability.blocks import tuning
from uqcore.stability.blocks.background import Deferred

__all__ = [
    "COMPILED_WEIGHT_TYPES",
    "WEIGHT_TYPES",
    "BlockContext",
    "BlockEvaluator",
    "FloatArray",
    "IntArray",
    "Keys",
    "Partial",
    "context",
    "has_ties",
    "int_type",
    "rows_per_block",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
IntArray = np.ndarray[Any, np.dtype[np.int64]]


def rows_per_block(n: int) -> int:
    """Resamples per block of the order-based paths (at least one)."""
    return max(1, tuning.BLOCK_ELEMENTS // max(n, 1))


def has_ties(values: FloatArray) -> bool:
    """Whether two of ``values`` are equal."""
    s = sort_host(values)
    return bool(s.shape[0] > 1 and np.any(s[1:] == s[:-1]))


#: The weight types the compiled block passes of CORP are compiled for (a block's counts in a
#: narrow integer type, or real weights); others are converted first.
WEIGHT_TYPES = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.int32, np.int64, np.float64))

#: The weight types of :meth:`BlockContext.compiled_weights`: byte counts (a bootstrap's) or
#: real weights; each further type would be compiled for every kernel that reads them.
COMPILED_WEIGHT_TYPES = frozenset(np.dtype(t) for t in (np.uint8, np.float64))

#: The dtypes :meth:`BlockContext.cum` gives (counts below and above 2^31, real weights): the
#: compiled block passes that read cumulative weights are compiled for these.
CUM_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float64))


def int_type(top: float) -> Any:
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
        #: The column of ones: each resample's total weight comes with the product (exact for
        #: counts), where summing a block of bytes on its own cost ~1.4 ms per resample at 10⁶.
        self.total_column = self.column("total", partial(np.ones, self.n))

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
            # equal columns found by a cheap fingerprint (a strided sample and the sum), then
            # compared in full: hashing every 8 MB column cost ~10 ms each at N = 10⁶
            seen: dict[tuple[bytes, float], list[int]] = {}
            cols: list[FloatArray] = []
            where = []
            for fn in self._column_fns:
                col = np.ascontiguousarray(to_numpy(fn()), dtype=np.float64)
                key = (col[:: max(1, col.shape[0] // 64)].tobytes(), float(np.sum(col)))
                same = [j for j in seen.get(key, []) if np.array_equal(cols[j], col)]
                if same:
                    where.append(same[0])
                    continue
                seen.setdefault(key, []).append(len(cols))
                where.append(len(cols))
                cols.append(col)
            x = np.empty((self.n, len(cols)), order="F")
            for j, col in enumerate(cols):
                x[:, j] = col
            self._x, self._where = x, np.asarray(where, dtype=np.int64)
        x = self._x
        b, k = w.shape[0], x.shape[1]
        if w.dtype == np.float64 and b * x.shape[0] * k <= tuning.LINEAR_EINSUM_MAX:
            sums = np.einsum("ij,jk->ik", w, x)  # numpy's own loop, no BLAS threads
        else:
            sums = self._chunked_product(w, x)
        out: FloatArray = sums[:, self._where]
        return out

    def _chunked_product(self, w: Any, x: FloatArray) -> FloatArray:
        """W·X a stretch of rows at a time: W (counts in a narrow integer type, or floats) is
        converted to float64 one cache-sized stretch at a time (never whole), and each
        product stays below the size at which OpenBLAS splits it across threads (measured on
        2 shared cores: a (32 × 2048)·(2048 × 20) product 20× slower threaded than not)."""
        b, n = w.shape
        k = x.shape[1]
        rows = max(64, tuning.LINEAR_PRODUCT_MAX // max(b * k, 1))
        rows = min(n, 1 << (rows.bit_length() - 1))  # a power of two
        buf = self.scratch("linear:w", (b, rows), np.float64)
        part = self.scratch("linear:part", (b, k), np.float64)
        sums = np.zeros((b, k))
        for start in range(0, n, rows):
            stop = min(start + rows, n)
            wc = buf[:, : stop - start]
            np.copyto(wc, w[:, start:stop], casting="unsafe")
            np.matmul(wc, x[start:stop], out=part)
            sums += part
        return sums

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
        """Whether two of the values of ``name`` are equal (computed once; for the uncertainty
        ``"u"`` and ``"e"`` = |e|, from their orders, which the block paths need anyway: an
        O(N) pass instead of a sort)."""

        def compute() -> bool:
            orders = {"u": self.order_u, "e": self.order_e}
            if name not in orders:
                return has_ties(values())
            s = values()[orders[name]()]  # monotone along the order: ties are neighbours
            return bool(s.shape[0] > 1 and np.any(s[1:] == s[:-1]))

        return self.get(f"ties:{name}", compute)  # type: ignore[no-any-return]

    def harmonic_table(self, name: str, top: float) -> FloatArray:
        """``"harmonic"`` (H_k) or ``"harmonic_times"`` (k·H_k) for k = 0..K, K ≥ ``top``:
        both are extended together (at least doubled) when ``top`` passes their end."""
        t: FloatArray | None = self._cache.get(name)
        if t is None or t.shape[0] <= top:
            k = max(int(top) + 1, 2 * (t.shape[0] if t is not None else 0), 1024)
            h = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, k + 1, dtype=np.float64))])
            self._cache["harmonic"] = h
            self._cache["harmonic_times"] = np.arange(k + 1, dtype=np.float64) * h
            t = self._cache[name]
        return t


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
            small = self.small()
            if self.integer and self.lin is not None:  # Σ w·1 of the product: exact for counts
                return np.asarray(self.lin[:, self.keys.total_column], dtype=np.float64)
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
            small = self.small()
            return np.array([np.count_nonzero(row) for row in small], dtype=np.int64)

        return self.get("positive", compute)  # type: ignore[no-any-return]

    def power_sum(self, p: int) -> FloatArray:
        """Σ_i w_i^p per resample (exact for integer weights: their powers counted by value)."""

        def compute() -> FloatArray:
            small = self.small()
            # exact in int64 (byte counts: ≤ 255³ per row; else a total below 2^20 bounds the
            # sum of cubes by 2^60), without a float64 copy of W
            narrow = small.dtype == np.uint8 or self.top < 2.0**20
            if self.integer and small.dtype.kind in "iu" and p in (2, 3) and narrow:
                ops = [small] * p
                powers = np.einsum(",".join(["ij"] * p) + "->i", *ops, dtype=np.int64)
                return powers.astype(np.float64)  # type: ignore[no-any-return]
            w = self.w if not self.integer else small.astype(np.float64)
            if p == 3:
                return np.einsum("ij,ij,ij->i", w, w, w)  # type: ignore[no-any-return]
            return np.sum(w**p, axis=1)  # type: ignore[no-any-return]

        return self.get(f"power_sum:{p}", compute)  # type: ignore[no-any-return]

    @property
    def integer(self) -> bool:
        """Whether every weight is an integer (bootstrap counts times integer base weights)."""
        self.small()
        return self._cache["integer"]  # type: ignore[no-any-return]

    def small(self) -> Any:
        """W as the narrowest integer type that holds it (gathers move fewer bytes), or W."""

        def compute() -> Any:
            w = self.w
            if w.dtype.kind in "iu":  # counts drawn straight into an integer block
                self._cache["integer"] = True
                return w
            with np.errstate(invalid="ignore"):  # weights above 255 (or 2^64) are caught
                small = w.astype(np.uint8)  # by the comparison just below
            if bool(np.all(small == w)):
                self._cache["integer"] = True
                return small
            # integers as float64 counts them exactly (up to 2^53; larger floats are integers
            # too, but not counts an integer type holds)
            integer = bool(np.all(w == np.floor(w))) and float(np.max(w)) <= 2.0**53
            self._cache["integer"] = integer
            if not integer:
                return w
            return w.astype(int_type(float(np.max(w))))

        return self.get("small", compute)

    def compiled_weights(self) -> Any:
        """W as the compiled block passes take it: :meth:`small` when C-contiguous and of
        one of :data:`COMPILED_WEIGHT_TYPES`, else a float64 copy (counts above 255)."""

        def compute() -> Any:
            w = self.small()
            if w.dtype not in COMPILED_WEIGHT_TYPES or not w.flags.c_contiguous:
                w = np.ascontiguousarray(w, dtype=np.float64)
            return w

        return self.get("compiled_weights", compute)

    def by(self, name: str, order: Callable[[], IntArray]) -> Any:
        """W with its columns in a fixed order (one gather per block and order); integer
        weights stay in a narrow integer type."""

        def compute() -> Any:
            small = self.small()
            out = self.scratch(f"by:{name}", small.dtype)
            return np.take(small, order(), axis=1, out=out, mode="clip")

        return self.get(f"by:{name}", compute)

    def cum(self, name: str, order: Callable[[], IntArray]) -> Any:
        """Cumulative weights along a fixed order (exact integers for integer weights)."""

        def compute() -> Any:
            w = self.by(name, order)
            dtype = int_type(self.top) if self.integer else np.float64
            out = self.scratch(f"cum:{name}", dtype)
            return np.cumsum(w, axis=1, dtype=dtype, out=out)

        return self.get(f"cum:{name}", compute)

    def cached_cum(self, name: str) -> Any:
        """The cumulative weights along ``name``'s order if already computed, else None."""
        return self._cache.get(f"cum:{name}")

    def harmonic(self, top: float) -> FloatArray:
        """H_0..H_K (H_k = Σ_{i ≤ k} 1/i) with K ≥ ``top``, kept across blocks in the keys."""
        return self.keys.harmonic_table("harmonic", top)

    def harmonic_times(self, top: float) -> FloatArray:
        """G_k = k·H_k for k = 0..K, K ≥ ``top`` (kept across blocks)."""
        return self.keys.harmonic_table("harmonic_times", top)

    def chunk_sums(self, name: str, order: Callable[[], IntArray]) -> Any:
        """The weights along ``name``'s order summed over chunks of :data:`tuning.CHUNK`
        rows (b × ⌈N/CHUNK⌉; int64 for integer weights): a vectorised pass, where the full
        cumulative sum is latency-bound."""

        def compute() -> Any:
            w = self.by(name, order)
            n, size = w.shape[1], tuning.CHUNK
            full = n // size
            wide = np.int64 if self.integer else np.float64
            sums = w[:, : full * size].reshape(self.rows, full, size).sum(axis=2, dtype=wide)
            if full * size < n:
                tail: Any = np.sum(w[:, full * size :], axis=1, dtype=wide)
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
        n, size = w.shape[1], tuning.CHUNK
        chunk = pos // size
        before = np.cumsum(self.chunk_sums(name, order), axis=1)  # C at each chunk's end
        base = np.where(chunk > 0, np.take(before, np.maximum(chunk - 1, 0), axis=1), 0)
        rows = (chunk * size)[:, None] + np.arange(size)[None, :]
        below = rows < pos[:, None]
        part = np.where(below, np.take(w, np.minimum(rows, n - 1), axis=1), 0)
        return (base + np.sum(part, axis=2)).astype(np.float64)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Partial:
    """The values of the block's resamples where ``done`` (a boolean mask over them); the
    others go resample by resample through the metric's implementation (which then says why
    one is undefined), e.g. where the evaluator's conditions hold on some resamples only."""

    values: FloatArray
    done: np.ndarray[Any, np.dtype[np.bool_]]


#: b values (NaN where undefined) from a block, a :class:`Deferred` of them, a :class:`Partial`
#: block, or None: not applicable to this block.
BlockEvaluator = Callable[[BlockContext], "FloatArray | Partial | Deferred | None"]


def context(keys: Keys, w: FloatArray, lin: FloatArray | None = None) -> BlockContext:
    """The shared context of one block of dense weights and its row sums."""
    return BlockContext(keys, w, lin)
