"""Validated regression prediction kinds and what metrics can ask of them.

Every kind holds N rows (one predictive distribution, or a point plus a score, per target) and
declares its *capabilities*, the quantities it can give:

``point``        point prediction (mean; the median for :class:`Quantiles`)
``uncertainty``  a scalar uncertainty per row used by ranking metrics (the predictive std for
                 distributions; the given score for :class:`PointUncertainty`)
``std``          the predictive standard deviation
``cdf``          the CDF F_i(y) at a target
``logpdf``       the log-density log f_i(y) at a target
``quantiles``    the quantile function F_i⁻¹(p) at levels p
``interval``     a prediction interval per row (:meth:`RegressionPrediction.interval`): the
                 given bounds of an :class:`Interval`, or the central interval
                 [F_i⁻¹(½ − c/2), F_i⁻¹(½ + c/2)] at any nominal coverage c of a kind with
                 quantiles

Metrics declare which of these they need; the registry answers applicability from them.
Inputs may be numpy, CuPy, torch or any array-API arrays (or Python sequences); values are
held as float64 arrays of the caller's namespace and device.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import array_api_compat
import numpy as np

from uqcore._backend import LOG_SQRT_2PI, Array, Namespace, clip, special, to_numpy
from uqcore._scaling import exponent, max_abs, rescaled
from uqcore._validation import (
    SIMPLEX_ATOL,
    UQValidationError,
    as_float_array,
    check_finite,
    check_in_open_unit,
    check_nonnegative,
    check_positive,
    check_strictly_increasing,
    common_namespace,
    first_bad,
)

__all__ = [
    "Gaussian",
    "Interval",
    "Laplace",
    "Mixture",
    "PointUncertainty",
    "Quantiles",
    "RegressionPrediction",
    "Samples",
    "StudentT",
]

#: log π (the Student-t density's constant).
_LOG_PI = math.log(math.pi)

#: Rules of thumb for the kernel bandwidth of :meth:`Samples.bandwidth`.
BandwidthRule = Literal["silverman", "scott", "scoringrules"]
Bandwidth = BandwidthRule | float


def _safe_std(xp: Namespace, std: Any, *values: Array) -> Array:
    """``std(*values)``, a row-wise standard deviation computed through squares, for values of
    any magnitude: where the result shows that the squares overflowed (not finite) or may have
    underflowed (a std below 2^−400), the values are divided by a power of two 2^e (exactly,
    :mod:`uqcore._scaling`), the std is computed again and multiplied by 2^e."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # checked just below
        sd = std(*values)
    top, low = float(xp.max(sd)), float(xp.min(sd))
    if math.isfinite(top) and low >= 2.0**-400:
        return sd
    e = exponent(*(max_abs(xp, v) for v in values))
    if e == 0:
        return sd
    return rescaled(std(*(rescaled(v, e) for v in values)), -e)


def _device(x: Any) -> Any:
    import array_api_compat

    return array_api_compat.device(x) if array_api_compat.is_array_api_obj(x) else None


