"""Proper scoring rules for regression: NLL, CRPS, check (pinball) and interval scores, and the
coverage and width of central prediction intervals (or of given ``Interval`` bounds).

All scores are negatively oriented (lower is better) and averaged over rows with the frequency
weights w_i: S = Σ w_i s_i / Σ w_i (chung2021 §3 and appendix A.3).

How they are computed:

* Every score is a weighted mean of per-row terms, and the terms are computed in blocks of rows
  (``_CHUNK_ELEMENTS`` = 2^18 values per temporary: 2^18 rows for closed forms, fewer for kinds
  with Q levels, K components or S draws per row), each block reduced as soon as it is made. A
  metric therefore holds a few blocks, never an N-long temporary, whatever N; the per-row terms
  themselves (``mean_terms``, used by the stability engine) are one N-long array filled block by
  block.
* Location-scale kinds (``Gaussian``, ``Laplace``, and ``StudentT`` when every row has the same
  ``df``) are scored through the standardised residual z_i = (y_i − loc_i)/scale_i of the block.
  The check and interval scores over a fixed level grid are scale_i · g(z_i) with g piecewise
  linear in z: g is tabulated once on the host (its breakpoints are the standardised quantiles),
  and each row costs a table look-up and one multiply-add, whatever the number of levels.
* For the other kinds (``Mixture``, ``Samples``, ``Quantiles``, ``StudentT`` with per-row
  ``df``) the check and interval scores, coverage and width come from their quantiles
  ``prediction.ppf(levels)``, block by block, so that no N×Q array is held.

Uncertainty Toolbox (``uncertainty_toolbox.metrics_scoring_rule``, version 0.1.1) is reproduced
by the defaults for Gaussian predictions: ``nll`` and ``crps`` are its ``nll_gaussian`` and
``crps_gaussian`` (``scaled=True``); ``check_score`` and ``interval_score`` use its grid of 99
levels 0.01, ..., 0.99 (``levels=numpy.linspace(0.01, 0.99, resolution)`` gives its grid for any
``resolution``) and its ``scaled`` switch (``scaled=False``: the sum over levels instead of the
mean).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal

import array_api_compat
import numpy as np

from uqcore._backend import LOG_SQRT_2PI, Array, clip, special, to_numpy
from uqcore._compiled import kernels
from uqcore._scaling import in_safe_range
from uqcore._validation import UQValidationError
from uqcore.batch import Batch
from uqcore.options import Coverage, CoverageLevels, OpenLevels, Range
from uqcore.predictions.regression import BandwidthRule, RegressionPrediction, Samples
from uqcore.registry import NO_TERMS, register, undefined
from uqcore.regression._intervals import nominal_level

__all__ = [
    "DEFAULT_LEVELS",
    "INTERVAL_LEVELS",
    "check_score",
    "coverage",
    "crps",
    "interval_score",
    "mean_width",
    "nll",
]

Estimator = Literal["nrg", "fair", "pwm"]
#: The kernel bandwidth of the log score of ``Samples``: a rule of thumb, one number for every
#: row, or one number per row (a sequence or 1-D array of length N).
#: A named rule, one bandwidth h > 0 for every row, or one per row (a sequence of length N).
Bandwidth = (
    BandwidthRule
    | Annotated[float, Range(0, lo_open=True)]
    | Annotated[Sequence[float], Range(0, lo_open=True)]
)

#: Default grid of the check score (quantile levels) and of the interval score (central
#: coverages): 0.01, 0.02, ..., 0.99 (chung2021 appendix A.3; Uncertainty Toolbox's 99 levels).
DEFAULT_LEVELS: tuple[float, ...] = tuple(round(k / 100, 2) for k in range(1, 100))

#: Default nominal coverages of ``coverage`` and ``mean_width``.
INTERVAL_LEVELS: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95, 0.99)

#: Values per temporary array: rows are scored in blocks of _CHUNK_ELEMENTS // width rows, where
#: width is the number of values a row needs (1 for closed forms, Q levels, K components, S draws).
#: 2^18 float64 values (2 MiB) keep a block's temporaries in cache; larger blocks were slower on
#: numpy (benchmarks/regression.py), smaller ones pay per-block overhead.
_CHUNK_ELEMENTS = 1 << 18

#: Tolerance for matching a level to the levels a ``Quantiles`` prediction provides.
_LEVEL_TOL = 1e-9

_GR = "Gneiting & Raftery 2007, Strictly proper scoring rules (JASA)"
_UT = "Chung et al. 2021, Uncertainty Toolbox, §3 and appendix A.3"
_LOCATION_SCALE = ("gaussian", "laplace", "student_t")


# -- option checks ---------------------------------------------------------------------------
def _check_levels(levels: Any, name: str = "levels") -> np.ndarray[Any, Any]:
    """``levels`` as a float64 array, each in (0, 1); a tuple (the options' defaults) is
    checked once per process (a copy of the checked array is returned)."""
    if type(levels) is tuple:
        try:
            return _checked_tuple(levels, name).copy()
        except TypeError:  # an element that is not hashable: checked below
            pass
    return _checked(levels, name)


@functools.lru_cache(maxsize=64)
def _checked_tuple(levels: tuple[Any, ...], name: str) -> np.ndarray[Any, Any]:
    lv = _checked(levels, name)
    lv.setflags(write=False)
    return lv


def _checked(levels: Any, name: str) -> np.ndarray[Any, Any]:
    try:
        lv = np.asarray(levels, dtype=np.float64)
    except (TypeError, ValueError):
        raise UQValidationError(
            f"{name} must be a sequence of numbers in (0, 1), found {levels!r}"
        ) from None
    if lv.ndim != 1 or lv.shape[0] == 0:
        raise UQValidationError(f"{name} must be a non-empty 1-D sequence, found shape {lv.shape}")
    bad = ~np.isfinite(lv) | (lv <= 0) | (lv >= 1)
    if bool(np.any(bad)):
        j = int(np.argmax(bad))
        raise UQValidationError(
            f"{name} must lie in the open interval (0, 1); {name}[{j}] = {lv[j]!r}"
        )
    return lv


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise UQValidationError(f"{name} must be True or False, found {value!r}")
    return bool(value)


def _check_estimator(estimator: Any) -> None:
    if estimator not in ("nrg", "fair", "pwm"):
        raise UQValidationError(f"estimator must be 'nrg', 'fair' or 'pwm', found {estimator!r}")


_BANDWIDTH_RULES = ("silverman", "scott", "scoringrules")


def _check_bandwidth(bandwidth: Any) -> np.ndarray[Any, Any] | None:
    """Validate ``bandwidth``; the per-row bandwidths on the host, or None for a rule or one
    number."""
    if isinstance(bandwidth, str) and bandwidth in _BANDWIDTH_RULES:
        return None
    if isinstance(bandwidth, (int, float)) and not isinstance(bandwidth, bool):
        if math.isfinite(bandwidth) and bandwidth > 0:
            return None
    elif not isinstance(bandwidth, (str, bool, bytes)) and bandwidth is not None:
        try:
            host = bandwidth if isinstance(bandwidth, (list, tuple)) else to_numpy(bandwidth)
            h = np.asarray(host, dtype=np.float64)
        except (AttributeError, TypeError, ValueError):
            h = None
        if h is not None and h.ndim == 1:
            bad = ~(np.isfinite(h) & (h > 0))
            if not bool(np.any(bad)):
                return h
            j = int(np.argmax(bad))
            raise UQValidationError(
                f"bandwidth must be finite and > 0 in every row; bandwidth[{j}] = {float(h[j])!r}"
            )
    raise UQValidationError(
        "bandwidth must be 'silverman', 'scott', 'scoringrules', a number > 0 or one number "
        f"> 0 per row, found {bandwidth!r}"
    )


# -- helpers -------------------------------------------------------------------------------
def _asarray(batch: Batch, values: Any) -> Array:
    host = np.ascontiguousarray(values, dtype=np.float64)
    if not host.flags.writeable and not array_api_compat.is_numpy_namespace(batch.xp):
        host = host.copy()  # a shared read-only array (torch warns of those, and may share it)
    return batch.xp.asarray(host, dtype=batch.xp.float64, device=batch.device)


def _host_special() -> Any:
    return special(np)


def _tabulable(pred: RegressionPrediction) -> bool:
    """Whether the prediction is location-scale with one standardised distribution for all rows."""
    if pred.kind in ("gaussian", "laplace"):
        return True
    if pred.kind == "student_t":
        df = pred.df  # type: ignore[attr-defined]
        return bool(pred.xp.all(df == df[0]))
    return False


def _scale(pred: RegressionPrediction) -> Array:
    return pred.std_ if pred.kind == "gaussian" else pred.scale  # type: ignore[attr-defined]


def _std_ppf(pred: RegressionPrediction, p: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Standardised quantiles of a tabulable prediction (host numpy, shape of ``p``)."""
    return _std_ppf_of(pred.kind, _family_df(pred), p)


def _family_df(pred: RegressionPrediction) -> float | None:
    """The degrees of freedom of a tabulable Student-t prediction (all rows share them)."""
    return float(pred.df[0]) if pred.kind not in ("gaussian", "laplace") else None  # type: ignore[attr-defined]


def _std_ppf_of(kind: str, df: float | None, p: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    sp = _host_special()
    if kind == "gaussian":
        return np.asarray(sp.ndtri(p), dtype=np.float64)
    if kind == "laplace":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(p < 0.5, np.log(2.0 * p), -np.log(2.0 * (1.0 - p)))
    return np.asarray(sp.stdtrit(np.full_like(p, df), p), dtype=np.float64)


@functools.lru_cache(maxsize=64)
def _check_table(kind: str, df: float | None, p: tuple[float, ...], factor: float) -> _Table:
    """The check score's table of a standardised family at levels ``p`` (a function of these
    alone: built once per process, not once per call)."""
    pa = np.asarray(p, dtype=np.float64)
    return _Table(_std_ppf_of(kind, df, pa), factor * (1.0 - pa), factor * pa, 0.0)


@functools.lru_cache(maxsize=64)
def _interval_table(
    kind: str,
    df: float | None,
    lo: tuple[float, ...],
    hi: tuple[float, ...],
    alpha: tuple[float, ...],
    factor: float,
) -> _Table:
    """The interval score's table of a standardised family (as :func:`_check_table`)."""
    la, ha = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    m = la.shape[0]
    coef = factor * 2.0 / np.asarray(alpha, dtype=np.float64)
    zl, zu = _std_ppf_of(kind, df, la), _std_ppf_of(kind, df, ha)
    return _Table(
        np.concatenate([zl, zu]),
        np.concatenate([coef, np.zeros(m)]),
        np.concatenate([np.zeros(m), coef]),
        float(np.sum(factor * (zu - zl))),
    )


class _Table:
    """g(z) = const + Σ_j [left_j·max(b_j − z, 0) + right_j·max(z − b_j, 0)], tabulated.

    ``breaks`` are the sorted distinct breakpoints U_0 < ... < U_{M−1}; on segment k, the
    interval (U_{k−1}, U_k] (U_{−1} = −∞, U_M = +∞), g(z) = slope[k]·z + intercept[k]. Each
    segment's coefficients are summed over the terms themselves (no differences of running
    sums), so they are as accurate as the terms.

    The segment of z is found without a binary search: a uniform grid of cells of width
    Δ ≤ (smallest gap)/2, each holding at most one breakpoint, gives the number of breakpoints
    below the cell (``base``), and one comparison with the next breakpoint finishes. Rounding can
    only misplace a z that lies within rounding of a breakpoint, where g is continuous, so the
    value is unaffected. When the grid would be too fine (over ``_MAX_CELLS`` cells) a
    ``searchsorted`` is used instead.
    """

    _MAX_CELLS = 1 << 20

    def __init__(
        self,
        breaks: np.ndarray[Any, Any],
        left: np.ndarray[Any, Any],
        right: np.ndarray[Any, Any],
        const: float,
    ) -> None:
        u = np.unique(breaks)
        below = np.concatenate([[-np.inf], u])  # U_{k-1} per segment k = 0..M
        # on segment k, a term whose breakpoint is <= U_{k-1} lies below z: its right arm is active
        active_right = breaks[None, :] <= below[:, None]
        self.slope = np.sum(np.where(active_right, right, -left), axis=1)
        self.intercept = const + np.sum(
            np.where(active_right, -right * breaks, left * breaks), axis=1
        )
        self.breaks = u
        self.cells: tuple[float, float, int, np.ndarray[Any, Any]] | None = None
        if u.shape[0] >= 2:
            width = float(np.min(np.diff(u))) / 2.0
            n_cells = int(np.floor((u[-1] - u[0]) / width)) + 2 if width > 0 else 0
            if 0 < n_cells <= self._MAX_CELLS and math.isfinite(1.0 / width):
                edges = u[0] + np.arange(n_cells) * width
                base = np.searchsorted(u, edges, side="left")
                self.cells = (float(u[0]), 1.0 / width, n_cells, base)

    @functools.cached_property
    def compiled_args(self) -> tuple[Any, ...]:
        """The cells' arguments of the compiled pass (``scaled_table``): (lo, 1/width, last
        cell, base, the breaks followed by +inf, slope, intercept), made once per table."""
        assert self.cells is not None
        lo, inv_width, n_cells, base = self.cells
        return (
            lo,
            inv_width,
            float(n_cells - 1),
            np.ascontiguousarray(base, dtype=np.int64),
            np.concatenate([self.breaks, [np.inf]]),
            np.ascontiguousarray(self.slope, dtype=np.float64),
            np.ascontiguousarray(self.intercept, dtype=np.float64),
        )

    def bind(self, batch: Batch) -> Callable[[Array], Array]:
        """g as a function of z on the batch's namespace and device (tables copied there once)."""
        xp = batch.xp
        slope = _asarray(batch, self.slope)
        intercept = _asarray(batch, self.intercept)
        if self.cells is None:
            breaks = _asarray(batch, self.breaks)

            def by_search(z: Array) -> Array:
                k = xp.searchsorted(breaks, z, side="left")
                return xp.take(slope, k) * z + xp.take(intercept, k)

            return by_search
        lo, inv_width, n_cells, base_host = self.cells
        top = float(n_cells - 1)
        base = xp.asarray(base_host, dtype=xp.int64, device=batch.device)
        nxt = _asarray(batch, np.concatenate([self.breaks, [np.inf]]))

        def by_cells(z: Array) -> Array:
            cell = xp.astype(clip(xp, (z - lo) * inv_width, min=0.0, max=top), xp.int64)
            k0 = xp.take(base, cell)
            k = k0 + xp.astype(z > xp.take(nxt, k0), xp.int64)
            return xp.take(slope, k) * z + xp.take(intercept, k)

        return by_cells


def _rows(pred: RegressionPrediction, start: int, stop: int) -> Any:
    """Rows start:stop of ``pred`` as a prediction of the same kind (views, no validation)."""
    if not pred._row_fields:  # a derived kind (e.g. a recalibrated prediction): copy the rows
        return pred.take(np.arange(start, stop))
    fields = {name: getattr(pred, name)[start:stop, ...] for name in pred._row_fields}
    fields.update({name: getattr(pred, name) for name in pred._shared_fields})
    sub = type(pred)._from_fields(pred.xp, fields)
    if pred.kind == "samples":
        # sort once for the whole batch; the blocks reuse it
        sub.__dict__["sorted_draws"] = pred.sorted_draws[start:stop, ...]  # type: ignore[attr-defined]
    return sub


#: Per-row values of a block of rows: fn(rows, y_rows), ``rows`` a prediction of the same kind.
RowFn = Callable[[Any, Array], Array]


def _blocks(batch: Batch, width: int) -> Iterator[tuple[int, int, Any]]:
    """(start, stop, rows) blocks of the prediction with about ``_CHUNK_ELEMENTS / width`` rows."""
    n = batch.n
    step = max(1, _CHUNK_ELEMENTS // max(1, width))
    if step >= n:
        yield 0, n, batch.prediction
        return
    for start in range(0, n, step):
        stop = min(n, start + step)
        yield start, stop, _rows(batch.prediction, start, stop)


def _terms(batch: Batch, width: int, fn: RowFn) -> Array:
    """The N per-row values fn(rows, y_rows), computed block by block into one array."""
    xp = batch.xp
    out = None
    for a, b, sub in _blocks(batch, width):
        v = fn(sub, batch.y[a:b])
        if b - a == batch.n:
            return v
        if out is None:
            out = xp.empty((batch.n,), dtype=v.dtype, device=batch.device)
        out[a:b] = v
    return out


def _mean(batch: Batch, width: int, fn: RowFn) -> float:
    """Σ w_i v_i / Σ w_i of the per-row values v = fn(rows, y_rows), reduced block by block."""
    xp = batch.xp
    total: Any = 0.0
    for a, b, sub in _blocks(batch, width):
        v = fn(sub, batch.y[a:b])
        if b - a == batch.n:
            return batch.mean(v)
        total = total + (xp.sum(v) if batch.weights is None else xp.sum(batch.weights[a:b] * v))
    return float(total) / batch.total_weight


def _weighted_sums(batch: Batch, width: int, fn: RowFn) -> Array:
    """Σ_i w_i v_ij for the block-wise N×width values v = fn(rows, y_rows): a length-width array."""
    xp = batch.xp
    total = None
    for a, b, sub in _blocks(batch, width):
        v = fn(sub, batch.y[a:b])
        s = (
            xp.sum(v, axis=0)
            if batch.weights is None
            else xp.sum(batch.weights[a:b, None] * v, axis=0)
        )
        total = s if total is None else total + s
    return total


def _quantile_columns(pred: Any, lv: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """Column indices of ``lv`` among a Quantiles prediction's levels (None if one is missing)."""
    known = to_numpy(pred.levels)
    idx = np.searchsorted(known, lv)
    idx = np.clip(idx, 0, known.shape[0] - 1)
    lower = np.clip(idx - 1, 0, known.shape[0] - 1)
    best = np.where(np.abs(known[lower] - lv) < np.abs(known[idx] - lv), lower, idx)
    if bool(np.all(np.abs(known[best] - lv) <= _LEVEL_TOL)):
        return best
    return None


def _quantiles_at(sub: Any, lv: np.ndarray[Any, Any]) -> Array:
    """sub's quantiles at ``lv``; a ``Quantiles`` prediction's own columns are taken as given."""
    if sub.kind == "quantiles":
        cols = _quantile_columns(sub, lv)
        if cols is not None:
            xp = sub.xp
            return xp.take(sub.values, xp.asarray(cols, device=_dev(sub.values)), axis=1)
    return sub.ppf(lv)


def _dev(x: Array) -> Any:
    return array_api_compat.device(x)


def _width_of(pred: RegressionPrediction, q: int) -> int:
    return q * (pred.n_components if pred.kind == "mixture" else 1)  # type: ignore[attr-defined]


def _positive_weight_rows(batch: Batch, bad: Array) -> tuple[bool, bool]:
    """(any bad row has positive weight, any bad row at all)."""
    xp = batch.xp
    anybad = bool(xp.any(bad))
    if not anybad:
        return False, False
    if batch.weights is None:
        return True, True
    return bool(xp.any(bad & (batch.weights > 0))), True


# -- NLL ------------------------------------------------------------------------------------
def _nll_gaussian(rows: Any, y: Array) -> Array:
    z = rows.standardize(y)
    return 0.5 * z * z + rows.xp.log(rows.std_) + LOG_SQRT_2PI


class _KernelSamples(Samples):
    """Draws with one given kernel bandwidth per row, kept as a row field so that the blocks of
    rows (and ``take``) carry the bandwidths with their draws."""

    _row_fields = ("draws", "kernel_bandwidth")
    kernel_bandwidth: Array

    def bandwidth(self, rule: Any = None) -> Array:
        return self.kernel_bandwidth


def _kernel_batch(batch: Batch, bandwidth: Any) -> Batch:
    """``batch``, or for ``Samples`` with one bandwidth per row the batch whose draws carry
    them (:class:`_KernelSamples`)."""
    h = _check_bandwidth(bandwidth)
    pred = batch.prediction
    if h is None or not isinstance(pred, Samples):
        return batch
    if h.shape[0] != batch.n:
        raise UQValidationError(
            f"bandwidth must give one value per row: {batch.n} rows, found {h.shape[0]} values"
        )
    fields = {"draws": pred.draws, "kernel_bandwidth": _asarray(batch, h)}
    return Batch(_KernelSamples._from_fields(pred.xp, fields), batch.y, batch.weights)


def _nll_rows(batch: Batch, *, bandwidth: Any = "silverman") -> tuple[int, RowFn]:
    """(values per row, block function) of the terms −log f_i(y_i) (``batch`` from
    :func:`_kernel_batch` where the bandwidth is given per row)."""
    pred = batch.prediction
    if pred.kind == "gaussian":
        return 1, _nll_gaussian
    if pred.kind == "samples":
        return pred.n_draws, lambda rows, y: -rows.logpdf(y, bandwidth)  # type: ignore[attr-defined]
    return _width_of(pred, 1), lambda rows, y: -rows.logpdf(y)


def _nll_terms(batch: Batch, *, bandwidth: Any = "silverman") -> Array:
    batch = _kernel_batch(batch, bandwidth)
    return _terms(batch, *_nll_rows(batch, bandwidth=bandwidth))


@register(
    "nll",
    family="scoring",
    needs={"logpdf"},
    direction="lower",
    scaling="log",
    reference="xiong2024 eq. 11 (as a mean); Gneiting & Raftery 2007 (logarithmic score); "
    "Silverman 1986 eq. 3.30-3.31 (kernel bandwidths)",
    mean_terms=_nll_terms,
    row_options=("bandwidth",),
)
def nll(batch: Batch, *, bandwidth: Bandwidth = "silverman") -> float | None:
    """Mean negative log-likelihood: NLL = −Σ w_i log f_i(y_i) / Σ w_i.

    Closed forms: Gaussian ½z² + log σ + ½ log 2π with z = (y − μ)/σ; Laplace |z| + log 2b;
    Student-t (location-scale, ``df`` ν) −log Γ((ν+1)/2) + log Γ(ν/2) + ½ log νπ + log s
    + (ν+1)/2 · log(1 + z²/ν), its Γ ratio evaluated as Pochhammer's symbol (ν/2)_{1/2} in
    scipy's form (``scipy.stats.t.logpdf``), exact at any ν; Gaussian mixture
    −log Σ_k w_k φ((y − μ_k)/σ_k)/σ_k by log-sum-exp.
    For ``Samples`` the density is a Gaussian kernel density estimate of the draws,
    f_i(y) = (1/S) Σ_s φ((y − x_is)/h_i)/h_i, with bandwidth ``bandwidth``: ``"silverman"``
    (default; h_i = 0.9·min(σ̂_i, IQR_i/1.34)·S^(−1/5), Silverman 1986 eq. 3.31), ``"scott"``
    (h_i = 1.06·σ̂_i·S^(−1/5)), ``"scoringrules"`` (h_i = 1.06·min(σ̂_i, IQR_i/1.34)·S^(−1/5),
    Silverman 1986 eq. 3.30: the default of ``scoringrules.logs_ensemble``, whose score per row
    is the term −log f_i(y_i) here), a number (the same h for every row), or one number per row
    (a sequence or 1-D array of length N, h_i given, as scoringrules' ``bw``; it belongs to its
    row: reorder, repeat or drop it with the rows); σ̂_i is the ddof = 1 std of row i's draws
    and IQR_i the difference of their linearly interpolated quartiles; see
    :meth:`uqcore.predictions.Samples.bandwidth`. The option is ignored by the other kinds. Not
    defined for ``Quantiles`` (no density). Undefined (``None``) when a row of positive weight has
    a zero rule-of-thumb bandwidth (all its draws equal). Lower is better; it is unbounded below
    (densities can exceed 1); the true distribution minimises its expectation (xiong2024 §III).

    Uncertainty Toolbox's ``nll_gaussian(scaled=True)`` is the Gaussian case (its
    ``scaled=False`` is this value times N).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(nll(P.Gaussian([0.0, 1.0], [1.0, 2.0]), np.array([0.0, 3.0])), 10)
    1.5155121235
    >>> draws = P.Samples([[0.0, 0.0], [1.0, 1.0]])  # each row's KDE is one Gaussian
    >>> round(nll(draws, np.array([0.0, 3.0]), bandwidth=[1.0, 2.0]), 10)
    1.5155121235
    """
    batch = _kernel_batch(batch, bandwidth)
    pred = batch.prediction
    if pred.kind == "samples" and isinstance(bandwidth, str):
        h = pred.bandwidth(bandwidth)  # type: ignore[attr-defined]
        bad = h <= 0
        blocking, anybad = _positive_weight_rows(batch, bad)
        if blocking:
            undefined("nll", "all draws of a row are equal (zero kernel bandwidth)")
            return None
        if anybad:
            xp = batch.xp
            keep = xp.nonzero(~bad)[0]
            sub = Batch(pred.take(keep), xp.take(batch.y, keep), xp.take(batch.weights, keep))
            return _mean(sub, *_nll_rows(sub, bandwidth=bandwidth))
    return _mean(batch, *_nll_rows(batch, bandwidth=bandwidth))


# -- CRPS -----------------------------------------------------------------------------------
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_PI = math.sqrt(math.pi)
_LOG_PI = math.log(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _crps_gaussian(rows: Any, y: Array, cdf: Array | None = None) -> Array:
    """The Gaussian CRPS per row; ``cdf``: Φ(z) of these rows where it is known already."""
    xp = rows.xp
    z = rows.standardize(y)
    if cdf is None:
        cdf = special(xp).ndtr(z)
    return rows.std_ * (
        z * (2.0 * cdf - 1.0) + (2.0 * _INV_SQRT_2PI) * xp.exp(-0.5 * z * z) - _INV_SQRT_PI
    )


def _crps_gaussian_rows(batch: Batch) -> RowFn:
    """:func:`_crps_gaussian`, reading Φ(z_i) from the batch's PIT values where the calibration
    metrics cached them (the same values: Φ of the same z), so that Φ is computed once."""
    if not batch.has_shared("pit"):
        return _crps_gaussian
    pit = batch.pit
    # the block functions are called on consecutive blocks from row 0 (_blocks), so the rows
    # of each call start where the previous call's ended
    start = [0]

    def block(rows: Any, y: Array) -> Array:
        a = start[0]
        start[0] = a + int(y.shape[0])
        return _crps_gaussian(rows, y, pit[a : start[0]])

    return block


def _crps_laplace(rows: Any, y: Array) -> Array:
    xp = rows.xp
    a = xp.abs(rows.standardize(y))
    return rows.scale * (a + xp.exp(-a) - 0.75)


def _crps_student_t(rows: Any, y: Array) -> Array:
    """σ[z(2F_ν(z) − 1) + 2 f_ν(z)(ν + z²)/(ν − 1) − 2√ν B(½, ν − ½)/((ν − 1) B(½, ν/2)²)];
    +inf where ν ≤ 1 (the CRPS is infinite there) (Gneiting & Raftery 2007; scoringrules'
    ``crps_t``).

    The Beta functions as Pochhammer symbols, B(½, a) = √π/(a)_{1/2} with
    (a)_{1/2} = Γ(a + ½)/Γ(a): the constant is 2√ν (ν/2)²_{1/2} / (√π (ν − 1)(ν − ½)_{1/2}) and
    f_ν's normaliser log (ν/2)_{1/2} − ½ log(νπ), with no difference of log Γ values, which
    cancels at large ν (measured through log Γ: 1e-10 absolute at ν = 10⁶, 7e-7 at 10⁹,
    3e-3 at 10¹²); as ν → ∞ the constant tends to the Gaussian's 1/√π. Where every row has
    the same ν the terms of ν alone are computed once (a length-1 array broadcast: the same
    values as per row)."""
    xp = rows.xp
    sp = special(xp)
    df = rows.df
    ok = df > 1.0
    shared = rows._shared_df()  # one ν for every row (length 1), or None: one per row
    nu = df if shared is None else shared
    nu = xp.where(nu > 1.0, nu, 2.0)
    z = rows.standardize(y)
    half = sp.poch(0.5 * nu, 0.5)  # Γ((ν+1)/2)/Γ(ν/2) = √π/B(½, ν/2)
    log_pdf_const = xp.log(half) - 0.5 * (xp.log(nu) + _LOG_PI)
    pdf = xp.exp(log_pdf_const - 0.5 * (nu + 1.0) * xp.log1p(z * z / nu))
    cdf = sp.stdtr(nu, z)
    const = 2.0 * xp.sqrt(nu) * (half * half) / (_SQRT_PI * (nu - 1.0) * sp.poch(nu - 0.5, 0.5))
    val = rows.scale * (z * (2.0 * cdf - 1.0) + 2.0 * pdf * (nu + z * z) / (nu - 1.0) - const)
    return xp.where(ok, val, math.inf)


def _abs_normal_mean(xp: Any, m: Array, s: Array) -> Array:
    """E|X| for X ~ N(m, s²): m(2Φ(m/s) − 1) + 2sφ(m/s)."""
    r = m / s
    return m * (2.0 * special(xp).ndtr(r) - 1.0) + (2.0 * _INV_SQRT_2PI) * s * xp.exp(-0.5 * r * r)


def _crps_mixture(rows: Any, y: Array) -> Array:
    """Σ_k w_k A(y − μ_k, σ_k) − ½ Σ_k Σ_l w_k w_l A(μ_k − μ_l, √(σ_k² + σ_l²)), A(m, s) = E|N(m, s²)|
    (Grimit et al. 2006); one pass over the block's rows × K components per component k."""
    xp = rows.xp
    w, mu, sd = rows.weights, rows.means, rows.stds
    first = xp.sum(w * _abs_normal_mean(xp, y[:, None] - mu, sd), axis=1)
    spread = xp.zeros_like(first)
    # √(σ_k² + σ_l²): from the squares where they stay in range (faster), else as hypot
    var = sd * sd if in_safe_range(float(xp.max(sd)), float(xp.min(sd))) else None
    for k in range(int(w.shape[1])):
        s_k = sd[:, k : k + 1]
        pair = xp.hypot(s_k, sd) if var is None else xp.sqrt(var[:, k : k + 1] + var)
        a = _abs_normal_mean(xp, mu[:, k : k + 1] - mu, pair)
        spread = spread + w[:, k] * xp.sum(w * a, axis=1)
    return first - 0.5 * spread


def _crps_samples(batch: Batch, estimator: str) -> RowFn:
    """CRPS of the draws from the sorted sample, per row.

    With d_(i) = x_(i) − y (sorted, i = 0..S−1) and c_i = 2i − S + 1, Σ_{s,t} |x_s − x_t| =
    2 Σ_i c_i d_(i), so nrg = mean|d| − Σ c_i d_(i)/S², fair = mean|d| − Σ c_i d_(i)/(S(S−1)),
    pwm = mean|d| + β0 − 2β1 with β0 = mean d, β1 = Σ_i i d_(i)/(S(S−1)) (Zamo & Naveau 2018).
    Differences to y keep the sums free of the draws' offset.
    """
    xp = batch.xp
    s = batch.prediction.n_draws  # type: ignore[attr-defined]
    i = np.arange(s, dtype=np.float64)
    if estimator == "nrg":
        coef = _asarray(batch, -(2.0 * i - s + 1.0) / (s * s))
    elif estimator == "fair":
        coef = _asarray(batch, -(2.0 * i - s + 1.0) / (s * (s - 1.0)))
    else:
        coef = _asarray(batch, 1.0 / s - 2.0 * i / (s * (s - 1.0)))

    def block(rows: Any, y: Array) -> Array:
        d = rows.sorted_draws - y[:, None]
        return xp.mean(xp.abs(d), axis=1) + d @ coef

    return block


def _pinball_rows(q: Array, y: Array, p: Array) -> Array:
    """Σ_j (1{y ≤ q_j} − p_j)(q_j − y) per row, for an N×Q block of quantiles q."""
    xp = array_api_compat.array_namespace(q)
    d = q - y[:, None]
    return xp.sum(xp.where(d >= 0, 1.0 - p, -p) * d, axis=1)


def _crps_quantiles(batch: Batch) -> RowFn:
    """2 × mean pinball loss over the given levels (quantile decomposition of the CRPS)."""
    lv = batch.prediction.levels  # type: ignore[attr-defined]
    q = int(lv.shape[0])

    def block(rows: Any, y: Array) -> Array:
        return (2.0 / q) * _pinball_rows(rows.values, y, lv)

    return block


#: Number of midpoint levels of the quadrature CRPS for kinds without a closed form.
QUADRATURE_LEVELS = 2000


def _crps_quadrature(batch: Batch) -> RowFn:
    """2·(1/K) Σ_k ρ_{p_k}(y − F⁻¹(p_k)) on the midpoints p_k = (k − ½)/K, K = QUADRATURE_LEVELS."""
    k = QUADRATURE_LEVELS
    lv = (np.arange(k, dtype=np.float64) + 0.5) / k
    p = _asarray(batch, lv)

    def block(rows: Any, y: Array) -> Array:
        return (2.0 / k) * _pinball_rows(rows.ppf(lv), y, p)

    return block


def _crps_rows(batch: Batch, *, estimator: Estimator = "nrg") -> tuple[int, RowFn]:
    """(values per row, block function) of the per-row CRPS."""
    _check_estimator(estimator)
    pred = batch.prediction
    kind = pred.kind
    if kind == "gaussian":
        return 1, _crps_gaussian_rows(batch)
    if kind == "laplace":
        return 1, _crps_laplace
    if kind == "student_t":
        return 1, _crps_student_t
    if kind == "mixture":
        return _width_of(pred, 1), _crps_mixture
    if kind == "samples":
        s = pred.n_draws  # type: ignore[attr-defined]
        if estimator != "nrg" and s < 2:
            raise UQValidationError(
                f"estimator={estimator!r} needs at least 2 draws per row (S >= 2), found S = 1"
            )
        return s, _crps_samples(batch, estimator)
    if kind == "quantiles":
        return int(pred.levels.shape[0]), _crps_quantiles(batch)  # type: ignore[attr-defined]
    return QUADRATURE_LEVELS, _crps_quadrature(batch)


def _crps_terms(batch: Batch, *, estimator: Estimator = "nrg") -> Array:
    return _terms(batch, *_crps_rows(batch, estimator=estimator))


@register(
    "crps",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_GR + " eq. 20-21; Jordan, Krüger & Lerch 2019 (scoringRules); Grimit et al. 2006 "
    "(mixtures); Zamo & Naveau 2018 (ensemble estimators)",
    mean_terms=_crps_terms,
)
def crps(batch: Batch, *, estimator: Estimator = "nrg") -> float | None:
    """Continuous ranked probability score: CRPS = Σ w_i ∫ (F_i(x) − 1{x ≥ y_i})² dx / Σ w_i.

    Closed forms per kind, with z = (y − loc)/scale:

    * Gaussian: σ[z(2Φ(z) − 1) + 2φ(z) − 1/√π] (Gneiting & Raftery 2007; Uncertainty Toolbox's
      ``crps_gaussian``).
    * Laplace: b[|z| + exp(−|z|) − 3/4] (Jordan et al. 2019).
    * Student-t (ν = df > 1): s[z(2F_ν(z) − 1) + 2f_ν(z)(ν + z²)/(ν − 1)
      − 2√ν B(½, ν − ½)/((ν − 1)B(½, ν/2)²)] (Jordan et al. 2019), the Beta functions as
      Pochhammer symbols (no difference of log Γ values: exact at any ν, tending to the
      Gaussian's as ν → ∞). Infinite for ν ≤ 1: the value is then undefined (``None``).
    * Gaussian mixture: Σ_k w_k A(y − μ_k, σ_k²) − ½ Σ_{k,l} w_k w_l A(μ_k − μ_l, σ_k² + σ_l²)
      with A(m, s²) = m(2Φ(m/s) − 1) + 2sφ(m/s) (Grimit et al. 2006), O(K²) per row.
    * Samples (S draws x_s), ``estimator``: ``"nrg"`` (default) the CRPS of the empirical
      distribution, (1/S)Σ|x_s − y| − (1/2S²)Σ_{s,t}|x_s − x_t|; ``"fair"`` the unbiased version
      with 1/(2S(S−1)); ``"pwm"`` the probability-weighted-moment form (1/S)Σ|x_s − y| + β0 − 2β1
      (equal to ``"fair"`` in exact arithmetic), as in ``scoringrules.crps_ensemble``. Computed
      from the draws sorted once (O(S log S) per row, no S×S array). ``"fair"`` and ``"pwm"``
      need S >= 2. ``estimator`` is ignored by the other kinds.
    * Quantiles (levels p_1..p_Q): the quantile-score approximation
      2·(1/Q) Σ_j ρ_{p_j}(y − q_j), ρ_p(u) = u(p − 1{u < 0}) — twice the mean pinball loss over
      the given levels (``scoringrules.crps_quantile``).
    * Any other kind with a quantile function (e.g. an isotonically recalibrated prediction):
      CRPS = 2∫₀¹ ρ_p(y − F⁻¹(p)) dp (Laio & Tamea 2007) by the midpoint rule on
      ``QUADRATURE_LEVELS`` = 2000 levels: an approximation, within 5e-5 relative of the closed
      form for Gaussians (tested), where the tails of F⁻¹ limit the rule to first order.

    Best value 0 (a point mass at y); lower is better.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(crps(P.Gaussian([0.0], [1.0]), np.array([0.0])), 10)
    0.2336949773
    """
    _check_estimator(estimator)
    pred = batch.prediction
    if pred.kind == "samples" and estimator != "nrg" and pred.n_draws < 2:  # type: ignore[attr-defined]
        undefined("crps", f"estimator={estimator!r} needs at least 2 draws per row")
        return None
    width, fn = _crps_rows(batch, estimator=estimator)
    if pred.kind == "student_t":
        bad = pred.df <= 1.0  # type: ignore[attr-defined]
        blocking, anybad = _positive_weight_rows(batch, bad)
        if blocking:
            undefined("crps", "a Student-t row has df <= 1 (infinite CRPS)")
            return None
        if anybad:  # rows of zero weight with an infinite CRPS: count them as 0

            def finite(rows: Any, y: Array) -> Array:
                return batch.xp.where(rows.df <= 1.0, 0.0, _crps_student_t(rows, y))

            fn = finite
    return _mean(batch, width, fn)


# -- check score ----------------------------------------------------------------------------
def _check_grid(batch: Batch, levels: Any) -> tuple[np.ndarray[Any, Any], bool]:
    """The quantile levels, and whether they are a Quantiles prediction's own columns."""
    pred = batch.prediction
    if levels is None:
        if pred.kind == "quantiles":
            return to_numpy(pred.levels).astype(np.float64), True  # type: ignore[attr-defined]
        return _check_levels(DEFAULT_LEVELS), False  # checked once per process
    return _check_levels(levels), False


def _unspanned(batch: Batch, needed: np.ndarray[Any, Any]) -> str | None:
    """Why a ``Quantiles`` prediction cannot give the quantile levels ``needed`` (they lie
    outside its levels, and it does not extrapolate), or ``None``."""
    pred = batch.prediction
    if pred.kind != "quantiles":
        return None
    j = pred.outside(needed)  # type: ignore[attr-defined]
    if j is None:
        return None
    known = to_numpy(pred.levels)  # type: ignore[attr-defined]
    return (
        f"the quantiles prediction spans the levels [{known[0]:.6g}, {known[-1]:.6g}]; the "
        f"quantile level {float(needed[j]):.6g} lies outside"
    )


def _location_scale_table(batch: Batch, table: _Table) -> RowFn:
    """Block function scale_i · g(z_i) of a tabulated g (on numpy float64 rows, one compiled
    pass where numba is available: the same operations row by row, no temporaries)."""
    compiled = _compiled_table(batch, table)
    bound: list[Callable[[Array], Array]] = []  # g on the batch's namespace, made when needed

    def block(rows: Any, y: Array) -> Array:
        if compiled is not None:
            loc, scale = rows.point(), _scale(rows)
            if _contiguous_f64(y, loc, scale):
                return compiled(y, loc, scale)
        if not bound:
            bound.append(table.bind(batch))
        return _scale(rows) * bound[0](rows.standardize(y))

    return block


def _contiguous_f64(*arrays: Any) -> bool:
    return all(
        isinstance(a, np.ndarray) and a.dtype == np.float64 and a.flags.c_contiguous for a in arrays
    )


def _f64(a: Any) -> np.ndarray[Any, Any]:
    """``a`` as a contiguous float64 numpy array (itself where it is one)."""
    return np.ascontiguousarray(a, dtype=np.float64)


def _compiled_table(batch: Batch, table: _Table) -> Callable[[Array, Array, Array], Array] | None:
    """The compiled pass of scale_i · g(z_i) for numpy batches, or ``None`` (no numba, another
    namespace, or a table searched without cells)."""
    if table.cells is None or not array_api_compat.is_numpy_namespace(batch.xp):
        return None
    jit = kernels()
    if jit is None:
        return None
    lo, inv_width, top, base, nxt, slope, intercept = table.compiled_args

    def run(y: Array, loc: Array, scale: Array) -> Array:
        out: Array = jit.scaled_table(
            y, loc, scale, lo, inv_width, top, base, nxt, slope, intercept
        )
        return out

    return run


def _check_rows(batch: Batch, *, levels: Any = None, scaled: bool = True) -> tuple[int, RowFn]:
    """(values per row, block function) of the per-row check score."""
    scaled = _check_bool(scaled, "scaled")
    p, own = _check_grid(batch, levels)
    q = p.shape[0]
    factor = 1.0 / q if scaled else 1.0
    pred = batch.prediction
    if _tabulable(pred):
        key = DEFAULT_LEVELS if levels is None else tuple(map(float, p))  # equal floats
        table = _check_table(pred.kind, _family_df(pred), key, factor)
        return 1, _location_scale_table(batch, table)
    p_x = _asarray(batch, p)

    def block(rows: Any, y: Array) -> Array:
        qv = rows.values if own else _quantiles_at(rows, p)
        return factor * _pinball_rows(qv, y, p_x)

    return _width_of(pred, q), block


def _check_terms(batch: Batch, *, levels: Any = None, scaled: bool = True) -> Array:
    if levels is not None and _unspanned(batch, _check_levels(levels)) is not None:
        return NO_TERMS
    return _terms(batch, *_check_rows(batch, levels=levels, scaled=scaled))


@register(
    "check_score",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_UT + "; Koenker & Bassett 1978 (pinball loss)",
    mean_terms=_check_terms,
)
def check_score(
    batch: Batch, *, levels: OpenLevels | None = None, scaled: bool = True
) -> float | None:
    """Check (pinball) score averaged over a grid of quantile levels.

    CS = Σ_i w_i (1/Q) Σ_j ρ_{p_j}(y_i − q_i(p_j)) / Σ w_i with ρ_p(u) = u(p − 1{u < 0}) and
    q_i(p) = F_i⁻¹(p). ``levels``: the quantile levels p_j; ``None`` (default) is the 99 levels
    0.01, ..., 0.99 of Uncertainty Toolbox's ``check_score`` (chung2021 appendix A.3), or, for a
    ``Quantiles`` prediction, its own levels (other levels are interpolated between the given
    quantiles; undefined when they do not lie within them). ``scaled=False`` sums over the
    levels instead of averaging (Uncertainty Toolbox's ``scaled``). Best value 0; lower is
    better.

    For Gaussian, Laplace and shared-df Student-t predictions the score is s_i·g(z_i) with g
    piecewise linear, tabulated once (no pass per level).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(check_score(P.Gaussian([0.0], [1.0]), np.array([0.0])), 10)
    0.1179559939
    """
    if levels is not None:
        why = _unspanned(batch, _check_levels(levels))
        if why is not None:
            undefined("check_score", why)
            return None
    return _mean(batch, *_check_rows(batch, levels=levels, scaled=scaled))


# -- interval score -------------------------------------------------------------------------
def _interval_grid(
    batch: Batch, levels: Any
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """(lower levels, upper levels, α = 1 − coverage) of the central intervals, or None."""
    pred = batch.prediction
    if levels is None and pred.kind == "quantiles":
        known = to_numpy(pred.levels).astype(np.float64)  # type: ignore[attr-defined]
        lo, hi = [], []
        for j, p in enumerate(known):
            if p >= 0.5:
                break
            k = int(np.argmin(np.abs(known - (1.0 - p))))
            if abs(known[k] - (1.0 - p)) <= _LEVEL_TOL and k != j:
                lo.append(p)
                hi.append(known[k])
        if not lo:
            return None
        lo_a, hi_a = np.asarray(lo), np.asarray(hi)
        return lo_a, hi_a, 1.0 - (hi_a - lo_a)
    if levels is None:
        lo, hi, alpha, _ = _default_interval_grid()
        return lo.copy(), hi.copy(), alpha.copy()  # the cached arrays stay in the cache
    c = _check_levels(levels)
    return 0.5 - c / 2.0, 0.5 + c / 2.0, 1.0 - c


@functools.lru_cache(maxsize=1)
def _default_interval_grid() -> tuple[Any, ...]:
    """The default central intervals (:data:`DEFAULT_LEVELS`), read-only, and their levels as
    the key of :func:`_interval_table`: made once per process."""
    c = np.asarray(DEFAULT_LEVELS, dtype=np.float64)
    grid = (0.5 - c / 2.0, 0.5 + c / 2.0, 1.0 - c)
    for a in grid:
        a.setflags(write=False)
    return (*grid, tuple(tuple(map(float, a)) for a in grid))


def _interval_rows(batch: Batch, *, levels: Any = None, scaled: bool = True) -> tuple[int, RowFn]:
    """(values per row, block function) of the per-row interval score."""
    scaled = _check_bool(scaled, "scaled")
    grid = _interval_grid(batch, levels)
    if grid is None:
        raise UQValidationError(
            "interval_score needs central intervals: the quantiles prediction has no pair of "
            "levels (p, 1 − p); pass levels"
        )
    lo, hi, alpha = grid
    m = lo.shape[0]
    factor = 1.0 / m if scaled else 1.0
    pred = batch.prediction
    coef = factor * 2.0 / alpha
    if _tabulable(pred):
        if levels is None and pred.kind != "quantiles":
            key = _default_interval_grid()[3]
        else:
            key = (tuple(map(float, lo)), tuple(map(float, hi)), tuple(map(float, alpha)))
        table = _interval_table(pred.kind, _family_df(pred), *key, factor)
        return 1, _location_scale_table(batch, table)
    both = np.concatenate([lo, hi])
    coef_x = _asarray(batch, coef)
    xp = batch.xp

    def block(rows: Any, y: Array) -> Array:
        qv = _quantiles_at(rows, both)
        ql, qu = qv[:, :m], qv[:, m:]
        yc = y[:, None]
        pen = clip(xp, ql - yc, min=0.0) + clip(xp, yc - qu, min=0.0)
        return xp.sum(factor * (qu - ql) + coef_x * pen, axis=1)

    return _width_of(pred, 2 * m), block


def _given_level(batch: Batch, levels: Any) -> float | None:
    """The nominal coverage c of an ``Interval`` prediction's intervals for ``interval_score``:
    its own level, else the one coverage of ``levels``; ``None`` when neither gives one."""
    own = batch.prediction.level
    if own is not None:
        return float(own)
    if levels is None:
        return None
    lv = _check_levels(levels)
    return float(lv[0]) if lv.shape[0] == 1 else None


_NO_GIVEN_LEVEL = (
    "the interval prediction has no level and levels does not name one coverage: pass "
    "levels=[c], the nominal coverage its intervals were made for"
)


def _given_interval_score_rows(batch: Batch, c: float) -> Array:
    """S_α(l_i, u_i; y_i) of an ``Interval`` prediction's own bounds, α = 1 − c."""
    xp = batch.xp
    lo, hi = batch.prediction.interval()
    y = batch.y
    coef = 2.0 / (1.0 - c)
    return (hi - lo) + coef * (clip(xp, lo - y, min=0.0) + clip(xp, y - hi, min=0.0))


def _interval_terms(batch: Batch, *, levels: Any = None, scaled: bool = True) -> Array:
    if batch.prediction.kind == "interval":
        _check_bool(scaled, "scaled")
        c = _given_level(batch, levels)
        return NO_TERMS if c is None else _given_interval_score_rows(batch, c)
    grid = _interval_grid(batch, levels)
    spanned = grid is None or levels is None or _unspanned(batch, np.concatenate(grid[:2])) is None
    if not spanned:
        return NO_TERMS
    return _terms(batch, *_interval_rows(batch, levels=levels, scaled=scaled))


@register(
    "interval_score",
    family="scoring",
    needs={"interval"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_GR + " eq. 43; " + _UT,
    mean_terms=_interval_terms,
)
def interval_score(
    batch: Batch, *, levels: CoverageLevels | None = None, scaled: bool = True
) -> float | None:
    """Interval score of central prediction intervals, averaged over a grid of coverages.

    For coverage c (α = 1 − c) with l = F⁻¹(½ − c/2), u = F⁻¹(½ + c/2):
    S_α(l, u; y) = (u − l) + (2/α)(l − y)·1{y < l} + (2/α)(y − u)·1{y > u} (Gneiting & Raftery
    2007, eq. 43), averaged over the coverages and then over rows (weighted). ``levels``: the
    coverages c; ``None`` (default) is 0.01, ..., 0.99 as Uncertainty Toolbox's
    ``interval_score`` (its grid is ``numpy.linspace(0.01, 0.99, resolution)``), or, for a
    ``Quantiles`` prediction, every symmetric pair (p, 1 − p) of its levels (undefined if there is
    none; explicit coverages whose quantile levels 0.5 ± c/2 lie outside its levels are
    undefined). ``scaled=False`` sums over the coverages (Uncertainty Toolbox's ``scaled``). Best
    value 0; lower is better.

    An :class:`~uqcore.predictions.Interval` prediction is scored on its own bounds (l_i, u_i)
    at α = 1 − c, c its ``level``; ``levels`` is then ignored, except for an interval without
    a level, where ``levels`` must name its one coverage (``levels=[c]``; otherwise the score
    is undefined). ``scaled`` changes nothing for it (one coverage).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(interval_score(P.Gaussian([0.0], [1.0]), np.array([0.0]), levels=[0.9]), 10)
    3.2897072539
    >>> interval_score(P.Interval([0.0, 0.0], [1.0, 1.0], level=0.5), np.array([0.5, 2.0]))
    3.0
    """
    if batch.prediction.kind == "interval":
        _check_bool(scaled, "scaled")
        c = _given_level(batch, levels)
        if c is None:
            undefined("interval_score", _NO_GIVEN_LEVEL)
            return None
        return batch.mean(_given_interval_score_rows(batch, c))
    grid = _interval_grid(batch, levels)
    if grid is None:
        undefined("interval_score", "the quantiles prediction has no pair of levels (p, 1 − p)")
        return None
    why = _unspanned(batch, np.concatenate(grid[:2])) if levels is not None else None
    if why is not None:
        undefined("interval_score", why)
        return None
    return _mean(batch, *_interval_rows(batch, levels=levels, scaled=scaled))


# -- coverage and width of central intervals --------------------------------------------------
def _check_level_in_levels(options: Mapping[str, Any]) -> None:
    _interval_levels(options["levels"], options["level"])


def _interval_levels(levels: Any, level: Any) -> tuple[np.ndarray[Any, Any], int]:
    lv = _check_levels(levels)
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise UQValidationError(f"level must be a number in (0, 1), found {level!r}")
    hit = np.flatnonzero(np.abs(lv - float(level)) <= 1e-12)
    if hit.shape[0] == 0:
        raise UQValidationError(
            f"level must be one of levels {lv.tolist()}, found {level!r}", argument="level"
        )
    return lv, int(hit[0])


def _available(
    batch: Batch, lo: np.ndarray[Any, Any], hi: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    """Which intervals the prediction can give (a Quantiles prediction does not extrapolate)."""
    pred = batch.prediction
    if pred.kind != "quantiles":
        return np.ones(lo.shape[0], dtype=bool)
    known = to_numpy(pred.levels)  # type: ignore[attr-defined]
    ok: np.ndarray[Any, Any] = (lo >= known[0] - _LEVEL_TOL) & (hi <= known[-1] + _LEVEL_TOL)
    return ok


def _covered_location_scale(
    batch: Batch, zl: np.ndarray[Any, Any], zu: np.ndarray[Any, Any]
) -> list[float]:
    """Σ w_i 1{zl_j ≤ z_i ≤ zu_j} / Σ w_i per interval j, one z per block and one pass per level."""
    xp = batch.xp
    jit = kernels() if batch.weights is None and array_api_compat.is_numpy_namespace(xp) else None
    if jit is not None:
        pred: Any = batch.prediction
        loc, scale = pred.point(), _scale(pred)
        if _contiguous_f64(batch.y, loc, scale):  # every level's count in one compiled pass
            counts = jit.count_between(batch.y, loc, scale, _f64(zl), _f64(zu))
            return [float(c) / batch.total_weight for c in counts]
    # numpy counts the hits without a float copy of them (the same integer count)
    count = np.count_nonzero if array_api_compat.is_numpy_namespace(xp) else None
    sums: list[Any] = [0.0] * zl.shape[0]
    for a, b, rows in _blocks(batch, 1):
        z = rows.standardize(batch.y[a:b])
        w = None if batch.weights is None else batch.weights[a:b]
        for j in range(zl.shape[0]):
            hit = (z >= float(zl[j])) & (z <= float(zu[j]))
            if w is not None:
                sums[j] = sums[j] + xp.sum(xp.where(hit, w, 0.0))
            elif count is not None:
                sums[j] = sums[j] + int(count(hit))
            else:
                sums[j] = sums[j] + xp.sum(xp.astype(hit, xp.float64))
    return [float(v) / batch.total_weight for v in sums]


def _given_rows(batch: Batch, covered: bool) -> Array:
    """Per-row coverage indicators 1{l_i ≤ y_i ≤ u_i} or widths u_i − l_i of an ``Interval``."""
    xp, y = batch.xp, batch.y
    lo, hi = batch.prediction.interval()
    if covered:
        return xp.astype((y >= lo) & (y <= hi), xp.float64)
    return hi - lo


def _interval_summary(
    batch: Batch, name: str, key: str, levels: Any, level: Any, covered: bool
) -> dict[str, Any]:
    if batch.prediction.kind == "interval":
        _interval_levels(levels, level)
        c = nominal_level(batch.prediction, level)
        value = batch.mean(_given_rows(batch, covered))
        return {"value": value, "level": c, "levels": [c], key: [value]}
    lv, at = _interval_levels(levels, level)
    lo, hi = 0.5 - lv / 2.0, 0.5 + lv / 2.0
    ok = _available(batch, lo, hi)
    values: list[float | None] = [None] * lv.shape[0]
    pred = batch.prediction
    xp = batch.xp
    idx = np.flatnonzero(ok)
    if idx.shape[0]:
        lo_k, hi_k = lo[idx], hi[idx]
        m = idx.shape[0]
        if _tabulable(pred):
            zl, zu = _std_ppf(pred, lo_k), _std_ppf(pred, hi_k)
            if covered:
                got = _covered_location_scale(batch, zl, zu)
            else:
                mean_scale = _mean(batch, 1, lambda rows, y: _scale(rows))
                got = [mean_scale * float(b - a) for a, b in zip(zl, zu, strict=True)]
        else:
            both = np.concatenate([lo_k, hi_k])

            def block(sub: Any, y: Array) -> Array:
                qv = _quantiles_at(sub, both)
                ql, qu = qv[:, :m], qv[:, m:]
                if covered:
                    yc = y[:, None]
                    return xp.astype((yc >= ql) & (yc <= qu), xp.float64)
                return qu - ql

            sums = to_numpy(_weighted_sums(batch, _width_of(pred, 2 * m), block))
            got = [float(v) / batch.total_weight for v in sums]
        for j, v in zip(idx, got, strict=True):
            values[int(j)] = float(v)
    if values[at] is None:
        undefined(
            name,
            f"the quantiles prediction does not span the {float(lv[at]):g} central interval",
        )
    return {
        "value": values[at],
        "level": float(lv[at]),
        "levels": [float(v) for v in lv],
        key: values,
    }


def interval_value_terms(
    batch: Batch, levels: Any, level: Any, covered: bool
) -> tuple[Array, float] | None:
    """Per-row terms t_i and a factor c such that the ``"value"`` of :func:`coverage`
    (``covered``) or :func:`mean_width` is c · Σ w_i t_i / Σ w_i (the stability engine's
    per-block form); ``None`` where the value is undefined (a ``Quantiles`` prediction that
    does not span the interval at ``level``).

    The terms are those of :func:`_interval_summary` at ``level``: the indicators
    1{zl ≤ z_i ≤ zu} (or 1{l_i ≤ y_i ≤ u_i}) for coverage; for the width of a location-scale
    prediction the scales with c = zu − zl, else the widths u_i − l_i.
    """
    if batch.prediction.kind == "interval":
        _interval_levels(levels, level)
        return _given_rows(batch, covered), 1.0
    lv, at = _interval_levels(levels, level)
    lo, hi = 0.5 - lv / 2.0, 0.5 + lv / 2.0
    ok = _available(batch, lo, hi)
    if not bool(ok[at]):
        return None
    idx = np.flatnonzero(ok)
    j = int(np.flatnonzero(idx == at)[0])
    lo_k, hi_k = lo[idx], hi[idx]
    m = idx.shape[0]
    pred = batch.prediction
    xp = batch.xp
    if _tabulable(pred):
        zl, zu = _std_ppf(pred, lo_k), _std_ppf(pred, hi_k)
        if not covered:
            return _terms(batch, 1, lambda rows, y: _scale(rows)), float(zu[j] - zl[j])
        a, b = float(zl[j]), float(zu[j])

        def hit(rows: Any, y: Array) -> Array:
            z = rows.standardize(y)
            return xp.astype((z >= a) & (z <= b), xp.float64)

        return _terms(batch, 1, hit), 1.0
    both = np.concatenate([lo_k, hi_k])

    def block(sub: Any, y: Array) -> Array:
        qv = _quantiles_at(sub, both)  # every level, as the metric computes them
        ql, qu = qv[:, j], qv[:, m + j]
        if covered:
            return xp.astype((y >= ql) & (y <= qu), xp.float64)
        return qu - ql

    return _terms(batch, _width_of(pred, 2 * m), block), 1.0


@register(
    "coverage",
    family="scoring",
    needs={"interval"},
    direction="target",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.95,
    reference=_GR + " §6 (central prediction intervals)",
    structured=True,
    check_options=_check_level_in_levels,
)
def coverage(
    batch: Batch,
    *,
    levels: CoverageLevels = INTERVAL_LEVELS,
    level: Coverage = 0.95,
) -> dict[str, Any]:
    """Coverage of central prediction intervals: Σ w_i 1{l_i ≤ y_i ≤ u_i} / Σ w_i per level.

    For nominal coverage c the interval is [F_i⁻¹(½ − c/2), F_i⁻¹(½ + c/2)] (closed). Returns
    ``{"value": coverage at `level`, "level", "levels", "coverage": [per level]}``; ``levels``
    defaults to 50/80/90/95/99 % and ``level`` (which must be one of them) to 0.95. The best
    value is the nominal level (direction "target"; the registry's ``best`` is that of the
    default ``level``, 0.95). Location-scale predictions compare z_i = (y_i − loc_i)/scale_i
    with the standardised bounds. A ``Quantiles`` prediction gives intervals within its levels
    only (interpolated between them); the others are ``None`` (and the value, with a warning,
    if `level` is among them).

    An :class:`~uqcore.predictions.Interval` prediction is judged on its own bounds: ``levels``
    does not apply to it (the details list one level), and the ``"level"`` reported is its own
    level when it has one, else the ``level`` option (the nominal coverage the value is to be
    compared with).

    >>> import numpy as np; from uqcore import predictions as P
    >>> coverage(P.Gaussian(np.zeros(4), np.ones(4)), np.array([0.0, 1.0, 2.0, 3.0]))["value"]
    0.5
    """
    return _interval_summary(batch, "coverage", "coverage", levels, level, covered=True)


@register(
    "mean_width",
    family="scoring",
    needs={"interval"},
    direction="lower",
    scaling="equivariant",
    bounds=(0.0, None),
    reference=_GR + " §6 (central prediction intervals); " + _UT + " (sharpness)",
    structured=True,
    check_options=_check_level_in_levels,
)
def mean_width(
    batch: Batch,
    *,
    levels: CoverageLevels = INTERVAL_LEVELS,
    level: Coverage = 0.95,
) -> dict[str, Any]:
    """Mean width of central prediction intervals: Σ w_i (u_i − l_i) / Σ w_i per level.

    l_i = F_i⁻¹(½ − c/2), u_i = F_i⁻¹(½ + c/2) for nominal coverage c. Returns ``{"value":
    width at `level`, "level", "levels", "width": [per level]}``; ``levels`` defaults to
    50/80/90/95/99 % and ``level`` to 0.95. Narrower is sharper (direction "lower"), but only
    together with ``coverage`` is it a measure of quality; it has no best value. A ``Quantiles``
    prediction gives widths within its levels only (others are ``None``). An
    :class:`~uqcore.predictions.Interval` prediction gives the mean width of its own bounds
    (``levels`` does not apply; ``"level"`` is its own level, else the ``level`` option).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(mean_width(P.Gaussian(np.zeros(2), np.array([1.0, 3.0])), np.zeros(2))["value"], 8)
    7.83985594
    """
    return _interval_summary(batch, "mean_width", "width", levels, level, covered=False)
