"""Calibration of regression predictions: calibration curves, ECE, RMSCE, miscalibration area,
Kuleshov's calibration error, the PIT histogram and KS test, ENCE, UCE, and sharpness.

Observed proportions come from the PIT values u_i = F_i(y_i), computed once per batch, and
every calibration metric of one ``evaluate()`` call shares one pass over them: without weights
the PIT values are sorted once (a value sort, shared with :func:`pit`) and each level costs one
``searchsorted``; with weights each row's bin on the union of all the levels' bounds is found
once and one weighted ``bincount`` gives every level. With sample weights w_i every proportion
is a share of the total weight.

Two kinds of proportions on a grid of levels p_1 < ... < p_M (default: the 99 levels
0.01, ..., 0.99, as in chung2021 appendix A.3):

``"quantile"``  (one-sided) p̂(p) = Σ w_i 1{y_i ≤ q_i(p)} / Σ w_i = share of u_i ≤ p — the
                textbook definition (chung2021 eq. 1; xiong2024 eq. 6; Kuleshov et al. 2018).
``"interval"``  (centred) p̂(p) = share of y_i in the central interval [q_i((1−p)/2),
                q_i((1+p)/2)], i.e. of u_i ∈ [(1−p)/2, (1+p)/2] (closed).

For a ``Quantiles`` prediction (no CDF) the prediction's own levels are used: the quantile
proportion at p_j is the share of y_i ≤ values[i, j], and the interval proportion is computed
for every symmetric pair of given levels (p, 1 − p), p < 1/2, with expected coverage 1 − 2p
(pairs matched to 1e-9). Other levels for a ``Quantiles`` prediction are interpolated linearly
between the given quantiles (:meth:`Quantiles.ppf`).

Uncertainty Toolbox compatibility (``compat="uncertainty_toolbox"``, Gaussian predictions
only): its grid is ``numpy.linspace(0, 1, 100)`` (it includes 0 and 1, ``num_bins=100``), its
proportions are computed in the space of z_i = (μ_i − y_i)/σ_i against ``scipy.stats.norm``
quantiles, and its ``prop_type="quantile"`` counts z_i ≤ Φ⁻¹(p), i.e. y_i ≥ q_i(1 − p) — the
mirror image of the textbook P(y ≤ q_p) that we use by default. For the (symmetric) interval
proportions the two agree up to floating-point ties.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import array_api_compat
import numpy as np

from uqcore._backend import Array, bincount, take_descending, to_numpy
from uqcore._compiled import kernels
from uqcore._kolmogorov import ks_sf
from uqcore._scaling import exponent, format_scaled, rescaled
from uqcore._stats import chunks, sorted_values, sorted_weights, sum_of_products
from uqcore._validation import UQValidationError
from uqcore.batch import Batch, regression_batch
from uqcore.options import Bins, CurveLevels
from uqcore.predictions.regression import Mixture, Samples, _LocationScale
from uqcore.registry import register, undefined
from uqcore.regression import ranking

__all__ = [
    "DEFAULT_LEVELS",
    "CalibrationCurve",
    "calibration_curve",
    "calibration_error",
    "ece",
    "ence",
    "mean_std",
    "miscalibration_area",
    "pit",
    "rmsce",
    "sharpness",
    "uce",
]

PropType = Literal["interval", "quantile"]
#: How ENCE bins the predicted std: equal weight (Levi et al.) or equal width (netcal).
EnceBinning = Literal["count", "width"]
Compat = Literal["uncertainty_toolbox"] | None

#: The default level grid: 0.01, 0.02, ..., 0.99 (chung2021 appendix A.3).
DEFAULT_LEVELS: tuple[float, ...] = tuple(round(k / 100, 2) for k in range(1, 100))

#: Uncertainty Toolbox's number of grid points, ``numpy.linspace(0, 1, 100)``.
UT_NUM_BINS = 100

_UT = "Chung et al. 2021, Uncertainty Toolbox, §3 and appendix A.3"
_KULESHOV = (
    "Kuleshov et al. 2018, Accurate uncertainties for deep learning (ICML); xiong2024 eq. 5-7"
)
_PAIR_TOL = 1e-9


@dataclass(frozen=True)
class CalibrationCurve:
    """Observed against expected proportions on a level grid.

    Attributes
    ----------
    expected : tuple of float
        Expected proportions (the nominal probability of each level or interval).
    observed : tuple of float
        Observed (weighted) proportions.
    prop_type : str
        ``"interval"`` or ``"quantile"``.
    levels : tuple of float
        The levels p of the grid. ``expected == levels`` except for the interval curve of a
        ``Quantiles`` prediction, whose levels are the lower levels p of the pairs
        (p, 1 − p) and whose expected coverages are 1 − 2p.
    """

    expected: tuple[float, ...]
    observed: tuple[float, ...]
    prop_type: str
    levels: tuple[float, ...]


@dataclass(frozen=True)
class _Tally:
    """Weighted counts of the rows inside each level's set (nested, growing with the level)."""

    levels: np.ndarray[Any, Any]
    expected: np.ndarray[Any, Any]
    counts: np.ndarray[Any, Any]
    total: float

    @property
    def observed(self) -> np.ndarray[Any, Any]:
        return self.counts / self.total


# -- option checks ---------------------------------------------------------------------------
def _check_prop_type(prop_type: Any) -> None:
    if prop_type not in ("interval", "quantile"):
        raise UQValidationError(f"prop_type must be 'interval' or 'quantile', found {prop_type!r}")


def _check_compat(compat: Any) -> None:
    if compat not in (None, "uncertainty_toolbox"):
        raise UQValidationError(f"compat must be None or 'uncertainty_toolbox', found {compat!r}")


def _check_levels(levels: Any) -> np.ndarray[Any, Any]:
    try:
        lv = np.asarray(levels, dtype=np.float64)
    except (TypeError, ValueError):
        raise UQValidationError(
            f"levels must be a sequence of numbers in [0, 1], found {levels!r}"
        ) from None
    if lv.ndim != 1 or lv.shape[0] == 0:
        raise UQValidationError(f"levels must be a non-empty 1-D sequence, found shape {lv.shape}")
    bad = ~np.isfinite(lv) | (lv < 0) | (lv > 1)
    if bool(np.any(bad)):
        j = int(np.argmax(bad))
        raise UQValidationError(f"levels must lie in [0, 1]; levels[{j}] = {lv[j]!r}")
    if lv.shape[0] > 1 and not bool(np.all(lv[1:] > lv[:-1])):
        j = int(np.argmin(lv[1:] > lv[:-1])) + 1
        raise UQValidationError(
            f"levels must be strictly increasing; levels[{j}] = {lv[j]!r} <= "
            f"levels[{j - 1}] = {lv[j - 1]!r}"
        )
    return lv


