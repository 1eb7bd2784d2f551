"""Adversarial group calibration: determinism, structure, exact limits, weights, and agreement
in distribution with Uncertainty Toolbox's unseeded procedure."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import threading
import time
import warnings
from typing import Any

import matplotlib
import numpy as np
import pytest

from uqcore import UQValidationError, evaluate, metric
from uqcore import predictions as P
from uqcore.curves import CURVES, curves
from uqcore.regression import group_calibration as gc

matplotlib.use("Agg")
warnings.filterwarnings("ignore", category=DeprecationWarning)

import uncertainty_toolbox as uct  # noqa: E402

NAME = "adversarial_group_calibration"


def _data(n: int, seed: int) -> tuple[P.Gaussian, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.3, 1.5, size=n)
    y = mu + 1.3 * sd * rng.normal(size=n)  # over-confident: visible miscalibration
    return P.Gaussian(mu, sd), y, mu, sd


def test_deterministic_for_a_seed_and_structured() -> None:
    pred, y, _, _ = _data(80, 0)
    a = metric(NAME, pred, y, seed=3)
    gc._RECENT.clear()  # drawn again, not the kept result
    assert a == metric(NAME, pred, y, seed=3)
    assert a != metric(NAME, pred, y, seed=4)
    assert a["group_sizes"] == [float(v) for v in np.linspace(0, 1, 10)]
    assert a["group_rows"] == [max(round(80 * r), 2) for r in np.linspace(0, 1, 10)]
    assert len(a["score_mean"]) == len(a["score_std"]) == len(a["score_stderr"]) == 10
    assert math.isclose(a["value"], float(np.mean(a["score_mean"])), rel_tol=1e-12)
    for sd, se in zip(a["score_std"], a["score_stderr"], strict=True):
        assert math.isclose(se, sd / math.sqrt(10), rel_tol=1e-12, abs_tol=1e-15)


def test_the_curve_reuses_the_draws_of_the_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job computes the metric and then its curve: the same draws from the same totals and
    seed, done once. The kept result is handed out as copies."""
    pred, y, _, _ = _data(300, 5)
    real = gc.group_scores.__wrapped__  # type: ignore[attr-defined]
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(gc, "group_scores", gc._Kept(counted))
    gc._RECENT.clear()
    a = metric(NAME, pred, y, seed=7)
    curve = curves(pred, y, ["group_calibration"], seed=7)["group_calibration"]
    assert len(calls) == 1
    assert list(curve.score_mean) == a["score_mean"]
    a["score_mean"][0] = -1.0  # the caller's copy
    assert metric(NAME, pred, y, seed=7)["score_mean"][0] != -1.0
    assert len(calls) == 1
    metric(NAME, pred, y, seed=8)  # other inputs: drawn
    assert len(calls) == 2


def test_a_call_waits_for_the_same_inputs_drawn_in_another_thread() -> None:
    """The curve, computed while evaluate's helper thread still draws the metric's groups,
    waits for that result instead of drawing the same groups again; an error reaches both
    calls, and the next call computes afresh."""
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow(cats: Any, expected: Any, *, fail: bool = False) -> dict[str, Any]:
        calls.append(1)
        started.set()
        assert release.wait(30)
        if fail:
            raise UQValidationError("no groups")
        return {"value": float(cats.sum()), "score_mean": [1.0, 2.0]}

    kept = gc._Kept(slow)
    cats, expected = np.arange(5), np.full(5, 0.2)
    for fail in (False, True):
        gc._RECENT.clear()
        calls.clear()
        started.clear()
        release.clear()
        out: dict[str, Any] = {}

        def first(fail: bool = fail, out: dict[str, Any] = out) -> None:
            try:
                out["first"] = kept(cats, expected, fail=fail)
            except UQValidationError as exc:
                out["first"] = exc

        t = threading.Thread(target=first)
        t.start()
        assert started.wait(30)
        waiter = concurrent.futures.ThreadPoolExecutor(1)
        second = waiter.submit(kept, cats, expected, fail=fail)
        time.sleep(0.05)
        assert not second.done()  # waiting for the first call, not computing
        release.set()
        t.join(30)
        waiter.shutdown()
        assert len(calls) == 1
        if fail:
            assert isinstance(out["first"], UQValidationError)
            with pytest.raises(UQValidationError, match="no groups"):
                second.result()
            assert not gc._PENDING
            with pytest.raises(UQValidationError):
                kept(cats, expected, fail=True)  # not kept: computed again
            assert len(calls) == 2
        else:
            assert out["first"] == second.result() == {"value": 10.0, "score_mean": [1.0, 2.0]}
            assert out["first"]["score_mean"] is not second.result()["score_mean"]  # copies
            assert not gc._PENDING


