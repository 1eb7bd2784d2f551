"""Proper scoring rules for regression: NLL, CRPS, check (pinball) and interval scores, and the
coverage and width of central prediction intervals.

All scores are negatively oriented (lower is better) and averaged over rows with the frequency
weights w_i: S = Σ w_i s_i / Σ w_i (chung2021 §3 and appendix A.3).

How they are computed:

* Location-scale kinds (``Gaussian``, ``Laplace``, and ``StudentT`` when every row has the same
  ``df``) are scored through the standardised residual z_i = (y_i − loc_i)/scale_i, computed once
  per batch (cached under ``"scoring:z"``). The check and interval scores over a fixed level grid
  are scale_i · g(z_i) with g piecewise linear in z: g is tabulated once on the host (its
  breakpoints are the standardised quantiles), and each row costs one ``searchsorted`` and one
  multiply-add, whatever the number of levels.
* Other kinds (``Mixture``, ``Samples``, ``Quantiles``, ``StudentT`` with per-row ``df``) are
  scored from their quantiles ``prediction.ppf(levels)``, in blocks of rows so that no N×Q array
  is held (memory is bounded by ``_CHUNK_ELEMENTS`` values per temporary).

Uncertainty Toolbox (``uncertainty_toolbox.metrics_scoring_rule``, version 0.1.1) is reproduced
by the defaults for Gaussian predictions: ``nll`` and ``crps`` are its ``nll_gaussian`` and
``crps_gaussian`` (``scaled=True``); ``check_score`` and ``interval_score`` use its grid of 99
levels 0.01, ..., 0.99 (``levels=numpy.linspace(0.01, 0.99, resolution)`` gives its grid for any
``resolution``) and its ``scaled`` switch (``scaled=False``: the sum over levels instead of the
mean).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import array_api_compat
import numpy as np

from uqcore._backend import LOG_SQRT_2PI, Array, special, to_numpy
from uqcore._validation import UQValidationError
from uqcore.batch import Batch
from uqcore.predictions.regression import RegressionPrediction
from uqcore.registry import register, undefined

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

#: Default grid of the check score (quantile levels) and of the interval score (central
#: coverages): 0.01, 0.02, ..., 0.99 (chung2021 appendix A.3; Uncertainty Toolbox's 99 levels).
DEFAULT_LEVELS: tuple[float, ...] = tuple(round(k / 100, 2) for k in range(1, 100))

#: Default nominal coverages of ``coverage`` and ``mean_width``.
INTERVAL_LEVELS: tuple[float, ...] = (0.5, 0.8, 0.9, 0.95, 0.99)

#: Values per temporary array in the blockwise (quantile-based) paths.
_CHUNK_ELEMENTS = 1 << 20

#: Tolerance for matching a level to the levels a ``Quantiles`` prediction provides.
_LEVEL_TOL = 1e-9

_GR = "Gneiting & Raftery 2007, Strictly proper scoring rules (JASA)"
_UT = "Chung et al. 2021, Uncertainty Toolbox, §3 and appendix A.3"
_LOCATION_SCALE = ("gaussian", "laplace", "student_t")


# -- option checks ---------------------------------------------------------------------------
def _check_levels(levels: Any, name: str = "levels") -> np.ndarray[Any, Any]:
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


def _check_bandwidth(bandwidth: Any) -> None:
    if isinstance(bandwidth, str) and bandwidth in ("silverman", "scott"):
        return
    if (
        isinstance(bandwidth, (int, float))
        and not isinstance(bandwidth, bool)
        and math.isfinite(bandwidth)
        and bandwidth > 0
    ):
        return
    raise UQValidationError(
        f"bandwidth must be 'silverman', 'scott' or a number > 0, found {bandwidth!r}"
    )


# -- helpers -------------------------------------------------------------------------------
def _asarray(batch: Batch, values: Any) -> Array:
    host = np.ascontiguousarray(values, dtype=np.float64)
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
    sp = _host_special()
    if pred.kind == "gaussian":
        return np.asarray(sp.ndtri(p), dtype=np.float64)
    if pred.kind == "laplace":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(p < 0.5, np.log(2.0 * p), -np.log(2.0 * (1.0 - p)))
    df0 = float(pred.df[0])  # type: ignore[attr-defined]
    return np.asarray(sp.stdtrit(np.full_like(p, df0), p), dtype=np.float64)


def _z(batch: Batch) -> Array:
    """z_i = (y_i − loc_i)/scale_i of a location-scale prediction, computed once per batch."""
    pred = batch.prediction
    return batch.shared("scoring:z", lambda: pred.standardize(batch.y))  # type: ignore[attr-defined]


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

    def __call__(self, batch: Batch, z: Array) -> Array:
        xp = batch.xp
        dev = batch.device
        slope = _asarray(batch, self.slope)
        intercept = _asarray(batch, self.intercept)
        if self.cells is None:
            k = xp.searchsorted(_asarray(batch, self.breaks), z, side="left")
        else:
            lo, inv_width, n_cells, base = self.cells
            cell = xp.astype(
                xp.clip((z - lo) * inv_width, min=0.0, max=float(n_cells - 1)), xp.int64
            )
            k0 = xp.take(xp.asarray(base, dtype=xp.int64, device=dev), cell)
            nxt = _asarray(batch, np.concatenate([self.breaks, [np.inf]]))
            k = k0 + xp.astype(z > xp.take(nxt, k0), xp.int64)
        return xp.take(slope, k) * z + xp.take(intercept, k)


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


def _map_blocks(batch: Batch, width: int, fn: Callable[[Any, Array], Array]) -> Array:
    """Per-row values fn(rows, y_rows), computed block by block and concatenated."""
    parts = [fn(sub, batch.y[a:b]) for a, b, sub in _blocks(batch, width)]
    return parts[0] if len(parts) == 1 else batch.xp.concat(parts)


def _weighted_sums(batch: Batch, width: int, fn: Callable[[Any, Array], Array]) -> Array:
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
def _nll_terms(batch: Batch, *, bandwidth: Any = "silverman") -> Array:
    _check_bandwidth(bandwidth)
    pred = batch.prediction
    xp = batch.xp
    if pred.kind == "gaussian":
        z = _z(batch)
        return 0.5 * z * z + xp.log(pred.std_) + LOG_SQRT_2PI  # type: ignore[attr-defined]
    if pred.kind == "samples":
        return -pred.logpdf(batch.y, bandwidth)  # type: ignore[call-arg]
    return -pred.logpdf(batch.y)


@register(
    "nll",
    family="scoring",
    needs={"logpdf"},
    direction="lower",
    reference="xiong2024 eq. 11 (as a mean); Gneiting & Raftery 2007 (logarithmic score); "
    "Silverman 1986 eq. 3.31 (kernel bandwidth)",
    mean_terms=_nll_terms,
)
def nll(batch: Batch, *, bandwidth: str | float = "silverman") -> float | None:
    """Mean negative log-likelihood: NLL = −Σ w_i log f_i(y_i) / Σ w_i.

    Closed forms: Gaussian ½z² + log σ + ½ log 2π with z = (y − μ)/σ; Laplace |z| + log 2b;
    Student-t (location-scale, ``df`` ν) −log Γ((ν+1)/2) + log Γ(ν/2) + ½ log νπ + log s
    + (ν+1)/2 · log(1 + z²/ν); Gaussian mixture −log Σ_k w_k φ((y − μ_k)/σ_k)/σ_k by log-sum-exp.
    For ``Samples`` the density is a Gaussian kernel density estimate of the draws,
    f_i(y) = (1/S) Σ_s φ((y − x_is)/h_i)/h_i, with bandwidth ``bandwidth``: ``"silverman"``
    (default; h = 0.9·min(σ̂, IQR/1.34)·S^(−1/5), Silverman 1986 eq. 3.31), ``"scott"``
    (h = 1.06·σ̂·S^(−1/5)), or a number (the same h for every row); see
    :meth:`uqcore.predictions.Samples.bandwidth`. The option is ignored by the other kinds. Not
    defined for ``Quantiles`` (no density). Undefined (``None``) when a row of positive weight has
    a zero rule-of-thumb bandwidth (all its draws equal). Lower is better; it is unbounded below
    (densities can exceed 1); the true distribution minimises its expectation (xiong2024 §III).

    Uncertainty Toolbox's ``nll_gaussian(scaled=True)`` is the Gaussian case (its
    ``scaled=False`` is this value times N).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(nll(P.Gaussian([0.0, 1.0], [1.0, 2.0]), np.array([0.0, 3.0])), 10)
    1.5155121235
    """
    _check_bandwidth(bandwidth)
    pred = batch.prediction
    if pred.kind == "gaussian":  # two reductions, no per-row temporaries beyond z²
        z = _z(batch)
        std = pred.std_  # type: ignore[attr-defined]
        return 0.5 * batch.mean(z * z) + batch.mean(batch.xp.log(std)) + LOG_SQRT_2PI
    if pred.kind == "samples" and not isinstance(bandwidth, (int, float)):
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
            return sub.mean(_nll_terms(sub, bandwidth=bandwidth))
    return batch.mean(_nll_terms(batch, bandwidth=bandwidth))


# -- CRPS -----------------------------------------------------------------------------------
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _crps_gaussian(batch: Batch) -> Array:
    xp = batch.xp
    z = _z(batch)
    cdf = special(xp).ndtr(z)
    return batch.prediction.std_ * (  # type: ignore[attr-defined]
        z * (2.0 * cdf - 1.0) + (2.0 * _INV_SQRT_2PI) * xp.exp(-0.5 * z * z) - _INV_SQRT_PI
    )


def _crps_laplace(batch: Batch) -> Array:
    xp = batch.xp
    a = xp.abs(_z(batch))
    return batch.prediction.scale * (a + xp.exp(-a) - 0.75)  # type: ignore[attr-defined]


def _crps_student_t(batch: Batch) -> Array:
    """σ[z(2F_ν(z) − 1) + 2 f_ν(z)(ν + z²)/(ν − 1) − 2√ν B(½, ν − ½)/((ν − 1) B(½, ν/2)²)];
    +inf where ν ≤ 1 (the CRPS is infinite there)."""
    xp = batch.xp
    sp = special(xp)
    pred = batch.prediction
    df = pred.df  # type: ignore[attr-defined]
    ok = df > 1.0
    nu = xp.where(ok, df, 2.0)
    z = _z(batch)
    lg_half = math.lgamma(0.5)
    g_nu2 = sp.gammaln(0.5 * nu)
    g_nu12 = sp.gammaln(0.5 * (nu + 1.0))
    log_pdf_const = g_nu12 - g_nu2 - 0.5 * xp.log(nu * math.pi)
    pdf = xp.exp(log_pdf_const - 0.5 * (nu + 1.0) * xp.log1p(z * z / nu))
    cdf = sp.stdtr(nu, z)
    log_b1 = lg_half + sp.gammaln(nu - 0.5) - sp.gammaln(nu)  # log B(1/2, ν − 1/2)
    log_b2 = lg_half + g_nu2 - g_nu12  # log B(1/2, ν/2)
    const = 2.0 * xp.sqrt(nu) * xp.exp(log_b1 - 2.0 * log_b2) / (nu - 1.0)
    val = pred.scale * (  # type: ignore[attr-defined]
        z * (2.0 * cdf - 1.0) + 2.0 * pdf * (nu + z * z) / (nu - 1.0) - const
    )
    return xp.where(ok, val, math.inf)


def _abs_normal_mean(xp: Any, m: Array, s: Array) -> Array:
    """E|X| for X ~ N(m, s²): m(2Φ(m/s) − 1) + 2sφ(m/s)."""
    r = m / s
    return m * (2.0 * special(xp).ndtr(r) - 1.0) + (2.0 * _INV_SQRT_2PI) * s * xp.exp(-0.5 * r * r)


def _crps_mixture(batch: Batch) -> Array:
    """Σ_k w_k A(y − μ_k, σ_k) − ½ Σ_k Σ_l w_k w_l A(μ_k − μ_l, √(σ_k² + σ_l²)), A(m, s) = E|N(m, s²)|
    (Grimit et al. 2006); one N×K pass per component k."""
    xp = batch.xp
    pred = batch.prediction
    w, mu, sd = pred.weights, pred.means, pred.stds  # type: ignore[attr-defined]
    var = sd * sd
    first = xp.sum(w * _abs_normal_mean(xp, batch.y[:, None] - mu, sd), axis=1)
    spread = xp.zeros_like(first)
    for k in range(int(w.shape[1])):
        a = _abs_normal_mean(xp, mu[:, k : k + 1] - mu, xp.sqrt(var[:, k : k + 1] + var))
        spread = spread + w[:, k] * xp.sum(w * a, axis=1)
    return first - 0.5 * spread


def _crps_samples(batch: Batch, estimator: str) -> Array:
    """CRPS of the draws from the sorted sample, per row, in blocks of rows.

    With d_(i) = x_(i) − y (sorted, i = 0..S−1) and c_i = 2i − S + 1, Σ_{s,t} |x_s − x_t| =
    2 Σ_i c_i d_(i), so nrg = mean|d| − Σ c_i d_(i)/S², fair = mean|d| − Σ c_i d_(i)/(S(S−1)),
    pwm = mean|d| + β0 − 2β1 with β0 = mean d, β1 = Σ_i i d_(i)/(S(S−1)) (Zamo & Naveau 2018).
    Differences to y keep the sums free of the draws' offset.
    """
    xp = batch.xp
    pred = batch.prediction
    s = pred.n_draws  # type: ignore[attr-defined]
    i = np.arange(s, dtype=np.float64)
    if estimator == "nrg":
        coef = _asarray(batch, -(2.0 * i - s + 1.0) / (s * s))
    elif estimator == "fair":
        coef = _asarray(batch, -(2.0 * i - s + 1.0) / (s * (s - 1.0)))
    else:
        coef = _asarray(batch, 1.0 / s - 2.0 * i / (s * (s - 1.0)))

    def block(sub: Any, y: Array) -> Array:
        d = sub.sorted_draws - y[:, None]
        return xp.mean(xp.abs(d), axis=1) + d @ coef

    return _map_blocks(batch, s, block)


def _pinball_rows(q: Array, y: Array, p: Array) -> Array:
    """Σ_j (1{y ≤ q_j} − p_j)(q_j − y) per row, for an N×Q block of quantiles q."""
    xp = array_api_compat.array_namespace(q)
    d = q - y[:, None]
    return xp.sum(xp.where(d >= 0, 1.0 - p, -p) * d, axis=1)


def _crps_quantiles(batch: Batch) -> Array:
    """2 × mean pinball loss over the given levels (quantile decomposition of the CRPS)."""
    pred = batch.prediction
    lv = pred.levels  # type: ignore[attr-defined]
    q = int(lv.shape[0])

    def block(sub: Any, y: Array) -> Array:
        return (2.0 / q) * _pinball_rows(sub.values, y, lv)

    return _map_blocks(batch, q, block)


#: Number of midpoint levels of the quadrature CRPS for kinds without a closed form.
QUADRATURE_LEVELS = 2000


def _crps_quadrature(batch: Batch) -> Array:
    """2·(1/K) Σ_k ρ_{p_k}(y − F⁻¹(p_k)) on the midpoints p_k = (k − ½)/K, K = QUADRATURE_LEVELS."""
    k = QUADRATURE_LEVELS
    lv = (np.arange(k, dtype=np.float64) + 0.5) / k
    p = _asarray(batch, lv)

    def block(sub: Any, y: Array) -> Array:
        return (2.0 / k) * _pinball_rows(sub.ppf(lv), y, p)

    return _map_blocks(batch, k, block)


def _crps_terms(batch: Batch, *, estimator: Estimator = "nrg") -> Array:
    _check_estimator(estimator)
    kind = batch.prediction.kind
    if kind == "gaussian":
        return _crps_gaussian(batch)
    if kind == "laplace":
        return _crps_laplace(batch)
    if kind == "student_t":
        return _crps_student_t(batch)
    if kind == "mixture":
        return _crps_mixture(batch)
    if kind == "samples":
        if estimator != "nrg" and batch.prediction.n_draws < 2:  # type: ignore[attr-defined]
            raise UQValidationError(
                f"estimator={estimator!r} needs at least 2 draws per row (S >= 2), found S = 1"
            )
        return _crps_samples(batch, estimator)
    if kind == "quantiles":
        return _crps_quantiles(batch)
    return _crps_quadrature(batch)


@register(
    "crps",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
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
      − 2√ν B(½, ν − ½)/((ν − 1)B(½, ν/2)²)] (Jordan et al. 2019). Infinite for ν ≤ 1: the value
      is then undefined (``None``).
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
    terms = _crps_terms(batch, estimator=estimator)
    if pred.kind == "student_t":
        bad = pred.df <= 1.0  # type: ignore[attr-defined]
        blocking, anybad = _positive_weight_rows(batch, bad)
        if blocking:
            undefined("crps", "a Student-t row has df <= 1 (infinite CRPS)")
            return None
        if anybad:
            terms = batch.xp.where(bad, 0.0, terms)
    return batch.mean(terms)


# -- check score ----------------------------------------------------------------------------
def _check_grid(batch: Batch, levels: Any) -> tuple[np.ndarray[Any, Any], bool]:
    """The quantile levels, and whether they are a Quantiles prediction's own columns."""
    pred = batch.prediction
    if levels is None:
        if pred.kind == "quantiles":
            return to_numpy(pred.levels).astype(np.float64), True  # type: ignore[attr-defined]
        return np.asarray(DEFAULT_LEVELS, dtype=np.float64), False
    return _check_levels(levels), False


