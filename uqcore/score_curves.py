"""The curves of the score decompositions: the CORP reliability diagram (regression and
classification) and the Murphy diagram of elementary scores (regression).

``corp_reliability`` (Dimitriadis, Gneiting & Jordan 2021): the isotonic recalibration x̂ as
a step function of the forecast x, one step per PAV block — the block's least and largest
distinct forecast (of positive weight), x̂ on it and the block's total weight, as R's
``reliabilitydiag`` gives them (``bin_lwr``, ``bin_upr``, ``CEP_pav``) — with the MCB, DSC,
UNC and score of the same fit (:mod:`uqcore._isotonic`). The steps are the whole fit
(x̂ at any distinct forecast is the value of the step holding it), and there are usually far
fewer of them than rows; where there are more than ``max_steps`` (at most one per distinct
forecast, e.g. outcomes increasing with the forecast), consecutive steps are merged into
``max_steps`` steps of about equal weight, each with the weighted mean of their x̂ (then
``merged`` is true: a drawing's resolution, not the fit; MCB, DSC, UNC are always the
fit's). For regression the forecast is the point (``functional="mean"``)
or the quantile at ``level``; for classification the top-label confidence against
correctness, or the probability of class 1 (``target="binary"``).

``murphy_diagram`` (Ehm, Gneiting, Jordan & Krüger 2016, JRSS-B 78:505, eqs. 9 and 11): the
weighted mean elementary score S̄(θ) = Σ_i w_i S_θ(x_i, y_i) / Σ_i w_i on a grid of θ, with

    quantile α:   S_θ(x, y) = (1{y < x} − α)(1{θ < x} − 1{θ < y}),
    expectile τ:  S_θ(x, y) = |1{y < x} − τ| ((y − θ)₊ − (x − θ)₊ − (y − x) 1{θ < x}),

the mean being the expectile τ = ½. The pinball loss is the mixture ∫ S_θ dθ and the squared
error 4 ∫ S_θ dθ (τ = ½), so the area under the diagram is the score. Grid: ``thetas`` when
given, else ``n_points`` points evenly from the least to the largest of the forecasts and the
targets (beyond them every S_θ is 0). Cost O(N log K + K) for K thresholds: each row is
binned into the grid once (a row scores only for θ in [min(x, y), max(x, y))) and the means
follow by cumulative sums over the grid (:func:`elementary_scores`), equal to the direct
N × K sum to rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._backend import host_floats, to_numpy
from uqcore._compiled import frozen_float64, kernels
from uqcore._validation import UQValidationError
from uqcore.batch import make_batch, regression_batch

__all__ = ["CorpReliability", "MurphyDiagram", "corp_reliability", "murphy_diagram"]

NDArray = np.ndarray[Any, Any]


@dataclass(frozen=True)
class CorpReliability:
    """The CORP reliability diagram: per step, x̂ (``fitted``) on the forecasts from
    ``x_min`` to ``x_max`` and their total ``weight``."""

    x_min: tuple[float, ...]
    x_max: tuple[float, ...]
    fitted: tuple[float, ...]
    weight: tuple[float, ...]
    mcb: float
    dsc: float
    unc: float
    score: float
    #: "mean" or "quantile" (regression), "top_label" or "binary" (classification)
    functional: str
    level: float | None = None
    #: the fit's steps, and whether they were merged into fewer (``max_steps``)
    steps: int = 0
    merged: bool = False


#: The most steps :func:`corp_reliability` gives by default (a drawing shows no more).
MAX_STEPS = 2000


def _steps(
    x: NDArray, fitted: NDArray, weight: NDArray, max_steps: int | None
) -> tuple[NDArray, NDArray, NDArray, NDArray, int, bool]:
    """(x_min, x_max, fitted, weight) per step of the fit at the distinct forecasts ``x``,
    the number of steps of the fit, and whether they were merged."""
    new = np.empty(fitted.shape[0], dtype=bool)
    new[:1] = True
    np.not_equal(fitted[1:], fitted[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], fitted.shape[0]) - 1
    w = np.add.reduceat(weight, starts) if starts.shape[0] else weight[:0]
    x_lo, x_hi, f = x[starts], x[ends], fitted[starts]
    steps = int(starts.shape[0])
    if max_steps is None or steps <= max_steps:
        return x_lo, x_hi, f, w, steps, False
    # groups of consecutive steps of about equal weight: step k joins group ⌊m·W_k / W⌋,
    # W_k the weight before it (non-decreasing, so the groups are runs)
    before = np.concatenate(([0.0], np.cumsum(w)[:-1]))
    group = np.minimum((before / (before[-1] + w[-1]) * max_steps).astype(np.intp), max_steps - 1)
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    last = np.append(first[1:], steps) - 1
    gw = np.add.reduceat(w, first)
    gf = np.add.reduceat(w * f, first) / gw
    return x_lo[first], x_hi[last], np.maximum.accumulate(gf), gw, steps, True


@dataclass(frozen=True)
class MurphyDiagram:
    """Mean elementary scores ``score`` at the thresholds ``theta``."""

    theta: tuple[float, ...]
    score: tuple[float, ...]
    functional: str
    level: float


def _floats(a: Any) -> tuple[float, ...]:
    return host_floats(np.asarray(a, dtype=np.float64))


def corp_reliability(
    prediction: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    functional: Literal["mean", "quantile", "top_label", "binary"] | None = None,
    level: float = 0.5,
    max_steps: int | None = MAX_STEPS,
) -> CorpReliability:
    """The CORP reliability diagram (see the module docstring); ``functional`` defaults to
    "mean" (regression) or "top_label" (classification); ``max_steps``: the most steps given
    (None: every step of the fit).

    >>> import numpy as np; from uqcore import predictions as P
    >>> c = corp_reliability(P.PointUncertainty([0.0, 1.0, 2.0], [1.0] * 3), [1.0, 0.0, 2.0])
    >>> c.x_min, c.x_max, c.fitted, c.weight, round(c.mcb, 6)
    ((0.0, 2.0), (1.0, 2.0), (0.5, 2.0), (2.0, 1.0), 0.5)
    """
    if max_steps is not None and int(max_steps) < 1:
        raise UQValidationError(f"max_steps must be >= 1, found {max_steps}", argument="max_steps")
    batch = make_batch(prediction, y, sample_weight)
    if getattr(prediction, "task", "regression") == "classification":
        from uqcore.classification.corp import corp_of as class_corp

        target = functional or "top_label"
        if target not in ("top_label", "binary"):
            raise UQValidationError(
                f"functional must be 'top_label' or 'binary' for classification, found {target!r}",
                argument="functional",
            )
        from uqcore.classification.corp import binary_undefined

        why = binary_undefined(batch, target)  # type: ignore[arg-type]
        if why is not None:
            raise UQValidationError(why, argument="functional")
        d = class_corp(batch, target)  # type: ignore[arg-type]
        lv = None
    else:
        from uqcore.regression.decomposition import corp_of

        fn = functional or "mean"
        if fn not in ("mean", "quantile"):
            raise UQValidationError(
                f"functional must be 'mean' or 'quantile' for regression, found {fn!r}",
                argument="functional",
            )
        got = corp_of(batch, fn, float(level))  # type: ignore[arg-type]
        if isinstance(got, str):
            raise UQValidationError(f"corp_reliability is undefined: {got}")
        d, target, lv = got, fn, (float(level) if fn == "quantile" else None)
    x_lo, x_hi, f, w, steps, merged = _steps(
        np.asarray(d.x, dtype=np.float64),
        np.asarray(d.fitted, dtype=np.float64),
        np.asarray(d.weight, dtype=np.float64),
        None if max_steps is None else int(max_steps),
    )
    return CorpReliability(
        x_min=_floats(x_lo),
        x_max=_floats(x_hi),
        fitted=_floats(f),
        weight=_floats(w),
        steps=steps,
        merged=merged,
        mcb=d.mcb,
        dsc=d.dsc,
        unc=d.unc,
        score=d.score,
        functional=target,
        level=lv,
    )


#: The weights argument of the compiled pass for unit weights.
_NO_WEIGHTS = np.empty(0)
_NO_WEIGHTS.setflags(write=False)


#: Rows per step of :func:`elementary_scores` (its per-row temporaries, about 100 bytes a
#: row, stay bounded; up to this many rows it is one step).
_SCORE_CHUNK = 1 << 20


def elementary_scores(
    x: NDArray, y: NDArray, w: NDArray | None, thetas: NDArray, functional: str, level: float
) -> NDArray:
    """Σ_i w_i S_θ(x_i, y_i) / Σ_i w_i for each θ of ``thetas`` (any order, repeats allowed),
    in O(N log K + K) for K distinct thresholds.

    A row's elementary score is nonzero only for θ in [min(x, y), max(x, y)), where it is the
    constant c = w (1 − α) if y < x, w α if x < y (quantile), or c |θ − y| with
    c = w |1{y < x} − τ| (expectile). Each row is binned into the sorted distinct thresholds
    (the first active one at its lower end, the first inactive one at its upper end); the
    mean then follows by one cumulative sum over the grid: rows entering add their value at
    their first active θ, rows leaving take off their value at their last one, and the rows
    active on both sides of a step move by their slope ±c times the step. Every summand is a
    row's own score or a slope times a grid step, so no large centred sums cancel; where no
    row of nonzero weight is active the mean is exactly 0, as the direct sum.
    """
    total = float(y.shape[0]) if w is None else float(np.sum(w))
    grid, where = np.unique(thetas, return_inverse=True)
    k = grid.shape[0]
    m = k + 1
    expectile = functional != "quantile"
    # per-threshold sums over the rows, accumulated chunk by chunk (bounded temporaries at
    # any N): rows live from / to each θ, and (quantile) c or (expectile) slope, entering and
    # leaving values by their first active and first inactive θ
    live_in, live_out, rate_in, rate_out, enter_at, leave_at = (np.zeros(m) for _ in range(6))
    n = int(y.shape[0])
    jit = kernels()
    for a in range(0, n, _SCORE_CHUNK):
        rows = slice(a, min(a + _SCORE_CHUNK, n))
        if jit is not None:
            # the same sums of the chunk's rows in one compiled pass (equal to the bit)
            part = np.zeros((6, m))
            jit.elementary_score_bins(
                frozen_float64(x[rows]),
                frozen_float64(y[rows]),
                _NO_WEIGHTS if w is None else frozen_float64(w[rows]),
                frozen_float64(grid),
                float(level),
                expectile,
                part,
            )
            live_in += part[0]
            live_out += part[1]
            rate_in += part[2]
            rate_out += part[3]
            enter_at += part[4]
            leave_at += part[5]
            continue
        xr, yr = x[rows], y[rows]
        below = yr < xr
        lo, hi = np.minimum(xr, yr), np.maximum(xr, yr)
        first = np.searchsorted(grid, lo, side="left")  # the first θ >= lo is the first active
        stop = np.searchsorted(grid, hi, side="left")  # the first θ >= hi is the first inactive
        del lo, hi
        # c per row: (1 − α) or α for the quantile, (1 − τ) or τ for the expectile
        wr = 1.0 if w is None else w[rows]
        c = np.where(below, wr * (1.0 - level), wr * level)
        c[first >= stop] = 0.0  # x = y, or no θ in [lo, hi): the row scores 0 everywhere
        live = c != 0.0
        live_in += np.bincount(first, weights=live, minlength=m)
        live_out += np.bincount(stop, weights=live, minlength=m)
        del live
        if not expectile:
            rate_in += np.bincount(first, weights=c, minlength=m)
            rate_out += np.bincount(stop, weights=c, minlength=m)
            continue
        at = np.minimum(first, k - 1)
        enter = c * np.abs(grid[at] - yr)  # its value at its first active θ
        enter_at += np.bincount(first, weights=enter, minlength=m)
        del enter
        np.maximum(stop - 1, 0, out=at)
        leave = c * np.abs(grid[at] - yr)  # at its last active θ
        leave_at += np.bincount(stop, weights=leave, minlength=m)
        del leave, at
        slope = np.where(below, c, -c)  # d/dθ of c |θ − y| on the active range
        rate_in += np.bincount(first, weights=slope, minlength=m)
        rate_out += np.bincount(stop, weights=slope, minlength=m)
    active = np.cumsum(live_in - live_out)[:k]
    step: NDArray  # float64: bincount with weights
    if not expectile:
        step = rate_in - rate_out
    else:
        ongoing = np.cumsum(rate_in - rate_out)[:k] - rate_in[:k]
        move = np.zeros(k)
        move[1:] = np.diff(grid) * ongoing[1:]
        step = enter_at - leave_at
        step[:k] = step[:k] + move
    sums = np.cumsum(step[:k])
    sums[active == 0] = 0.0
    result: NDArray = sums[where.reshape(-1)] / total
    return result


def murphy_diagram(
    prediction: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    functional: Literal["mean", "quantile"] = "mean",
    level: float = 0.5,
    n_points: int = 101,
    thetas: Sequence[float] | None = None,
) -> MurphyDiagram:
    """The Murphy diagram of the mean (expectile ½, the point prediction) or of the quantile
    at ``level`` (see the module docstring).

    >>> import numpy as np; from uqcore import predictions as P
    >>> d = murphy_diagram(P.PointUncertainty([0.0], [1.0]), [2.0], thetas=[-1.0, 1.0, 3.0])
    >>> d.score
    (0.0, 0.5, 0.0)
    """
    batch = regression_batch(prediction, y, sample_weight)
    if functional == "mean":
        x = to_numpy(batch.point)
        lv = 0.5
    elif functional == "quantile":
        if "quantiles" not in prediction.capabilities:
            raise UQValidationError(
                f"murphy_diagram with functional='quantile' needs quantiles, which a "
                f"{prediction.kind} prediction lacks",
                argument="functional",
            )
        lv = float(level)
        x = to_numpy(prediction.ppf([lv]))[:, 0]
    else:
        raise UQValidationError(
            f"functional must be 'mean' or 'quantile', found {functional!r}", argument="functional"
        )
    x = np.asarray(x, dtype=np.float64)
    yy = np.asarray(to_numpy(batch.y), dtype=np.float64)
    w = None if batch.weights is None else np.asarray(to_numpy(batch.weights), dtype=np.float64)
    if thetas is None:
        if int(n_points) < 2:
            raise UQValidationError(f"n_points must be >= 2, found {n_points}", argument="n_points")
        lo = min(float(np.min(x)), float(np.min(yy)))
        hi = max(float(np.max(x)), float(np.max(yy)))
        grid = np.linspace(lo, hi, int(n_points))
    else:
        grid = np.asarray(thetas, dtype=np.float64)
        if grid.ndim != 1 or not bool(np.all(np.isfinite(grid))):
            raise UQValidationError("thetas must be a 1-D sequence of finite numbers")
    scores = elementary_scores(x, yy, w, grid, functional, lv)
    return MurphyDiagram(
        theta=_floats(grid), score=_floats(scores), functional=functional, level=lv
    )