class RegressionPrediction:
    """Base class of the regression prediction kinds.

    Subclasses set ``kind``, ``_row_fields`` (arrays indexed by row, first axis N) and
    ``_shared_fields`` (arrays shared by all rows), and implement what their capabilities
    promise. Instances are immutable; :meth:`take` returns a new instance on a subset of rows.
    """

    kind: ClassVar[str] = ""
    _row_fields: ClassVar[tuple[str, ...]] = ()
    _shared_fields: ClassVar[tuple[str, ...]] = ()
    _capabilities: ClassVar[frozenset[str]] = frozenset()

    xp: Namespace
    n: int

    # -- construction helpers -------------------------------------------------------------
    def _init_arrays(
        self, spec: Mapping[str, tuple[Any, int | tuple[int, ...]]], same_shape: tuple[str, ...]
    ) -> dict[str, Array]:
        xp = common_namespace(*(v for v, _ in spec.values()))
        dev = next((_device(v) for v, _ in spec.values() if _device(v) is not None), None)
        out: dict[str, Array] = {}
        for name, (value, ndim) in spec.items():
            arr = as_float_array(value, name, xp, ndim=ndim, device=dev)
            check_finite(arr, name, xp)
            out[name] = arr
        self.xp = xp
        ref = same_shape[0]
        first = out[ref]
        self.n = int(first.shape[0])
        for name in same_shape[1:]:
            arr = out[name]
            if tuple(arr.shape) != tuple(first.shape):
                raise UQValidationError(
                    f"{name} must have the same shape as {ref} "
                    f"{tuple(first.shape)}, found {tuple(arr.shape)}",
                    argument=name,
                )
        if self.n == 0:
            raise UQValidationError(f"{ref} must not be empty (N = 0)", argument=ref)
        return out

    @classmethod
    def _from_fields(cls, xp: Namespace, fields: Mapping[str, Array]) -> Any:
        obj = cls.__new__(cls)
        obj.xp = xp
        for name, value in fields.items():
            object.__setattr__(obj, name, value)
        obj.n = int(fields[cls._row_fields[0]].shape[0])
        return obj

    # -- generic API ----------------------------------------------------------------------
    @property
    def capabilities(self) -> frozenset[str]:
        """The quantities this prediction can give (see the module docstring)."""
        return self._capabilities

    def take(self, indices: Any) -> Any:
        """A new prediction of the same kind holding rows ``indices`` (in that order)."""
        xp = self.xp
        dev = _device(getattr(self, self._row_fields[0]))
        idx = xp.asarray(to_numpy(xp.asarray(indices)).astype(np.int64), device=dev)
        fields = {name: xp.take(getattr(self, name), idx, axis=0) for name in self._row_fields}
        fields.update({name: getattr(self, name) for name in self._shared_fields})
        return self._from_fields(xp, fields)

    def arrays(self) -> dict[str, Array]:
        """The arrays that define this prediction, by constructor argument name."""
        names = (*self._row_fields, *self._shared_fields)
        return {name.rstrip("_"): getattr(self, name) for name in names}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, n={self.n})"

    def _missing(self, what: str) -> UQValidationError:
        return UQValidationError(f"a {self.kind} prediction does not provide {what}")

    def point(self) -> Array:
        """Point prediction per row."""
        raise self._missing("a point prediction")

    def uncertainty(self) -> Array:
        """Scalar uncertainty per row (higher = more uncertain)."""
        raise self._missing("a scalar uncertainty")

    def mean(self) -> Array:
        """Predictive mean per row."""
        raise self._missing("a predictive mean")

    def std(self) -> Array:
        """Predictive standard deviation per row."""
        raise self._missing("a predictive standard deviation")

    def cdf(self, y: Array) -> Array:
        """Predictive CDF F_i(y_i) per row."""
        raise self._missing("a CDF")

    def logpdf(self, y: Array) -> Array:
        """Predictive log-density log f_i(y_i) per row."""
        raise self._missing("a density")

    def ppf(self, levels: Any) -> Array:
        """Predictive quantiles F_i⁻¹(p) for every row and level: an N×Q array."""
        raise self._missing("a quantile function")

    #: The nominal coverage of the prediction's own interval (:class:`Interval`); ``None`` for
    #: the distributional kinds, whose central intervals exist at every level.
    level: float | None = None

    def interval(self, level: float | None = None) -> tuple[Array, Array]:
        """The prediction interval of every row at nominal coverage ``level``: (lower, upper).

        For a kind with quantiles it is the central interval
        [F_i⁻¹(½ − c/2), F_i⁻¹(½ + c/2)] at c = ``level`` (required). An :class:`Interval`
        returns its bounds; ``level`` must then be ``None`` or its own level.
        """
        q = self.ppf(self._central(level))
        return q[:, 0], q[:, 1]

    def _central(self, level: float | None) -> list[float]:
        """The levels ½ ∓ c/2 of the central interval at nominal coverage c = ``level``
        (validated)."""
        if "quantiles" not in self.capabilities:
            raise self._missing("prediction intervals")
        if level is None:
            raise UQValidationError(
                f"a {self.kind} prediction has central intervals at every level: pass level=c, "
                "the nominal coverage in (0, 1)",
                argument="level",
            )
        c = float(level)
        if not 0.0 < c < 1.0:
            raise UQValidationError(
                f"level must be a nominal coverage in (0, 1); found {level!r}",
                argument="level",
                value=level,
            )
        return [0.5 - c / 2.0, 0.5 + c / 2.0]

    def _levels(self, levels: Any) -> Array:
        xp = self.xp
        dev = _device(getattr(self, self._row_fields[0]))
        lv = as_float_array(levels, "levels", xp, ndim=1, device=dev)
        check_finite(lv, "levels", xp)
        check_in_open_unit(lv, "levels", xp)
        return lv


class _LocationScale(RegressionPrediction):
    """Shared code of the location-scale families: z = (y − loc) / scale."""

    _capabilities = frozenset(
        {"point", "uncertainty", "std", "cdf", "logpdf", "quantiles", "interval"}
    )
    _loc_name: ClassVar[str]
    _scale_name: ClassVar[str]

    @property
    def _loc(self) -> Array:
        return getattr(self, self._loc_name)

    @property
    def _scale(self) -> Array:
        return getattr(self, self._scale_name)

    def _standard_ppf(self, lv: Array) -> Array | None:
        """The standard quantiles z(p) of the levels ``lv`` when every row shares them (the
        quantiles are then loc_i + scale_i·z(p)); ``None`` where they differ by row."""
        return None

    def ppf(self, levels: Any) -> Array:
        lv = self._levels(levels)
        zq = self._standard_ppf(lv)
        if zq is None:
            raise self._missing("a quantile function")
        return self._loc[:, None] + self._scale[:, None] * zq[None, :]

    def interval(self, level: float | None = None) -> tuple[Array, Array]:
        """As :meth:`RegressionPrediction.interval`; where the rows share their standard
        quantiles, each bound is loc + scale·z in one pass of its own (contiguous, the values
        of the :meth:`ppf` columns to the last bit)."""
        lv = self._levels(self._central(level))
        zq = self._standard_ppf(lv)
        if zq is None:
            return super().interval(level)
        return self._loc + self._scale * zq[0], self._loc + self._scale * zq[1]

    def standardize(self, y: Array) -> Array:
        """z_i = (y_i − loc_i) / scale_i (a new array: one allocation, divided in place)."""
        z = y - self._loc
        z /= self._scale
        return z

    def point(self) -> Array:
        return self._loc

    def mean(self) -> Array:
        return self._loc

    def uncertainty(self) -> Array:
        return self.std()