def _check_terms(batch: Batch, *, levels: Any = None, scaled: bool = True) -> Array:
    scaled = _check_bool(scaled, "scaled")
    p, own = _check_grid(batch, levels)
    q = p.shape[0]
    factor = 1.0 / q if scaled else 1.0
    pred = batch.prediction
    if _tabulable(pred):
        zq = _std_ppf(pred, p)
        table = _Table(zq, factor * (1.0 - p), factor * p, 0.0)
        return _scale(pred) * table(batch, _z(batch))
    p_x = _asarray(batch, p)

    def block(sub: Any, y: Array) -> Array:
        qv = sub.values if own else _quantiles_at(sub, p)
        return factor * _pinball_rows(qv, y, p_x)

    return _map_blocks(batch, _width_of(pred, q), block)


@register(
    "check_score",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
    bounds=(0.0, None),
    best=0.0,
    reference=_UT + "; Koenker & Bassett 1978 (pinball loss)",
    mean_terms=_check_terms,
)
def check_score(
    batch: Batch, *, levels: Sequence[float] | None = None, scaled: bool = True
) -> float:
    """Check (pinball) score averaged over a grid of quantile levels.

    CS = Σ_i w_i (1/Q) Σ_j ρ_{p_j}(y_i − q_i(p_j)) / Σ w_i with ρ_p(u) = u(p − 1{u < 0}) and
    q_i(p) = F_i⁻¹(p). ``levels``: the quantile levels p_j; ``None`` (default) is the 99 levels
    0.01, ..., 0.99 of Uncertainty Toolbox's ``check_score`` (chung2021 appendix A.3), or, for a
    ``Quantiles`` prediction, its own levels (other levels are interpolated between the given
    quantiles and must lie within them). ``scaled=False`` sums over the levels instead of
    averaging (Uncertainty Toolbox's ``scaled``). Best value 0; lower is better.

    For Gaussian, Laplace and shared-df Student-t predictions the score is s_i·g(z_i) with g
    piecewise linear, tabulated once (no pass per level).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(check_score(P.Gaussian([0.0], [1.0]), np.array([0.0])), 10)
    0.1179559939
    """
    return batch.mean(_check_terms(batch, levels=levels, scaled=scaled))


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
    c = np.asarray(DEFAULT_LEVELS, dtype=np.float64) if levels is None else _check_levels(levels)
    return 0.5 - c / 2.0, 0.5 + c / 2.0, 1.0 - c


