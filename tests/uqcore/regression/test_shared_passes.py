"""Work shared between the metrics of one ``evaluate``: Φ(z) once, no extra sorts, same values."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.special
import scipy.stats

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


@pytest.mark.parametrize("n", [1, 2, 5_000])
@pytest.mark.parametrize("metrics", [["spearman"], ["mdae", "ause"], ["ause", "spearman"]])
def test_sorted_abs_error_made_with_the_error_ranks_is_a_sort(n: int, metrics: list[str]) -> None:
    # the sorted |e| is gathered along the |e| argsort before that order is narrowed to int32;
    # it must be the sorted |e| itself, ties included, and the ranks must still sort it
    from uqcore import registry
    from uqcore.batch import Batch
    from uqcore.regression.ranking import _e_rank_order, _errors_by_u_descending

    rng = np.random.default_rng(n)
    mu = np.round(rng.normal(size=n), 1)  # ties in |e| and in σ
    sd = rng.integers(1, 4, size=n).astype(float)
    y = np.round(mu + rng.normal(size=n), 1)
    batch = Batch(P.Gaussian(mu, sd), y)
    batch.plan = frozenset(metrics)
    with warnings.catch_warnings():
        # Spearman of one row is undefined (constant ranks): the sort is made all the same
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        for name in metrics:
            registry.get(name).impl(batch)
    got = batch._shared["stats:sorted:abs_error"]
    assert np.array_equal(got, np.sort(np.abs(y - mu)))
    pos = _e_rank_order(batch)
    assert pos.dtype == np.int32
    assert np.array_equal(np.flip(_errors_by_u_descending(batch))[pos], got)


def _count_finiteness_checks(monkeypatch: pytest.MonkeyPatch, y: np.ndarray) -> list[int]:
    """Counts the finiteness passes over ``y`` (wherever the check is called from)."""
    import uqcore._validation as validation
    import uqcore.batch as batch_module

    real = validation.check_finite
    seen = [0]

    def counting(x: Any, name: str, xp: Any) -> None:
        if name == "y" and x.shape == y.shape:
            seen[0] += 1
        real(x, name, xp)

    monkeypatch.setattr(validation, "check_finite", counting)
    monkeypatch.setattr(batch_module, "check_finite", counting, raising=False)
    return seen


@pytest.mark.parametrize("name", ["mae", "rmse"])
def test_mae_and_rmse_read_the_targets_once(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    # their own sum proves y finite: no separate finiteness pass over y
    pred, y = _gaussian(34)
    seen = _count_finiteness_checks(monkeypatch, y)
    e = np.abs(y - pred.mean_)
    want = float(np.mean(e)) if name == "mae" else float(np.sqrt(np.mean(e * e)))
    assert metric(name, pred, y) == pytest.approx(want, rel=1e-13)
    assert seen[0] == 0
    metric("r2", pred, y)  # a metric without that proof checks y itself
    assert seen[0] == 1


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_bad_target_is_still_refused_by_every_path(bad: float) -> None:
    from uqcore import UQValidationError

    pred = P.Gaussian(np.zeros(6), np.ones(6))
    y = np.array([0.1, -0.2, 0.3, bad, 0.5, np.nan])
    shown = {np.inf: "inf", -np.inf: "-inf"}.get(bad, "nan")
    msg = f"y must be finite; y[3] = {shown}"
    for names in (["mae"], ["rmse"], ["rmse", "mae"], ["spearman", "mae"], "all"):
        with pytest.raises(UQValidationError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            evaluate(pred, y, metrics=names)
    y[1] = 1e308  # sums of |e| overflow before the bad entry is found: no warning leaks
    y[2] = 1e308
    for name in ("mae", "rmse", "mdae", "crps"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(
                UQValidationError, match=msg.replace("[", r"\[").replace("]", r"\]")
            ):
                metric(name, pred, y)


def test_largest_square_root_equals_the_bisection_over_bit_patterns() -> None:
    import random
    import struct

    from uqcore.regression.calibration import _largest_square_root

    def bisection(v: float) -> float:
        lo, hi = 0, 0x7FF0000000000000
        while hi - lo > 1:
            mid = (lo + hi) // 2
            x = struct.unpack("<d", struct.pack("<q", mid))[0]
            lo, hi = (mid, hi) if x * x <= v else (lo, mid)
        return float(struct.unpack("<d", struct.pack("<q", lo))[0])

    rng = random.Random(35)
    values = [0.0, 5e-324, 1e-300, 1e-290, 1.0, 2.0, 4.0, 1e300, 1.7e308]
    values += [rng.uniform(0.0, 10.0) for _ in range(2000)]
    values += [10 ** rng.uniform(-300.0, 307.0) for _ in range(2000)]
    values += [x * x for x in (rng.uniform(0.0, 1e3) for _ in range(1000))]
    for v in values:
        assert _largest_square_root(v) == bisection(v), v


@pytest.mark.parametrize("weighted", [False, True])
def test_the_calibration_metrics_read_one_tally(
    monkeypatch: pytest.MonkeyPatch, weighted: bool
) -> None:
    import uqcore.regression.calibration as cal

    rng = np.random.default_rng(8)
    n = 5000
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    pred, y = P.Gaussian(mu, sd), mu + sd * rng.normal(scale=1.2, size=n)
    w = rng.integers(0, 4, size=n).astype(np.float64) if weighted else None
    names = ["ece", "rmsce", "adversarial_group_calibration", "calibration_error"]
    alone = {m: metric(m, pred, y, sample_weight=w) for m in names}
    real = cal._pit_counts
    counted: list[str] = []

    def counting(batch: Any, prop_type: Any, lv: Any) -> Any:
        counted.append(prop_type)
        return real(batch, prop_type, lv)

    monkeypatch.setattr(cal, "_pit_counts", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = evaluate(pred, y, metrics=names, sample_weight=w)
    # one tally per proportion type on the default grid (calibration_error's is "quantile")
    assert sorted(counted) == ["interval", "quantile"]
    assert {m: report[m] for m in names} == alone
    batch = cal.regression_batch(pred, y, w)
    t = cal._tally(batch, "interval", None, None)
    assert t is cal._tally(batch, "interval", None, None)
    assert t is not cal._tally(batch, "interval", [0.1, 0.5, 0.9], None)
    assert not (t.counts.flags.writeable or t.levels.flags.writeable)


@pytest.mark.parametrize("n", [1, 2, 257, 5000, 200_000])
def test_the_compiled_ks_distance_is_the_numpy_blocks(
    monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    import uqcore.regression.calibration as cal

    rng = np.random.default_rng(n)
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 2.0, size=n)
    for y in (mu + sd * rng.normal(scale=1.3, size=n), np.round(mu, 1), mu):  # ties, z = 0
        pred = P.Gaussian(mu, sd)
        compiled = metric("pit", pred, y)
        monkeypatch.setattr(cal, "kernels", lambda: None)
        numpy_blocks = metric("pit", pred, y)
        monkeypatch.undo()
        assert compiled == numpy_blocks
        s = np.sort(scipy.special.ndtr((y - mu) / sd))
        i = np.arange(n, dtype=np.float64)
        d = max(0.0, float(np.max(s - i / n)), float(np.max((i + 1) / n - s)))
        assert compiled["value"] == min(d, 1.0)


@pytest.mark.parametrize("kind", ["gaussian", "laplace", "student_t"])
def test_the_compiled_coverage_counts_are_the_numpy_passes(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    import uqcore.regression.scoring as scoring
    from tests.factories import make_prediction

    pred, y = make_prediction(kind, 3000, seed=4)
    if kind == "student_t":  # one df for every row: the tabulated path
        pred = P.StudentT(pred.loc, pred.scale, df=np.full(3000, 4.0))
    # targets on the bounds themselves (the intervals are closed)
    zl = scoring._std_ppf(pred, np.array([0.25]))[0]
    y = np.array(y, dtype=np.float64)
    y[:40] = np.asarray(pred.point())[:40] + zl * np.asarray(scoring._scale(pred))[:40]
    levels = (0.5, 0.8, 0.9, 0.95, 0.99)
    compiled = metric("coverage", pred, y, levels=levels)
    monkeypatch.setattr(scoring, "kernels", lambda: None)
    numpy_passes = metric("coverage", pred, y, levels=levels)
    assert compiled == numpy_passes
    z = (y - np.asarray(pred.point())) / np.asarray(scoring._scale(pred))
    for c, got in zip(levels, compiled["coverage"], strict=True):
        lo, hi = scoring._std_ppf(pred, np.array([0.5 - c / 2, 0.5 + c / 2]))
        assert got == np.mean((z >= lo) & (z <= hi))


@pytest.mark.parametrize("n", [2, 3, 10, 4097, 100_000])
def test_spearman_of_distinct_values_is_the_exact_fraction(n: int) -> None:
    from fractions import Fraction

    rng = np.random.default_rng(n)
    mu = rng.normal(size=n)
    sd = rng.permutation(np.linspace(0.5, 2.0, n))  # distinct
    y = mu + sd * rng.normal(size=n)
    got = metric("spearman", P.Gaussian(mu, sd), y)
    ru = np.argsort(np.argsort(sd)).astype(np.int64)
    re = np.argsort(np.argsort(np.abs(y - mu))).astype(np.int64)
    h2 = Fraction(n - 1, 2)
    num = sum(
        (Fraction(int(a)) - h2) * (Fraction(int(b)) - h2) for a, b in zip(ru, re, strict=True)
    )
    den = Fraction(n * (n * n - 1), 12)
    assert got == float(num / den)
    assert got == pytest.approx(scipy.stats.spearmanr(sd, np.abs(y - mu)).statistic, abs=1e-13)