class Gaussian(_LocationScale):
    """Gaussian predictive distributions N(mean_i, std_i²).

    Parameters
    ----------
    mean, std : array_like, shape (N,)
        Finite; ``std > 0``.
    """

    kind = "gaussian"
    _row_fields = ("mean_", "std_")
    _loc_name = "mean_"
    _scale_name = "std_"

    def __init__(self, mean: Any, std: Any) -> None:
        f = self._init_arrays({"mean": (mean, 1), "std": (std, 1)}, ("mean", "std"))
        check_positive(f["std"], "std", self.xp)
        self.mean_ = f["mean"]
        self.std_ = f["std"]

    def std(self) -> Array:
        return self.std_

    def cdf(self, y: Array) -> Array:
        return special(self.xp).ndtr(self.standardize(y), overwrite=True)

    def logpdf(self, y: Array) -> Array:
        z = self.standardize(y)
        return -0.5 * z * z - self.xp.log(self.std_) - LOG_SQRT_2PI

    def _standard_ppf(self, lv: Array) -> Array:
        return special(self.xp).ndtri(lv)


class Laplace(_LocationScale):
    """Laplace predictive distributions with density exp(−|y − loc|/scale) / (2·scale).

    Parameters
    ----------
    loc, scale : array_like, shape (N,)
        Finite; ``scale > 0``. The standard deviation is √2·scale.
    """

    kind = "laplace"
    _row_fields = ("loc", "scale")
    _loc_name = "loc"
    _scale_name = "scale"

    def __init__(self, loc: Any, scale: Any) -> None:
        f = self._init_arrays({"loc": (loc, 1), "scale": (scale, 1)}, ("loc", "scale"))
        check_positive(f["scale"], "scale", self.xp)
        self.loc = f["loc"]
        self.scale = f["scale"]

    def std(self) -> Array:
        return math.sqrt(2.0) * self.scale

    def cdf(self, y: Array) -> Array:
        xp = self.xp
        z = self.standardize(y)
        half_tail = 0.5 * xp.exp(-xp.abs(z))
        return xp.where(z < 0, half_tail, 1.0 - half_tail)

    def logpdf(self, y: Array) -> Array:
        xp = self.xp
        return -xp.abs(self.standardize(y)) - xp.log(2.0 * self.scale)

    def _standard_ppf(self, lv: Array) -> Array:
        xp = self.xp
        return xp.where(lv < 0.5, xp.log(2.0 * lv), -xp.log(2.0 * (1.0 - lv)))


