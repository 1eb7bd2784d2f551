"""Work shared between the metrics of one ``evaluate``: Φ(z) once, no extra sorts, same values."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.special

from uqcore import evaluate, metric
from uqcore import predictions as P

N = 700_000  # several blocks of the scoring metrics' row loop (2^18 rows each)


def _gaussian(seed: int) -> tuple[P.Gaussian, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=N)
    sd = rng.uniform(0.5, 2.0, size=N)
    y = mu + sd * rng.normal(scale=1.1, size=N)
    return P.Gaussian(mu, sd), y


def test_phi_is_computed_once_for_pit_and_crps(monkeypatch: pytest.MonkeyPatch) -> None:
    pred, y = _gaussian(31)
    real = scipy.special.ndtr
    seen = [0]

    def counting(x: Any, *args: Any, **kwargs: Any) -> Any:
        seen[0] += int(np.size(x))
        return real(x, *args, **kwargs)

    monkeypatch.setattr(scipy.special, "ndtr", counting)
    evaluate(pred, y, metrics=["pit", "crps"])
    assert seen[0] == N  # Φ of each z_i once


def test_crps_with_shared_phi_is_bit_identical() -> None:
    pred, y = _gaussian(32)
    alone = metric("crps", pred, y)
    together = evaluate(pred, y, metrics=["calibration_error", "pit", "crps"])
    assert together["crps"] == alone
    # and against the closed form written out independently (float64 rounding only)
    z = (y - pred.mean_) / pred.std_
    ref = np.mean(
        pred.std_
        * (
            z * (2 * scipy.special.ndtr(z) - 1)
            + 2 * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
            - 1 / np.sqrt(np.pi)
        )
    )
    assert abs(alone - ref) <= 1e-12 * abs(ref)


def test_sorted_values_from_gathers_equal_sorts() -> None:
    pred, y = _gaussian(33)
    r = evaluate(pred, y, metrics=["mdae", "spearman", "ence", "nmerci", "ause"])
    e = np.abs(y - pred.mean_)
    assert r["mdae"] == float(np.median(e))
    assert r["spearman"] == pytest.approx(
        float(np.corrcoef(np.argsort(np.argsort(pred.std_)), np.argsort(np.argsort(e)))[0, 1]),
        rel=1e-12,
    )
    alone = {name: metric(name, pred, y) for name in ("ence", "nmerci", "ause")}
    for name, value in alone.items():
        assert r[name] == value
