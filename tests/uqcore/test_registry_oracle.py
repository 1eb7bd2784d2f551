"""The best value of every metric of the set, interval, decomposition and skill families, on an
input built to attain it (an oracle), and a worse value on a perturbed input.

Each entry says why its input is the oracle; a metric of these families with a best value must
have an entry here (or say in ``UNATTAINABLE`` why its best cannot be reached).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.factories import make_classification, make_prediction
from uqcore import predictions as P
from uqcore import registry
from uqcore.batch import ClassificationBatch, make_batch

FAMILIES = {"intervals", "sets", "skill"}
NEW = {
    "wis",
    "wis_dispersion",
    "wis_overprediction",
    "wis_underprediction",
    "corp_mcb",
    "brier_reliability",
    "smooth_ece",
    "spiegelhalter_z",
    "interval_score",
}
UNATTAINABLE = {
    "nll_skill": "best 1 is the limit of a density at y growing without bound",
}

N = 60
Y = np.random.default_rng(21).normal(size=N) * 2.0
LABELS = np.repeat([0, 1], N // 2)


def _quantiles_at_y() -> tuple[Any, Any]:
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    return P.Quantiles(levels, np.repeat(Y[:, None], 5, axis=1)), Y


def _interval_covering(share: float, level: float, widths: Any = None) -> tuple[Any, Any]:
    """Intervals around y that miss the target on exactly the rows of a share 1 − ``share``
    of every group of twenty rows (by width when ``widths`` is given)."""
    w = np.full(N, 1.0) if widths is None else widths
    miss = (np.arange(N) % 20) >= round(20 * share)
    # centres on a grid of 1/4 near y: equal widths stay exactly equal after the subtraction
    centre = np.round(Y * 4.0) / 4.0
    lower = centre - w / 2 + np.where(miss, w + 1.0, 0.0)  # shifted above y: not covered
    return P.Interval(lower, lower + w, level=level), Y


def _one_hot() -> tuple[Any, Any]:
    return P.Probs(np.eye(2)[LABELS]), LABELS


def _sets_at(share: float) -> tuple[Any, Any]:
    """Singletons holding the label on a share ``share`` of each class's rows."""
    hit = (np.arange(N) % (N // 2)) < round(share * N / 2)
    chosen = np.where(hit, LABELS, 1 - LABELS)
    return P.PredictionSet(np.eye(2, dtype=bool)[chosen]), LABELS


ORACLES: dict[tuple[str, str], tuple[Callable[[], tuple[Any, Any]], dict[str, Any]]] = {
    # quantiles equal to the targets: no width, no miss
    ("regression", "wis"): (_quantiles_at_y, {}),
    ("regression", "wis_dispersion"): (_quantiles_at_y, {}),
    ("regression", "wis_overprediction"): (_quantiles_at_y, {}),
    ("regression", "wis_underprediction"): (_quantiles_at_y, {}),
    ("regression", "check_score_skill"): (_quantiles_at_y, {}),
    ("regression", "crps_skill"): (lambda: (P.Samples(np.repeat(Y[:, None], 4, 1)), Y), {}),
    # zero-width intervals at the targets
    ("regression", "interval_score"): (lambda: (P.Interval(Y, Y, level=0.9), Y), {}),
    ("regression", "interval_score_skill"): (lambda: (P.Interval(Y, Y, level=0.9), Y), {}),
    ("regression", "cwc"): (lambda: (P.Interval(Y, Y, level=0.9), Y), {}),
    # equal widths: the width says nothing about coverage
    ("regression", "hsic_width_coverage"): (lambda: _interval_covering(0.7, 0.9), {}),
    # exactly the nominal share covered, in every width stratum
    ("regression", "coverage"): (lambda: _interval_covering(0.95, 0.95), {}),
    ("regression", "size_stratified_coverage"): (
        lambda: _interval_covering(0.9, 0.9, np.linspace(1.0, 3.0, N)),
        {},
    ),
    ("regression", "coverage_pvalue"): (lambda: _interval_covering(0.9, 0.9), {}),
    # the mean forecast is the target: already its own isotonic recalibration
    ("regression", "corp_mcb"): (lambda: (P.Gaussian(Y, np.ones(N)), Y), {}),
    # one-hot probabilities of the labels
    ("classification", "brier_skill"): (_one_hot, {}),
    ("classification", "log_loss_skill"): (_one_hot, {}),
    ("classification", "corp_mcb"): (_one_hot, {}),
    ("classification", "brier_reliability"): (_one_hot, {}),
    ("classification", "smooth_ece"): (_one_hot, {}),
    # confidence 0.75 and three rows in four correct: calibrated
    ("classification", "spiegelhalter_z"): (
        lambda: (P.Probs(np.tile([0.75, 0.25], (N, 1))), (np.arange(N) % 4 == 3).astype(int)),
        {},
    ),
    # singletons, the label in 90% of each class's rows; none empty
    ("classification", "coverage"): (lambda: _sets_at(0.9), {"level": 0.9}),
    ("classification", "worst_class_coverage"): (lambda: _sets_at(0.9), {}),
    ("classification", "class_conditional_coverage_gap"): (lambda: _sets_at(0.9), {}),
    ("classification", "size_stratified_coverage"): (lambda: _sets_at(0.9), {}),
    ("classification", "empty_rate"): (lambda: _sets_at(0.9), {}),
}


def _value(task: str, name: str, pred: Any, y: Any, params: dict[str, Any]) -> float:
    spec = registry.get(name, task)
    batch = ClassificationBatch(pred, y) if task == "classification" else make_batch(pred, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", registry.UndefinedMetricWarning)
        got = registry.call(spec, batch, params)
    assert got is not None
    return float(got["value"] if isinstance(got, dict) else got)


def test_every_metric_with_a_best_value_has_an_oracle() -> None:
    wanted = {
        (s.task, s.name)
        for s in registry.specs()
        if s.best is not None and (s.family in FAMILIES or s.name in NEW)
    }
    missing = {k for k in wanted - set(ORACLES) if k[1] not in UNATTAINABLE}
    assert not missing, sorted(missing)


@pytest.mark.parametrize(("task", "name"), sorted(ORACLES))
def test_oracle_input_gets_the_best_value(task: str, name: str) -> None:
    spec = registry.get(name, task)
    make, params = ORACLES[(task, name)]
    pred, y = make()
    assert spec.why_not(pred) is None
    best = spec.target(params) if spec.direction == "target" else spec.best
    assert best is not None
    assert _value(task, name, pred, y, params) == pytest.approx(best, abs=1e-12)
    # and a random prediction of the same kind is not better (a "target" metric's random
    # value may equal its target by chance: not checked)
    if spec.direction == "target":
        return
    if task == "classification":
        other, y2, _ = make_classification(pred.kind, 200, seed=3)
    else:
        other, y2 = make_prediction(pred.kind, 200, seed=3)
    worse = _value(task, name, other, y2, params)
    assert worse >= best if spec.direction == "lower" else worse <= best
