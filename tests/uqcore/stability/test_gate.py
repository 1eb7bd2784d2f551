"""Quality gates: the one-sided decision rule on synthetic bootstrap degradations, Holm's
adjustment against a hand computation, and quality_gate against an independent bootstrap
written here from the definition (the same resample counts, the metric computed by numpy)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore.stability.gate import degradation_decision, holm, quality_gate
from uqcore.stability.weights import Resampler


def reference_decision(d: np.ndarray, allowance: float, confidence: float) -> tuple:
    """From the definition: L = the ⌊α(B+1)⌋-th smallest D*, p = (1 + #{D* <= δ})/(B + 1)."""
    s = sorted(float(x) for x in d)
    b = len(s)
    j = math.floor((1 - confidence) * (b + 1) + 1e-9)
    p = (1 + sum(x <= allowance for x in s)) / (b + 1)
    low = s[j - 1] if j >= 1 else None
    return low, p, low is not None and low > allowance


@pytest.mark.parametrize("seed", range(5))
def test_decision_is_the_one_sided_quantile_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = rng.normal(0.1, 0.05, size=199)
    for allowance in (-0.1, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3):
        for confidence in (0.9, 0.95, 0.99):
            got = degradation_decision(d, allowance, confidence)
            low, p, fails = reference_decision(d, allowance, confidence)
            assert got.low == low and got.p_value == pytest.approx(p) and got.fails == fails
            # the bound rule and the p-value rule are one rule
            assert got.fails == (p <= (1 - confidence) + 1e-12)


def test_decision_on_a_clear_case() -> None:
    d = np.arange(1.0, 200.0)  # B = 199, α = 0.05: j = 10, L = 10
    r = degradation_decision(d, 9.5, 0.95)
    assert (r.low, r.high, r.fails) == (10.0, 190.0, True)
    assert r.p_value == pytest.approx(10 / 200)  # 9 values <= 9.5, plus one
    r = degradation_decision(d, 10.0, 0.95)
    assert not r.fails and r.p_value == pytest.approx(11 / 200)
    # NaN resamples are left out; too few resamples for the confidence never fail
    assert degradation_decision([np.nan, 1.0, 2.0], 0.0, 0.95).n_valid == 2
    few = degradation_decision([5.0] * 10, 0.0, 0.95)
    assert few.low is None and not few.fails and few.p_value == pytest.approx(1 / 11)


def test_holm_against_a_hand_computation() -> None:
    # p sorted: 0.01 (×4 = 0.04), 0.02 (×3 = 0.06), 0.03 (×2 = 0.06), 0.5 (×1); monotone
    assert holm([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm([0.3, None, 0.6]) == [0.6, None, 0.6]
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # 2 × 0.8 capped at 1


def test_quality_gate_against_an_independent_bootstrap() -> None:
    n, b, seed = 150, 199, 7
    rng = np.random.default_rng(3)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 1.5, size=n)
    y = mean + std * rng.normal(size=n)
    ref, cand = P.Gaussian(mean, std), P.Gaussian(mean + 1.0, std)
    checks = [
        {"name": "mae", "allowed": 0.05, "mode": "absolute"},
        {"name": "mae", "allowed": 2.0, "mode": "relative"},
        {"name": "r2", "allowed": 0.0, "mode": "absolute"},
    ]
    g = quality_gate(cand, ref, y, checks, n_resamples=b, seed=seed, confidence=0.95)
    # the same resamples (counts), the metrics by numpy
    w = np.stack([Resampler(n).counts(seed, i) for i in range(b)]).astype(float)
    err_c, err_r = np.abs(y - mean - 1.0), np.abs(y - mean)
    mae_c, mae_r = w @ err_c / w.sum(1), w @ err_r / w.sum(1)

    def r2(pred: np.ndarray) -> np.ndarray:
        ybar = w @ y / w.sum(1)
        ss_res = w @ (y - pred) ** 2
        ss_tot = np.sum(w * (y[None, :] - ybar[:, None]) ** 2, axis=1)
        return 1 - ss_res / ss_tot

    d_mae = mae_c - mae_r  # lower is better: badness = value
    d_r2 = -(r2(mean + 1.0)) + r2(mean)  # higher is better: badness = −value
    full_mae_r = float(np.mean(err_r))
    expected = [
        (d_mae, 0.05, float(np.mean(err_c) - full_mae_r)),
        (d_mae, 2.0 * full_mae_r, float(np.mean(err_c) - full_mae_r)),
        (d_r2, 0.0, None),
    ]
    ps = []
    for entry, (d, allowance, degradation) in zip(g["checks"], expected, strict=True):
        low, p, _ = reference_decision(d, allowance, 0.95)
        assert entry["allowance"] == pytest.approx(allowance, rel=1e-12)
        assert entry["low"] == pytest.approx(low, rel=1e-9, abs=1e-12)
        assert entry["p_value"] == pytest.approx(p)
        if degradation is not None:
            assert entry["degradation"] == pytest.approx(degradation, rel=1e-9)
        ps.append(p)
    adjusted = holm(ps)
    for entry, adj in zip(g["checks"], adjusted, strict=True):
        assert entry["p_value_adjusted"] == pytest.approx(adj)
        assert entry["passed"] == (adj > 0.05)
    # a shift of 1 is far beyond 0.05 in MAE, within 200 % of it
    assert [e["outcome"] for e in g["checks"][:2]] == ["fail", "pass"]
    assert g["passed"] is False


def test_equal_predictions_pass_and_undefined_metrics_are_errors() -> None:
    rng = np.random.default_rng(1)
    mean = rng.normal(size=80)
    y = mean + rng.normal(size=80)
    pred = P.Gaussian(mean, np.ones(80))
    g = quality_gate(pred, pred, y, [{"name": "crps", "allowed": 0.0, "mode": "absolute"}],
                     n_resamples=99)  # fmt: skip
    assert g["passed"] is True and g["checks"][0]["degradation"] == 0.0
    assert g["checks"][0]["p_value"] == 1.0  # every D* = 0 <= 0
    g = quality_gate(pred, pred, np.full(80, 1.0), [{"name": "r2", "allowed": 0.1}],
                     n_resamples=99)  # fmt: skip
    assert g["passed"] is None and g["checks"][0]["outcome"] == "error"