class StudentT(_LocationScale):
    """Location-scale Student-t predictive distributions.

    Parameters
    ----------
    loc, scale : array_like, shape (N,)
        Finite; ``scale > 0``.
    df : float or array_like, shape (N,)
        Degrees of freedom, ``df > 0``. The point prediction is ``loc`` (the median; also the
        mean when df > 1). A standard deviation ``scale·sqrt(df/(df−2))`` exists only when every
        ``df > 2``; otherwise ``std`` and ``uncertainty`` are not offered and the metrics that
        need them are reported as not applicable.
    """

    kind = "student_t"
    _row_fields = ("loc", "scale", "df")
    _loc_name = "loc"
    _scale_name = "scale"

    def __init__(self, loc: Any, scale: Any, df: Any) -> None:
        xp0 = common_namespace(loc, scale, df)
        if isinstance(df, (int, float)) or (hasattr(df, "ndim") and df.ndim == 0):
            n = len(loc) if not hasattr(loc, "shape") else int(loc.shape[0])
            df = np.full(n, float(df)) if xp0 is common_namespace() else xp0.full(n, float(df))
        f = self._init_arrays(
            {"loc": (loc, 1), "scale": (scale, 1), "df": (df, 1)}, ("loc", "scale", "df")
        )
        check_positive(f["scale"], "scale", self.xp)
        check_positive(f["df"], "df", self.xp)
        self.loc = f["loc"]
        self.scale = f["scale"]
        self.df = f["df"]

    @property
    def capabilities(self) -> frozenset[str]:
        if bool(self.xp.all(self.df > 2)):
            return self._capabilities
        return self._capabilities - {"std", "uncertainty"}

    def std(self) -> Array:
        if not bool(self.xp.all(self.df > 2)):
            idx = first_bad(self.df > 2)
            i = idx[0] if idx else 0
            df = float(to_numpy(self.df)[i])
            raise UQValidationError(
                f"a student_t prediction has a finite std only when df > 2; df[{i}] = {df:.6g}",
                argument="df",
                index=i,
                value=df,
            )
        return self.scale * self.xp.sqrt(self.df / (self.df - 2.0))

    def cdf(self, y: Array) -> Array:
        return special(self.xp).stdtr(self.df, self.standardize(y))

    def logpdf(self, y: Array) -> Array:
        """log f(y) = log[Γ((ν+1)/2)/Γ(ν/2)] − ½(log ν + log π) − (ν+1)/2 · log1p(z²/ν) − log s,
        z = (y − loc)/s, in scipy's form (``scipy.stats.t.logpdf``): the ratio of the Γ as
        Pochhammer's symbol (ν/2)_{1/2}, whose log stays exact where log Γ((ν+1)/2) − log Γ(ν/2)
        cancels (at ν = 10⁶ that difference of two logs lost 4e-10, at 10¹² 2e-4). Where every
        row has the same ν (:meth:`_shared_df`) the terms of ν alone are computed once, the
        same values as per row."""
        xp = self.xp
        sp = special(xp)
        z = self.standardize(y)
        nu = self._shared_df()
        if nu is None:
            nu = self.df
        const = xp.log(sp.poch(0.5 * nu, 0.5)) - 0.5 * (xp.log(nu) + _LOG_PI)
        return const - (nu + 1.0) / 2.0 * xp.log1p(z * z / nu) - xp.log(self.scale)

    def _shared_df(self) -> Array | None:
        """The df of the first row as a length-1 array where every row has it (a scalar df,
        or equal ones), else None: then a function of df alone is computed once."""
        xp = self.xp
        if self.n == 0 or not bool(xp.all(self.df == self.df[0])):
            return None
        return self.df[:1]

    def _standard_ppf(self, lv: Array) -> Array | None:
        """Where every row has the same df (:meth:`_shared_df`): the standard quantiles
        t_df(p) once per level, the values each row's own evaluation gives (one ``stdtrit``
        per level instead of one per row and level); None where the df differ."""
        xp = self.xp
        nu = self._shared_df()
        if nu is None:
            return None
        return special(xp).stdtrit(xp.broadcast_to(nu, lv.shape), lv)

    def ppf(self, levels: Any) -> Array:
        lv = self._levels(levels)
        xp = self.xp
        zq = self._standard_ppf(lv)
        if zq is not None:  # q_ij = zq_j: the same values as below, in one pass
            return self.loc[:, None] + self.scale[:, None] * zq[None, :]
        q = special(xp).stdtrit(
            self.df[:, None], xp.broadcast_to(lv[None, :], (self.n, lv.shape[0]))
        )
        return self.loc[:, None] + self.scale[:, None] * q


