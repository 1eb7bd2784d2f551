"""Tests of the papers' synthetic datasets and their true distributions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from uqcore import UQValidationError, metric
from uqcore import synthetic as S


@pytest.mark.parametrize("name", S.names())
def test_shapes_seeding_and_pit_uniform(name: str) -> None:
    ds = S.load(name, n_train=40, n_test=3000, seed=3)
    assert ds.name == name
    assert ds.x_train.shape == ds.y_train.shape == (40,)
    assert ds.x_test.shape == ds.y_test.shape == (3000,)
    assert ds.true_test.n == 3000
    again = S.load(name, n_train=40, n_test=3000, seed=3)
    np.testing.assert_array_equal(again.y_test, ds.y_test)
    np.testing.assert_array_equal(again.x_train, ds.x_train)
    other = S.load(name, n_train=40, n_test=3000, seed=4)
    assert not np.array_equal(other.y_test, ds.y_test)
    # y_test is a draw from true_test: the PIT values are uniform (seeded KS test)
    u = np.asarray(ds.true_test.cdf(ds.y_test))
    assert stats.kstest(u, "uniform").pvalue > 1e-3


@pytest.mark.parametrize(
    ("name", "domain"),
    [
        ("xiong2024_homoscedastic", (-1, 1)),
        ("xiong2024_heteroscedastic", (-1, 1)),
        ("xiong2024_multimodal", (0, 1)),
        ("xiong2024_epistemic", (0, 1)),
        ("moukari2019_cubic", (-4, 4)),
        ("chung2021_case_study", (-10, 10)),
    ],
)
def test_domains(name: str, domain: tuple[float, float]) -> None:
    ds = S.load(name, n_train=500, n_test=500, seed=0)
    for x in (ds.x_train, ds.x_test):
        assert x.min() >= domain[0] and x.max() <= domain[1]
        assert x.max() - x.min() > 0.9 * (domain[1] - domain[0])


def test_epistemic_gap() -> None:
    ds = S.xiong2024_epistemic(n_train=5000, n_test=5000, seed=1)
    lo, hi = S.EPISTEMIC_GAP
    assert not np.any((ds.x_train >= lo) & (ds.x_train <= hi))
    in_gap = (ds.x_test >= lo) & (ds.x_test <= hi)
    assert 0.25 < in_gap.mean() < 0.35  # the test set covers the gap (30% of [0, 1])
    # training inputs are uniform on the rest: half of them below the gap
    assert abs(np.mean(ds.x_train < lo) - 0.5) < 0.03


def test_true_distributions() -> None:
    ho = S.xiong2024_homoscedastic(n_test=20, seed=0)
    np.testing.assert_allclose(np.asarray(ho.true_test.std()), 0.1)
    np.testing.assert_allclose(np.asarray(ho.true_test.mean()), np.cos(1.5 * np.pi * ho.x_test))
    he = S.xiong2024_heteroscedastic(n_test=20, seed=0)
    np.testing.assert_allclose(
        np.asarray(he.true_test.std()), 0.4 * np.abs(np.cos(1.5 * np.pi * he.x_test))
    )
    mm = S.xiong2024_multimodal(n_test=20, seed=0)
    assert mm.true_test.kind == "mixture"
    np.testing.assert_allclose(np.asarray(mm.true_test.mean()), 0.5)
    c = np.cos(2 * np.pi * mm.x_test)
    np.testing.assert_allclose(np.asarray(mm.true_test.std()), np.sqrt(c * c + 0.05**2))
    ch = S.chung2021_case_study(n_test=2000, seed=0)
    sd = np.asarray(ch.true_test.std())
    for lo, hi, s in [(-10, -5, 1.0), (-5, 0, 0.01), (0, 5, 1.5), (5, 10, 0.5)]:
        sel = (ch.x_test >= lo) & (ch.x_test < hi)
        np.testing.assert_allclose(sd[sel], s)


def test_population_nll() -> None:
    # The mean NLL of the truth at its own draws estimates the differential entropy.
    ho = S.xiong2024_homoscedastic(n_test=20000, seed=2)
    value = metric("nll", ho.true_test, ho.y_test)
    assert abs(value - 0.5 * math.log(2 * math.pi * math.e * 0.01)) < 4 * math.sqrt(0.5 / 20000)
    he = S.xiong2024_heteroscedastic(n_test=20000, seed=2)
    pop = 0.5 * math.log(2 * math.pi * math.e) + math.log(0.4) - math.log(2.0)
    # per-row sd: sqrt(1/2 + π²/12) (Var log|cos| = π²/12)
    assert abs(metric("nll", he.true_test, he.y_test) - pop) < 4 * math.sqrt(
        (0.5 + math.pi**2 / 12) / 20000
    )


def test_moukari_outliers() -> None:
    ds = S.moukari2019_cubic(seed=0, n_train=2000, outlier_bias=50.0)
    lo, hi = S.MOUKARI_OUTLIER_INTERVAL
    inside = (ds.x_train >= lo) & (ds.x_train <= hi)
    resid = ds.y_train - ds.x_train**3
    assert abs(resid[inside].mean() - 50.0) < 1.5
    assert abs(resid[~inside].mean()) < 0.5
    clean = S.moukari2019_cubic(seed=0)
    assert clean.x_train.shape == (20,)
    np.testing.assert_allclose(np.asarray(clean.true_test.mean()), clean.x_test**3)
    biased = S.moukari2019_cubic(seed=0, test_outliers=True)
    t_in = (biased.x_test >= lo) & (biased.x_test <= hi)
    np.testing.assert_allclose(
        np.asarray(biased.true_test.mean())[t_in], biased.x_test[t_in] ** 3 + 50.0
    )


def test_validation() -> None:
    with pytest.raises(UQValidationError, match="n_test"):
        S.xiong2024_homoscedastic(n_test=0)
    with pytest.raises(UQValidationError, match="seed"):
        S.xiong2024_homoscedastic(seed=None)
    with pytest.raises(UQValidationError, match="name must be one of"):
        S.load("nope")
