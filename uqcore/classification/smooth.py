"""Calibration of probability forecasts without bins: the smooth ECE and Spiegelhalter's Z test.

Both judge a probability forecast f_i ∈ [0, 1] of a binary outcome o_i ∈ {0, 1}, chosen by
the option ``target``:

``"top_label"`` (default)  f_i = max_c p̄_ic (the confidence), o_i = 1{argmax_c p̄_ic = y_i}
                           (the top label is right), as the binned ``ece``.
``"binary"``               C = 2 only: f_i = p̄_i1, o_i = 1{y_i = 1}; undefined for C ≠ 2.

Weights are frequency weights: a row of integer weight k counts as k copies of the row.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np

from uqcore.batch import ClassificationBatch
from uqcore.options import Range
from uqcore.registry import register, undefined

__all__ = ["smooth_ece", "smooth_ece_at", "spiegelhalter_z"]

_TASK = "classification"
Target = Literal["top_label", "binary"]
#: "auto" (the fixed point) or σ in [0.001, 1] (the floor of relplot's search: finer grids
#: than 10^4 points add nothing at the resolution of the search).
SmoothBandwidth = Literal["auto"] | Annotated[float, Range(0.001, 1)]

_BN = (
    "Błasiok & Nakkiran 2023, Smooth ECE: principled reliability diagrams via kernel "
    "smoothing (ICLR 2024), and its package relplot"
)
_SP = "Spiegelhalter 1986, Probabilistic prediction in patient management and clinical trials"

#: The bandwidth search of relplot's ``smECE``: bisection of (0, 1], 10 halvings, floor 0.001.
_SEARCH_STEPS = 10
_SEARCH_FLOOR = 0.001
#: Gaussian kernels of at most this many grid points are convolved directly (exactly as
#: relplot does); larger ones (σ < 0.01) by FFT, the same sums up to rounding.
_DIRECT_MAX = 1001


def _forecast(batch: ClassificationBatch, target: str, name: str) -> tuple[Any, Any] | None:
    """(f, o) of ``target`` (module doc), or ``None`` with the warning for C ≠ 2."""
    if target == "binary":
        c = batch.prediction.n_classes
        if c != 2:
            undefined(name, f"target='binary' needs C = 2 classes, found C = {c}")
            return None
        return batch.probs[:, 1], batch.y == 1
    # o as booleans: the arithmetic below casts them, no float copy of N is made for them
    return batch.confidence, batch.predicted == batch.y


def _unit_weights(batch: ClassificationBatch) -> np.ndarray[Any, Any]:
    w = batch.weights_or_ones()
    return np.asarray(w, dtype=np.float64) / float(np.max(w))


def _residuals(
    batch: ClassificationBatch, f: Any, o: Any, key: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The forecasts f (contiguous) and the residuals v = f − o, made once per batch."""

    def make() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        fc = np.ascontiguousarray(f, dtype=np.float64)
        return fc, fc - o

    return batch.shared(f"smooth:fv:{key}", make)