class Mixture(RegressionPrediction):
    """Gaussian mixtures per row: f_i(y) = Σ_k w_ik · N(y; μ_ik, σ_ik²).

    Parameters
    ----------
    weights, means, stds : array_like, shape (N, K)
        ``weights >= 0`` with rows summing to 1 within ``SIMPLEX_ATOL`` (1e-6; rows are then
        renormalised exactly), ``stds > 0``. A deep ensemble of K Gaussian members is
        ``weights = 1/K``.
    """

    kind = "mixture"
    _row_fields = ("weights", "means", "stds")
    _capabilities = frozenset(
        {"point", "uncertainty", "std", "cdf", "logpdf", "quantiles", "interval"}
    )

    def __init__(self, weights: Any, means: Any, stds: Any) -> None:
        f = self._init_arrays(
            {"weights": (weights, 2), "means": (means, 2), "stds": (stds, 2)},
            ("weights", "means", "stds"),
        )
        xp = self.xp
        check_nonnegative(f["weights"], "weights", xp)
        check_positive(f["stds"], "stds", xp)
        rowsum = xp.sum(f["weights"], axis=1)
        ok = xp.abs(rowsum - 1.0) <= SIMPLEX_ATOL
        idx = first_bad(ok)
        if idx is not None:
            total = float(to_numpy(rowsum)[idx[0]])
            raise UQValidationError(
                f"weights rows must sum to 1 (tolerance {SIMPLEX_ATOL:g}); sum(weights[{idx[0]}]) "
                f"= {total:.10g}",
                argument="weights",
                index=idx[0],
                value=total,
            )
        self.weights = f["weights"] / rowsum[:, None]
        self.means = f["means"]
        self.stds = f["stds"]

    @property
    def n_components(self) -> int:
        """K, the number of mixture components."""
        return int(self.weights.shape[1])

    def point(self) -> Array:
        return self.mean()

    def mean(self) -> Array:
        return self.xp.sum(self.weights * self.means, axis=1)

    def std(self) -> Array:
        w = self.weights
        return _safe_std(self.xp, lambda mu, sd: _mixture_std(w, mu, sd), self.means, self.stds)

    def uncertainty(self) -> Array:
        return self.std()

    def moment_matched(self) -> Gaussian:
        """The Gaussian with the mixture's mean and variance (Lakshminarayanan et al. 2017)."""
        out: Gaussian = Gaussian._from_fields(self.xp, {"mean_": self.mean(), "std_": self.std()})
        return out

    def cdf(self, y: Array) -> Array:
        z = (y[:, None] - self.means) / self.stds
        return self.xp.sum(self.weights * special(self.xp).ndtr(z), axis=1)

    def logpdf(self, y: Array) -> Array:
        xp = self.xp
        z = (y[:, None] - self.means) / self.stds
        with np.errstate(divide="ignore"):
            logw = xp.log(self.weights)
        terms = logw - 0.5 * z * z - xp.log(self.stds) - LOG_SQRT_2PI
        top = xp.max(terms, axis=1)
        return top + xp.log(xp.sum(xp.exp(terms - top[:, None]), axis=1))

    def ppf(self, levels: Any, *, tol: float = 1e-12, max_iter: int = 200) -> Array:
        """Quantiles by safeguarded Newton iteration on the mixture CDF.

        Each quantile is bracketed by [min_k(μ_k − 40σ_k), max_k(μ_k + 40σ_k)]; a Newton step
        that leaves the current bracket (or meets a vanishing density) is replaced by bisection.
        Iteration stops when every step is below ``tol`` times the row's smallest component std.
        Rows are processed in blocks so that the N×Q×K work array stays near 2^20 values.
        """
        xp = self.xp
        lv = self._levels(levels)
        q = int(lv.shape[0])
        block = max(1, (1 << 20) // max(1, q * self.n_components))
        parts = [
            self._ppf_rows(lv, start, min(start + block, self.n), tol, max_iter)
            for start in range(0, self.n, block)
        ]
        return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)

    def _ppf_rows(self, lv: Array, start: int, stop: int, tol: float, max_iter: int) -> Array:
        xp = self.xp
        sp = special(xp)
        q = int(lv.shape[0])
        w_rows = self.weights[start:stop, :]
        m_rows = self.means[start:stop, :]
        s_rows = self.stds[start:stop, :]
        n = stop - start
        w = w_rows[:, None, :]
        mu = m_rows[:, None, :]
        sd = s_rows[:, None, :]
        lo = xp.asarray(
            xp.broadcast_to(xp.min(m_rows - 40.0 * s_rows, axis=1)[:, None], (n, q)), copy=True
        )
        hi = xp.asarray(
            xp.broadcast_to(xp.max(m_rows + 40.0 * s_rows, axis=1)[:, None], (n, q)), copy=True
        )
        mean = xp.sum(w_rows * m_rows, axis=1)
        sd_rows = _safe_std(xp, lambda mu, sd: _mixture_std(w_rows, mu, sd), m_rows, s_rows)
        x = mean[:, None] + sd_rows[:, None] * sp.ndtri(lv)[None, :]
        x = clip(xp, x, min=lo, max=hi)
        scale = xp.min(s_rows, axis=1)[:, None]
        norm = 1.0 / math.sqrt(2.0 * math.pi)
        for _ in range(max_iter):
            z = (x[:, :, None] - mu) / sd
            f = xp.sum(w * sp.ndtr(z), axis=2) - lv[None, :]
            dens = xp.sum(w * xp.exp(-0.5 * z * z) * (norm / sd), axis=2)
            lo = xp.where(f < 0, x, lo)
            hi = xp.where(f > 0, x, hi)
            usable = dens > 1e-280  # a Newton step through a vanishing density overflows
            newton = x - f / xp.where(usable, dens, 1.0)
            inside = usable & (newton > lo) & (newton < hi)
            x_new = xp.where(inside, newton, 0.5 * (lo + hi))
            done = xp.abs(x_new - x) <= tol * scale
            x = x_new
            if bool(xp.all(done)):
                break
        return x


def _mixture_std(w: Array, mu: Array, sd: Array) -> Array:
    """Std of Gaussian mixtures per row: sqrt(Σ_k w_k (σ_k² + μ_k²) − (Σ_k w_k μ_k)²)."""
    xp = array_api_compat.array_namespace(w)
    m = xp.sum(w * mu, axis=1)
    second = xp.sum(w * (sd * sd + mu * mu), axis=1)
    return xp.sqrt(clip(xp, second - m * m, min=0.0))