def test_evaluate_computes_the_curves_and_its_callers_work_while_the_groups_are_drawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """evaluate's curves and ``meanwhile`` run while the metric draws in its helper thread;
    the group calibration curve (``late``: computed last) waits for the metric's draws rather
    than drawing them again."""
    pred, y, _, _ = _data(2000, 6)
    real = gc.group_scores.__wrapped__  # type: ignore[attr-defined]
    order: list[str] = []
    release = threading.Event()

    def counted(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        order.append("groups drawn")
        return real(*args, **kwargs)

    pit_spec = CURVES["pit_histogram"]

    def pit(*args: Any, **kwargs: Any) -> Any:
        order.append("pit_histogram")
        return pit_spec.compute(*args, **kwargs)

    monkeypatch.setattr(gc, "group_scores", gc._Kept(counted))
    monkeypatch.setitem(CURVES, "pit_histogram", dataclasses.replace(pit_spec, compute=pit))
    gc._RECENT.clear()
    rep = evaluate(
        pred,
        y,
        [NAME, "mae"],
        curves=["pit_histogram"],
        meanwhile=lambda: (order.append("meanwhile"), release.set()),
    )
    assert order == ["pit_histogram", "meanwhile", "groups drawn"]
    assert list(rep.curves) == ["pit_histogram"]

    # The late curve waits for the metric's draws (released 0.3 s after the start).
    order.clear()
    release.clear()
    gc._RECENT.clear()
    timer = threading.Timer(0.3, release.set)
    timer.start()
    rep = evaluate(pred, y, [NAME, "mae"], curves=["group_calibration", "pit_histogram"])
    timer.join()
    assert order == ["pit_histogram", "groups drawn"]  # drawn once, for both
    assert list(rep.curves) == ["group_calibration", "pit_histogram"]  # the order asked
    assert list(rep.curves["group_calibration"].score_mean) == rep[NAME]["score_mean"]


@pytest.mark.parametrize("cali", [("mean_abs", "ece"), ("root_mean_sq", "rmsce")])
@pytest.mark.parametrize("compat", [None, "uncertainty_toolbox"])
def test_whole_set_group_equals_average_calibration(
    cali: tuple[str, str], compat: str | None
) -> None:
    pred, y, _, _ = _data(50, 1)
    r = metric(NAME, pred, y, cali_type=cali[0], compat=compat)
    assert r["group_rows"][-1] == 50
    full = metric(cali[1], pred, y, compat=compat)
    assert math.isclose(r["score_mean"][-1], full, rel_tol=1e-12)
    assert r["score_std"][-1] <= 1e-15


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tiny_inputs(n: int) -> None:
    pred, y, _, _ = _data(n, n)
    r = metric(NAME, pred, y)
    assert all(g <= n for g in r["group_rows"])
    assert 0.0 <= r["value"] <= 1.0
    r = metric(NAME, pred, y, draw_with_replacement=True)
    assert min(r["group_rows"]) == 2


def test_integer_weights_equal_repeated_rows_and_real_weights_refused() -> None:
    pred, y, _, _ = _data(40, 2)
    counts = np.random.default_rng(0).integers(0, 4, size=40)
    counts[0] = 1
    idx = np.repeat(np.arange(40), counts)
    for repl in (False, True):
        a = metric(NAME, pred, y, sample_weight=counts.astype(float), draw_with_replacement=repl)
        b = metric(NAME, pred.take(idx), y[idx], draw_with_replacement=repl)
        assert a == b
    with pytest.raises(UQValidationError, match="integer"):
        metric(NAME, pred, y, sample_weight=np.full(40, 0.5))


def test_quantiles_kind_is_supported() -> None:
    from tests.factories import make_prediction

    pred, y = make_prediction("quantiles", 60, 0)
    r = metric(NAME, pred, y)
    assert math.isclose(r["score_mean"][-1], metric("ece", pred, y), rel_tol=1e-12)


@pytest.mark.slow
def test_agrees_in_distribution_with_uncertainty_toolbox() -> None:
    n, runs, ours_runs, trials = 60, 8, 100, 10  # trials: both procedures' default num_trials
    pred, y, mu, sd = _data(n, 7)
    np.random.seed(12345)  # noqa: NPY002  (the peer draws from the legacy global RNG)
    ut = [uct.adversarial_group_calibration(mu, sd, y, cali_type="mean_abs") for _ in range(runs)]
    ours = [metric(NAME, pred, y, seed=s, compat="uncertainty_toolbox") for s in range(ours_runs)]
    ut_mean = np.array([r.score_mean for r in ut]).mean(axis=0)
    ours_mean = np.array([r["score_mean"] for r in ours]).mean(axis=0)
    # Means over runs per group size agree within 4 standard errors of the difference. A run's
    # score is the mean over its trials of the worst of 10 random groups, and each run reports
    # the trials' standard deviation (ddof = 1; the peer calls it score_stderr): the trials are
    # independent within and across runs, so the variance of a run mean is the trials'
    # variance pooled over the runs (8 · 9 degrees of freedom, where the spread of 8 run means
    # has 7) over the trials. Simulated from 10⁵ trials of each size: on agreeing procedures
    # some size fails with probability 2·10⁻³ (10 runs, their means' spread and 5 standard
    # errors: 3·10⁻³), and a shift of the means by 0.2 of the trials' standard deviation or
    # more is detected at least as often as with those.
    ut_var = np.mean(np.array([r.score_stderr for r in ut]) ** 2, axis=0)
    ours_var = np.mean(np.array([r["score_std"] for r in ours], dtype=float) ** 2, axis=0)
    se = np.sqrt(ut_var / (trials * runs) + ours_var / (trials * ours_runs))
    diff = np.abs(ut_mean - ours_mean)
    assert np.all(diff <= 4 * se + 1e-12), (diff, se)
    # The procedure is sensitive: a different calibration type is far off at small groups.
    other = metric(NAME, pred, y, cali_type="root_mean_sq", compat="uncertainty_toolbox")
    assert other["score_mean"][0] > ut_mean[0] + 4 * se[0]


def test_bad_options() -> None:
    pred, y, _, _ = _data(10, 0)
    with pytest.raises(UQValidationError, match="cali_type"):
        metric(NAME, pred, y, cali_type="max")
    with pytest.raises(UQValidationError, match="num_trials"):
        metric(NAME, pred, y, num_trials=0)


def test_evaluate_finishes_it_after_the_others_with_the_same_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """evaluate starts the metric in its turn and takes the random groups from the helper
    thread after the other metrics: the value of a direct call, in the same place of the
    report, whether the helper thread is on or off."""
    from uqcore import _background, evaluate

    pred, y, _, _ = _data(500, 11)
    threads: list[str] = []
    real = gc.group_scores

    def where(*args: Any, **kwargs: Any) -> Any:
        import threading

        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(gc, "group_scores", gc._Kept(where))
    gc._RECENT.clear()
    on = evaluate(pred, y, params={NAME: {"seed": 5}})
    assert threads and threads[0].startswith("uqcore-bg")
    monkeypatch.setattr(_background, "ENABLED", False)
    gc._RECENT.clear()
    off = evaluate(pred, y, params={NAME: {"seed": 5}})
    assert threads[-1] == "MainThread"
    gc._RECENT.clear()
    direct = metric(NAME, pred, y, seed=5)
    assert on[NAME] == off[NAME] == direct
    assert list(on.to_dict()["values"]) == list(off.to_dict()["values"])  # the same order
    assert on.meta["timings_s"][NAME] > 0


def test_evaluate_reports_its_undefined_value_and_raises_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the start finds (too many rows to draw from: None and the reason) and what the
    helper thread raises reach evaluate's report and caller as in a direct call."""
    from uqcore import evaluate

    pred, y, _, _ = _data(50, 12)
    w = np.ones(50)
    w[0] = 2e9  # a total weight of 10^9 rows or more: numpy's sampler cannot draw groups
    report = evaluate(pred, y, [NAME, "ece"], sample_weight=w)
    assert report[NAME] is None
    assert any("10^9 rows" in note for note in report.warnings)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("drawn badly")

    monkeypatch.setattr(gc, "group_scores", gc._Kept(broken))
    with pytest.raises(RuntimeError, match="drawn badly"):
        evaluate(pred, y, [NAME, "ece"])
