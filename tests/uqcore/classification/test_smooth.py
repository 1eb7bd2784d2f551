"""Smooth ECE against relplot (the authors' package) and the paper's integral; Spiegelhalter's Z
against its formula."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import relplot
from relplot.kernels import ReflectedGaussianKernel
from scipy.stats import norm

import uqcore
from uqcore import predictions as P
from uqcore.registry import UndefinedMetricWarning


def _binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    f = rng.uniform(0.0, 1.0, size=n)
    o = (rng.uniform(size=n) < f**1.4).astype(float)  # miscalibrated
    return f, o


def _smece(f: np.ndarray, o: np.ndarray, w: Any = None, **options: Any) -> Any:
    pred = P.Probs(np.c_[1.0 - f, f])
    return uqcore.metric(
        "smooth_ece", pred, o.astype(int), sample_weight=w, target="binary", **options
    )


@pytest.mark.parametrize(("n", "seed"), [(40, 1), (500, 2), (5000, 3)])
def test_smooth_ece_equals_relplot(n: int, seed: int) -> None:
    f, o = _binary(n, seed)
    want, width = relplot.smECE(f, o, return_width=True)
    got = _smece(f, o)
    assert got["bandwidth"] == width
    # relplot adds 1e-4 to the density at each mesh point (left out here): relative ~1e-4/N
    assert got["value"] >= want
    assert got["value"] / want - 1.0 <= 1.5e-4 / n


@pytest.mark.parametrize("sigma", [0.3, 0.05, 0.004])
def test_smooth_ece_at_a_bandwidth_equals_relplots_kernel_sums(sigma: float) -> None:
    f, o = _binary(700, 4)
    kernel = ReflectedGaussianKernel(sigma)
    mesh = np.linspace(0.0, 1.0, max(round(10 / sigma), 200))
    num = kernel.apply(f, f - o, mesh)
    den = kernel.apply(f, np.ones_like(f), mesh)
    want = float(np.sum(np.abs(num)) / np.sum(den))
    got = _smece(f, o, bandwidth=sigma)["value"]
    assert got == pytest.approx(want, rel=1e-11 if sigma >= 0.01 else 1e-8)


def _relplot_at(f: np.ndarray, o: np.ndarray, w: np.ndarray, sigma: float) -> float:
    """smECE_σ from relplot's kernel sums (linear in the values: weights enter as values)."""
    kernel = ReflectedGaussianKernel(sigma)
    mesh = np.linspace(0.0, 1.0, max(round(10 / sigma), 200))
    num = kernel.apply(f, w * (f - o), mesh)
    den = kernel.apply(f, w, mesh)
    return float(np.sum(np.abs(num)) / np.sum(den))


@pytest.mark.parametrize("sigma", [0.5, 0.05, 0.01])
@pytest.mark.parametrize(
    "case", ["weights", "ties", "one_row", "constant", "zero_weights", "ends", "huge_weights"]
)
def test_smooth_ece_grid_sums_equal_relplots_with_weights_ties_and_edges(
    case: str, sigma: float
) -> None:
    """The grid sums (one bincount per sum over each row's cell) against relplot's own
    ``smooth_round_to_grid`` and convolution, to 1e-12, weights given as values there."""
    rng = np.random.default_rng(13)
    n = 1 if case == "one_row" else 300
    f = rng.uniform(size=n)
    if case == "ties":
        f = np.round(f, 1)  # many rows on one value, several of them on grid points
    if case == "constant":
        f = np.full(n, 0.3)
    if case == "ends":
        f = rng.choice([0.0, 1.0, 0.5, 0.999999], size=n)
    o = (rng.uniform(size=n) < f).astype(float)
    w = rng.uniform(0.0, 3.0, size=n)
    if case == "zero_weights":
        w[rng.uniform(size=n) < 0.5] = 0.0
        w[0] = 1.0
    if case == "huge_weights":
        w = w * 1e300
    got = _smece(f, o, w, bandwidth=sigma)["value"]
    want = _relplot_at(f, o, w / w.max(), sigma)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_smooth_ece_top_label_reads_the_first_of_tied_maxima() -> None:
    """Top-label confidence and correctness with tied maxima (the first is the prediction),
    against relplot's conversion (a separate max and argmax)."""
    rng = np.random.default_rng(14)
    p = np.tile([[0.4, 0.4, 0.2], [0.1, 0.45, 0.45], [0.2, 0.3, 0.5]], (100, 1))
    y = rng.integers(0, 3, size=p.shape[0])
    conf, correct = relplot.multiclass_logits_to_confidences(p, y, probs=True)
    for sigma in (0.2, 0.02):
        got = uqcore.metric("smooth_ece", P.Probs(p), y, bandwidth=sigma)["value"]
        assert got == pytest.approx(_relplot_at(conf, correct, np.ones(300), sigma), rel=1e-12)
    want = _z(conf, correct, np.ones(300))
    assert uqcore.metric("spiegelhalter_z", P.Probs(p), y)["value"] == pytest.approx(
        want, rel=1e-12
    )


