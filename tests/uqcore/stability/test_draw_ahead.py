"""The next block of bootstrap counts is drawn while a block is evaluated: every resample's
values are still those of its own counts, evaluated on their own."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.stability import bootstrap_values
from uqcore.stability import weights as W
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import tuning


@pytest.mark.parametrize("background", [True, False])
def test_blocks_drawn_ahead_give_each_resample_its_own_values(
    monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    monkeypatch.setattr(tuning, "BACKGROUND", background)
    n, b, seed = 400, 11, 5
    rng = np.random.default_rng(3)
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    y = mu + sd * rng.normal(size=n)
    pred = P.Gaussian(mu, sd)
    names = ["spearman", "ause", "pit", "ece", "mdae", "ence", "rmse", "crps"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # blocks of 3: four blocks, each drawn while the one before is evaluated
        got = bootstrap_values(
            pred, y, names, start=0, stop=b, n_resamples=b, seed=seed, block_size=3
        )
        chosen, _ = select_metrics([pred], names, None)
        engine = Engine(Batch(pred, y), chosen)
        resampler = W.Resampler(n)
        # each resample drawn on its own (float counts) and evaluated alone
        want = [engine.values([Resample(resampler.counts(seed, i))]) for i in range(b)]
    for name in names:
        ref = np.array([w[name][0] for w in want])
        np.testing.assert_allclose(got[name], ref, rtol=1e-12, atol=1e-15, err_msg=name)
        assert np.unique(got[name]).shape[0] > b // 2, name  # the resamples differ