def _interval_terms(batch: Batch, *, levels: Any = None, scaled: bool = True) -> Array:
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
        zl, zu = _std_ppf(pred, lo), _std_ppf(pred, hi)
        table = _Table(
            np.concatenate([zl, zu]),
            np.concatenate([coef, np.zeros(m)]),
            np.concatenate([np.zeros(m), coef]),
            float(np.sum(factor * (zu - zl))),
        )
        return _scale(pred) * table(batch, _z(batch))
    both = np.concatenate([lo, hi])
    coef_x = _asarray(batch, coef)
    xp = batch.xp

    def block(sub: Any, y: Array) -> Array:
        qv = _quantiles_at(sub, both)
        ql, qu = qv[:, :m], qv[:, m:]
        yc = y[:, None]
        pen = xp.clip(ql - yc, min=0.0) + xp.clip(yc - qu, min=0.0)
        return xp.sum(factor * (qu - ql) + coef_x * pen, axis=1)

    return _map_blocks(batch, _width_of(pred, 2 * m), block)


@register(
    "interval_score",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
    bounds=(0.0, None),
    best=0.0,
    reference=_GR + " eq. 43; " + _UT,
    mean_terms=_interval_terms,
)
def interval_score(
    batch: Batch, *, levels: Sequence[float] | None = None, scaled: bool = True
) -> float | None:
    """Interval score of central prediction intervals, averaged over a grid of coverages.

    For coverage c (α = 1 − c) with l = F⁻¹(½ − c/2), u = F⁻¹(½ + c/2):
    S_α(l, u; y) = (u − l) + (2/α)(l − y)·1{y < l} + (2/α)(y − u)·1{y > u} (Gneiting & Raftery
    2007, eq. 43), averaged over the coverages and then over rows (weighted). ``levels``: the
    coverages c; ``None`` (default) is 0.01, ..., 0.99 as Uncertainty Toolbox's
    ``interval_score`` (its grid is ``numpy.linspace(0.01, 0.99, resolution)``), or, for a
    ``Quantiles`` prediction, every symmetric pair (p, 1 − p) of its levels (undefined if there is
    none). ``scaled=False`` sums over the coverages (Uncertainty Toolbox's ``scaled``). Best
    value 0; lower is better.

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(interval_score(P.Gaussian([0.0], [1.0]), np.array([0.0]), levels=[0.9]), 10)
    3.2897072539
    """
    if _interval_grid(batch, levels) is None:
        undefined("interval_score", "the quantiles prediction has no pair of levels (p, 1 − p)")
        return None
    return batch.mean(_interval_terms(batch, levels=levels, scaled=scaled))


