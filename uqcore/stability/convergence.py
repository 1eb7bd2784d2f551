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

**Resampling unit.** ``unit="row"`` (default) subsamples rows. ``unit="group"`` subsamples
whole groups of ``groups`` (e.g. images, when the rows are pixels): sizes then count groups
(2³, 2⁴, …, G), a subset of m groups contains every row of those m groups, and the minimum
reliable size is a number of groups. Use it whenever the rows within a group are dependent: a
row-level subset of m pixels spread over many images is far less variable than m pixels of a
few images, and the row-level curve would overstate the stability.

Subsets are weight vectors (0/1) for the engine; small subsets are gathered as index sets.
Subset r of size m is drawn from ``default_rng([seed, 3, m, r])``, the path's order from
``default_rng([seed, 2])`` (orders of the G groups for ``unit="group"``, groups numbered in the
sorted order of their labels): same seed, same output.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from uqcore._scaling import std
from uqcore._validation import UQValidationError
from uqcore.stability._engine import (
    Engine,
    Progress,
    Resample,
    StabilityResult,
    batch_extra,
    batch_targets,
    default_block,
    finish,
    make_batch,
    scalar,
    select_metrics,
)
from uqcore.stability.bootstrap import check_resamples
from uqcore.stability.weights import (
    STREAM_PATH,
    STREAM_SUBSETS,
    group_codes,
    resample_rng,
    subsample_indices,
)

__all__ = ["convergence", "default_sizes", "minimum_reliable_size"]

ToleranceType = Literal["relative", "absolute"]
SubsetUnit = Literal["row", "group"]


class _GroupRows:
    """Rows of a set of groups: group codes 0..G-1 per row -> sorted row indices."""

    def __init__(self, codes: np.ndarray[Any, Any], n_groups: int) -> None:
        self.codes = codes
        self.n_groups = n_groups
        self.sizes = np.bincount(codes, minlength=n_groups)

    def rows(self, chosen: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.int64]]:
        sel = np.zeros(self.n_groups, dtype=bool)
        sel[chosen] = True
        return np.flatnonzero(sel[self.codes]).astype(np.int64)


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
    unit: SubsetUnit = "row",
    block_size: int | None = None,
    estimators: str | Sequence[str] | None = None,
    progress: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> StabilityResult:
    """Metrics on nested and on independent random subsets of growing size.

    Parameters
    ----------
    prediction, y, metrics, params, sample_weight
        As in :func:`uqcore.evaluate`.
    groups : array_like, shape (N,), optional
        Group labels: the subsampling unit for ``unit="group"``; also passed to the batch
        where it takes them (for group metrics).
    unit : {"row", "group"}
        Subsample rows (default) or whole groups of ``groups`` (sizes then count groups; see
        the module docstring).
    repeats : int
        R, independent subsets per size (default 100).
    seed : int
    sizes : list of int, optional
        Subset sizes (rows, or groups for ``unit="group"``); default 2³, 2⁴, …, N (or G).
    quantiles : list of float
        Quantile levels of the R subset values reported per size.
    tolerance, tolerance_type, coverage
        Define the minimum reliable size (see the module docstring): the central ``coverage``
        range of the subset values must lie within ``tolerance`` (relative to |full value|, or
        absolute) of the full-set value.
    estimators : "all" or list of str, optional
        Classification: also compute every metric that takes an ``estimator`` option for each
        of these estimators, as the entry ``"metric[estimator]"`` (as in
        :func:`uqcore.evaluate`; the metric's own estimator keeps the entry ``"metric"``).
    progress : callable, optional
        Called with the fraction done (increasing, in (0, 1], the last call 1.0) after each
        block of subsets of each size (a size's share is proportional to it: a subset costs
        about its size); what it raises stops the computation. The results do not depend on
        it.
    **kwargs
        Further keyword arguments of the prediction's batch, passed through: for
        classification ``ood`` and ``soft_labels`` (as in :func:`uqcore.evaluate`).

    Returns
    -------
    StabilityResult
        name -> {"value" (full set), "path", "mean", "std", "bias", "quantiles" (level ->
        list), "n_undefined", "min_reliable_size", "warnings"}; lists are per size.
        ``to_dict()`` adds sizes, repeats, seed, the resampling unit and the tolerance (and,
        for ``unit="group"``, the number of groups and the mean number of rows per size).

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=256)
    >>> cur = convergence(P.Gaussian(np.zeros(256), np.ones(256)), y, ["mae"], repeats=20)
    >>> cur.meta["sizes"], len(cur["mae"]["mean"])
    ([8, 16, 32, 64, 128, 256], 6)
    """
    r_count = check_resamples(repeats, "repeats")
    done = Progress(progress)
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
    if unit not in ("row", "group"):
        raise UQValidationError(f"unit must be 'row' or 'group', found {unit!r}")
    extra = batch_extra(kwargs, groups, prediction)
    batch = make_batch(prediction, y, sample_weight, extra)
    n_rows = batch.n
    grouping: _GroupRows | None = None
    if unit == "group":
        grouping = _GroupRows(*group_codes(groups, n_rows))
    n = n_rows if grouping is None else grouping.n_groups  # the number of units
    chosen, not_applicable = select_metrics(
        [prediction],
        metrics,
        params,
        targets=batch_targets(batch),
        estimators=estimators,
        sample_weight=batch.weights,
    )
    size_list = _check_sizes(sizes, n)
    engine = Engine(batch, chosen, extra)
    full = engine.compute_full()

    def subset(units: np.ndarray[Any, Any]) -> Resample:
        rows = np.sort(units).astype(np.int64) if grouping is None else grouping.rows(units)
        return Resample(np.ones(rows.shape[0]), rows)

    order = resample_rng(seed, STREAM_PATH).permutation(n)
    path = engine.values([subset(order[:m]) for m in size_list])

    sub_sizes = [m for m in size_list if m < n]
    block = block_size if block_size is not None else default_block(n_rows, r_count)
    block = check_resamples(block, "block_size")
    per_size: list[dict[str, np.ndarray[Any, Any]]] = []
    rows_per_size: list[float] = []
    total_cost = float(sum(sub_sizes)) or 1.0
    cost_done = 0.0
    for m in sub_sizes:
        share = done.span(cost_done / total_cost, (cost_done + m) / total_cost)
        cost_done += m

        def make(indices: Sequence[int], m: int = m) -> list[Resample]:
            out = [
                subset(subsample_indices(n, m, resample_rng(seed, STREAM_SUBSETS, m, r)))
                for r in indices
            ]
            rows_per_size.extend(float(r.support()) for r in out)
            return out

        count0 = len(rows_per_size)
        per_size.append(engine.run(make, r_count, block, share))
        rows_per_size[count0:] = [float(np.mean(rows_per_size[count0:]))]
    done.finish()
    if size_list[-1] == n:
        rows_per_size.append(float(n_rows))

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
                stds.append(std(ok, ddof=1) if ok.shape[0] > 1 else 0.0)
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
        if c.spec.biased:
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
        "n": n_rows,
        "weighted": batch.weights is not None,
        "resampling": {
            "unit": unit,
            "scheme": "subsets without replacement"
            + (" of whole groups (sizes count groups)" if unit == "group" else ""),
            "path": "nested prefixes of one random order"
            + (" of the groups" if unit == "group" else ""),
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
    if grouping is not None:
        meta["n_groups"] = n
        meta["mean_rows_per_size"] = rows_per_size
    return finish(entries, meta, warnings_, not_applicable)