class Samples(RegressionPrediction):
    """Predictive distributions given by S draws per row (MC dropout, ensembles, EBR sampling).

    The distribution of row i is the empirical distribution of ``draws[i]``: CDF
    F_i(y) = #{s : x_is ≤ y} / S, mean and (population, ddof = 0) std of the draws, quantiles by
    linear interpolation of the order statistics (Hyndman & Fan type 7, numpy's default), and a
    Gaussian kernel density estimate for the log-density (see :meth:`logpdf`).

    Parameters
    ----------
    draws : array_like, shape (N, S)
        Finite, S >= 1.
    """

    kind = "samples"
    _row_fields: ClassVar[tuple[str, ...]] = ("draws",)
    _capabilities = frozenset(
        {"point", "uncertainty", "std", "cdf", "logpdf", "quantiles", "interval"}
    )

    def __init__(self, draws: Any) -> None:
        f = self._init_arrays({"draws": (draws, 2)}, ("draws",))
        if f["draws"].shape[1] == 0:
            raise UQValidationError(
                "draws must have at least one draw per row (S >= 1), found S = 0", argument="draws"
            )
        self.draws = f["draws"]

    @property
    def n_draws(self) -> int:
        """S, the number of draws per row."""
        return int(self.draws.shape[1])

    @functools.cached_property
    def sorted_draws(self) -> Array:
        """Draws sorted within each row (computed once)."""
        return self.xp.sort(self.draws, axis=1)

    def point(self) -> Array:
        return self.mean()

    def mean(self) -> Array:
        return self.xp.mean(self.draws, axis=1)

    def std(self) -> Array:
        xp = self.xp
        return _safe_std(xp, lambda d: xp.std(d, axis=1), self.draws)

    def uncertainty(self) -> Array:
        return self.std()

    def cdf(self, y: Array) -> Array:
        xp = self.xp
        return xp.sum(xp.astype(self.draws <= y[:, None], self.draws.dtype), axis=1) / self.n_draws

    def bandwidth(self, rule: Bandwidth = "silverman") -> Array:
        """Per-row Gaussian-kernel bandwidth h_i.

        ``"silverman"``: h = 0.9·min(σ̂, IQR/1.34)·S^(−1/5) (Silverman 1986, eq. 3.31), with σ̂
        the ddof = 1 std; where the IQR is 0 it falls back to σ̂. ``"scott"``: h = 1.06·σ̂·S^(−1/5)
        (Scott 1992). ``"scoringrules"``: h = 1.06·min(σ̂, IQR/1.34)·S^(−1/5) (Silverman 1986,
        eq. 3.30; R's ``bw.nrd``), the default of ``scoringrules.logs_ensemble``: σ̂ with
        ddof = 1 and the IQR of the linearly interpolated quartiles (``numpy.quantile``), as
        there; where the IQR is 0 it falls back to σ̂ (scoringrules' bandwidth is then 0 and its
        score not finite). A float gives that bandwidth for every row.
        """
        xp = self.xp
        s = self.n_draws
        if isinstance(rule, (int, float)) and not isinstance(rule, bool):
            if not (math.isfinite(rule) and rule > 0):
                raise UQValidationError(
                    f"bandwidth must be a finite number > 0, found {rule!r}",
                    argument="bandwidth",
                    value=rule,
                )
            return xp.full((self.n,), float(rule), dtype=self.draws.dtype)
        if s < 2:
            raise UQValidationError(
                "a kernel density estimate needs at least 2 draws per row (S >= 2)",
                argument="draws",
            )
        sd = _safe_std(xp, lambda d: xp.std(d, axis=1, correction=1), self.draws)
        if rule == "scott":
            return 1.06 * sd * s ** (-0.2)
        if rule in ("silverman", "scoringrules"):
            qs = self._row_quantiles(self.sorted_draws, [0.25, 0.75])
            iqr = (qs[:, 1] - qs[:, 0]) / 1.34
            spread = xp.where(iqr > 0, xp.minimum(sd, iqr), sd)
            return (0.9 if rule == "silverman" else 1.06) * spread * s ** (-0.2)
        raise UQValidationError(
            "bandwidth must be 'silverman', 'scott', 'scoringrules' or a number > 0, found "
            f"{rule!r}",
            argument="bandwidth",
            value=rule,
        )

    def logpdf(self, y: Array, bandwidth: Bandwidth = "silverman") -> Array:
        """log of the Gaussian KDE: log[(1/S) Σ_s φ((y − x_s)/h)/h], computed with log-sum-exp."""
        xp = self.xp
        h = self.bandwidth(bandwidth)
        if not bool(xp.all(h > 0)):
            idx = first_bad(h > 0)
            i = idx[0] if idx else 0
            # a whole row is at fault, not one entry: the index is the row, no value
            raise UQValidationError(
                f"the kernel density estimate is undefined: all draws of row {i} are equal "
                "(bandwidth 0); give a numeric bandwidth",
                argument="draws",
                index=i,
            )
        z = (y[:, None] - self.draws) / h[:, None]
        terms = -0.5 * z * z
        top = xp.max(terms, axis=1)
        lse = top + xp.log(xp.sum(xp.exp(terms - top[:, None]), axis=1))
        return lse - math.log(self.n_draws) - xp.log(h) - LOG_SQRT_2PI

    def _row_quantiles(self, sorted_rows: Array, levels: Any) -> Array:
        xp = self.xp
        s = int(sorted_rows.shape[1])
        lv = to_numpy(xp.asarray(levels)) if not isinstance(levels, list) else np.asarray(levels)
        pos = lv * (s - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, s - 1)
        frac = pos - lo
        dev = _device(sorted_rows)
        a = xp.take(sorted_rows, xp.asarray(lo, device=dev), axis=1)
        b = xp.take(sorted_rows, xp.asarray(hi, device=dev), axis=1)
        fr = xp.asarray(frac, dtype=sorted_rows.dtype, device=dev)
        return a + (b - a) * fr[None, :]

    def ppf(self, levels: Any) -> Array:
        lv = self._levels(levels)
        return self._row_quantiles(self.sorted_draws, to_numpy(lv))


