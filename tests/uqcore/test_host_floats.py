"""uqcore._backend.host_floats: a curve's points as Python floats, the values of float(v)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from uqcore._backend import host_floats

RNG = np.random.default_rng(41)


@pytest.mark.parametrize(
    "values",
    [
        RNG.normal(size=50),
        RNG.normal(size=50).astype(np.float32),
        RNG.integers(-(2**62), 2**62, size=50),  # beyond 2^53: rounded as float() rounds
        np.array([np.nan, np.inf, -np.inf, -0.0, 5e-324]),
        RNG.normal(size=(20, 3))[:, 1],  # strided
        np.zeros(0),
        [np.float64(0.1), np.float32(0.2), 3, 2**60 + 1, True],
        (0.5, 1.5),
    ],
)
def test_the_values_of_float_of_each(values: Any) -> None:
    got = host_floats(values)
    ref = tuple(float(v) for v in values)
    assert isinstance(got, tuple) and all(type(v) is float for v in got)
    assert np.array_equal(np.array(got), np.array(ref), equal_nan=True)
    assert [np.signbit(v) for v in got] == [np.signbit(v) for v in ref]