def _check_n_bins(n_bins: Any, name: str = "n_bins") -> int:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise UQValidationError(f"{name} must be an integer >= 1, found {n_bins!r}")
    return int(n_bins)


def level_grid(levels: Any, compat: Compat) -> np.ndarray[Any, Any]:
    """The checked levels p_j of the calibration tally (the default grid, or ``compat``'s)."""
    if levels is not None:
        return _check_levels(levels)
    if compat == "uncertainty_toolbox":
        return np.linspace(0.0, 1.0, UT_NUM_BINS)
    return np.asarray(DEFAULT_LEVELS, dtype=np.float64)


# -- weighted counting of values at or below a set of bounds -----------------------------------
def _prev(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The next float64 below each x: v < x ⇔ v ≤ _prev(x) for every float64 v."""
    return np.nextafter(np.asarray(x, dtype=np.float64), -np.inf)


def _weight_at_or_below(
    batch: Batch,
    name: str,
    values: Callable[[], Array],
    bounds: np.ndarray[Any, Any],
    *,
    owned: bool = False,
) -> np.ndarray[Any, Any]:
    """Weight of the rows with value ≤ b, for every b of the strictly increasing ``bounds``.

    Without weights the values are sorted once (a value sort, shared, e.g. with :func:`pit`)
    and each bound costs one ``searchsorted``. With weights each row's bin, the number of bounds
    below its value, is found once per batch (weight-free, so shared with resampled weights);
    then one weighted ``bincount`` and a cumulative sum over the bins give every bound.
    ``owned``: as for :func:`~uqcore._stats.sorted_values` (the sort may overwrite
    ``values()``).
    """
    xp = batch.xp
    digest = hashlib.sha1(bounds.tobytes()).hexdigest()
    w = batch.weights

    def compute() -> np.ndarray[Any, Any]:
        if w is None:
            s = sorted_values(batch, name, values, owned=owned)
            b = xp.asarray(bounds, dtype=s.dtype, device=batch.device)
            return np.asarray(to_numpy(xp.searchsorted(s, b, side="right")), dtype=np.float64)
        k = bounds.shape[0]

        def bins() -> Array:
            v = values()
            b = xp.asarray(bounds, dtype=v.dtype, device=batch.device)
            idx = xp.searchsorted(b, v, side="left")  # v ≤ bounds[j] ⇔ idx ≤ j
            return xp.astype(idx, xp.int16 if k < 2**15 - 1 else xp.int32)

        idx = batch.shared(f"calibration:bins:{name}:{digest}", bins)
        h = np.asarray(to_numpy(bincount(xp, idx, w, k + 1)), dtype=np.float64)
        out: np.ndarray[Any, Any] = np.cumsum(h[:k])
        return out

    return batch.weighted(f"calibration:at_or_below:{name}:{digest}", compute)


def _at(bounds: np.ndarray[Any, Any], cum: np.ndarray[Any, Any], x: np.ndarray[Any, Any]) -> Any:
    """``cum`` at the bounds equal to ``x`` (every x is one of the bounds)."""
    return cum[np.searchsorted(bounds, x)]


def pit_bounds(lv: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The PIT bounds whose weight at or below gives the counts of :func:`_pit_counts`.

    One set of bounds serves both proportion types on lv and on lv ∪ {0, 1}, so ece, rmsce,
    calibration_error and miscalibration_area of one batch share one pass over the PIT (and
    the stability engine reads them off the cumulative weights along the PIT order).
    """
    levels = tuple(np.asarray(lv, dtype=np.float64).ravel().tolist())
    return _pit_bounds_of(levels).copy()  # a few hundred values: the cached one stays intact


@functools.lru_cache(maxsize=64)
def _pit_bounds_of(levels: tuple[float, ...]) -> np.ndarray[Any, Any]:
    """:func:`pit_bounds` of the levels (a function of them alone: made once per process)."""
    full = np.unique(np.concatenate([[0.0], levels, [1.0]]))
    out = np.unique(np.concatenate([full, (1.0 + full) / 2.0, _prev((1.0 - full) / 2.0)]))
    out.setflags(write=False)
    return out


def pit_counts_at(
    bounds: np.ndarray[Any, Any], cum: np.ndarray[Any, Any], prop_type: PropType, lv: Any
) -> np.ndarray[Any, Any]:
    """The counts of :func:`_pit_counts` from ``cum``, the weight at or below each of
    :func:`pit_bounds` (last axis; leading axes are independent weightings)."""
    if prop_type == "quantile":  # u ≤ p
        out: np.ndarray[Any, Any] = cum[..., np.searchsorted(bounds, lv)]
        return out
    # (1 − p)/2 ≤ u ≤ (1 + p)/2: weight at or below the upper end minus weight below the lower
    upper = cum[..., np.searchsorted(bounds, (1.0 + lv) / 2.0)]
    out = upper - cum[..., np.searchsorted(bounds, _prev((1.0 - lv) / 2.0))]
    return out


def _pit_source(batch: Batch) -> tuple[Callable[[], Array], bool]:
    """(the PIT values, whether a sort may overwrite them) for the sorted PIT values. Without
    weights, and unless the PIT values are cached already, they are a new F_i(y_i) sorted in
    place: the batch then holds the sorted PIT values only, not a second N-array — except for
    Gaussians, whose PIT values Φ(z_i) the CRPS reads too (cached, so Φ is computed once)."""
    if (
        batch.weights is None
        and not batch.has_shared("pit")
        and batch.prediction.kind != "gaussian"
    ):
        return (lambda: batch.prediction.cdf(batch.y)), True
    return (lambda: batch.pit), False


def _pit_counts(
    batch: Batch, prop_type: PropType, lv: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    bounds = pit_bounds(lv)
    values, owned = _pit_source(batch)
    cum = _weight_at_or_below(batch, "pit", values, bounds, owned=owned)
    return pit_counts_at(bounds, cum, prop_type, lv)


def _ut_counts(
    batch: Batch, prop_type: PropType, lv: np.ndarray[Any, Any], absolute: bool
) -> np.ndarray[Any, Any]:
    """Uncertainty Toolbox's counts in z = (μ − y)/σ space, with its scipy.stats bounds."""
    pred = batch.prediction
    if pred.kind != "gaussian":
        raise UQValidationError(
            "compat='uncertainty_toolbox' needs a gaussian prediction (Uncertainty Toolbox "
            f"handles Gaussian predictions only), found {pred.kind}"
        )
    import scipy.stats  # at first use: importing uqcore does not load scipy.stats

    norm = scipy.stats.norm(loc=0, scale=1)
    quantile = np.asarray(norm.ppf(lv))
    upper = np.asarray(norm.ppf(0.5 + lv / 2.0))
    lower = np.asarray(norm.ppf(0.5 - lv / 2.0))
    # every variant's bounds at once, so that all of them share one pass over z
    bounds = np.unique(np.concatenate([quantile, upper, _prev(lower), _prev(-upper)]))
    cum = _weight_at_or_below(batch, "ut_z", lambda: (pred.mean() - batch.y) / pred.std(), bounds)
    if prop_type == "quantile":  # z ≤ Φ⁻¹(p)
        out: np.ndarray[Any, Any] = _at(bounds, cum, quantile)
        return out
    if absolute:  # miscalibration_area: |z| <= Φ⁻¹(1/2 + p/2)
        lower = -upper
    # get_proportion_lists_vectorized: Φ⁻¹(1/2 − p/2) <= z <= Φ⁻¹(1/2 + p/2)
    out = _at(bounds, cum, upper) - _at(bounds, cum, _prev(lower))
    return out


def _quantile_pairs(lv: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Indices (lo, hi) of the symmetric level pairs (p, 1 − p), p < 1/2, by growing coverage."""
    los, his = [], []
    for j in range(lv.shape[0] - 1, -1, -1):  # largest p < 1/2 first = smallest coverage
        if lv[j] >= 0.5:
            continue
        k = int(np.argmin(np.abs(lv - (1.0 - lv[j]))))
        if abs(lv[k] - (1.0 - lv[j])) <= _PAIR_TOL:
            los.append(j)
            his.append(k)
    return np.asarray(los, dtype=np.int64), np.asarray(his, dtype=np.int64)


def _quantiles_counts(
    batch: Batch, prop_type: PropType, levels: Any
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(levels, expected, counts) for a prediction without a CDF, from its quantiles."""
    xp = batch.xp
    pred: Any = batch.prediction
    y = batch.y[:, None]
    w = batch.weights

    def share(inside: Array) -> np.ndarray[Any, Any]:
        f = xp.astype(inside, batch.y.dtype)
        total = xp.sum(f, axis=0) if w is None else xp.sum(w[:, None] * f, axis=0)
        return np.asarray(to_numpy(total), dtype=np.float64)

    own = np.asarray(to_numpy(pred.levels), dtype=np.float64)
    if prop_type == "quantile":
        if levels is None:
            lv, values = own, pred.values
        else:
            lv = _check_levels(levels)
            values = pred.ppf(lv)
        return lv, lv, share(y <= values)
    if levels is None:
        lo_idx, hi_idx = _quantile_pairs(own)
        if lo_idx.shape[0] == 0:
            raise _NoPairs(
                "the prediction's levels contain no symmetric pair (p, 1 - p) for interval "
                "proportions"
            )
        lv = own[lo_idx]
        expected = own[hi_idx] - own[lo_idx]
        dev = batch.device
        lower = xp.take(pred.values, xp.asarray(lo_idx, device=dev), axis=1)
        upper = xp.take(pred.values, xp.asarray(hi_idx, device=dev), axis=1)
        return lv, expected, share((lower <= y) & (y <= upper))
    lv = _check_levels(levels)
    lower = pred.ppf((1.0 - lv) / 2.0)
    upper = pred.ppf((1.0 + lv) / 2.0)
    return lv, lv, share((lower <= y) & (y <= upper))


class _NoPairs(UQValidationError):
    """A Quantiles prediction has no symmetric level pair: interval proportions are undefined."""


def _tally(
    batch: Batch,
    prop_type: PropType,
    levels: Any,
    compat: Compat,
    *,
    absolute: bool = False,
    ends: bool = False,
) -> _Tally:
    """Weighted counts of rows inside each level's set; shared by every calibration metric.

    From a CDF (or with ``compat``) the tally of a batch (its weights) is made once for each
    proportion type and grid and kept on the batch, read-only: ece, rmsce, calibration_error,
    adversarial group calibration and the calibration curve read the same one. ``ends``: on
    the grid completed with the levels 0 and 1 (miscalibration_area's)."""
    _check_prop_type(prop_type)
    _check_compat(compat)
    ut = compat == "uncertainty_toolbox"
    if ut or "cdf" in batch.prediction.capabilities:
        if ends:
            lv = _with_ends(None) if levels is None else _with_ends(level_grid(levels, compat))
        else:
            lv = level_grid(levels, compat)

        def count() -> _Tally:
            grid = _read_only(np.array(lv, dtype=np.float64))
            if ut:
                counts = _ut_counts(batch, prop_type, grid, absolute)
            else:
                counts = _pit_counts(batch, prop_type, grid)
            return _Tally(grid, grid, _read_only(counts), batch.total_weight)

        # absolute changes Uncertainty Toolbox's interval test only
        grid = "default" if levels is None else lv.tobytes().hex()
        key = f"calibration:tally:{prop_type}:{compat}:{absolute and ut}:{ends}:{grid}"
        return batch.weighted(key, count)
    lv, expected, counts = _quantiles_counts(batch, prop_type, levels)
    return _Tally(lv, expected, counts, batch.total_weight)


def _with_ends(lv: np.ndarray[Any, Any] | None) -> np.ndarray[Any, Any]:
    """The levels ``lv`` (``None``: the default grid, made once) with 0 and 1 added."""
    if lv is None:
        return _default_with_ends()
    return np.unique(np.concatenate([[0.0], lv, [1.0]]))


@functools.lru_cache(maxsize=1)
def _default_with_ends() -> np.ndarray[Any, Any]:
    return _read_only(_with_ends(np.asarray(DEFAULT_LEVELS, dtype=np.float64)))


def _read_only(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a``, marked read-only (an array that a cache hands to several callers)."""
    a.setflags(write=False)
    return a


def _tally_or_none(
    name: str, batch: Batch, prop_type: PropType, levels: Any, compat: Compat, **kw: Any
) -> _Tally | None:
    try:
        return _tally(batch, prop_type, levels, compat, **kw)
    except _NoPairs as exc:
        undefined(name, str(exc))
        return None


def calibration_curve(
    prediction: Any,
    y: Any,
    *,
    prop_type: PropType = "interval",
    levels: CurveLevels | None = None,
    sample_weight: Any = None,
    compat: Compat = None,
) -> CalibrationCurve:
    """Observed against expected proportions (the calibration plot of Kuleshov et al. 2018).

    Parameters
    ----------
    prediction : a uqcore prediction with a CDF or quantiles
    y : array_like, shape (N,)
    prop_type : {"interval", "quantile"}
        Centred-interval or one-sided (``y <= q_p``) proportions; see the module docstring.
    levels : sequence of float in [0, 1], strictly increasing, optional
        Default: 0.01, ..., 0.99 (for ``Quantiles``: the prediction's own levels; with
        ``compat="uncertainty_toolbox"``: ``numpy.linspace(0, 1, 100)``).
    sample_weight : array_like, shape (N,), optional
    compat : {None, "uncertainty_toolbox"}
        Reproduce Uncertainty Toolbox's ``get_proportion_lists_vectorized`` (Gaussian only).

    Returns
    -------
    CalibrationCurve

    >>> import numpy as np; from uqcore import predictions as P
    >>> c = calibration_curve(P.Gaussian(np.zeros(4), np.ones(4)), np.array([-2.0, -0.1, 0.3, 1.0]),
    ...                       prop_type="quantile", levels=[0.25, 0.5, 0.75])
    >>> c.observed
    (0.25, 0.5, 0.75)
    """
    if not {"cdf", "quantiles"} & set(getattr(prediction, "capabilities", ())):
        raise UQValidationError(
            "calibration_curve needs a prediction with a CDF or quantiles, found "
            f"{getattr(prediction, 'kind', type(prediction).__name__)}"
        )
    batch = regression_batch(prediction, y, sample_weight)
    t = _tally(batch, prop_type, levels, compat)
    return CalibrationCurve(
        expected=tuple(float(v) for v in t.expected),
        observed=tuple(float(v) for v in t.observed),
        prop_type=prop_type,
        levels=tuple(float(v) for v in t.levels),
    )


# -- average calibration -----------------------------------------------------------------------
_CAL_NEEDS = {"quantiles"}


@register(
    "ece",
    biased=True,
    family="calibration",
    needs=_CAL_NEEDS,
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_UT + "; Kuleshov et al. 2018",
)
def ece(
    batch: Batch,
    *,
    prop_type: PropType = "interval",
    levels: CurveLevels | None = None,
    compat: Compat = None,
) -> float | None:
    """Mean absolute calibration error: ECE = (1/M) Σ_j |p̂(p_j) − p_j|.

    chung2021 §3 (ECE of average calibration). Options: ``prop_type`` (default ``"interval"``,
    as Uncertainty Toolbox; ``"quantile"`` = the one-sided textbook proportions), ``levels``
    (default 0.01..0.99; a ``Quantiles`` prediction uses its own levels) and
    ``compat="uncertainty_toolbox"``, which reproduces ``mean_absolute_calibration_error``
    exactly (grid ``linspace(0, 1, 100)``; its ``"quantile"`` proportions are the mirror image
    z = (μ − y)/σ ≤ Φ⁻¹(p), see the module docstring). Best value 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(ece(P.Gaussian(np.zeros(4), np.ones(4)), np.array([-2.0, -0.1, 0.3, 1.0])), 6)
    0.095253
    """
    t = _tally_or_none("ece", batch, prop_type, levels, compat)
    if t is None:
        return None
    return float(np.mean(np.abs(t.observed - t.expected)))


@register(
    "rmsce",
    biased=True,
    family="calibration",
    needs=_CAL_NEEDS,
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_UT,
)
def rmsce(
    batch: Batch,
    *,
    prop_type: PropType = "interval",
    levels: CurveLevels | None = None,
    compat: Compat = None,
) -> float | None:
    """Root mean squared calibration error: RMSCE = sqrt((1/M) Σ_j (p̂(p_j) − p_j)²).

    Options and defaults as for :func:`ece`; ``compat="uncertainty_toolbox"`` reproduces
    ``root_mean_squared_calibration_error``. Best value 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(rmsce(P.Gaussian(np.zeros(4), np.ones(4)), np.array([-2.0, -0.1, 0.3, 1.0])), 6)
    0.115579
    """
    t = _tally_or_none("rmsce", batch, prop_type, levels, compat)
    if t is None:
        return None
    d = t.observed - t.expected
    return float(math.sqrt(float(np.mean(d * d))))


def _area_between(x: np.ndarray[Any, Any], d: np.ndarray[Any, Any]) -> float:
    """∫ |d| for d linear between the points x; a segment crossing 0 is split at the crossing."""
    return float(areas_between(x, d[None, :])[0])


def areas_between(x: np.ndarray[Any, Any], d: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """:func:`_area_between` for each row of ``d`` (the stability engine's per-block form)."""
    dl, dr, dx = d[:, :-1], d[:, 1:], np.diff(x)
    al, ar = np.abs(dl), np.abs(dr)
    cross = dl * dr < 0
    denom = np.where(cross, al + ar, 1.0)
    seg = np.where(cross, 0.5 * dx * (dl * dl + dr * dr) / denom, 0.5 * dx * (al + ar))
    out: np.ndarray[Any, Any] = np.sum(seg, axis=1)
    return out


@register(
    "miscalibration_area",
    biased=True,
    family="calibration",
    needs=_CAL_NEEDS,
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_UT,
)
def miscalibration_area(
    batch: Batch,
    *,
    prop_type: PropType = "interval",
    levels: CurveLevels | None = None,
    compat: Compat = None,
) -> float | None:
    """Area between the calibration curve and the diagonal: ∫₀¹ |p̂(p) − p| dp.

    The curve is the polyline through (p_j, p̂(p_j)); the area of each segment is computed
    exactly (a segment that crosses the diagonal is split at the crossing: ½Δp(d_l² + d_r²) /
    (|d_l| + |d_r|), else ½Δp(|d_l| + |d_r|)). By default the grid 0.01..0.99 is completed with
    the levels 0 and 1, where p̂ is computed the same way for a CDF (for ``Quantiles`` the limits
    (0, 0) and (1, 1) are used), so the area is over [0, 1]. Options as for :func:`ece`.

    ``compat="uncertainty_toolbox"`` reproduces ``uncertainty_toolbox.miscalibration_area``:
    the same trapezoid-with-crossings area on ``linspace(0, 1, 100)`` with its own interval
    test |μ − y|/σ ≤ Φ⁻¹(1/2 + p/2) (no points appended). Best value 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(miscalibration_area(P.Gaussian(np.zeros(4), np.ones(4)),
    ...                           np.array([-2.0, -0.1, 0.3, 1.0])), 6)
    0.093021
    """
    if compat is None and "cdf" in batch.prediction.capabilities:
        full = _tally(batch, prop_type, levels, compat, ends=True)
        return _area_between(full.expected, full.observed - full.expected)
    t = _tally_or_none("miscalibration_area", batch, prop_type, levels, compat, absolute=True)
    if t is None:
        return None
    x, obs = t.expected, t.observed
    if compat is None:  # Quantiles: complete with the limits (0, 0) and (1, 1)
        if x[0] > 0:
            x, obs = np.concatenate([[0.0], x]), np.concatenate([[0.0], obs])
        if x[-1] < 1:
            x, obs = np.concatenate([x, [1.0]]), np.concatenate([obs, [1.0]])
    return _area_between(x, obs - x)


_LEVEL_WEIGHTS = ("uniform", "mean")


@register(
    "calibration_error",
    biased=True,
    family="calibration",
    needs=_CAL_NEEDS,
    direction="lower",
    scaling="invariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_KULESHOV,
)
def calibration_error(
    batch: Batch,
    *,
    prop_type: PropType = "quantile",
    levels: CurveLevels | None = None,
    level_weights: Literal["uniform", "mean"] = "uniform",
) -> float | None:
    """Calibration error of Kuleshov et al. (2018): cal = Σ_j w_j (p_j − p̂_j)².

    xiong2024 eq. 5-7: p̂_j is the (weighted) share of PIT values F_i(y_i) ≤ p_j, i.e. the
    one-sided ``"quantile"`` proportions (the default, by definition; ``"interval"`` is
    offered). ``level_weights``: ``"uniform"`` (default) w_j = 1, the choice of Kuleshov et al.
    — a sum over the M levels, so the value grows with M; ``"mean"`` w_j = 1/M (the mean
    squared deviation, comparable across grids). Default levels 0.01..0.99 (a ``Quantiles``
    prediction uses its own levels). Best value 0; bounded by M (uniform) or 1 (mean).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(calibration_error(P.Gaussian(np.zeros(4), np.ones(4)),
    ...                         np.array([-2.0, -0.1, 0.3, 1.0])), 6)
    0.9975
    """
    if level_weights not in _LEVEL_WEIGHTS:
        raise UQValidationError(
            f"level_weights must be one of {', '.join(map(repr, _LEVEL_WEIGHTS))}, "
            f"found {level_weights!r}"
        )
    t = _tally_or_none("calibration_error", batch, prop_type, levels, None)
    if t is None:
        return None
    d = t.expected - t.observed
    total = float(np.sum(d * d))
    return total / d.shape[0] if level_weights == "mean" else total


# -- PIT histogram and uniformity test ---------------------------------------------------------
PitPValue = Literal["auto", "exact", "asymptotic"]
_PIT_P_VALUE: tuple[str, ...] = get_args(PitPValue)


@register(
    "pit",
    biased=True,
    family="calibration",
    needs={"cdf"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.0,
    reference="Dawid 1984; Gneiting et al. 2007 (PIT histogram); Kolmogorov-Smirnov test",
    structured=True,
    exempt={
        "repeat_rows": "the p-value uses the effective sample size (Σw)²/Σw², which is not "
        "the count of repeated rows; the histogram and the KS statistic are invariant",
    },
)
def pit(batch: Batch, *, n_bins: Bins = 10, p_value: PitPValue = "auto") -> dict[str, Any]:
    """PIT histogram and Kolmogorov-Smirnov test of the PIT values u_i = F_i(y_i) against U(0, 1).

    ``value`` is the KS statistic D = sup_t |F̂_w(t) − t| of the weighted empirical CDF
    F̂_w(t) = Σ w_i 1{u_i ≤ t} / Σ w_i (best 0). ``histogram`` gives the share of the weight in
    each of ``n_bins`` equal bins [k/B, (k+1)/B) (the last one closed), ``bin_edges`` their
    edges; the counts are ``histogram · Σw``. ``p_value`` is the two-sided KS p-value for
    n = round(n_eff) observations, with the effective sample size n_eff = (Σ w_i)² / Σ w_i²
    (= N without weights); it assumes continuous F_i (with ties, as for ``Samples``, it is
    conservative). ``p_value="exact"`` (and ``"auto"``, the default, at every n) is the
    finite-n distribution, ``scipy.stats.kstwo.sf`` within a relative 1e-11 at a cost
    independent of n (:func:`uqcore._kolmogorov.ks_sf`); ``"asymptotic"`` is Kolmogorov's
    limit law (``scipy.stats.kstwobign``), which earlier versions' ``"auto"`` used above
    n = 10^5 (relatively off by about 1/√n there).

    >>> import numpy as np; from uqcore import predictions as P
    >>> r = pit(P.Gaussian(np.zeros(4), np.ones(4)), np.array([-2.0, -0.1, 0.3, 1.0]), n_bins=2)
    >>> round(r["value"], 6), r["histogram"]
    (0.22725, [0.5, 0.5])
    """
    b = _check_n_bins(n_bins)
    if p_value not in _PIT_P_VALUE:
        raise UQValidationError(
            f"p_value must be one of {', '.join(map(repr, _PIT_P_VALUE))}, found {p_value!r}"
        )
    xp = batch.xp
    n = batch.n
    total = batch.total_weight
    w = batch.weights
    # the one sort of the PIT values in a batch (a value sort: much faster than an argsort)
    values, owned = _pit_source(batch)
    s = sorted_values(batch, "pit", values, owned=owned)
    jit = kernels() if isinstance(s, np.ndarray) and s.dtype == np.float64 else None
    if w is None and jit is not None and s.flags.c_contiguous:
        d = jit.ks_distance(s, total)  # the blocks below in one compiled pass
        n_eff = float(n)
    elif w is None:
        # F̂ is i/N just below and (i + 1)/N just after the i-th smallest value (0-based)
        d = 0.0
        for rows in chunks(xp, n):
            before = xp.arange(rows.start, rows.stop, dtype=s.dtype) / total
            d = max(d, float(xp.max(s[rows] - before)))
            after = xp.arange(rows.start + 1, rows.stop + 1, dtype=s.dtype) / total
            d = max(d, float(xp.max(after - s[rows])))
        n_eff = float(n)
    else:
        # cumulative weights in PIT order: these need the permutation itself (an argsort)
        cumw = xp.cumulative_sum(sorted_weights(batch, "pit", lambda: batch.pit))
        after = cumw / total
        d = max(float(xp.max(after - s)), float(s[0]))  # F̂ is 0 below the smallest value
        if n > 1:
            d = max(d, float(xp.max(s[1:] - after[:-1])))
        # (Σw)²/Σw² does not change when w is scaled: with w / 2^e (exact, max in [1/2, 1))
        # neither sum can overflow or underflow, whatever the scale of the weights
        unit = rescaled(w, math.frexp(float(xp.max(w)))[1])
        n_eff = float(xp.sum(unit)) ** 2 / sum_of_products(xp, unit, unit)
    d = min(max(d, 0.0), 1.0)
    edges, edge_list = _pit_edges(b)
    inner = xp.asarray(edges[1:-1].copy(), dtype=s.dtype, device=batch.device)  # writable
    idx = np.asarray(to_numpy(xp.searchsorted(s, inner, side="left")), dtype=np.int64)
    if w is None:
        below = idx.astype(np.float64)
    else:  # weight of the values < edge: the cumulative weight just before position idx
        at = xp.asarray(np.maximum(idx - 1, 0), device=batch.device)
        below = np.asarray(to_numpy(xp.take(cumw, at)), dtype=np.float64)
        below = np.where(idx > 0, below, 0.0)
    cuts = np.concatenate([[0.0], below, [total]])
    hist = np.diff(cuts) / total
    n_int = max(1, round(n_eff))
    method = "exact" if p_value == "auto" else p_value
    if method == "exact":
        p = ks_sf(d, n_int)
    else:
        import scipy.stats

        p = float(scipy.stats.kstwobign.sf(d * math.sqrt(n_int)))
    return {
        "value": d,
        "ks_statistic": d,
        "p_value": min(max(p, 0.0), 1.0),
        "p_value_method": method,
        "n_eff": n_eff,
        "histogram": [float(v) for v in hist],
        "bin_edges": list(edge_list),
    }


@functools.lru_cache(maxsize=16)
def _pit_edges(b: int) -> tuple[np.ndarray[Any, Any], tuple[float, ...]]:
    """The PIT histogram's ``b + 1`` equal-width edges on [0, 1] (read-only), as floats too."""
    edges = _read_only(np.linspace(0.0, 1.0, b + 1))
    return edges, tuple(float(v) for v in edges)


# -- binned by predicted std ------------------------------------------------------------------
#: ``uncertainty`` implementations that return the predictive std: for these kinds the ranking
#: metrics' sort by uncertainty is also the sort by std.
_UNCERTAINTY_IS_STD = frozenset(
    {_LocationScale.uncertainty, Mixture.uncertainty, Samples.uncertainty}
)


def _uncertainty_is_std(batch: Batch) -> bool:
    return type(batch.prediction).uncertainty in _UNCERTAINTY_IS_STD


def _sigma(batch: Batch) -> Array:
    """Predictive std σ_i (the batch's uncertainty array where that is the std)."""
    return batch.uncertainty if _uncertainty_is_std(batch) else batch.std


@dataclass(frozen=True)
class _BySigma:
    """The rows in ascending order of σ: σ itself (sorted values), |e| and the weights in that
    order (paired position by position: ties of σ in any order)."""

    sigma: Array
    abs_error: Array
    weights: Array | None


def _by_sigma(batch: Batch) -> _BySigma:
    """σ, |e| and the weights along the ascending σ order. Where the uncertainty is σ these are
    the ranking metrics' shared arrays (the same sort, gather and weights); otherwise the std's
    own, cached under their own keys."""
    xp = batch.xp
    if _uncertainty_is_std(batch):
        return _BySigma(
            ranking._sorted_u(batch),
            xp.flip(ranking._errors_by_u_descending(batch)),
            ranking._weights_by_u(batch),
        )
    desc = batch.order("std", lambda: batch.std, descending=True)
    e_desc = batch.shared(
        "calibration:abs_error_by_std_desc",
        lambda: take_descending(xp, batch.abs_error, desc),
    )
    w = batch.weights
    return _BySigma(
        sorted_values(batch, "std", lambda: batch.std),
        xp.flip(e_desc),
        None
        if w is None
        else batch.weighted("calibration:weights_by_std", lambda: xp.take(w, xp.flip(desc))),
    )


def _by_sigma_in_range(batch: Batch) -> tuple[_BySigma, int]:
    """:func:`_by_sigma` with σ and |e| divided by 2^e (exactly) where their squares would
    overflow or underflow, and e (0 when they are used as they are). Binning by σ or σ² gives
    the same bins either way, and the bin sums of squares are those of the data times 4^−e."""
    rows = _by_sigma(batch)
    e = batch.weighted(  # ENCE and UCE both ask (the weights only choose the rows' order)
        "calibration:sigma_error_exponent",
        lambda: exponent(float(rows.sigma[-1]), float(batch.xp.max(batch.abs_error))),
    )
    if e == 0:
        return rows, 0
    return _BySigma(rescaled(rows.sigma, e), rescaled(rows.abs_error, e), rows.weights), e


def _largest_square_root(v: float) -> float:
    """The largest float x >= 0 with x·x <= v in float64 (``v`` finite, >= 0).

    x ↦ fl(x·x) is non-decreasing on x >= 0, so {x >= 0 : fl(x·x) <= v} is an interval [0, T]
    and σ² <= v (computed as σ·σ) holds exactly for σ <= T: a bisection over the bit patterns
    of non-negative floats (ordered as the floats are), at most 64 steps. For a normal v the
    correctly rounded sqrt(v) lies within an ulp or two of T, so a few steps from it find T
    first (the same T: the walk stops at the interval's end).
    """
    if 1e-290 < v < 1e300:
        x = math.sqrt(v)
        for _ in range(8):
            if x * x > v:
                x = math.nextafter(x, 0.0)
                continue
            up = math.nextafter(x, math.inf)
            if up * up <= v:
                x = up
                continue
            return x
    lo, hi = 0, 0x7FF0000000000000  # the bits of 0.0 and +inf: 0·0 <= v < inf·inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        x = struct.unpack("<d", struct.pack("<q", mid))[0]
        if x * x <= v:
            lo = mid
        else:
            hi = mid
    return float(struct.unpack("<d", struct.pack("<q", lo))[0])


#: Up to this many rows the per-bin sums of squares are one reduceat (see _bin_sums_by_sigma).
_REDUCEAT_MAX_N = 1 << 16


def _bin_sums_by_sigma(
    batch: Batch, rows: _BySigma, cuts: list[int]
) -> tuple[np.ndarray[Any, Any], ...]:
    """Per-bin weight, Σ wσ² and Σ we² of the contiguous runs rows[cuts[j]:cuts[j+1]] of the
    ascending σ order: sums of products over each run (no N-sized temporary), the weight of a
    run its length (unweighted) or the sum of its weights. A bin is a set of σ *values*, so a
    run holds the same rows for every order of tied σ."""
    xp = batch.xp
    s, e, w = rows.sigma, rows.abs_error, rows.weights
    m = len(cuts) - 1
    wk, vk, ek = np.zeros(m), np.zeros(m), np.zeros(m)
    if w is None and batch.n <= _REDUCEAT_MAX_N and array_api_compat.is_numpy_namespace(xp):
        # small batches: one reduceat over the squares instead of two calls per bin (the
        # squares are an N-sized temporary, cheap at this size)
        nonempty = [j for j, (a, b) in enumerate(itertools.pairwise(cuts)) if b > a]
        if nonempty:
            starts = [cuts[j] for j in nonempty]
            wk[nonempty] = [b - a for a, b in itertools.pairwise([*starts, cuts[-1]])]
            at = np.asarray(starts, dtype=np.intp)
            vk[nonempty] = np.add.reduceat(s * s, at)
            ek[nonempty] = np.add.reduceat(e * e, at)
        return wk, vk, ek
    for j, (a, b) in enumerate(itertools.pairwise(cuts)):
        if b <= a:
            continue
        if w is None:
            wk[j] = b - a
            vk[j] = sum_of_products(xp, s[a:b], s[a:b])
            ek[j] = sum_of_products(xp, e[a:b], e[a:b])
        else:
            wk[j] = float(xp.sum(w[a:b]))
            vk[j] = sum_of_products(xp, w[a:b], s[a:b], s[a:b])
            ek[j] = sum_of_products(xp, w[a:b], e[a:b], e[a:b])
    return wk, vk, ek


def _cuts(
    batch: Batch, sorted_key: Array, bounds: list[float], side: Literal["left", "right"] = "right"
) -> list[int]:
    """[0, #{key <= bound} for each bound (ascending), N]: the runs of the bins (b_{j−1}, b_j]
    along the ascending order of ``sorted_key``; with ``side="left"`` #{key < bound}, the runs
    of the bins [b_{j−1}, b_j)."""
    xp = batch.xp
    if not bounds:
        return [0, batch.n]
    b = xp.asarray(bounds, dtype=sorted_key.dtype, device=batch.device)
    inner = [int(c) for c in to_numpy(xp.searchsorted(sorted_key, b, side=side))]
    return [0, *inner, batch.n]


def _ence_edges(batch: Batch, rows: _BySigma, k: int) -> list[float]:
    """σ at the weighted lower quantiles j/k, j = 1..k−1 (inverted CDF), ascending: the σ of
    the first row (in σ order) whose cumulative weight reaches W·j/k."""
    xp = batch.xp
    n = batch.n
    total = batch.total_weight
    targets = [total * j / k for j in range(1, k)]
    if rows.weights is None:  # cumulative weight i + 1 at sorted position i
        pos = [min(max(math.ceil(t) - 1, 0), n - 1) for t in targets]
    else:
        cumw = xp.cumulative_sum(rows.weights)
        t = xp.asarray(targets, dtype=cumw.dtype, device=batch.device)
        pos = [min(int(p), n - 1) for p in to_numpy(xp.searchsorted(cumw, t, side="left"))]
    return [float(v) for v in to_numpy(xp.take(rows.sigma, xp.asarray(pos, device=batch.device)))]


def _ence_width_edges(batch: Batch, rows: _BySigma, k: int) -> list[float]:
    """The K − 1 inner edges of K equal-width bins between the smallest and the largest σ of
    the rows of positive weight, as ``numpy.linspace`` places them (netcal's edges)."""
    xp = batch.xp
    first, last = 0, batch.n - 1
    if rows.weights is not None:
        positive = xp.astype(rows.weights > 0, xp.int8)
        first = int(xp.argmax(positive))
        last = batch.n - 1 - int(xp.argmax(xp.flip(positive)))
    lo, hi = float(rows.sigma[first]), float(rows.sigma[last])
    if k < 2 or not hi > lo:
        return []
    return [float(v) for v in np.linspace(lo, hi, k + 1)[1:-1]]


@register(
    "ence",
    biased=True,
    family="calibration",
    needs={"point", "std"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, None),
    best=0.0,
    reference="Levi et al. 2022, Evaluating and calibrating uncertainty prediction in "
    "regression tasks (Sensors), eq. 8; Küppers et al. 2022 (netcal) for equal-width bins",
)
def ence(batch: Batch, *, n_bins: Bins = 10, binning: EnceBinning = "count") -> float | None:
    """Expected normalized calibration error: ENCE = (1/K) Σ_k |RMV_k − RMSE_k| / RMV_k.

    Levi et al. (2022): rows are binned by predicted std σ into K = ``n_bins`` (default 10)
    bins; RMV_k = sqrt(mean σ² in bin k) and RMSE_k = sqrt(mean (y − ŷ)² in bin k) (weighted
    means); empty bins are skipped and K counts only non-empty bins. Best value 0.

    ``binning="count"`` (default; equal-count bins, as Levi et al.): the bin edges are the
    weighted lower quantiles (inverted CDF) of σ at k/K, and a bin holds σ in
    (edge_{k−1}, edge_k], so tied σ share a bin (which keeps integer weights equal to repeated
    rows). ``binning="width"`` (equal-width bins, as ``netcal.metrics.ENCE`` computes them,
    Küppers et al. 2022): edges σ_min + (σ_max − σ_min)·k/K (``numpy.linspace``) between the
    smallest and largest σ of the rows with positive weight, bins [edge_{k−1}, edge_k) with
    the last one closed (numpy's and scipy's histogram bins, which netcal uses); a constant σ
    makes one bin (where netcal raises). Both are invariant to scaling the weights. Undefined
    (``None`` with a warning) when every σ of a bin is 0.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(ence(P.Gaussian(np.zeros(4), np.array([1.0, 1.0, 2.0, 2.0])),
    ...            np.array([1.0, -1.0, 1.0, 1.0]), n_bins=2), 6)
    0.25
    >>> pred = P.Gaussian(np.zeros(4), np.array([1.0, 1.0, 2.0, 4.0]))
    >>> ence(pred, np.array([1.0, -1.0, 2.0, 2.0]), n_bins=2, binning="width")  # {1, 1, 2}, {4}
    0.25
    """
    k = _check_n_bins(n_bins)
    if binning not in ("count", "width"):
        raise UQValidationError(f"binning must be 'count' or 'width', found {binning!r}")
    rows, _ = _by_sigma_in_range(batch)  # ENCE does not change when σ and e are scaled
    if binning == "width":
        cuts = _cuts(batch, rows.sigma, _ence_width_edges(batch, rows, k), side="left")
    else:
        cuts = _cuts(batch, rows.sigma, _ence_edges(batch, rows, k) if k > 1 else [])
    wk, vk, ek = _bin_sums_by_sigma(batch, rows, cuts)
    keep = wk > 0
    rmv = np.sqrt(vk[keep] / wk[keep])
    rmse_k = np.sqrt(ek[keep] / wk[keep])
    if not bool(np.all(rmv > 0)):
        undefined("ence", "every predicted std of a bin is 0 (RMV = 0)")
        return None
    return float(np.mean(np.abs(rmv - rmse_k) / rmv))


@register(
    "uce",
    biased=True,
    family="calibration",
    needs={"point", "std"},
    direction="lower",
    scaling="quadratic",
    bounds=(0.0, None),
    best=0.0,
    reference="Laves et al. 2020, Well-calibrated regression uncertainty in medical imaging "
    "with deep learning (MIDL), eq. 11",
)
def uce(batch: Batch, *, n_bins: Bins = 10) -> float | None:
    """Uncertainty calibration error: UCE = Σ_m (W_m / W) |MSE_m − MV_m|.

    Laves et al. (2020): rows are binned by predicted variance σ² into M = ``n_bins`` (default
    10) equal-width bins between the smallest and largest σ² (of rows with positive weight;
    bin m holds σ² in (e_{m−1}, e_m], the first bin also its left edge); MSE_m = mean (y − ŷ)²
    and MV_m = mean σ² in the bin (weighted), W_m the bin's weight. Best value 0. In units of
    y² (it scales by c² with the data): ``None`` with a warning where the value exceeds
    float64's range (data beyond about 1e154).
    ``netcal.metrics.UCE`` computes the same sum over the same edges (``numpy.linspace``
    placement) with bins [e_{m−1}, e_m) (the last one closed): the two differ only where a σ²
    lies exactly on an inner edge.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(uce(P.Gaussian(np.zeros(4), np.array([1.0, 1.0, 2.0, 2.0])),
    ...           np.array([1.0, -1.0, 1.0, 1.0]), n_bins=2), 6)
    1.5
    """
    m = _check_n_bins(n_bins)
    xp = batch.xp
    rows, scale = _by_sigma_in_range(batch)  # UCE scales with σ² and e²: by 4^scale
    first, last = 0, batch.n - 1
    if rows.weights is not None:  # the range of the rows that count (positive weight)
        positive = xp.astype(rows.weights > 0, xp.int8)
        first = int(xp.argmax(positive))
        last = batch.n - 1 - int(xp.argmax(xp.flip(positive)))
    s_first, s_last = float(rows.sigma[first]), float(rows.sigma[last])
    lo, hi = s_first * s_first, s_last * s_last  # σ² is non-decreasing along the σ order
    edges = [lo + (hi - lo) * j / m for j in range(1, m)] if m > 1 and hi > lo else []
    # σ² <= edge (σ² as σ·σ) exactly where σ <= the edge's largest square root
    cuts = _cuts(batch, rows.sigma, [_largest_square_root(e) for e in edges])
    wk, vk, ek = _bin_sums_by_sigma(batch, rows, cuts)
    keep = wk > 0
    value = float(np.sum(np.abs(ek[keep] - vk[keep])) / batch.total_weight)
    if math.frexp(value)[1] + 2 * scale > 1024:  # beyond the largest float64
        undefined("uce", f"its value {format_scaled(value, 2 * scale)} exceeds the float64 range")
        return None
    return math.ldexp(value, 2 * scale)


# -- sharpness ---------------------------------------------------------------------------------
@register(
    "sharpness",
    family="calibration",
    needs={"std"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    reference=_UT + " (uncertainty_toolbox.sharpness)",
    mean_terms=lambda batch: batch.std * batch.std,
    finalize=math.sqrt,
)
def sharpness(batch: Batch) -> float:
    """Sharpness of Uncertainty Toolbox: sqrt(Σ w_i σ_i² / Σ w_i), the root mean predictive variance.

    A property of the predictions only (lower = sharper; no best value without the truth).
    Identical to ``uncertainty_toolbox.sharpness``.

    >>> import numpy as np; from uqcore import predictions as P
    >>> sharpness(P.Gaussian(np.zeros(2), np.array([1.0, 7.0])), np.zeros(2))
    5.0
    """
    return batch.root_mean_square(_sigma(batch))


@register(
    "mean_std",
    family="calibration",
    needs={"std"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    reference=_UT + " (appendix A.3: sharpness as the mean predicted std)",
    mean_terms=lambda batch: batch.std,
)
def mean_std(batch: Batch) -> float:
    """Mean predictive standard deviation Σ w_i σ_i / Σ w_i (chung2021 appendix A.3's sharpness).

    >>> import numpy as np; from uqcore import predictions as P
    >>> mean_std(P.Gaussian(np.zeros(2), np.array([1.0, 7.0])), np.zeros(2))
    4.0
    """
    return batch.mean(_sigma(batch))