def _grid_sums(
    batch: ClassificationBatch, f: Any, v: Any, m: int, key: str
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Σ w_i v_i and Σ w_i on the grid k/(m − 1), each row split linearly between its two
    neighbouring grid points (relplot's ``smooth_round_to_grid``)."""

    def split() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        # the cell b of each row and its fraction f(m − 1) − b towards the upper grid point
        frac = f * (m - 1)
        b = frac.astype(np.int64)
        np.clip(b, 0, m - 2, out=b)
        frac -= b
        return b, frac

    def sums() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        b, frac = batch.shared(f"smooth:{key}:{m}", split)
        # every sum is over the rows of one cell b (one bincount each, no shifted copy of b):
        # the lower point takes Σ w·v − Σ w·frac·v, the upper one Σ w·frac·v
        w_b: np.ndarray[Any, Any]
        if batch.weights is None:
            wv, wfrac, w_b = v, frac, np.bincount(b, None, m - 1).astype(np.float64)
        else:
            w = batch.weighted("smooth:unit_weights", lambda: _unit_weights(batch))
            wv, wfrac, w_b = w * v, w * frac, np.bincount(b, w, m - 1)
        v_b, hv_b = np.bincount(b, wv, m - 1), np.bincount(b, frac * wv, m - 1)
        h_b = np.bincount(b, wfrac, m - 1)
        num, den = np.zeros(m), np.zeros(m)
        num[:-1] = v_b - hv_b
        num[1:] += hv_b
        den[:-1] = w_b - h_b
        den[1:] += h_b
        return num, den

    # one grid size serves every bandwidth σ >= 0.01 of the search: its sums are made once
    return batch.weighted(f"smooth:sums:{key}:{m}", sums)


def _reflected(values: np.ndarray[Any, Any], sigma: float) -> np.ndarray[Any, Any]:
    """Convolution of grid values with φ_σ, reflected at 0 and 1 (relplot's
    ``ReflectedGaussianKernel.convolve``)."""
    m = values.shape[0]
    t = np.linspace(0.0, 1.0, m)
    ker = np.exp(-(t - 0.5) * (t - 0.5) / (2.0 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma)
    ext = np.concatenate([values[::-1][:-1], values, values[::-1][1:]])
    # relplot keeps the outputs m//2 .. m//2 + m − 1 of the "valid" convolution of the 3m − 2
    # extended values: only the 2m − 1 of them that these outputs read are convolved (the same
    # sums, half the work)
    ext = ext[m // 2 : m // 2 + 2 * m - 1]
    out: np.ndarray[Any, Any]
    if m <= _DIRECT_MAX:
        out = np.convolve(ext, ker, "valid")
    else:
        from scipy.signal import fftconvolve

        out = fftconvolve(ext, ker, "valid")
    return out


def _interpolate(t: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Linear interpolation of k/(m − 1) ↦ y_k at t (relplot's ``interpolate``)."""
    m = y.shape[0]
    idx = np.clip((t * (m - 1)).astype(np.int64), 0, m - 2)
    r = (t - idx / (m - 1)) * (m - 1)
    out: np.ndarray[Any, Any] = y[idx] * (1.0 - r) + y[idx + 1] * r
    return out


def smooth_ece_at(batch: ClassificationBatch, f: Any, o: Any, sigma: float, key: str) -> float:
    """smECE_σ: ∫ |r̂_σ(t)| δ̂_σ(t) dt / ∫ δ̂_σ(t) dt on relplot's grids (see ``smooth_ece``)."""
    m = max(2000, round(20.0 / sigma)) // 2 + 1
    fc, v = _residuals(batch, f, o, key)
    num, den = _grid_sums(batch, fc, v, m, key)
    mesh = np.linspace(0.0, 1.0, max(round(10.0 / sigma), 200))
    r = _interpolate(mesh, _reflected(num, sigma))
    d = _interpolate(mesh, _reflected(den, sigma))
    return float(np.sum(np.abs(r)) / np.sum(d))


def _fixed_point(fn: Any) -> float:
    """relplot's ``search_param``: σ = 1 if σ ≥ smECE_σ there, else the upper end of the
    bracket of the fixed point σ = smECE_σ after 10 halvings of (0, 1]."""

    def below(a: float) -> bool:
        return a < _SEARCH_FLOOR or a < fn(a)

    if below(1.0):
        return 1.0
    start, end = 1.0, 0.0
    for _ in range(_SEARCH_STEPS):
        mid = (start + end) / 2.0
        if below(mid):
            end = mid
        else:
            start = mid
    return start


@register(
    "smooth_ece",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="lower",
    bounds=(0.0, 1.0),
    best=0.0,
    reference=_BN,
    structured=True,
    biased=True,
)
def smooth_ece(
    batch: ClassificationBatch,
    *,
    target: Target = "top_label",
    bandwidth: SmoothBandwidth = "auto",
) -> dict[str, Any] | None:
    """Smooth ECE: the kernel-smoothed calibration error with its automatic bandwidth.

    With the residuals r_i = f_i − o_i (module doc for ``target``) and the Gaussian kernel
    K_σ reflected at 0 and 1 (Błasiok & Nakkiran 2023, §4):
    smECE_σ = ∫₀¹ |Σ_i w_i K_σ(t, f_i) r_i| dt / ∫₀¹ Σ_i w_i K_σ(t, f_i) dt, the mean absolute
    kernel-smoothed residual under the smoothed density of the forecasts; ``bandwidth="auto"``
    (default) takes the paper's σ*, the fixed point σ* = smECE_σ* (it exists and is unique:
    smECE_σ decreases in σ), a number takes that σ. Returns ``{"value": smECE_σ, "bandwidth":
    σ, "target"}``. Best 0 (calibrated), at most 1.

    Computed as relplot 0.1's ``smECE`` (the authors' package): each f_i split linearly
    between the two nearest points of a grid of M = ⌊max(2000, round(20/σ))/2⌋ + 1 points,
    the grid convolved with φ_σ after one reflection at each end, interpolated on a mesh of
    max(round(10/σ), 200) points and summed there; σ* by relplot's search, the upper end of
    the bracket after 10 bisections of (0, 1] (σ within 2⁻¹⁰ above the exact fixed point; σ
    no smaller than 0.001). One difference: relplot adds 10⁻⁴ to the smoothed density at each
    mesh point in the denominator (its value is lower by a relative ≈ 10⁻⁴/N), which is left
    out here so that the value is exactly invariant to the scale of the weights. Sample
    weights are frequency weights on the grid (relplot has none). Cost: the top-label
    confidences read N×C once (an argmax, the confidence gathered there); then O(N) per grid
    size (each row's cell, then four ``bincount`` passes over the cells: Σ w, Σ w·frac,
    Σ w·v, Σ w·frac·v; every σ ≥ 0.01 shares one grid, so the search makes at most five
    grids), and O(M) per bandwidth tried. Biased upwards at small N, as every estimator of an
    absolute calibration error.

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs([[0.5, 0.5]] * 4)  # a coin forecast at ½, right half the time
    >>> round(smooth_ece(p, np.array([0, 1, 0, 1]), target="binary")["value"], 10)
    0.0
    """
    pair = _forecast(batch, target, "smooth_ece")
    if pair is None:
        return None
    f, o = pair
    key = target

    seen: dict[float, float] = {}

    def at(sigma: float) -> float:
        # the search ends on a bandwidth it has evaluated already
        if sigma not in seen:
            seen[sigma] = smooth_ece_at(batch, f, o, sigma, key)
        return seen[sigma]

    sigma = _fixed_point(at) if bandwidth == "auto" else float(bandwidth)
    return {"value": at(sigma), "bandwidth": sigma, "target": target}


@register(
    "spiegelhalter_z",
    task=_TASK,
    family="calibration",
    needs={"probs"},
    direction="target",
    best=0.0,
    reference=_SP + " (Statistics in Medicine 5, §3); Rufibach 2010",
    structured=True,
    exempt={
        "scale_weights": "weights are frequency weights: z grows as the square root of the "
        "total weight (a test statistic counts rows)"
    },
)
def spiegelhalter_z(
    batch: ClassificationBatch, *, target: Target = "top_label"
) -> dict[str, Any] | None:
    """Spiegelhalter's Z test of calibration for the Brier score of probability forecasts.

    Z = Σ_i w_i (o_i − f_i)(1 − 2f_i) / √(Σ_i w_i (1 − 2f_i)² f_i (1 − f_i)) (Spiegelhalter
    1986): the Brier score's deviation from its expectation under calibration, standardised;
    approximately N(0, 1) when the forecasts are calibrated. Returns ``{"value": Z,
    "p_value": 2Φ(−|Z|) (two-sided), "target"}`` (``target``: module doc). Weights are
    frequency weights (a row of weight k is k rows: both sums count it k times), so Z scales
    with the square root of the total weight. The best value is 0 (direction "target"; the
    p-value says how surprising |Z| is). Undefined when the variance is 0 (every forecast is
    0, ½ or 1).

    >>> import numpy as np; from uqcore import predictions as P
    >>> p = P.Probs([[0.2, 0.8], [0.9, 0.1]])  # (0.2·(−0.6) + (−0.1)·0.8) / √(0.0576 + 0.0576)
    >>> round(spiegelhalter_z(p, np.array([1, 0]), target="binary")["value"], 10)
    -0.589255651
    """
    pair = _forecast(batch, target, "spiegelhalter_z")
    if pair is None:
        return None
    f, o = pair
    g = 1.0 - 2.0 * f
    if batch.weights is None:  # no array of ones to multiply by
        wg, scale = g, 1.0
    else:
        wg, scale = _unit_weights(batch) * g, float(np.max(batch.weights))
    var = float(np.sum(wg * g * f * (1.0 - f)))
    if not var > 0.0:
        undefined("spiegelhalter_z", "every forecast is 0, ½ or 1 (the statistic has variance 0)")
        return None
    z = float(np.sum(wg * (o - f))) / math.sqrt(var) * math.sqrt(scale)
    return {"value": z, "p_value": math.erfc(abs(z) / math.sqrt(2.0)), "target": target}
