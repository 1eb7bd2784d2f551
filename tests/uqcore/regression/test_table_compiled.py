"""The check and interval scores of location-scale predictions, whose per-row value is
scale_i · g(z_i) for a tabulated piecewise-linear g: the compiled row pass and the numpy path
(cells and gathers) against the formulas (Koenker & Bassett 1978: the pinball loss at the
quantiles loc + scale·F⁻¹(τ); Gneiting & Raftery 2007, eq. 43), summed exactly."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.stats

import uqcore
from uqcore import _compiled
from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.regression import scoring

LEVELS = [round(k / 100, 2) for k in range(1, 100)]


@pytest.fixture(params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "compiled":
        assert _compiled.kernels() is not None  # numba is a dependency
    else:
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
    return str(request.param)


def _family(kind: str, n: int, rng: np.random.Generator) -> tuple[Any, Any, np.ndarray]:
    loc = rng.normal(size=n)
    scale = rng.uniform(0.3, 3.0, n)
    if kind == "gaussian":
        return P.Gaussian(loc, scale), scipy.stats.norm(loc, scale), loc
    if kind == "laplace":
        return P.Laplace(loc, scale), scipy.stats.laplace(loc, scale), loc
    df = np.full(n, 5.0)
    return P.StudentT(loc, scale, df), scipy.stats.t(df, loc, scale), loc


def _wmean(rows: list[float], w: np.ndarray | None) -> float:
    if w is None:
        return math.fsum(rows) / len(rows)
    return math.fsum(r * float(wi) for r, wi in zip(rows, w, strict=True)) / math.fsum(w)


@pytest.mark.usefixtures("path")
@pytest.mark.parametrize("kind", ["gaussian", "laplace", "student_t"])
@pytest.mark.parametrize("weighted", [False, True])
def test_check_and_interval_scores_equal_the_formulas(kind: str, weighted: bool) -> None:
    rng = np.random.default_rng(len(kind) + weighted)
    n = 3001
    pred, dist, loc = _family(kind, n, rng)
    y = loc + dist.std() * rng.standard_t(4, size=n)
    y[:5] = dist.ppf(0.3)[:5]  # on a breakpoint of g
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    got = uqcore.evaluate(pred, y, metrics=["check_score", "interval_score"], sample_weight=w)
    tau = np.asarray(LEVELS)
    q = dist.ppf(tau[:, None])  # levels × rows
    d = y[None, :] - q
    pin = np.where(d >= 0, tau[:, None] * d, (tau[:, None] - 1.0) * d)
    check = [math.fsum(pin[:, i]) / len(LEVELS) for i in range(n)]
    assert got["check_score"] == pytest.approx(_wmean(check, w), rel=1e-12)
    lo = dist.ppf(0.5 - tau[:, None] / 2)
    hi = dist.ppf(0.5 + tau[:, None] / 2)
    alpha = 1.0 - tau[:, None]
    s = (hi - lo) + (2 / alpha) * (lo - y) * (y < lo) + (2 / alpha) * (y - hi) * (y > hi)
    interval = [math.fsum(s[:, i]) / len(LEVELS) for i in range(n)]
    assert got["interval_score"] == pytest.approx(_wmean(interval, w), rel=1e-12)


def test_compiled_rows_equal_the_numpy_rows_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same operations row by row: the per-row terms (the bootstrap's mean terms) agree
    exactly between the two paths."""
    rng = np.random.default_rng(9)
    pred, _, loc = _family("gaussian", 5000, rng)
    y = loc + rng.normal(size=5000)
    assert _compiled.kernels() is not None
    on = scoring._check_terms(Batch(pred, y))
    monkeypatch.setattr(_compiled, "_KERNELS", [None])
    off = scoring._check_terms(Batch(pred, y))
    assert np.array_equal(on, off)