def test_smooth_ece_approximates_the_papers_integral() -> None:
    """smECE_σ = ∫|Σ K(t, f_i) r_i| dt / ∫ Σ K(t, f_i) dt with the reflected kernel, written
    directly (every reflection of the Gaussian, a fine midpoint rule)."""
    f, o = _binary(300, 5)
    sigma = 0.08
    t = (np.arange(20000) + 0.5) / 20000

    def kernel(tt: np.ndarray, x: np.ndarray) -> np.ndarray:
        k = np.zeros((tt.shape[0], x.shape[0]))
        for shift in (-2.0, 0.0, 2.0):
            k += norm.pdf(tt[:, None] - (x[None, :] + shift), scale=sigma)
            k += norm.pdf(tt[:, None] - (shift - x[None, :]), scale=sigma)
        return k

    k = kernel(t, f)
    want = float(np.sum(np.abs(k @ (f - o))) / np.sum(k))
    got = _smece(f, o, bandwidth=sigma)["value"]
    assert got == pytest.approx(want, rel=2e-3)


def test_smooth_ece_top_label_equals_relplot_on_confidences() -> None:
    rng = np.random.default_rng(6)
    p = rng.dirichlet(np.full(4, 0.7), size=800)
    y = np.array([rng.choice(4, p=row) for row in p])
    conf, correct = relplot.multiclass_logits_to_confidences(p, y, probs=True)
    want, width = relplot.smECE(conf, correct, return_width=True)
    got = uqcore.metric("smooth_ece", P.Probs(p), y)
    assert got["bandwidth"] == width and got["target"] == "top_label"
    assert got["value"] == pytest.approx(want, rel=1.5e-4 / 800)


def test_smooth_ece_integer_weights_equal_repeated_rows_in_relplot() -> None:
    f, o = _binary(200, 7)
    w = np.random.default_rng(8).integers(0, 4, size=200)
    idx = np.repeat(np.arange(200), w)
    want, width = relplot.smECE(f[idx], o[idx], return_width=True)
    got = _smece(f, o, w.astype(float))
    assert got["bandwidth"] == width
    assert got["value"] == pytest.approx(want, rel=1.5e-4 / idx.shape[0])


def test_smooth_ece_of_calibrated_forecasts_is_small_and_of_binary_needs_two_classes() -> None:
    rng = np.random.default_rng(9)
    f = rng.uniform(size=20000)
    o = (rng.uniform(size=20000) < f).astype(float)
    assert _smece(f, o)["value"] < 0.02 < _smece(f, 1.0 - o)["value"]
    with pytest.warns(UndefinedMetricWarning, match="C = 3"):
        v = uqcore.metric("smooth_ece", P.Probs(np.full((3, 3), 1 / 3)), [0, 1, 2], target="binary")
    assert v is None


# -- Spiegelhalter's Z --------------------------------------------------------------------------
def _z(f: np.ndarray, o: np.ndarray, w: np.ndarray) -> float:
    """Spiegelhalter 1986: (Σ (o − f)(1 − 2f)) / √(Σ (1 − 2f)² f (1 − f)), w as counts."""
    num = np.sum(w * (o - f) * (1 - 2 * f))
    return float(num / math.sqrt(np.sum(w * (1 - 2 * f) ** 2 * f * (1 - f))))


@pytest.mark.parametrize("target", ["binary", "top_label"])
def test_spiegelhalter_z_equals_its_formula(target: str) -> None:
    rng = np.random.default_rng(10)
    n = 400
    c = 2 if target == "binary" else 5
    p = rng.dirichlet(np.ones(c), size=n)
    y = np.array([rng.choice(c, p=row) for row in p])
    w = rng.uniform(0.0, 3.0, size=n)
    if target == "binary":
        f, o = p[:, 1], (y == 1).astype(float)
    else:
        f, o = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    got = uqcore.metric("spiegelhalter_z", P.Probs(p), y, sample_weight=w, target=target)
    z = _z(f, o, w)
    assert got["value"] == pytest.approx(z, rel=1e-12)
    assert got["p_value"] == pytest.approx(2.0 * norm.sf(abs(z)), rel=1e-10)


def test_spiegelhalter_z_weights_count_rows() -> None:
    f, o = _binary(100, 11)
    w = np.random.default_rng(12).integers(0, 3, size=100)
    idx = np.repeat(np.arange(100), w)
    pred = P.Probs(np.c_[1 - f, f])
    a = uqcore.metric(
        "spiegelhalter_z", pred, o.astype(int), sample_weight=w * 1.0, target="binary"
    )
    b = uqcore.metric("spiegelhalter_z", pred.take(idx), o[idx].astype(int), target="binary")
    assert a["value"] == pytest.approx(b["value"], rel=1e-12)
    scaled = uqcore.metric(
        "spiegelhalter_z", pred, o.astype(int), sample_weight=w * 4.0, target="binary"
    )
    assert scaled["value"] == pytest.approx(2.0 * a["value"], rel=1e-12)


def test_spiegelhalter_z_is_undefined_without_variance() -> None:
    with pytest.warns(UndefinedMetricWarning, match="variance 0"):
        v = uqcore.metric(
            "spiegelhalter_z", P.Probs([[0.5, 0.5], [1.0, 0.0]]), [0, 1], target="binary"
        )
    assert v is None
