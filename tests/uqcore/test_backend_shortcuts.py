"""numpy shortcuts of ``uqcore._backend`` (``clip``, ``sorted_unique``) against the
array-api-compat functions they stand in for: the same dtype and the same values, bit for bit."""

from __future__ import annotations

from typing import Any

import array_api_compat.numpy as xp
import numpy as np
import pytest

from uqcore._backend import clip, sorted_unique

FLOATS = np.array([-np.inf, -3.5, -0.0, 0.0, 1e-310, 2.0, 7.25, np.inf, np.nan])


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
        and (a.dtype.kind != "f" or np.array_equal(np.signbit(a), np.signbit(b)))
    )


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0.0, None), (None, 0.0), (-1.0, 3), (0, None), (-0.0, 0.0), (2.0, 1.0), (None, None)],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clip_of_floats_is_array_api_compats(lo: Any, hi: Any, dtype: Any) -> None:
    x = FLOATS.astype(dtype)
    assert _same(clip(xp, x, min=lo, max=hi), xp.clip(x, min=lo, max=hi))


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0, None), (None, 5), (-3, 3), (0.5, None), (None, 2**40), (-(2**40), None), (None, None)],
)
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_clip_of_integers_is_array_api_compats(lo: Any, hi: Any, dtype: Any) -> None:
    # bounds outside the dtype or of another kind go to array-api-compat itself
    x = np.array([0, 1, 5, 9, 100], dtype=dtype)
    assert _same(clip(xp, x, min=lo, max=hi), xp.clip(x, min=lo, max=hi))


def test_clip_with_array_bounds_and_scalars_is_array_api_compats() -> None:
    x = np.linspace(-2.0, 2.0, 9)
    lo = np.full(9, -1.0)
    assert _same(clip(xp, x, min=lo), xp.clip(x, min=lo))
    s = np.float64(-0.5)
    assert _same(clip(xp, s, min=0.0), xp.clip(s, min=0.0))


@pytest.mark.parametrize(
    "x",
    [
        np.array([3, 1, 3, 0, 2, 2, 7], dtype=np.int64),
        np.array([0], dtype=np.int64),
        np.array([], dtype=np.int64),
        np.array([2.5, -1.0, 2.5, np.inf, -0.0, 0.0]),
    ],
)
def test_sorted_unique_is_sorted_unique_values(x: np.ndarray) -> None:
    assert _same(sorted_unique(xp, x), xp.sort(xp.unique_values(x)))


def test_numpy_bounds_of_the_arrays_kind_skip_array_api_compat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("array-api-compat's clip was called")

    monkeypatch.setattr(xp, "clip", boom)
    assert _same(clip(xp, FLOATS, min=0.0), np.clip(FLOATS, 0.0, None))
    assert _same(clip(xp, np.arange(5), max=2), np.array([0, 1, 2, 2, 2]))
    with pytest.raises(AssertionError):
        clip(xp, np.arange(5), min=0.5)  # another kind: array-api-compat's
