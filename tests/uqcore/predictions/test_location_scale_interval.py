"""The central intervals of location-scale predictions: each bound in a pass of its own,
equal to the columns of ``ppf`` at ½ ∓ c/2 to the last bit, contiguous, validated as before."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import UQValidationError
from uqcore import predictions as P


def _cases(seed: int) -> list[P.RegressionPrediction]:
    rng = np.random.default_rng(seed)
    n = 500
    loc = rng.normal(size=n) * 10.0 ** rng.integers(-5, 5)
    scale = rng.uniform(0.01, 3.0, size=n)
    frozen_loc, frozen_scale = loc.copy(), scale.copy()
    frozen_loc.setflags(write=False)
    frozen_scale.setflags(write=False)
    return [
        P.Gaussian(loc, scale),
        P.Laplace(loc, scale),
        P.Gaussian(frozen_loc, frozen_scale),
        P.Laplace(loc[::2], scale[::2]),  # strided inputs
        P.StudentT(loc, scale, df=4.0),  # its own quantile function: the ppf columns
    ]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [1e-9, 0.1, 0.5, 0.8, 0.9, 0.95, 0.999999])
def test_bounds_equal_the_ppf_columns(seed: int, level: float) -> None:
    for pred in _cases(seed):
        lo, hi = pred.interval(level)
        q = pred.ppf([0.5 - level / 2.0, 0.5 + level / 2.0])
        assert np.array_equal(lo, q[:, 0]) and np.array_equal(hi, q[:, 1])
        assert lo.dtype == q.dtype and hi.dtype == q.dtype
        if not isinstance(pred, P.StudentT):
            assert lo.flags.c_contiguous and hi.flags.c_contiguous
        assert np.all(lo <= hi)


@pytest.mark.parametrize("level", [None, 0.0, 1.0, -0.1, 1.5, float("nan")])
def test_levels_are_validated_as_before(level: float | None) -> None:
    for pred in _cases(0):
        with pytest.raises(UQValidationError):
            pred.interval(level)
