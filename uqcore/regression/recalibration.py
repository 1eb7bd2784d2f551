"""Recalibration: isotonic recalibration of the CDF and a single std scaling factor.

Both are fitted on one set (a prediction and its targets) and applied to another prediction,
returning a prediction object that every metric accepts.

* :func:`fit_isotonic` — Kuleshov et al. (2018), "Accurate uncertainties for deep learning using
  calibrated regression", Alg. 1: with PIT values u_i = F_i(y_i) on the calibration set, fit a
  monotone map R by isotonic regression of the empirical CDF P̂(u_i) on u_i; the recalibrated
  CDF is R(F_i(y)).
* :func:`fit_std_scaling` — one factor s multiplying every predicted scale (as Uncertainty
  Toolbox's ``optimize_recalibration_ratio``), chosen by NLL (closed form for Gaussians) or by
  calibration error.

Backends: the fitted maps are small numpy objects; fitting and applying them round-trips the
per-row values through the host (``to_numpy``), so a recalibrated prediction built on torch,
CuPy or array-API-strict arrays works (its outputs are returned in the prediction's namespace)
but is not device-native. The recalibration functions are tools, not registered metrics; they
validate their inputs exactly as metrics do (through :class:`~uqcore.batch.Batch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.special

from uqcore._backend import Array, from_numpy, to_numpy
from uqcore._validation import (
    UQValidationError,
    as_float_array,
    check_finite,
    check_in_open_unit,
)
from uqcore.batch import Batch, regression_batch
from uqcore.predictions.regression import (
    Gaussian,
    Laplace,
    Mixture,
    RegressionPrediction,
    StudentT,
)

__all__ = [
    "IsotonicMap",
    "IsotonicRecalibrated",
    "StdScaling",
    "fit_isotonic",
    "fit_std_scaling",
]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]
Positions = Literal["midpoint", "ecdf"]
Objective = Literal["nll", "calibration_error"]

#: Number of midpoint levels of the quadrature that gives the std of a recalibrated
#: non-Gaussian prediction (see :meth:`IsotonicRecalibrated.std`).
STD_QUADRATURE_LEVELS = 512
#: Rows per chunk in that quadrature (bounds memory to chunk × levels floats).
_STD_CHUNK = 4096


_NEED_WORDS = {"cdf": "a CDF", "logpdf": "a density"}


def _fit_batch(prediction: Any, y: Any, sample_weight: Any, need: str) -> Batch:
    batch = regression_batch(prediction, y, sample_weight)
    if need not in prediction.capabilities:
        raise UQValidationError(
            f"prediction must provide {_NEED_WORDS[need]} for this recalibration; a "
            f"{prediction.kind} "
            "prediction does not"
        )
    return batch


def _host_weights(batch: Batch) -> FloatArray:
    if batch.weights is None:
        return np.ones(batch.n)
    return np.asarray(to_numpy(batch.weights), dtype=np.float64)


# -- isotonic recalibration -------------------------------------------------------------------
@dataclass(frozen=True)
class IsotonicMap:
    """A continuous, non-decreasing, piecewise-linear map R: [0, 1] → [0, 1], R(0)=0, R(1)=1.

    ``knots`` are the distinct calibration PIT values (with 0 and 1 added) and ``values`` the
    isotonic fit at them; between knots R is linear, so R has the piecewise-constant derivative
    that makes a recalibrated density R'(F(y))·f(y).
    """

    knots: FloatArray = field(repr=False)
    values: FloatArray = field(repr=False)

    def __call__(self, p: Any) -> FloatArray:
        """R(p) for p in [0, 1]."""
        out: FloatArray = np.interp(np.asarray(p, dtype=np.float64), self.knots, self.values)
        return out

    def slope(self, p: Any) -> FloatArray:
        """R'(p): the slope of the segment holding p (right-continuous at the knots)."""
        k = np.searchsorted(self.knots, np.asarray(p, dtype=np.float64), side="right") - 1
        k = np.clip(k, 0, self.knots.shape[0] - 2)
        dx = np.diff(self.knots)
        dv = np.diff(self.values)
        out: FloatArray = (dv / dx)[k]
        return out

    def inverse(self, q: Any) -> FloatArray:
        """R⁻¹(q): the smallest p with R(p) = q (linear inversion of the knots)."""
        q = np.asarray(q, dtype=np.float64)
        # For flat stretches (only with positions="ecdf") take the left end, the generalised
        # inverse inf{p : R(p) >= q}.
        k = np.searchsorted(self.values, q, side="left")
        k = np.clip(k, 1, self.values.shape[0] - 1)
        v0, v1 = self.values[k - 1], self.values[k]
        x0, x1 = self.knots[k - 1], self.knots[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(v1 > v0, (q - v0) / (v1 - v0), 0.0)
        out: FloatArray = np.clip(x0 + t * (x1 - x0), 0.0, 1.0)
        return out

    def apply(self, prediction: RegressionPrediction) -> IsotonicRecalibrated:
        """The recalibrated prediction with CDF R(F_i(y))."""
        return IsotonicRecalibrated(prediction, self)


def fit_isotonic(
    prediction: RegressionPrediction,
    y: Any,
    *,
    sample_weight: Any = None,
    positions: Positions = "midpoint",
) -> IsotonicMap:
    """Fit Kuleshov et al.'s (2018) isotonic recalibration map on a calibration set.

    With PIT values u_i = F_i(y_i), weights w_i (W = Σ w_i) and the distinct values
    u_(1) < ... < u_(m) carrying weights W_k, the targets are the empirical CDF at the knots,
    P̂_k = (Σ_{j≤k} W_j − c·W_k) / W with c = ½ for ``positions="midpoint"`` (default: the
    Hazen plotting position, the middle of the ECDF's jump) or c = 0 for ``"ecdf"`` (Kuleshov's
    P̂ exactly). R is the isotonic regression (``scipy.optimize.isotonic_regression``, weights
    W_k) of P̂ on u, pinned to R(0) = 0 and R(1) = 1 and linear in between. With the midpoint
    positions R is strictly increasing, so the recalibrated density is positive wherever the
    base density is; with ``"ecdf"`` R reaches 1 at the largest PIT value and the density is
    0 beyond it (NLL may then be infinite on new data).

    Parameters
    ----------
    prediction : RegressionPrediction
        A prediction that provides a CDF (every kind except ``Quantiles`` and
        ``PointUncertainty``).
    y : array_like, shape (N,)
        Calibration targets.
    sample_weight : array_like, shape (N,), optional
        Frequency weights; zero-weight rows are ignored.
    positions : {"midpoint", "ecdf"}

    Returns
    -------
    IsotonicMap
        Apply it with ``fit_isotonic(...).apply(new_prediction)``.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> rng = np.random.default_rng(0); y = 2.0 * rng.standard_normal(2000)
    >>> pred = P.Gaussian(np.zeros(2000), np.ones(2000))    # std too small by a factor 2
    >>> recal = fit_isotonic(pred, y).apply(pred)
    >>> round(float(recal.ppf([0.975])[0, 0]), 1)             # population value 3.92
    3.8
    """
    if positions not in ("midpoint", "ecdf"):
        raise UQValidationError(f"positions must be 'midpoint' or 'ecdf', found {positions!r}")
    batch = _fit_batch(prediction, y, sample_weight, "cdf")
    u = np.clip(np.asarray(to_numpy(batch.pit), dtype=np.float64), 0.0, 1.0)
    w = _host_weights(batch)
    keep = w > 0
    u, w = u[keep], w[keep]
    knots, inverse = np.unique(u, return_inverse=True)
    wk = np.bincount(inverse, weights=w, minlength=knots.shape[0])
    total = float(np.sum(wk))
    c = 0.5 if positions == "midpoint" else 0.0
    target = (np.cumsum(wk) - c * wk) / total
    import scipy.optimize  # at first use: importing uqcore does not load scipy.optimize

    fitted = np.asarray(scipy.optimize.isotonic_regression(target, weights=wk).x)
    # Pin the ends: a CDF transform must map 0 to 0 and 1 to 1.
    inner = (knots > 0.0) & (knots < 1.0)
    xs = np.concatenate([[0.0], knots[inner], [1.0]])
    vs = np.clip(np.concatenate([[0.0], fitted[inner], [1.0]]), 0.0, 1.0)
    vs = np.maximum.accumulate(vs)
    return IsotonicMap(knots=xs, values=vs)


class IsotonicRecalibrated(RegressionPrediction):
    """A prediction recalibrated by an :class:`IsotonicMap` R: CDF G_i(y) = R(F_i(y)).

    * ``cdf``: R(F_i(y)).
    * ``logpdf``: log R'(F_i(y)) + log f_i(y) — R is piecewise linear, so the recalibrated
      density is the base density times the slope of the segment holding F_i(y) (at a knot, the
      right segment's slope). Offered when the base has a density and is not ``Samples`` (whose
      step CDF and kernel density do not belong to each other).
    * ``ppf``: G_i⁻¹(p) = F_i⁻¹(R⁻¹(p)).
    * ``point``: the recalibrated median F_i⁻¹(R⁻¹(½)) (a mean would need an integral).
    * ``std`` (= ``uncertainty``): exact for a Gaussian base — U = R⁻¹(V), V ~ U(0, 1), has a
      piecewise-constant density R' on [0, 1], so Y = μ_i + σ_i·Φ⁻¹(U) has moments from the
      partial moments of the normal, ∫₀ᵘ Φ⁻¹ = −φ(Φ⁻¹(u)) and ∫₀ᵘ (Φ⁻¹)² = u − Φ⁻¹(u)·φ(Φ⁻¹(u))
      (the same for every row). For other bases it is a midpoint quadrature over ``STD_QUADRATURE_LEVELS`` (512)
      recalibrated levels, which omits the outer 1/1024 of each tail (a slight underestimate).

    Arrays are computed on the host and returned in the base prediction's namespace.
    """

    kind: ClassVar[str] = "isotonic_recalibrated"

    def __init__(self, base: RegressionPrediction, mapping: IsotonicMap) -> None:
        if not isinstance(base, RegressionPrediction):
            raise UQValidationError(
                f"prediction must be a uqcore prediction object, found {type(base).__name__}"
            )
        if "cdf" not in base.capabilities or "quantiles" not in base.capabilities:
            raise UQValidationError(
                f"prediction must provide a CDF and quantiles for isotonic recalibration; a "
                f"{base.kind} prediction does not"
            )
        self.base = base
        self.mapping = mapping
        self.xp = base.xp
        self.n = base.n

    @property
    def capabilities(self) -> frozenset[str]:
        caps = {"point", "uncertainty", "std", "cdf", "quantiles"}
        if "logpdf" in self.base.capabilities and self.base.kind != "samples":
            caps.add("logpdf")
        return frozenset(caps)

    def take(self, indices: Any) -> IsotonicRecalibrated:
        return IsotonicRecalibrated(self.base.take(indices), self.mapping)

    def arrays(self) -> dict[str, Array]:
        return self.base.arrays()

    def _out(self, values: FloatArray) -> Array:
        like = next(iter(self.base.arrays().values()))
        return from_numpy(self.xp, like, np.ascontiguousarray(values, dtype=np.float64))

    def cdf(self, y: Array) -> Array:
        u = to_numpy(self.base.cdf(y))
        return self._out(self.mapping(np.clip(u, 0.0, 1.0)))

    def logpdf(self, y: Array) -> Array:
        if "logpdf" not in self.capabilities:
            raise self._missing("a density")
        u = np.clip(to_numpy(self.base.cdf(y)), 0.0, 1.0)
        base = np.asarray(to_numpy(self.base.logpdf(y)), dtype=np.float64)
        with np.errstate(divide="ignore"):
            out = np.log(self.mapping.slope(u)) + base
        return self._out(out)

    def ppf(self, levels: Any) -> Array:
        lv = as_float_array(levels, "levels", np, ndim=1)
        check_finite(lv, "levels", np)
        check_in_open_unit(lv, "levels", np)
        inner = np.clip(self.mapping.inverse(lv), 1e-300, 1.0 - 2.0**-53)
        return self.base.ppf(inner)

    def point(self) -> Array:
        return self.ppf([0.5])[:, 0]

    def std(self) -> Array:
        if isinstance(self.base, Gaussian):
            m1, m2 = self._gaussian_moments()
            return self.base.std_ * math.sqrt(max(m2 - m1 * m1, 0.0))
        mids = (np.arange(STD_QUADRATURE_LEVELS) + 0.5) / STD_QUADRATURE_LEVELS
        out = np.empty(self.n)
        for start in range(0, self.n, _STD_CHUNK):
            rows = np.arange(start, min(start + _STD_CHUNK, self.n))
            q = to_numpy(self.take(rows).ppf(mids))
            out[rows] = np.std(q, axis=1)
        return self._out(out)

    def uncertainty(self) -> Array:
        return self.std()

    def _gaussian_moments(self) -> tuple[float, float]:
        # E[Z] and E[Z²] for Z = Φ⁻¹(U), U with density R' (constant slope s_k on each segment):
        # Σ_k s_k [G(b) − G(a)] with G1(u) = −φ(Φ⁻¹(u)), G2(u) = u − Φ⁻¹(u)·φ(Φ⁻¹(u)).
        x = self.mapping.knots
        s = np.diff(self.mapping.values) / np.diff(x)
        z = scipy.special.ndtri(x)
        with np.errstate(invalid="ignore"):
            phi = np.where(np.isfinite(z), np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi), 0.0)
            zphi = np.where(np.isfinite(z), z * phi, 0.0)
        g1 = -phi
        g2 = x - zphi
        m1 = float(np.sum(s * np.diff(g1)))
        m2 = float(np.sum(s * np.diff(g2)))
        return m1, m2


