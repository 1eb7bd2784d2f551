"""The skill scores' climatological sums of a block of resamples: the compiled pass
(:func:`uqcore._jit.climatology_sums`) against the numpy expression it replaces, on counts
(int32 and int64 cumulative weights) and real weights, fractions that land exactly on a level,
and a row whose fractions go down (the search pointer moving back)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.stability import blocks
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import skill
from uqcore.stability.weights import Resampler

jit = skill.kernels()
pytestmark = pytest.mark.skipif(jit is None, reason="numba is not installed")


def _numpy_sums(cum: np.ndarray, total: np.ndarray, phi: skill.Phi, gaps: np.ndarray) -> Any:
    part = cum[:, :-1]
    f = part / total[:, None]
    g = (total[:, None] - part) / total[:, None]
    return phi(f, g) @ gaps


def _cums(rng: np.random.Generator, b: int, n: int, dtype: Any) -> np.ndarray:
    if dtype == np.float64:
        w = rng.uniform(0.0, 2.0, size=(b, n))
        w[:, rng.integers(0, n, size=n // 4)] = 0.0  # rows left out of a resample
    else:
        w = rng.multinomial(n, np.full(n, 1.0 / n), size=b)
    return np.cumsum(w, axis=1).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize(
    "phi",
    [
        skill.Phi(),  # the CRPS
        skill.Phi(np.linspace(0.01, 0.99, 99), np.full(99, 1 / 99)),  # the check score's grid
        skill.Phi(np.array([0.95, 0.05]), np.array([40.0, 40.0])),  # an interval's two ends
        skill.Phi(np.array([0.25, 0.5, 0.75]), np.array([1.0, 2.0, 3.0])),
    ],
    ids=["crps", "check", "interval", "quarters"],
)
def test_compiled_sums_equal_the_numpy_expression(dtype: Any, phi: skill.Phi) -> None:
    rng = np.random.default_rng(3)
    n, b = 400, 6
    cum = _cums(rng, b, n, dtype)
    total = cum[:, -1].astype(np.float64)
    gaps = np.diff(np.sort(np.round(rng.normal(size=n), 1)))  # zero gaps: tied targets
    out = np.empty(b)
    jit.climatology_sums(cum, total, phi.taus, phi.below, phi.above, gaps, phi.crps, out)
    np.testing.assert_allclose(out, _numpy_sums(cum, total, phi, gaps), rtol=1e-13, atol=0)


def test_fractions_on_the_levels_and_going_down() -> None:
    """A total of 100: fractions k/100 equal the levels 0.25, 0.5, 0.75 exactly (searchsorted
    "left" puts them below the level); the second row's cumulative weights rise and fall."""
    phi = skill.Phi(np.array([0.25, 0.5, 0.75]), np.array([1.0, 2.0, 3.0]))
    up = np.arange(0, 101, 5, dtype=np.int64)
    down = np.concatenate([up[:11], up[11:][::-1] - 50, [100]]).astype(np.int64)
    cum = np.stack([up, down[: up.shape[0]]])
    total = np.array([100.0, 100.0])
    gaps = np.linspace(0.5, 1.5, up.shape[0] - 1)
    out = np.empty(2)
    jit.climatology_sums(cum, total, phi.taus, phi.below, phi.above, gaps, False, out)
    np.testing.assert_allclose(out, _numpy_sums(cum, total, phi, gaps), rtol=1e-14, atol=0)


@pytest.mark.parametrize("name", ["crps_skill", "check_score_skill", "nll_skill"])
def test_the_block_path_is_the_same_with_and_without_the_kernels(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block path's values with the compiled pass and with numpy's (counts and real
    weights) agree to rounding."""
    rng = np.random.default_rng(9)
    n = 300
    mu = rng.normal(size=n)
    pred, y = P.Gaussian(mu, np.full(n, 0.8)), mu + rng.normal(size=n)
    counts = Resampler(n).block(4, range(6))
    chosen, _ = select_metrics([pred], [name], None)
    assert name in blocks.PATHS
    for w in (None, rng.uniform(0.5, 2.0, size=n)):
        fast = Engine(Batch(pred, y, w), chosen).values([Resample(r) for r in counts])[name]
        with monkeypatch.context() as m:
            m.setattr(skill, "kernels", lambda: None)
            plain = Engine(Batch(pred, y, w), chosen).values([Resample(r) for r in counts])[name]
        np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-15)
