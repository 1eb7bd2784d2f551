"""The weighted interval score's numpy evaluation (the compiled row pass, and the blocked numpy
products without numba) against the formula of Bracher et al. (2021, eq. 2) summed exactly
(``math.fsum``) row by row, and against the array-API path."""

from __future__ import annotations

import math

import array_api_strict
import numpy as np
import pytest

import uqcore
from uqcore import _compiled
from uqcore import predictions as P
from uqcore.regression import decomposition

PARTS = ("wis", "wis_dispersion", "wis_overprediction", "wis_underprediction")


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test on both numpy paths: the compiled kernel (numba is a dependency, so it must
    load) and the blocked numpy products, the fallback without numba."""
    if request.param == "compiled":
        assert _compiled.kernels() is not None
    else:
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
    return str(request.param)


def _exact(
    y: np.ndarray, q: np.ndarray, levels: np.ndarray, alphas: np.ndarray, w: np.ndarray | None
) -> dict[str, float]:
    """Weighted means of the parts, each row's sum and the mean taken exactly."""
    col = {round(float(v), 12): i for i, v in enumerate(levels)}
    m = q[:, col[0.5]]
    lo = np.stack([q[:, col[round(a / 2, 12)]] for a in alphas], axis=1)
    up = np.stack([q[:, col[round(1 - a / 2, 12)]] for a in alphas], axis=1)
    k = alphas.size
    ww = np.ones_like(y) if w is None else w
    rows: dict[str, list[float]] = {p: [] for p in PARTS}
    for i in range(y.size):
        d = math.fsum((a / 2) * (u - lw) for a, u, lw in zip(alphas, up[i], lo[i], strict=True))
        o = math.fsum([*(max(lw - y[i], 0.0) for lw in lo[i]), 0.5 * max(m[i] - y[i], 0.0)])
        u = math.fsum([*(max(y[i] - v, 0.0) for v in up[i]), 0.5 * max(y[i] - m[i], 0.0)])
        for name, v in zip(PARTS, (d + o + u, d, o, u), strict=True):
            rows[name].append(v / (k + 0.5))
    total = math.fsum(ww)
    return {p: math.fsum(wi * v for wi, v in zip(ww, rows[p], strict=True)) / total for p in PARTS}


def _exact_location_scale(
    y: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    levels: np.ndarray,
    alphas: np.ndarray,
    w: np.ndarray | None,
) -> dict[str, float]:
    """:func:`_exact` for the Gaussian N(μ_i, σ_i²): σ_i times the parts of N(0, 1) at
    t_i = (y_i − μ_i)/σ_i, whose quantiles are the standard normal's (scipy's ndtri)."""
    from scipy.special import ndtri

    t = (y - mu) / sd
    z = np.broadcast_to(ndtri(levels), (y.size, levels.size))
    ww = sd if w is None else w * sd
    scale = math.fsum(ww) / (y.size if w is None else math.fsum(w))
    return {k: v * scale for k, v in _exact(t, z, levels, alphas, ww).items()}


def _levels(alphas: np.ndarray) -> np.ndarray:
    return np.sort(np.concatenate([alphas / 2, [0.5], 1 - alphas / 2]))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("offset", [0.0, 1e8])
def test_blocks_equal_the_exact_formula(weighted: bool, offset: float) -> None:
    """More rows than one block; a location of 10^8 with widths of order 1, where summing
    α/2·u and α/2·l apart would lose eight digits of the dispersion."""
    rng = np.random.default_rng(7)
    n = decomposition._WIS_BLOCK // 7 * 2 + 37  # 7 columns: three blocks
    alphas = np.array([0.1, 0.5, 0.8])
    levels = _levels(alphas)
    mu = rng.normal(size=n) + offset
    sd = rng.uniform(0.5, 2.0, n)
    y = mu + sd * rng.normal(size=n)
    y[:50] = mu[:50]  # targets on the median
    w = rng.choice([0.0, 0.5, 1.0, 4.0], n) if weighted else None
    gauss = P.Gaussian(mu, sd)
    q = np.asarray(gauss.ppf(levels))
    q[50:60, :] = y[50:60, None]  # targets on every quantile
    quant = P.Quantiles(levels, q)
    ref = _exact(y, q, levels, alphas, w)
    got = uqcore.evaluate(quant, y, metrics=list(PARTS), sample_weight=w)
    for name in PARTS:
        assert got[name]["value"] == pytest.approx(ref[name], rel=1e-12, abs=0), name
    # the Gaussian at coverages given as an option: the WIS of the distribution itself, whose
    # quantiles are μ_i + σ_i z_p exactly, a row's parts σ_i times those of N(0, 1) at
    # t_i = (y_i − μ_i)/σ_i (at 10^8, the quantiles rounded to float64 would be off by 10^-8)
    params = {p: {"levels": list(1 - alphas)} for p in PARTS}
    ref = _exact_location_scale(y, mu, sd, levels, alphas, w)
    got = uqcore.evaluate(gauss, y, metrics=list(PARTS), sample_weight=w, params=params)
    for name in PARTS:
        assert got[name]["value"] == pytest.approx(ref[name], rel=1e-12, abs=0), name
    if offset == 0.0:  # where the rounded quantiles are as good: the same as through them
        ref = _exact(y, np.asarray(gauss.ppf(levels)), levels, alphas, w)
        for name in PARTS:
            assert got[name]["value"] == pytest.approx(ref[name], rel=1e-12, abs=0), name


