"""CORP's unit-weight isotonic fit: the compiled pool-adjacent-violators pass against scipy's
``isotonic_regression`` (the peer) and against the definition (the least-squares
non-decreasing fit: monotone, each block's value the mean of its rows), and CORP with and
without it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from uqcore import _compiled
from uqcore._isotonic import corp


def _cases() -> list[np.ndarray]:
    rng = np.random.default_rng(12)
    out = [np.array([1.0]), np.array([2.0, 1.0]), np.array([1.0, 1.0, 0.0]), -np.arange(50.0)]
    for n in (7, 100, 5000):
        out.append(rng.normal(size=n))
        out.append(rng.normal(size=n) + np.linspace(0.0, 4.0, n))
        out.append(np.round(rng.normal(size=n), 1))  # tied values
        out.append(rng.standard_cauchy(n) * 1e8)
    return out


def test_pav_equals_scipy_and_the_definition() -> None:
    jit = _compiled.kernels()
    assert jit is not None  # numba is a dependency
    for y in _cases():
        fit = jit.pav_unit(y)
        np.testing.assert_allclose(
            fit, isotonic_regression(y).x, rtol=1e-12, atol=1e-12 * np.max(np.abs(y))
        )
        assert np.all(np.diff(fit) >= 0)
        # each run of equal fitted values is a block whose value is the mean of its rows
        cuts = np.flatnonzero(np.diff(fit)) + 1
        for block_y, block_fit in zip(np.split(y, cuts), np.split(fit, cuts), strict=True):
            assert block_fit[0] == pytest.approx(np.mean(block_y), rel=1e-12, abs=1e-9)


def test_corp_with_and_without_the_compiled_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(size=3000)
    y = x + rng.normal(size=3000)
    on = corp(x, y, None)
    monkeypatch.setattr(_compiled, "_KERNELS", [None])
    off = corp(x, y, None)
    for part in ("score", "mcb", "dsc", "unc"):
        assert getattr(on, part) == pytest.approx(getattr(off, part), rel=1e-12, abs=1e-15)
    np.testing.assert_allclose(on.fitted, off.fitted, rtol=1e-12, atol=1e-13)
