"""The compiled kernels of :mod:`uqcore._jit` (numba), loaded on first use.

:func:`kernels` compiles them (or loads them from numba's cache) once per process, for the
argument types uqcore passes, and returns ``None`` where numba is missing or cannot compile:
the callers then run their numpy algorithms, which give the same results, slower. Workers call
it at start (``worker.runtime.warm_kernels``), before any job's memory limit.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

__all__ = ["frozen_float64", "kernels"]

_KERNELS: list[Any] = []


def kernels() -> Any:
    """The compiled kernels (:mod:`uqcore._jit`), compiled or loaded from numba's cache on the
    first call; ``None`` where numba is not installed or cannot compile (the callers' numpy
    algorithms then run: the same results, slower). ``UQCORE_JIT=0`` turns them off."""
    if not _KERNELS:
        _KERNELS.append(_load_kernels())
    return _KERNELS[0]


def frozen_float64(a: Any) -> np.ndarray[Any, Any]:
    """``a`` as a contiguous float64 read-only view (a copy only where it is not contiguous
    float64), for the kernels compiled once, for read-only arrays, whatever the caller's
    arrays are (writable or not: numba types the two apart)."""
    view: np.ndarray[Any, Any] = np.ascontiguousarray(a, dtype=np.float64).view()
    view.setflags(write=False)
    return view


def _load_kernels() -> Any:
    if os.environ.get("UQCORE_JIT", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        from uqcore import _jit

        _warm(_jit)
    except Exception as exc:  # no numba, or no compiler for this platform
        warnings.warn(
            f"uqcore: the compiled kernels are unavailable ({exc!r}); using numpy (slower)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    return _jit


def _warm(jit: Any) -> None:
    """Compile every kernel for the types uqcore passes (float64 throughout; the WIS rows also
    for float32 quantiles; AUSE's prefix sums also along a reversed view; the rank sums for
    byte counts and int32 cumulative counts; the radix sort along contiguous and reversed
    arrays, with and without the order; read-only inputs wherever a kernel reads the
    prediction's or the targets' own arrays), so that no job compiles."""
    one, start = np.ones(2), np.zeros(1, dtype=np.intp)
    # a worker's inputs may be read-only memory maps, passed on as they are: the kernels that
    # read inputs (rather than arrays uqcore made) are compiled for them too
    frozen = np.ones(2)
    frozen.setflags(write=False)
    jit.quantile_isotonic(one, one, start, 0.5)
    jit.lower_quantile(one, one, 0.5)
    jit.pinball_sums(one, one, one, start, one[:1], 0.0, 0.5)
    cols, coef = np.zeros(1, dtype=np.intp), np.ones(1)
    for dtype in (np.float64, np.float32):
        q = np.ones((2, 1), dtype=dtype)
        fixed = q.copy()
        fixed.setflags(write=False)
        out = [np.empty(2, dtype=dtype) for _ in range(3)]
        for quantiles, y in ((q, one), (q, frozen), (fixed, frozen)):
            jit.wis_rows(quantiles, y, 0, cols, coef, coef, coef, *out)
    for s in (one, frozen):
        jit.ratio_order_stats(one, s, 0, 1)
    for err in (one, one[::-1]):  # contiguous, and a reversed view
        jit.prefix_mean_sum(err)
    for x in (one, frozen):
        jit.scaled_table(x, x, x, 0.0, 1.0, 1.0, start, one, one, one)
        jit.ks_distance(x, 2.0)
        jit.count_between(x, x, x, one, one)
        for y in (one, frozen):
            jit.min_max_pair(x, y)
            jit.pearson_sums(x, y, 1.0, 1.0, 1.0, 1.0)
    counts = np.ones((1, 2), dtype=np.uint8)
    cum = np.array([[1, 2]], dtype=np.int32)
    for index in (np.int32, np.intp):  # int32 orders below 2^31 rows
        order = np.arange(2, dtype=index)
        jit.rank_sums(
            counts, cum, counts, order, order, one, one, np.ones(3), np.ones(3), np.empty_like(cum)
        )
    jit.pav_unit(one)
    # the CORP decomposition of the mean, a block of resamples: the weights along the
    # forecasts' order as the block holds them (counts in a narrow integer type, or real)
    for w_type in (np.uint8, np.uint16, np.int32, np.int64, np.float64):
        jit.corp_mean_sums(
            one,
            one,
            np.ones((1, 2), dtype=w_type),
            np.empty((1, 4)),
            np.empty(2),
            np.empty(2),
            np.empty(2, dtype=np.int64),
        )
    # size-stratified coverage: cumulative weights of counts (int32, int64) or real weights
    for cum_type in (np.int32, np.int64, np.float64):
        jit.strata_worst_coverage(
            np.ones((1, 2), dtype=cum_type),
            one,
            np.ones(2, dtype=np.int64),
            3,
            np.empty(1),
            np.empty(3),
            np.empty(3),
        )
    # the skill scores' climatological sums: cumulative weights of counts (int32, int64) or of
    # real weights, a block of resamples
    for cum_type in (np.int32, np.int64, np.float64):
        for crps in (False, True):
            jit.climatology_sums(
                np.ones((1, 2), dtype=cum_type),
                one[:1],
                one,
                np.ones(3),
                np.ones(3),
                one[:1],
                crps,
                np.empty(1),
            )
    # the random groups of adversarial group calibration: a seeded generator, int64 totals,
    # the expected proportions as given (the calibration tally's are read-only), and the
    # read-only table of log(k!)
    table = np.zeros(4)
    jit.fill_log_factorials(table, 1)
    table.setflags(write=False)
    colors = np.ones(2, dtype=np.int64)
    sizes = np.ones(1, dtype=np.int64)
    for expected in (one[:1], frozen[:1]):
        for root in (False, True):
            errors = np.empty((1, 2))
            jit.group_errors(np.random.default_rng(0), colors, sizes, expected, root, table, errors)
    # the Murphy diagram's sums: read-only views (frozen_float64), unit weights
    # (an empty array) or weights, the mean's expectile and quantiles
    grid = np.array([0.0, 1.0])
    grid.setflags(write=False)
    for weights in (frozen[:0], frozen):
        for expectile in (True, False):
            sums = np.zeros((6, 3))
            jit.elementary_score_bins(frozen, frozen, weights, grid, 0.5, expectile, sums)
    # a bootstrap resample's counts, into a row of the block (counts in a narrow integer type,
    # or real weights) or a new int64 array
    halves, totals = np.zeros(2, dtype=np.uint32), np.ones(1, dtype=np.int64)
    for w_type in (np.uint8, np.int64, np.float64):
        jit.chunk_counts(halves, 31, totals, 2, np.empty(2, dtype=w_type), 255.0)
    # HSIC's box moments: read-only views (frozen_float64); and a block of resamples (the
    # bootstrap's block path): the weights as BlockContext.compiled_weights gives them (byte
    # counts or real), whole and a resample's row
    jit.box_moments(frozen, frozen, 0.0, 0.125, 3)
    for w_type in (np.uint8, np.float64):
        block = np.ones((1, 2), dtype=w_type)
        jit.kept_ends(block, np.arange(2, dtype=np.intp), np.empty((1, 2), dtype=np.int64))
        jit.weighted_spread(one, block[0], 1.0, 2.0)
        jit.weighted_box_moments(one, one, block[0], 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 0.125, 3)
    bits = np.ones(3).view(np.uint64)
    fixed_bits = bits.copy()
    fixed_bits.setflags(write=False)
    into, rows = np.empty(3, dtype=np.uint64), np.empty(3, dtype=np.int64)
    keys, idx = np.empty(3, dtype=np.uint64), np.empty(3, dtype=np.int32)
    for src in (bits, bits[::-1], fixed_bits, fixed_bits[::-1]):  # contiguous, and reversed
        jit.radix_sort(src, into, rows, keys, idx, idx.copy())
        jit.radix_sort(src, into, idx.copy(), keys, idx, idx.copy())  # an int32 order
        jit.radix_sort(src, into, rows[:0], keys, idx[:0], idx[:0])