class Quantiles(RegressionPrediction):
    """Predictive quantiles at shared levels: ``values[i, j]`` = F_i⁻¹(levels[j]).

    Parameters
    ----------
    levels : array_like, shape (Q,)
        Strictly increasing, in the open interval (0, 1).
    values : array_like, shape (N, Q)
        Finite, non-decreasing along each row.

    Notes
    -----
    The point prediction is the median, linearly interpolated between levels (it requires
    ``levels[0] <= 0.5 <= levels[-1]``). The scalar uncertainty is the normal-equivalent std of
    the outermost levels, (q_{p_Q} − q_{p_1}) / (Φ⁻¹(p_Q) − Φ⁻¹(p_1)). Quantiles at other levels
    are linear interpolations between the given ones (no extrapolation). There is no CDF or
    density: calibration uses the given levels directly, and NLL is not defined.
    """

    kind = "quantiles"
    _row_fields = ("values",)
    _shared_fields = ("levels",)

    def __init__(self, levels: Any, values: Any) -> None:
        f = self._init_arrays({"values": (values, 2), "levels": (levels, 1)}, ("values",))
        xp = self.xp
        lv = f["levels"]
        check_in_open_unit(lv, "levels", xp)
        check_strictly_increasing(lv, "levels", xp)
        vals = f["values"]
        if vals.shape[1] != lv.shape[0]:
            raise UQValidationError(
                f"values must have one column per level ({lv.shape[0]}), found {vals.shape[1]}",
                argument="values",
            )
        if vals.shape[1] > 1:
            ok = vals[:, 1:] >= vals[:, :-1]
            idx = first_bad(ok)
            if idx is not None:
                i, j = idx
                vn = to_numpy(vals)
                raise UQValidationError(
                    f"values must be non-decreasing along each row; values[{i}, {j + 1}] = "
                    f"{vn[i, j + 1]:.6g} < values[{i}, {j}] = {vn[i, j]:.6g}",
                    argument="values",
                    index=(i, j + 1),
                    value=vn[i, j + 1],
                )
        self.levels = lv
        self.values = vals

    @property
    def capabilities(self) -> frozenset[str]:
        caps = {"quantiles", "interval"}
        lv = to_numpy(self.levels)
        if lv[0] <= 0.5 <= lv[-1]:
            caps.add("point")
        if lv.shape[0] >= 2:
            caps.add("uncertainty")
        return frozenset(caps)

    def point(self) -> Array:
        if "point" not in self.capabilities:
            raise self._missing("a median (levels must span 0.5)")
        return self.ppf([0.5])[:, 0]

    def uncertainty(self) -> Array:
        if "uncertainty" not in self.capabilities:
            raise self._missing("a scalar uncertainty (at least 2 levels are needed)")
        lv = to_numpy(self.levels)
        from scipy.special import ndtri

        width = float(ndtri(lv[-1]) - ndtri(lv[0]))
        return (self.values[:, -1] - self.values[:, 0]) / width

    def outside(self, levels: Any) -> int | None:
        """Index of the first of ``levels`` outside the predicted levels (beyond 1e-12), which
        :meth:`ppf` cannot interpolate (it does not extrapolate), or ``None``."""
        lv = np.asarray(to_numpy(levels), dtype=np.float64)
        known = to_numpy(self.levels)
        tol = 1e-12
        bad = (lv < known[0] - tol) | (lv > known[-1] + tol)
        return int(np.argmax(bad)) if bool(np.any(bad)) else None

    def ppf(self, levels: Any) -> Array:
        xp = self.xp
        lv = to_numpy(self._levels(levels))
        known = to_numpy(self.levels)
        j = self.outside(lv)
        if j is not None:
            raise UQValidationError(
                f"levels must lie within the predicted levels [{known[0]:.6g}, {known[-1]:.6g}]; "
                f"levels[{j}] = {lv[j]:.6g}",
                argument="levels",
                index=j,
                value=lv[j],
            )
        pos = np.interp(lv, known, np.arange(known.shape[0], dtype=np.float64))
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, known.shape[0] - 1)
        frac = pos - lo
        dev = _device(self.values)
        a = xp.take(self.values, xp.asarray(lo, device=dev), axis=1)
        b = xp.take(self.values, xp.asarray(hi, device=dev), axis=1)
        return a + (b - a) * xp.asarray(frac, dtype=self.values.dtype, device=dev)[None, :]