# -- std scaling ------------------------------------------------------------------------------
_SCALED_FIELD = {"gaussian": "std_", "laplace": "scale", "student_t": "scale", "mixture": "stds"}


@dataclass(frozen=True)
class StdScaling:
    """A single factor s > 0 multiplying every predicted scale.

    ``apply`` returns the same kind with the scale multiplied: Gaussian std, Laplace scale,
    Student-t scale (df unchanged), and for a Mixture every component std (means and weights
    unchanged — this is *not* the mixture's std multiplied by s, which would also need the
    component means moved). Other kinds have no scale to multiply and raise
    :class:`UQValidationError`.
    """

    factor: float
    objective: str

    def apply(self, prediction: RegressionPrediction) -> RegressionPrediction:
        """The prediction with its scale multiplied by ``factor``."""
        kind = getattr(prediction, "kind", type(prediction).__name__)
        name = _SCALED_FIELD.get(kind)
        if name is None or not isinstance(prediction, (Gaussian, Laplace, StudentT, Mixture)):
            raise UQValidationError(
                f"prediction must be a gaussian, laplace, student_t or mixture prediction to "
                f"scale its std, found {kind!r}"
            )
        fields = {f: getattr(prediction, f) for f in type(prediction)._row_fields}
        fields[name] = fields[name] * self.factor
        out: RegressionPrediction = type(prediction)._from_fields(prediction.xp, fields)
        return out


