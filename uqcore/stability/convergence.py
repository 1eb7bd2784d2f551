"""Convergence of metrics with the test-set size (xiong2024 §IV-C, Fig. 4).

Two experiments on subsets drawn without replacement from the N rows, at sizes 2³, 2⁴, …, N:

1. **Convergence path** (Fig. 4a): one seeded random order of the rows; the metric on its first
   m rows for every size m (nested subsets, as when test points are collected one by one).
2. **Bias of the mean** (Fig. 4b): R independent subsets per size (default 100); the mean, std
   and quantiles of the metric over them, and the bias of the mean (mean − full-set value).

From (2), the **minimum reliable test-set size** of a metric: the smallest size m such that at m
and at every larger size the central ``coverage`` range of the R subset values (default the
5%–95% quantiles) lies within ``tolerance`` of the full-set value — relative
(``tolerance · |full value|``, default 10%) or absolute (``tolerance_type="absolute"``). A
relative tolerance is meaningless for a full-set value near 0 (e.g. a calibration error of a
well-calibrated model); use an absolute one there. At m = N the spread is 0, so the answer is
at most N; N means "not stable below the full set".

Subsets are weight vectors (0/1) for the engine; small subsets are gathered as index sets.
Subset r of size m is drawn from ``default_rng([seed, 3, m, r])``, the path's order from
``default_rng([seed, 2])``: same seed, same output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.stability._engine import (
    BIASED_METRICS,
    Engine,
    Resample,
    StabilityResult,
    batch_extra,
    default_block,
    finish,
    make_batch,
    scalar,
    select_metrics,
)
from uqcore.stability.bootstrap import check_resamples
from uqcore.stability.weights import STREAM_PATH, STREAM_SUBSETS, resample_rng, subsample_indices

__all__ = ["convergence", "default_sizes", "minimum_reliable_size"]

ToleranceType = Literal["relative", "absolute"]


def default_sizes(n: int, smallest: int = 8) -> list[int]:
    """2³, 2⁴, … up to the largest power of two below N, then N."""
    sizes = []
    m = smallest
    while m < n:
        sizes.append(m)
        m *= 2
    sizes.append(n)
    return sizes


def _check_sizes(sizes: Any, n: int) -> list[int]:
    if sizes is None:
        return default_sizes(n)
    out = sorted({int(s) for s in sizes})
    if not out or out[0] < 1 or out[-1] > n:
        raise UQValidationError(f"sizes must be integers in [1, {n}], found {list(sizes)!r}")
    return out


def minimum_reliable_size(
    sizes: Sequence[int],
    low: Sequence[float | None],
    high: Sequence[float | None],
    full: float | None,
    tolerance: float,
    tolerance_type: ToleranceType = "relative",
) -> int | None:
    """Smallest size from which [low, high] stays within the tolerance of the full value.

    ``low``/``high`` are the spread bounds per size (e.g. the 5% and 95% quantiles over the
    subsets). The tolerance band is full ± tolerance·|full| (relative) or full ± tolerance
    (absolute). ``None`` if the full value is undefined or no size qualifies.

    >>> minimum_reliable_size([8, 16, 32], [0.5, 0.95, 0.99], [1.5, 1.04, 1.0], 1.0, 0.05)
    16
    """
    if full is None or not math.isfinite(full):
        return None
    tol = tolerance * abs(full) if tolerance_type == "relative" else tolerance
    answer: int | None = None
    for m, lo, hi in reversed(list(zip(sizes, low, high, strict=True))):
        if lo is None or hi is None or not (full - tol <= lo and hi <= full + tol):
            break
        answer = int(m)
    return answer


def convergence(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    repeats: int = 100,
    seed: int = 0,
    sizes: Sequence[int] | None = None,
    quantiles: Sequence[float] = (0.05, 0.25, 0.5, 0.75, 0.95),
    tolerance: float = 0.1,
    tolerance_type: ToleranceType = "relative",
    coverage: float = 0.9,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    block_size: int | None = None,
    **kwargs: Any,
) -> StabilityResult:
    """Metrics on nested and on independent random subsets of growing size.

    Parameters
    ----------
    prediction, y, metrics, params, sample_weight
        As in :func:`uqcore.evaluate`.
    groups : array_like, optional
        Group labels, passed to the batch where it takes them (for group metrics).
    repeats : int
        R, independent subsets per size (default 100).
    seed : int
    sizes : list of int, optional
        Subset sizes; default 2³, 2⁴, …, N.
    quantiles : list of float
        Quantile levels of the R subset values reported per size.
    tolerance, tolerance_type, coverage
        Define the minimum reliable size (see the module docstring): the central ``coverage``
        range of the subset values must lie within ``tolerance`` (relative to |full value|, or
        absolute) of the full-set value.

    Returns
    -------
    StabilityResult
        name -> {"value" (full set), "path", "mean", "std", "bias", "quantiles" (level ->
        list), "n_undefined", "min_reliable_size", "warnings"}; lists are per size.
        ``to_dict()`` adds sizes, repeats, seed, the resampling unit and the tolerance.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=256)
    >>> cur = convergence(P.Gaussian(np.zeros(256), np.ones(256)), y, ["mae"], repeats=20)
    >>> cur.meta["sizes"], len(cur["mae"]["mean"])
    ([8, 16, 32, 64, 128, 256], 6)
    """
    r_count = check_resamples(repeats, "repeats")
    qs = [float(q) for q in quantiles]
    if any(not 0 <= q <= 1 for q in qs):
        raise UQValidationError(f"quantiles must lie in [0, 1], found {list(quantiles)!r}")
    if tolerance_type not in ("relative", "absolute"):
        raise UQValidationError(
            f"tolerance_type must be 'relative' or 'absolute', found {tolerance_type!r}"
        )
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        raise UQValidationError(f"tolerance must be a number >= 0, found {tolerance!r}")
    if not (isinstance(coverage, (int, float)) and 0 < coverage <= 1):
        raise UQValidationError(f"coverage must be in (0, 1], found {coverage!r}")
    extra = batch_extra(kwargs, groups)
    batch = make_batch(prediction, y, sample_weight, extra)
    n = batch.n
    chosen, not_applicable = select_metrics([prediction], metrics, params)
    size_list = _check_sizes(sizes, n)
    engine = Engine(batch, chosen, extra)
    full = engine.compute_full()

    order = resample_rng(seed, STREAM_PATH).permutation(n)
    path_resamples = [Resample(np.ones(m), np.sort(order[:m]).astype(np.int64)) for m in size_list]
    path = engine.values(path_resamples)

    sub_sizes = [m for m in size_list if m < n]
    block = block_size if block_size is not None else default_block(n, r_count)
    block = check_resamples(block, "block_size")
    per_size: list[dict[str, np.ndarray[Any, Any]]] = []
    for m in sub_sizes:

        def make(indices: Sequence[int], m: int = m) -> list[Resample]:
            return [
                Resample(
                    np.ones(m), subsample_indices(n, m, resample_rng(seed, STREAM_SUBSETS, m, r))
                )
                for r in indices
            ]

        per_size.append(engine.run(make, r_count, block))

    lo_q, hi_q = (1 - coverage) / 2, (1 + coverage) / 2
    entries: dict[str, Any] = {}
    warnings_: list[str] = list(engine.full_notes)
    for c in chosen:
        theta = scalar(full[c.name])
        means: list[float] = []
        stds: list[float] = []
        biases: list[float] = []
        undef: list[int] = []
        lows: list[float | None] = []
        highs: list[float | None] = []
        qvals: dict[str, list[float | None]] = {f"{q:g}": [] for q in qs}
        for j, m in enumerate(size_list):
            # at m = N every subset is the full set: one value, no spread
            v = per_size[j][c.name] if m < n else np.array([theta])
            ok = v[np.isfinite(v)]
            undef.append(int(v.shape[0] - ok.shape[0]) * (1 if m < n else r_count))
            if ok.shape[0]:
                # at m = N every subset is the full set: its mean is the full-set value
                means.append(float(np.mean(ok)))
                stds.append(float(np.std(ok, ddof=1)) if ok.shape[0] > 1 else 0.0)
                biases.append(means[-1] - theta)
                for q, val in zip(qs, np.quantile(ok, qs), strict=True):
                    qvals[f"{q:g}"].append(float(val))
                lo, hi = np.quantile(ok, [lo_q, hi_q])
                lows.append(float(lo))
                highs.append(float(hi))
            else:
                means.append(math.nan)
                stds.append(math.nan)
                biases.append(math.nan)
                for q in qs:
                    qvals[f"{q:g}"].append(None)
                lows.append(None)
                highs.append(None)
        notes: list[str] = []
        if any(undef):
            notes.append(
                "undefined on some subsets (per size: "
                + ", ".join(f"{m}: {u}" for m, u in zip(size_list, undef, strict=True) if u)
                + f" of {r_count}); they are left out"
            )
        if c.name in BIASED_METRICS:
            notes.append(
                "this estimator has a finite-sample bias: small-subset values are shifted "
                "(see 'bias')"
            )
        if tolerance_type == "relative" and math.isfinite(theta) and abs(theta) < 1e-3:
            notes.append(
                "the full-set value is near 0, so a relative tolerance is very strict; "
                "use tolerance_type='absolute'"
            )
        full_or_none = theta if math.isfinite(theta) else None
        entries[c.name] = {
            "value": full_or_none,
            # the last point of the path is the full set: report the full-set value itself
            "path": [
                full_or_none if m == n else float(p)
                for m, p in zip(size_list, path[c.name], strict=True)
            ],
            "mean": means,
            "std": stds,
            "bias": biases,
            "quantiles": qvals,
            "spread_low": lows,
            "spread_high": highs,
            "n_undefined": undef,
            "min_reliable_size": minimum_reliable_size(
                size_list, lows, highs, full_or_none, float(tolerance), tolerance_type
            ),
            "direction": c.spec.direction,
            "warnings": notes,
        }
        warnings_.extend(f"{c.name}: {m}" for m in notes)
    warnings_.extend(engine.other_warnings)
    meta = {
        "analysis": "convergence",
        "seed": seed,
        "repeats": r_count,
        "sizes": size_list,
        "n": n,
        "weighted": batch.weights is not None,
        "resampling": {
            "unit": "row",
            "scheme": "subsets without replacement",
            "path": "nested prefixes of one random order",
            "subsets": f"{r_count} independent subsets per size",
        },
        "quantile_levels": qs,
        "reliability": {
            "tolerance": float(tolerance),
            "tolerance_type": tolerance_type,
            "coverage": float(coverage),
            "rule": "smallest size from which the central coverage range of the subset "
            "values stays within the tolerance of the full-set value at every larger size",
        },
        "params": {c.name: c.params for c in chosen},
    }
    return finish(entries, meta, warnings_, not_applicable)
