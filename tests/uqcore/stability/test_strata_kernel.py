"""Size-stratified coverage's block path with the compiled pass
(:func:`uqcore._jit.strata_worst_coverage`) against its numpy passes and the per-resample
path: tied widths (a tie shares a stratum), counts and real weights, one to seven strata."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import strata
from uqcore.stability.weights import Resampler

pytestmark = pytest.mark.skipif(strata.kernels() is None, reason="numba is not installed")

NAME = "size_stratified_coverage"


@pytest.mark.parametrize("bins", [1, 3, 7])
@pytest.mark.parametrize("weights", ["counts", "real"])
def test_compiled_pass_equals_the_numpy_passes_and_the_implementation(
    bins: int, weights: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(20 + bins)
    n = 400
    mu = rng.normal(size=n)
    sd = np.round(np.exp(rng.normal(size=n) * 0.5), 1)  # tied widths
    pred, y = P.Gaussian(mu, sd), mu + rng.normal(size=n) * 1.2
    base = None if weights == "counts" else rng.uniform(0.5, 2.0, size=n)
    counts = Resampler(n).block(7, range(6))
    chosen, _ = select_metrics([pred], [NAME], {NAME: {"bins": bins}})
    fast = Engine(Batch(pred, y, base), chosen)
    assert NAME in fast._fast
    got = fast.values([Resample(r) for r in counts])[NAME]
    with monkeypatch.context() as m:
        m.setattr(strata, "kernels", lambda: None)
        plain = Engine(Batch(pred, y, base), chosen).values([Resample(r) for r in counts])[NAME]
    ref = Engine(Batch(pred, y, base), chosen, use_blocks=False).values(
        [Resample(r) for r in counts]
    )[NAME]
    if weights == "counts":  # every sum an exact integer on both block paths
        np.testing.assert_array_equal(got, plain)
    np.testing.assert_allclose(got, plain, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)
    assert np.all((got >= 0.0) & (got <= 1.0))