def fit_std_scaling(
    prediction: RegressionPrediction,
    y: Any,
    *,
    objective: Objective = "nll",
    sample_weight: Any = None,
    bounds: tuple[float, float] = (1e-3, 1e3),
) -> StdScaling:
    """Fit one factor s multiplying every predicted scale, on a calibration set.

    ``objective="nll"`` (default) minimises the weighted mean negative log-likelihood of the
    scaled prediction; for a Gaussian this has the closed form s² = Σ w_i z_i² / Σ w_i with
    z_i = (y_i − μ_i)/σ_i. ``objective="calibration_error"`` minimises Kuleshov's calibration
    error (:func:`uqcore.regression.calibration.calibration_error`, its defaults: one-sided
    proportions on the levels 0.01..0.99), a step function of s, by a grid over log s followed
    by a bounded Brent search (``scipy.optimize.minimize_scalar``) around the best grid point.
    Other cases use the bounded search on log s directly. ``bounds`` bound s.

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Gaussian(np.zeros(3), np.ones(3))
    >>> s = fit_std_scaling(pred, np.array([1.0, -2.0, 2.0]))
    >>> round(s.factor, 6)                                      # sqrt((1 + 4 + 4) / 3)
    1.732051
    >>> round(float(s.apply(pred).std()[0]), 6)
    1.732051
    """
    if objective not in ("nll", "calibration_error"):
        raise UQValidationError(
            f"objective must be 'nll' or 'calibration_error', found {objective!r}"
        )
    lo, hi = (float(b) for b in bounds)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise UQValidationError(f"bounds must satisfy 0 < low < high, found {bounds!r}")
    need = "logpdf" if objective == "nll" else "cdf"
    batch = _fit_batch(prediction, y, sample_weight, need)
    StdScaling(1.0, objective).apply(prediction)  # raises for kinds without a scale
    w = _host_weights(batch)

    if objective == "nll" and isinstance(prediction, Gaussian):
        z = to_numpy((batch.y - prediction.mean_) / prediction.std_)
        s = math.sqrt(float(np.sum(w * z * z)) / float(np.sum(w)))
        if s <= 0.0:
            raise UQValidationError(
                "y must not equal the predicted mean on every row: the NLL-optimal std is 0"
            )
        return StdScaling(s, objective)

    def loss(log_s: float) -> float:
        scaled = StdScaling(math.exp(log_s), objective).apply(prediction)
        if objective == "nll":
            lp = to_numpy(scaled.logpdf(batch.y))
            return float(-np.sum(w * lp) / np.sum(w))
        from uqcore.regression.calibration import calibration_error

        value = calibration_error(scaled, batch.y, sample_weight=batch.weights)
        return float(value) if value is not None else math.inf

    a, b = math.log(lo), math.log(hi)
    if objective == "calibration_error":
        grid = np.linspace(a, b, 121)
        values = np.array([loss(float(t)) for t in grid])
        k = int(np.argmin(values))
        a, b = float(grid[max(k - 1, 0)]), float(grid[min(k + 1, grid.shape[0] - 1)])
        best_t, best_v = float(grid[k]), float(values[k])
    else:
        best_t, best_v = 0.0, math.inf
    import scipy.optimize

    res = scipy.optimize.minimize_scalar(loss, bounds=(a, b), method="bounded")
    t = float(res.x) if float(res.fun) <= best_v else best_t
    return StdScaling(math.exp(t), objective)
