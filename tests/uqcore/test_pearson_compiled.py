"""The compiled unweighted Pearson correlation (``uqcore._stats``) against numpy's path and
scipy: the same value within a few ulps, at any magnitude, and the same undefined cases."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import uqcore._stats as stats
from uqcore import _compiled
from uqcore._stats import weighted_pearson


def _numpy_path(a: np.ndarray, b: np.ndarray) -> float | None:
    # strided views: the compiled kernels take contiguous arrays only
    return weighted_pearson(np, np.repeat(a, 2)[::2], np.repeat(b, 2)[::2], None)


@pytest.mark.parametrize("n", [2, 3, 255, 256, 257, 1000, 70_000])
@pytest.mark.parametrize("scale_a", [1.0, 1e-305, 1e300, 2.0**-1030])
def test_compiled_pearson_is_the_numpy_paths_and_scipys(n: int, scale_a: float) -> None:
    assert _compiled.kernels() is not None
    rng = np.random.default_rng(n)
    for trial in range(5):
        a = rng.normal(size=n) * scale_a
        b = 0.3 * a / scale_a + rng.normal(size=n) * 10.0 ** (trial * 60 - 120)
        got = stats._compiled_pearson(a, b)
        assert got is not stats._NOT_COMPILED
        want = _numpy_path(a, b)
        assert got is not None and want is not None
        assert abs(got - want) <= 1e-13, (n, scale_a, got, want)
        ref = scipy.stats.pearsonr(a / scale_a, b / 10.0 ** (trial * 60 - 120)).statistic
        assert abs(got - ref) <= 1e-12


def test_constant_and_undefined_cases_are_the_numpy_paths() -> None:
    x = np.array([1.0, 2.0, 3.0])
    for a, b in [
        (np.full(4, 2.5), np.arange(4.0)),
        (np.arange(4.0), np.full(4, -1.0)),
        (np.array([0.0, -0.0]), np.array([1.0, 2.0])),
        (x, x),
        (x, -x),
    ]:
        assert stats._compiled_pearson(a, b) == _numpy_path(a, b)
    assert stats._compiled_pearson(x, x) == pytest.approx(1.0, abs=1e-15)
    assert stats._compiled_pearson(x, -x) == pytest.approx(-1.0, abs=1e-15)


def test_other_arrays_take_numpys_path() -> None:
    a = np.arange(10.0)
    for args in [(a[::2], a[:5]), (a.astype(np.float32), a), (a[:1], a[:1]), (a[:, None], a)]:
        assert stats._compiled_pearson(*args) is stats._NOT_COMPILED
