"""The Murphy diagram's binned O(N log K + K) evaluation against the elementary scores of
Ehm et al. (2016, eqs. 9 and 11) summed directly over rows and thresholds, written here."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore import score_curves
from uqcore.score_curves import elementary_scores, murphy_diagram


def _direct(
    x: np.ndarray, y: np.ndarray, w: np.ndarray | None, t: np.ndarray, functional: str, a: float
) -> np.ndarray:
    """Σ_i w_i S_θ(x_i, y_i) / Σ_i w_i from the formulas, one N × K table."""
    ww = np.ones_like(y) if w is None else w
    xs, ys, ts = x[:, None], y[:, None], t[None, :]
    below = (ys < xs).astype(np.float64)
    if functional == "quantile":
        s = (below - a) * ((ts < xs).astype(np.float64) - (ts < ys).astype(np.float64))
    else:
        s = np.abs(below - a) * (
            np.maximum(ys - ts, 0.0) - np.maximum(xs - ts, 0.0) - (ys - xs) * (ts < xs)
        )
    out: np.ndarray = np.sum(ww[:, None] * s, axis=0) / np.sum(ww)
    return out


def _close(got: np.ndarray, ref: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """Equal to 1e-12 of the scale: the largest mean score, or the mean of the rows' largest
    elementary scores (|x − y| for the mean; the direct sum's own rounding is of that size)."""
    scale = max(float(np.max(np.abs(ref))), float(np.mean(np.abs(x - y))), 1e-300)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("functional", ["mean", "quantile"])
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("chunk", [None, 7])
def test_binned_scores_equal_the_direct_sum(
    functional: str, seed: int, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The binned scores equal the direct sum of the formulas; also with the rows taken in
    chunks of 7 (the sums over the thresholds accumulated chunk by chunk, as for large N)."""
    if chunk is not None:
        monkeypatch.setattr(score_curves, "_SCORE_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 50))
    offset = [0.0, 1e6, -3e3, 1e-8][seed % 4]
    # rounded values: ties of x with y, of rows with each other and with the thresholds
    x = np.round(rng.normal(size=n), seed % 3) + offset
    y = np.round(x + rng.normal(size=n), seed % 3)
    if seed % 5 == 0:
        y[: n // 2] = x[: n // 2]
    w = None if seed % 3 == 0 else rng.choice([0.0, 0.5, 1.0, 3.0], n)
    if w is not None and w.sum() == 0:
        w[0] = 2.0
    a = 0.5 if functional == "mean" else float(rng.uniform(0.05, 0.95))
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    if seed % 2:  # the default grid: its ends are data values
        t = np.linspace(lo, hi, int(rng.integers(2, 30)))
    else:  # a user grid: unsorted, repeated, at data values and beyond the data
        t = np.concatenate([rng.choice(np.concatenate([x, y]), 6), rng.uniform(lo - 1, hi + 1, 6)])
        rng.shuffle(t)
        t = np.concatenate([t, t[:3], [lo - 5.0, hi + 5.0]])
    got = elementary_scores(x, y, w, t, functional, a)
    ref = _direct(x, y, w, t, functional, a)
    assert got.shape == t.shape
    _close(got, ref, x, y)
    if functional == "quantile":  # where no row is active the direct sum is exactly 0
        assert np.all(got[ref == 0.0] == 0.0)
    assert np.all(got[(t < lo) | (t >= hi)] == 0.0)


def test_cancellation_stays_at_the_rows_own_scale() -> None:
    """An outlier stretches the grid a million-fold; the scores of the other rows are of
    order one and must still agree to 1e-12 of their own size."""
    rng = np.random.default_rng(3)
    n = 2000
    x = rng.normal(size=n) + 5e3
    y = x + rng.normal(size=n)
    x[0], y[0] = 5e3, 5e3 + 1e6
    w = rng.uniform(0.0, 2.0, n)
    t = np.linspace(x.min() - 1.0, x.max() + 1.0, 201)  # inside the bulk of the rows
    for functional, a in (("mean", 0.5), ("quantile", 0.2)):
        got = elementary_scores(x, y, w, t, functional, a)
        ref = _direct(x, y, w, t, functional, a)
        _close(got, ref, x, y)


@pytest.mark.parametrize("functional", ["mean", "quantile"])
def test_one_row_and_constant_inputs(functional: Literal["mean", "quantile"]) -> None:
    a = 0.5 if functional == "mean" else 0.25
    pred = P.Gaussian([1.0], [1.0])
    x = np.asarray(pred.ppf([a]))[:, 0] if functional == "quantile" else np.array([1.0])
    for yv in (3.0, -2.0, float(x[0])):
        y = np.array([yv])
        d = murphy_diagram(pred, y, functional=functional, level=a, n_points=9)
        ref = _direct(x, y, None, np.asarray(d.theta), functional, a)
        _close(np.asarray(d.score), ref, x, y)
    # all forecasts and targets equal: a grid of one point repeated, every score 0
    d = murphy_diagram(P.Gaussian([2.0] * 4, [1.0] * 4), [2.0] * 4, n_points=3)
    assert d.theta == (2.0, 2.0, 2.0) and d.score == (0.0, 0.0, 0.0)


def test_curve_keeps_the_order_of_the_given_thresholds() -> None:
    rng = np.random.default_rng(5)
    n = 300
    mu = rng.normal(size=n)
    y = mu + rng.normal(size=n)
    w = rng.integers(0, 4, n).astype(np.float64)
    thetas = [0.5, -1.0, 0.5, float(y[7]), float(mu[3]), 2.0, -4.0]
    d = murphy_diagram(P.Gaussian(mu, np.ones(n)), y, sample_weight=w, thetas=thetas)
    assert d.theta == tuple(thetas)
    _close(np.asarray(d.score), _direct(mu, y, w, np.asarray(thetas), "mean", 0.5), mu, y)
    # integer weights are repeated rows
    rep = np.repeat(np.arange(n), w.astype(int))
    again = murphy_diagram(P.Gaussian(mu[rep], np.ones(rep.size)), y[rep], thetas=thetas)
    np.testing.assert_allclose(again.score, d.score, rtol=1e-12, atol=1e-15)


@pytest.mark.skipif(score_curves.kernels() is None, reason="numba is not installed")
@pytest.mark.parametrize("functional", ["mean", "quantile"])
@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("chunk", [None, 7])
def test_compiled_sums_equal_numpys_to_the_bit(
    functional: str, seed: int, chunk: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled pass bins each row as ``searchsorted`` does and sums the rows in order
    as ``bincount`` does: the scores equal those of the numpy passes exactly (ties of rows
    with thresholds, repeated and unsorted thresholds, zero weights, strided inputs)."""
    if chunk is not None:
        monkeypatch.setattr(score_curves, "_SCORE_CHUNK", chunk)
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 400))
    x = np.round(rng.normal(size=2 * n) * 10.0 ** rng.integers(-3, 4), seed % 3)[::2]
    y = np.round(x + rng.normal(size=n), seed % 3)
    if seed % 4 == 0:
        y[: n // 3] = x[: n // 3]
    w = None if seed % 3 == 0 else rng.choice([0.0, 0.5, 1.0, 3.0, 1e-9], n)
    if w is not None and w.sum() == 0:
        w[0] = 2.0
    a = 0.5 if functional == "mean" else float(rng.uniform(0.05, 0.95))
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    t = np.concatenate(
        [np.linspace(lo, hi, int(rng.integers(2, 200))), rng.choice(np.concatenate([x, y]), 5)]
    )
    rng.shuffle(t)
    got = elementary_scores(x, y, w, t, functional, a)
    monkeypatch.setattr(score_curves, "kernels", lambda: None)
    want = elementary_scores(x, y, w, t, functional, a)
    assert np.array_equal(got, want)


def _grids() -> list[np.ndarray]:
    """Ascending grids the compiled search meets: evenly spaced (the default), uneven,
    repeated values, one or two values, a span past float64's range (no guess)."""
    rng = np.random.default_rng(7)
    return [
        np.linspace(-3.0, 3.0, 101),
        np.linspace(1e6, 1e6 + 1e-3, 57),
        np.sort(rng.normal(size=40)),
        np.sort(np.round(rng.normal(size=60), 1)),
        np.array([0.5]),
        np.array([2.0, 2.0, 2.0]),
        np.array([-1e308, 0.0, 1e308]),
        np.concatenate([np.linspace(0.0, 1.0, 30), [50.0, 1e5]]),
    ]


@pytest.mark.skipif(score_curves.kernels() is None, reason="numba is not installed")
@pytest.mark.parametrize("grid", _grids(), ids=range(len(_grids())))
def test_compiled_search_from_any_guess_is_searchsorted(grid: np.ndarray) -> None:
    """The compiled search started from any index (in range or not) finds what
    ``searchsorted(side="left")`` finds: at, between, before and after the thresholds."""
    from uqcore import _jit

    k = grid.shape[0]
    finite = grid[np.isfinite(grid)]
    values = np.concatenate(
        [grid, np.nextafter(grid, -np.inf), np.nextafter(grid, np.inf), [-np.inf, np.inf]]
    )
    lo, hi = max(finite.min(), -1e300), min(finite.max(), 1e300)
    values = np.concatenate([values, np.linspace(lo - 1, hi + 1, 25)])
    for v in values:
        want = int(np.searchsorted(grid, v, side="left"))
        for guess in range(-3, k + 4):
            assert _jit._first_not_below_near(grid, float(v), guess) == want, (v, guess)


@pytest.mark.skipif(score_curves.kernels() is None, reason="numba is not installed")
@pytest.mark.parametrize("seed", range(12))
def test_compiled_sums_on_even_grids_equal_numpys_to_the_bit(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the default grid (evenly spaced from the smallest to the largest value, where the
    compiled search starts at each value's computed position), and on grids wider or
    narrower than the data, the compiled sums equal numpy's exactly."""
    rng = np.random.default_rng(500 + seed)
    n = int(rng.integers(1, 3000))
    x = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7)
    y = x + rng.standard_t(3, size=n) * np.abs(x).mean()
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    pad = (hi - lo) * [0.0, 0.3, -0.3][seed % 3]
    t = np.linspace(lo - pad, hi + pad, int(rng.integers(2, 300)))
    for functional in ("mean", "quantile"):
        got = elementary_scores(x, y, None, t, functional, 0.3)
        with monkeypatch.context() as m:
            m.setattr(score_curves, "kernels", lambda: None)
            want = elementary_scores(x, y, None, t, functional, 0.3)
        assert np.array_equal(got, want)
