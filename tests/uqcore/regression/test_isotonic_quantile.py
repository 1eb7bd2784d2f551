"""The exact isotonic α-quantile fit of CORP against dynamic programming over the candidate
values, written here: the least pinball loss and the smallest minimiser, group by group."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import _compiled
from uqcore._isotonic import corp, pinball


@pytest.fixture(params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs on both fits: the compiled slope-trick kernel (numba is a dependency, so
    it must load) and the numpy partitioning algorithm, the fallback without numba."""
    if request.param == "compiled":
        assert _compiled.kernels() is not None
    else:
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
    return str(request.param)


def _smallest_isotonic_quantile(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, a: float
) -> tuple[np.ndarray, float]:
    """(the pointwise smallest minimiser at each distinct x, the least total loss) over the
    non-decreasing functions of x with values among the y: forward and backward dynamic
    programmes; the minimisers form a lattice, so group g's smallest optimal value is the
    least v with (best prefix ending in v) + (best suffix starting in v) − its own cost
    equal to the optimum."""
    keep = w > 0
    x, y, w = x[keep], y[keep], w[keep]
    ux, g = np.unique(x, return_inverse=True)
    vals = np.unique(y)
    m = ux.size
    cost = np.array(
        [[np.sum(w[g == i] * pinball(y[g == i], v, a)) for v in vals] for i in range(m)]
    )
    fwd, bwd = np.empty_like(cost), np.empty_like(cost)
    fwd[0] = cost[0]
    for i in range(1, m):
        fwd[i] = cost[i] + np.minimum.accumulate(fwd[i - 1])
    bwd[-1] = cost[-1]
    for i in range(m - 2, -1, -1):
        bwd[i] = cost[i] + np.minimum.accumulate(bwd[i + 1][::-1])[::-1]
    best = float(fwd[-1].min())
    through = fwd + bwd - cost
    tol = 1e-9 * max(best, 1.0)  # exact for binary fractions; real weights round
    fit = np.array([vals[np.flatnonzero(through[i] <= best + tol)[0]] for i in range(m)])
    return fit, best


def _case(seed: int, case: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = 1 if case == "one_row" else int(rng.integers(20, 160))
    x = rng.normal(size=n)
    y = np.round((0.5 * x + rng.normal(size=n)) * 64) / 64  # binary fractions: exact sums
    if case in ("ties", "weights"):  # ties in x and in y
        x, y = np.round(x, 1), np.round(y, 0)
    if case == "constant_x":
        x = np.full(n, 2.0)
    if case == "constant_y":
        y = np.full(n, -1.0)
    # integer weights: with α a short binary fraction every sum is exact, so the equal-loss
    # ties (and the smallest-minimiser rule) are tested exactly
    w = rng.integers(1, 4, size=n).astype(float) if case == "weights" else np.ones(n)
    if case == "weights":
        w[::7] = 0.0
    return x, y, w


@pytest.mark.parametrize(
    "case", ["plain", "ties", "weights", "one_row", "constant_x", "constant_y"]
)
@pytest.mark.parametrize("a", [0.25, 0.5, 0.875])
@pytest.mark.parametrize("seed", range(3))
def test_fit_is_the_smallest_minimiser(case: str, a: float, seed: int, path: str) -> None:
    x, y, w = _case(seed, case)
    fit, best = _smallest_isotonic_quantile(x, y, w, a)
    d = corp(x, y, None if case != "weights" else w, functional="quantile", level=a)
    np.testing.assert_array_equal(d.fitted, fit)
    total = w.sum()
    assert d.score - d.mcb == pytest.approx(best / total, rel=1e-12, abs=1e-15)
    assert abs(d.mcb - d.dsc + d.unc - d.score) <= 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_least_loss_at_any_level_and_real_weights(seed: int, path: str) -> None:
    """Levels and weights that are not short binary fractions: the loss is the least one."""
    rng = np.random.default_rng(50 + seed)
    n = 120
    x = np.round(rng.normal(size=n), 1)
    y = np.round(x + rng.standard_t(3, size=n), 1)
    w = rng.uniform(0.1, 3.0, n)
    a = float(rng.uniform(0.05, 0.95))
    _, best = _smallest_isotonic_quantile(x, y, w, a)
    d = corp(x, y, w, functional="quantile", level=a)
    assert d.score - d.mcb == pytest.approx(best / w.sum(), rel=1e-12)
    assert np.all(np.diff(d.fitted) >= 0)


@pytest.mark.parametrize("seed", range(6))
def test_climatological_quantile_is_the_inverted_cdf(seed: int, path: str) -> None:
    """UNC's reference r: the smallest y_j with Σ_{y_i ≤ y_j} w_i ≥ α Σ w_i, written here by
    sorting; unit weights (a selection) and integer weights (exact sums), ties in y."""
    rng = np.random.default_rng(90 + seed)
    n = int(rng.integers(1, 300))
    y = np.round(rng.normal(size=n), 1)
    x = rng.normal(size=n)
    w = rng.integers(1, 5, size=n).astype(float)
    for a in (0.125, 0.25, 0.5, 0.75, 0.999):
        for weights in (None, w):
            ww = np.ones(n) if weights is None else weights
            o = np.argsort(y, kind="stable")
            cw = np.cumsum(ww[o])
            want = y[o][np.flatnonzero(cw >= a * cw[-1])[0]]
            d = corp(x, y, weights, functional="quantile", level=a)
            assert d.reference == want
            assert d.unc == pytest.approx(
                np.sum(ww * pinball(y, np.full(n, want), a)) / ww.sum(), rel=1e-12, abs=1e-15
            )


def test_compiled_and_numpy_fits_agree_to_the_loss_at_scale() -> None:
    """20,000 rows with few distinct values: the two exact algorithms reach the same least loss
    (and, with exact sums at a dyadic level, the same smallest minimiser)."""
    rng = np.random.default_rng(7)
    n = 20_000
    x = np.round(rng.normal(size=n), 2)
    y = np.round(x + rng.standard_t(4, size=n), 1)
    w = rng.integers(1, 4, size=n).astype(float)
    assert _compiled.kernels() is not None
    got = corp(x, y, w, functional="quantile", level=0.375)
    held = _compiled._KERNELS[:]
    try:
        _compiled._KERNELS[:] = [None]
        ref = corp(x, y, w, functional="quantile", level=0.375)
    finally:
        _compiled._KERNELS[:] = held
    np.testing.assert_array_equal(got.fitted, ref.fitted)
    for part in ("score", "mcb", "dsc", "unc"):  # sums in another order: equal to rounding
        assert getattr(got, part) == pytest.approx(getattr(ref, part), rel=1e-12)
