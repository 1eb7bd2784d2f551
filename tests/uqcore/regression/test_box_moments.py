"""HSIC's box moments: the compiled pass equals the numpy passes (bincounts of repeated
products) to the last bit, and both equal the moments summed from their definition."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uqcore.regression import intervals


def _definition(t: np.ndarray, a: np.ndarray) -> np.ndarray:
    h, p = intervals._PAIR_BOX, intervals._PAIR_TERMS
    t0 = float(np.min(t))
    box = np.floor((t - t0) / h).astype(np.int64)
    out = np.zeros((int(box.max()) + 1, p))
    for tl, al, b in zip(t.tolist(), a.tolist(), box.tolist(), strict=True):
        sigma = tl - (t0 + (b + 0.5) * h)
        for m in range(p):
            out[b, m] += al * sigma**m
    return out


@pytest.mark.skipif(intervals.kernels() is None, reason="numba is not installed")
@pytest.mark.parametrize("seed", range(12))
def test_compiled_equals_numpy_to_the_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    t = rng.uniform(0.0, float(rng.choice([0.1, 3.0, 40.0])), size=2 * n)[:: 1 + seed % 2][:n]
    if seed % 3 == 0:
        t = np.round(t, 1)  # rows on the boxes' edges, ties
    t = t + float(rng.choice([0.0, 1e3, -7.25]))
    a = rng.normal(size=t.shape[0]) * (rng.uniform(size=t.shape[0]) < 0.9)
    got = intervals.box_moments(t, a)
    monkeypatch.setattr(intervals, "kernels", lambda: None)
    want = intervals.box_moments(t, a)
    assert got.shape == want.shape
    assert np.array_equal(got, want)
    ref = _definition(t, a)
    scale = np.sum(np.abs(a)) * (intervals._PAIR_BOX / 2) ** np.arange(intervals._PAIR_TERMS)
    assert np.all(np.abs(got - ref) <= 1e-12 * scale + 1e-300)
    assert math.isclose(float(np.sum(got[:, 0])), float(np.sum(a)), rel_tol=1e-12, abs_tol=1e-12)
