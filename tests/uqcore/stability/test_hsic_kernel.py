"""HSIC of interval width and coverage: its block path (:mod:`uqcore.stability.blocks.hsic`)
against the per-resample path, and its compiled passes against the implementation's own
steps on the rows a resample keeps: the box moments bit for bit, the weighted spread, the
first and last kept rows along an order; resamples off the box-to-box path (too few rows,
widths spread over too many kernel scales, MAPIE's statistic with Σ w ≤ 1) through the
implementation."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.regression import intervals as rintervals
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import hsic, table
from uqcore.stability.blocks.context import Partial
from uqcore.stability.weights import Resampler

pytestmark = pytest.mark.skipif(hsic.kernels() is None, reason="numba is not installed")

NAME = "hsic_width_coverage"


def _jit() -> Any:
    return hsic.kernels()


def _gaussian(n: int, seed: int, spread: float = 0.5) -> tuple[Any, np.ndarray[Any, Any]]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = np.exp(rng.normal(size=n) * spread)
    # targets whose spread grows faster than σ: the coverage depends on the width
    y = mu + rng.normal(size=n) * sd**1.5
    return P.Gaussian(mu, sd), y


def _values(
    pred: Any,
    y: np.ndarray[Any, Any],
    params: dict[str, Any],
    counts: Any,
    base: Any = None,
    blocks: bool = True,
) -> np.ndarray[Any, Any]:
    chosen, _ = select_metrics([pred], [NAME], {NAME: params})
    engine = Engine(Batch(pred, y, base), chosen, use_blocks=blocks)
    if blocks:
        assert NAME in engine._fast
    return engine.values([Resample(r) for r in counts])[NAME]


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Partial]:
    """The Partial blocks the evaluator returns."""
    seen: list[Partial] = []
    real = hsic.hsic

    def prepare(*args: Any) -> Any:
        ev = real(*args)
        if ev is None:
            return None

        def run(ctx: Any) -> Any:
            got = ev(ctx)
            seen.append(got)
            return got

        return run

    monkeypatch.setitem(table.PATHS, NAME, table.BlockPath(prepare))
    return seen


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"statistic": "mapie"},
        {"kernel_size": 10.0, "indicator_kernel_size": 0.4},
        {"level": 0.5, "statistic": "mapie", "kernel_size": 2.0},
    ],
    ids=["std", "mapie", "fixed-kernel", "level-0.5"],
)
@pytest.mark.parametrize("weights", ["counts", "real", "wide-integers"])
def test_block_path_equals_the_per_resample_path(
    params: dict[str, Any], weights: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 3000
    pred, y = _gaussian(n, 5)
    rng = np.random.default_rng(6)
    base = {
        "counts": None,
        "real": rng.uniform(0.5, 2.0, size=n),
        # integer weights above a byte: the block's uint16 counts go to the kernels as float64
        "wide-integers": rng.integers(100, 400, size=n).astype(np.float64),
    }[weights]
    counts = Resampler(n).block(11, range(7))
    seen = _spy(monkeypatch)
    got = _values(pred, y, params, counts, base)
    assert seen and all(bool(np.all(p.done)) for p in seen)  # every resample on the block path
    ref = _values(pred, y, params, counts, base, blocks=False)
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    # the same moments; Σ w, Σ w·b and the spread summed in another order (measured: 1e-14)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0.0)


def test_resamples_off_the_box_path_go_through_the_implementation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a bootstrap resample keeps about 63.2% of the rows: 1,620 rows put the kept count on
    # both sides of the box-to-box path's 1,024
    n = 1620
    pred, y = _gaussian(n, 9)
    counts = Resampler(n).block(3, range(24))
    seen = _spy(monkeypatch)
    got = _values(pred, y, {}, counts)
    done = np.concatenate([p.done for p in seen])
    kept = np.count_nonzero(np.asarray(counts), axis=1)
    np.testing.assert_array_equal(done, kept >= 1024)
    assert done.any() and not done.all()
    ref = _values(pred, y, {}, counts, blocks=False)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0.0)


def test_widths_over_many_kernel_scales_go_through_the_implementation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 2500
    pred, y = _gaussian(n, 13, spread=4.0)  # σ over many orders of magnitude
    counts = Resampler(n).block(4, range(4))
    seen = _spy(monkeypatch)
    got = _values(pred, y, {}, counts)
    assert not any(bool(p.done.any()) for p in seen)
    ref = _values(pred, y, {}, counts, blocks=False)
    np.testing.assert_array_equal(got, ref)


def test_mapie_with_total_weight_at_most_one_is_undefined_as_in_the_implementation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 2000
    pred, y = _gaussian(n, 17)
    base = np.full(n, 1e-4)  # Σ w ≈ 0.2 on every resample
    counts = Resampler(n).block(5, range(3))
    seen = _spy(monkeypatch)
    got = _values(pred, y, {"statistic": "mapie"}, counts, base)
    assert not any(bool(p.done.any()) for p in seen)
    assert np.all(np.isnan(got))
    plain = _values(pred, y, {}, counts, base)  # the V-statistic is defined there
    assert np.all(np.isfinite(plain))


def test_constant_widths_and_rounding_noise_give_zero() -> None:
    n = 2000
    rng = np.random.default_rng(21)
    centre = 1e6 + rng.normal(size=n)
    y = centre + rng.normal(size=n)
    counts = Resampler(n).block(8, range(3))
    # bounds made as centre ± h: widths differ from 2h by rounding only
    noisy = P.Interval(centre - 0.75, centre + 0.75, level=0.9)
    for pred in (noisy, P.Gaussian(centre, np.full(n, 1.5))):
        got = _values(pred, y, {}, counts)
        np.testing.assert_array_equal(got, 0.0)
        np.testing.assert_array_equal(got, _values(pred, y, {}, counts, blocks=False))


def test_without_kernels_the_metric_goes_resample_by_resample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    n = 1500
    pred, y = _gaussian(n, 23)
    monkeypatch.setattr(hsic, "kernels", lambda: None)
    chosen, _ = select_metrics([pred], [NAME], {NAME: {}})
    assert NAME not in Engine(Batch(pred, y), chosen)._fast


# -- the compiled passes against the implementation's steps ----------------------------------
def _kept_steps(
    width: np.ndarray[Any, Any], covered: np.ndarray[Any, Any], w: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], float, float]:
    """t and a as hsic_width_coverage makes them from the rows it keeps (kernel_size="std")."""
    keep = w > 0
    v, b, wk = width[keep], covered[keep].astype(np.float64), w[keep].astype(np.float64)
    total = float(np.sum(wk))
    cbar = float(np.sum(wk * b) / total)
    top = max(abs(float(np.min(v))), abs(float(np.max(v))))
    u = v / top
    sd = math.sqrt(float(np.sum(wk * (u - np.sum(wk * u) / total) ** 2) / total))
    scale = math.sqrt(2.0) * sd
    t = v / top
    t /= scale
    a = b - cbar
    a *= wk / float(np.max(wk))
    return t, a, top, scale


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])  # the types the block passes
def test_weighted_box_moments_equal_the_implementations_bit_for_bit(dtype: Any) -> None:
    rng = np.random.default_rng(31)
    n = 5000
    width = np.exp(rng.normal(size=n) * 0.4) * 3.0
    covered = (rng.uniform(size=n) < 0.9).astype(np.float64)
    raw = rng.poisson(1.0, size=n) * (rng.uniform(0.5, 2.0, size=n) if dtype is np.float64 else 1)
    w = raw.astype(dtype)
    t, a, top, scale = _kept_steps(width, covered, w)
    want = _jit().box_moments(t, a, float(np.min(t)), rintervals._PAIR_BOX, rintervals._PAIR_TERMS)
    keep = w > 0
    wk = w[keep].astype(np.float64)
    cbar = float(np.sum(wk * covered[keep]) / float(np.sum(wk)))
    got = _jit().weighted_box_moments(
        width,
        covered,
        w,
        top,
        scale,
        cbar,
        float(np.max(wk)),
        float(np.min(width[keep])),
        float(np.max(width[keep])),
        rintervals._PAIR_BOX,
        rintervals._PAIR_TERMS,
    )
    np.testing.assert_array_equal(got, want)
    # and the kernel sum from them is the implementation's box-to-box sum
    assert rintervals.pair_sum(got) == rintervals._kernel_sum_pairs(t, a)


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
def test_weighted_spread_is_the_weighted_standard_deviation(dtype: Any) -> None:
    rng = np.random.default_rng(37)
    n = 3001  # not a multiple of the two-level sums' block
    width = 1e3 + rng.normal(size=n)  # a spread small against the widths
    w = (rng.poisson(1.0, size=n) * (1.7 if dtype is np.float64 else 1)).astype(dtype)
    keep = w > 0
    top = float(np.max(np.abs(width[keep])))
    v, wk = width[keep] / top, w[keep].astype(np.float64)
    total = float(np.sum(wk))
    want = math.sqrt(float(np.sum(wk * (v - np.sum(wk * v) / total) ** 2) / total))
    got = _jit().weighted_spread(width, w, top, total)
    assert got == pytest.approx(want, rel=1e-12)


def test_kept_ends_are_the_first_and_last_kept_rows_along_the_order() -> None:
    rng = np.random.default_rng(41)
    n = 300
    w = (rng.uniform(size=(6, n)) < 0.05).astype(np.uint8)
    w[4] = 0  # no kept row
    w[5] = 0
    w[5, 17] = 3  # one
    order = rng.permutation(n)
    out = np.empty((6, 2), dtype=np.int64)
    _jit().kept_ends(w, order, out)
    for r in range(6):
        pos = np.flatnonzero(w[r, order] > 0)
        want = (pos[0], pos[-1]) if pos.size else (-1, -1)
        assert tuple(out[r]) == want


@pytest.mark.parametrize("weights", ["counts", "real"])
def test_cwc_range_from_kept_ends_equals_the_gathered_weights(
    weights: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cwc's block path reads each resample's range of y from the first and last kept rows
    along y's order (kept_ends), else from the block's weights gathered along it: the same
    values as each other and as the per-resample path. With 40 rows, the rows of the least
    and largest y are dropped by about a third of the resamples each."""
    from uqcore.stability.blocks import intervals as block_intervals

    n = 40
    pred, y = _gaussian(n, 43)
    rng = np.random.default_rng(44)
    base = None if weights == "counts" else rng.uniform(0.5, 2.0, size=n)
    counts = np.asarray(Resampler(n).block(12, range(30)))
    lo, hi = int(np.argmin(y)), int(np.argmax(y))
    assert (counts[:, lo] == 0).any() and (counts[:, hi] == 0).any()
    chosen, _ = select_metrics([pred], ["cwc"], None)

    def values(blocks: bool = True) -> np.ndarray[Any, Any]:
        engine = Engine(Batch(pred, y, base), chosen, use_blocks=blocks)
        assert ("cwc" in engine._fast) == blocks
        return engine.values([Resample(r) for r in counts])["cwc"]

    got = values()
    ref = values(blocks=False)
    with monkeypatch.context() as m:
        m.setattr(block_intervals, "kernels", lambda: None)
        gathered = values()
    np.testing.assert_array_equal(got, gathered)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=0.0)