# -- coverage and width of central intervals --------------------------------------------------
def _interval_levels(levels: Any, level: Any) -> tuple[np.ndarray[Any, Any], int]:
    lv = _check_levels(levels)
    if isinstance(level, bool) or not isinstance(level, (int, float)):
        raise UQValidationError(f"level must be a number in (0, 1), found {level!r}")
    hit = np.flatnonzero(np.abs(lv - float(level)) <= 1e-12)
    if hit.shape[0] == 0:
        raise UQValidationError(f"level must be one of levels {lv.tolist()}, found {level!r}")
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


def _interval_summary(
    batch: Batch, name: str, key: str, levels: Any, level: Any, covered: bool
) -> dict[str, Any]:
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
                z = _z(batch)
                got = [
                    batch.mean(xp.astype((z >= float(a)) & (z <= float(b)), xp.float64))
                    for a, b in zip(zl, zu, strict=True)
                ]
            else:
                mean_scale = batch.mean(_scale(pred))
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


@register(
    "coverage",
    family="scoring",
    needs={"quantiles"},
    direction="target",
    bounds=(0.0, 1.0),
    best=0.95,
    reference=_GR + " §6 (central prediction intervals)",
    structured=True,
)
def coverage(
    batch: Batch,
    *,
    levels: Sequence[float] = INTERVAL_LEVELS,
    level: float = 0.95,
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

    >>> import numpy as np; from uqcore import predictions as P
    >>> coverage(P.Gaussian(np.zeros(4), np.ones(4)), np.array([0.0, 1.0, 2.0, 3.0]))["value"]
    0.5
    """
    return _interval_summary(batch, "coverage", "coverage", levels, level, covered=True)


@register(
    "mean_width",
    family="scoring",
    needs={"quantiles"},
    direction="lower",
    bounds=(0.0, None),
    reference=_GR + " §6 (central prediction intervals); " + _UT + " (sharpness)",
    structured=True,
)
def mean_width(
    batch: Batch,
    *,
    levels: Sequence[float] = INTERVAL_LEVELS,
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean width of central prediction intervals: Σ w_i (u_i − l_i) / Σ w_i per level.

    l_i = F_i⁻¹(½ − c/2), u_i = F_i⁻¹(½ + c/2) for nominal coverage c. Returns ``{"value":
    width at `level`, "level", "levels", "width": [per level]}``; ``levels`` defaults to
    50/80/90/95/99 % and ``level`` to 0.95. Narrower is sharper (direction "lower"), but only
    together with ``coverage`` is it a measure of quality; it has no best value. A ``Quantiles``
    prediction gives widths within its levels only (others are ``None``).

    >>> import numpy as np; from uqcore import predictions as P
    >>> round(mean_width(P.Gaussian(np.zeros(2), np.array([1.0, 3.0])), np.zeros(2))["value"], 8)
    7.83985594
    """
    return _interval_summary(batch, "mean_width", "width", levels, level, covered=False)
