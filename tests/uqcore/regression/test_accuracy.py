"""Accuracy metrics against plain float64 references written from their formulas."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tests.factories import to_backend
from uqcore import UndefinedMetricWarning, metric
from uqcore import predictions as P


def _ref(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> dict[str, float | None]:
    """Weighted accuracy metrics by explicit loops (frequency weights)."""
    tw = sum(w)
    mae = sum(wi * abs(yi - pi) for yi, pi, wi in zip(y, p, w, strict=True)) / tw
    mse = sum(wi * (yi - pi) ** 2 for yi, pi, wi in zip(y, p, w, strict=True)) / tw
    terms = []
    for yi, pi in zip(y, p, strict=True):
        d = abs(yi) + abs(pi)
        terms.append(0.0 if d == 0 else 2 * abs(yi - pi) / d)
    marpd = 100 * sum(wi * t for wi, t in zip(w, terms, strict=True)) / tw
    ybar = sum(wi * yi for yi, wi in zip(y, w, strict=True)) / tw
    pbar = sum(wi * pi for pi, wi in zip(p, w, strict=True)) / tw
    syy = sum(wi * (yi - ybar) ** 2 for yi, wi in zip(y, w, strict=True))
    spp = sum(wi * (pi - pbar) ** 2 for pi, wi in zip(p, w, strict=True))
    spy = sum(wi * (pi - pbar) * (yi - ybar) for yi, pi, wi in zip(y, p, w, strict=True))
    r2 = None if syy == 0 else 1 - mse * tw / syy
    corr = None if syy == 0 or spp == 0 else spy / math.sqrt(syy * spp)
    # median of the expanded sample (integer weights)
    expanded = sorted(
        e for yi, pi, wi in zip(y, p, w, strict=True) for e in [abs(yi - pi)] * int(wi)
    )
    m = len(expanded)
    mdae = (expanded[(m - 1) // 2] + expanded[m // 2]) / 2
    return {
        "mae": mae,
        "rmse": math.sqrt(mse),
        "mdae": mdae,
        "marpd": marpd,
        "r2": r2,
        "corr": corr,
    }


CASES = []
for n in (1, 2, 3, 10, 101):
    for seed in range(2):
        CASES.append(pytest.param(n, seed, id=f"n{n}-s{seed}"))


@pytest.mark.parametrize(("n", "seed"), CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_accuracy_matches_reference(n: int, seed: int, weighted: bool) -> None:
    rng = np.random.default_rng(seed)
    y = rng.standard_t(2, size=n) * 10.0 ** rng.integers(-3, 4, size=n)  # heavy tails, wide range
    p = y + rng.standard_cauchy(size=n)
    if n > 3:
        p[:2] = y[:2]  # exact hits
        y[3] = 0.0
        p[3] = 0.0  # 0/0 in marpd
    w = rng.integers(1, 4, size=n).astype(float) if weighted else np.ones(n)
    pred = P.PointUncertainty(p, np.ones(n))
    ref = _ref(y, p, w)
    sw = w if weighted else None
    for name, expected in ref.items():
        with (
            pytest.warns(UndefinedMetricWarning, match=f"{name} is undefined")
            if expected is None
            else _nullcontext()
        ):
            got = metric(name, pred, y, sample_weight=sw)
        if expected is None:
            assert got is None, name
        else:
            assert got == pytest.approx(expected, rel=1e-10, abs=1e-300), name


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None


def test_perfect_prediction_gets_best_values() -> None:
    y = np.array([1.0, -2.0, 3.5, 7.0])
    pred = P.Gaussian(y, np.ones(4))
    assert metric("mae", pred, y) == 0.0
    assert metric("rmse", pred, y) == 0.0
    assert metric("mdae", pred, y) == 0.0
    assert metric("marpd", pred, y) == 0.0
    assert metric("r2", pred, y) == 1.0
    assert metric("corr", pred, y) == pytest.approx(1.0, abs=1e-15)


def test_inverted_cdf_median_is_the_lower_weighted_median() -> None:
    pred = P.PointUncertainty(np.zeros(4), np.ones(4))
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert metric("mdae", pred, y, method="inverted_cdf") == 2.0
    assert metric("mdae", pred, y, sample_weight=[1, 1, 5, 1], method="inverted_cdf") == 3.0
    assert metric("mdae", pred, y) == 2.5


def test_accuracy_uses_the_median_of_quantile_predictions(xp: Any) -> None:
    lv = np.array([0.25, 0.5, 0.75])
    vals = np.array([[0.0, 1.0, 2.0], [0.0, 4.0, 5.0]])
    pred, y = to_backend(P.Quantiles(lv, vals), np.array([2.0, 2.0]), xp)
    assert metric("mae", pred, y) == pytest.approx(1.5, rel=1e-12)