class Interval(RegressionPrediction):
    """A prediction interval per row, e.g. from split conformal prediction or CQR.

    Parameters
    ----------
    lower, upper : array_like, shape (N,)
        Finite bounds with ``lower <= upper`` (a zero-width interval is allowed). The
        interval is closed: y is covered when lower <= y <= upper.
    level : float, optional
        The nominal coverage 1 − α in (0, 1) the intervals were made for, when known. Metrics
        that need a nominal level (``interval_score``, ``cwc``, ``coverage_pvalue``, the target
        of ``coverage``) use it; without it they take their ``level`` option.

    Capability ``interval`` only: no point prediction (the midpoint of a conformalized quantile
    interval is not the model's point prediction), no distribution.

    >>> Interval([0.0, 1.0], [1.0, 3.0], level=0.9)
    Interval(kind='interval', n=2, level=0.9)
    """

    kind = "interval"
    _row_fields = ("lower", "upper")
    _capabilities = frozenset({"interval"})

    def __init__(self, lower: Any, upper: Any, level: float | None = None) -> None:
        f = self._init_arrays({"lower": (lower, 1), "upper": (upper, 1)}, ("lower", "upper"))
        ok = f["upper"] >= f["lower"]
        idx = first_bad(ok)
        if idx is not None:
            (i,) = idx
            lo, hi = to_numpy(f["lower"]), to_numpy(f["upper"])
            raise UQValidationError(
                f"upper must be >= lower in every row; upper[{i}] = {hi[i]:.6g} < "
                f"lower[{i}] = {lo[i]:.6g}",
                argument="upper",
                index=(i,),
                value=hi[i],
            )
        self.lower = f["lower"]
        self.upper = f["upper"]
        self.level = _nominal_level(level)

    def take(self, indices: Any) -> Any:
        out = super().take(indices)
        out.level = self.level
        return out

    def interval(self, level: float | None = None) -> tuple[Array, Array]:
        if level is not None and self.level is not None and abs(float(level) - self.level) > 1e-12:
            raise UQValidationError(
                f"the intervals were made at level {self.level:g}; level {float(level):g} was "
                "asked for (an interval prediction has no other level)",
                argument="level",
                value=level,
            )
        return self.lower, self.upper

    def width(self) -> Array:
        """upper − lower per row."""
        return self.upper - self.lower

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, n={self.n}, level={self.level!r})"


def _nominal_level(level: Any) -> float | None:
    if level is None:
        return None
    if isinstance(level, bool):
        raise UQValidationError(
            f"level must be a number in (0, 1) or None; found {level!r}", argument="level"
        )
    try:
        c = float(level)
    except (TypeError, ValueError):
        raise UQValidationError(
            f"level must be a number in (0, 1) or None; found {level!r}", argument="level"
        ) from None
    if not 0.0 < c < 1.0:
        raise UQValidationError(
            f"level must be a nominal coverage in (0, 1); found {level!r}",
            argument="level",
            value=level,
        )
    return c


class PointUncertainty(RegressionPrediction):
    """A point prediction with a scalar uncertainty score and no distribution.

    Parameters
    ----------
    prediction : array_like, shape (N,)
    uncertainty : array_like, shape (N,)
        Finite, ``>= 0``; higher means more uncertain (e.g. a predicted std or a predicted loss).
        Ranking metrics (AUSE, Spearman, n-MeRCI) apply; calibration and scoring rules do not.
    """

    kind = "point_uncertainty"
    _row_fields = ("prediction", "uncertainty_")
    _capabilities = frozenset({"point", "uncertainty"})

    def __init__(self, prediction: Any, uncertainty: Any) -> None:
        f = self._init_arrays(
            {"prediction": (prediction, 1), "uncertainty": (uncertainty, 1)},
            ("prediction", "uncertainty"),
        )
        check_nonnegative(f["uncertainty"], "uncertainty", self.xp)
        self.prediction = f["prediction"]
        self.uncertainty_ = f["uncertainty"]

    def point(self) -> Array:
        return self.prediction

    def uncertainty(self) -> Array:
        return self.uncertainty_


#: Public kind name -> class, for payload decoding and the catalogue.
KINDS: dict[str, type[RegressionPrediction]] = {
    cls.kind: cls
    for cls in (
        Gaussian,
        Laplace,
        StudentT,
        Mixture,
        Samples,
        Quantiles,
        PointUncertainty,
        Interval,
    )
}