def test_quantiles_with_unused_columns_and_one_row() -> None:
    """Levels 0.05..0.95 in steps of 0.05 with intervals asked at two coverages only: the other
    columns are read with coefficient 0."""
    rng = np.random.default_rng(8)
    levels = np.round(np.arange(1, 20) * 0.05, 10)
    alphas = np.array([0.1, 0.6])
    params = {p: {"levels": list(1 - alphas)} for p in PARTS}
    for n in (1, 3000):
        q = np.sort(rng.normal(size=(n, levels.size)), axis=1) * 3.0
        y = rng.normal(size=n) * 2.0
        ref = _exact(y, q, levels, alphas, None)
        got = uqcore.evaluate(P.Quantiles(levels, q), y, metrics=list(PARTS), params=params)
        for name in PARTS:
            assert got[name]["value"] == pytest.approx(ref[name], rel=1e-12, abs=1e-300), name


def test_numpy_blocks_equal_the_array_api_path_row_by_row() -> None:
    rng = np.random.default_rng(9)
    n = 1500
    alphas = 1 - np.asarray(decomposition.HUB_COVERAGES)
    levels = _levels(alphas)
    q = np.sort(rng.normal(size=(n, levels.size)), axis=1)
    y = rng.normal(size=n)
    from uqcore.batch import Batch

    xp = array_api_strict
    got = decomposition._wis_parts(Batch(P.Quantiles(levels, q), y, None), None)
    ref = decomposition._wis_parts(
        Batch(P.Quantiles(xp.asarray(levels), xp.asarray(q)), xp.asarray(y), None), None
    )
    assert not isinstance(got, str) and not isinstance(ref, str)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("kind", ["laplace", "student_t", "student_t, df per row"])
@pytest.mark.parametrize("weighted", [False, True])
def test_location_scale_families_equal_the_formula_on_their_quantiles(
    kind: str, weighted: bool
) -> None:
    """Laplace and Student-t (one df: the tabulated parts; df per row: the quantiles) against
    the formula on the quantiles their ppf gives, targets on the median and on the quantiles
    (the tables' breakpoints) included."""
    rng = np.random.default_rng(10)
    n = 700
    loc, scale = rng.normal(size=n) * 3.0, rng.uniform(0.2, 3.0, n)
    if kind == "laplace":
        pred = P.Laplace(loc, scale)
    else:
        df = np.full(n, 3.5) if kind == "student_t" else rng.uniform(2.5, 30.0, n)
        pred = P.StudentT(loc, scale, df)
    alphas = np.sort(1.0 - np.asarray(decomposition.HUB_COVERAGES))
    levels = _levels(alphas)
    q = np.asarray(pred.ppf(levels))
    y = loc + scale * rng.standard_t(3, size=n)
    y[:20] = loc[:20]
    y[20:40] = q[np.arange(20, 40), np.arange(20) % levels.size]
    w = rng.choice([0.0, 0.5, 1.0, 3.0], n) if weighted else None
    ref = _exact(y, q, levels, alphas, w)
    got = uqcore.evaluate(pred, y, metrics=list(PARTS), sample_weight=w)
    for name in PARTS:
        assert got[name]["value"] == pytest.approx(ref[name], rel=1e-12, abs=0), name
    # the bootstrap's per-row terms are the same parts
    from uqcore.batch import Batch

    terms = decomposition._wis_parts(Batch(pred, y, None), None)
    assert not isinstance(terms, str)
    mean_rows = [float(np.mean(t)) for t in terms]
    unweighted = _exact(y, q, levels, alphas, None)
    for part, value in zip(PARTS[1:], mean_rows, strict=True):
        assert value == pytest.approx(unweighted[part], rel=1e-12), part
