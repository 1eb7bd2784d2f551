"""The Interval and PredictionSet kinds: validation with the first offending index, rows,
capabilities, and the central intervals of the distributional kinds."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from scipy.stats import norm

from tests.factories import to_backend
from uqcore import UQValidationError
from uqcore import predictions as P


def test_interval_holds_its_bounds_and_level() -> None:
    pred = P.Interval([0.0, 1.0, 2.0], [1.0, 1.0, 5.0], level=0.9)
    assert pred.kind == "interval" and pred.n == 3 and pred.level == 0.9
    assert pred.capabilities == frozenset({"interval"})
    lo, hi = pred.interval()
    np.testing.assert_array_equal(lo, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(hi, [1.0, 1.0, 5.0])
    np.testing.assert_array_equal(pred.width(), [1.0, 0.0, 3.0])
    assert pred.interval(0.9)[0] is lo  # its own level may be named
    sub = pred.take([2, 0])
    assert sub.level == 0.9
    np.testing.assert_array_equal(sub.lower, [2.0, 0.0])
    assert P.Interval([0.0], [1.0]).level is None


@pytest.mark.parametrize(
    ("kwargs", "argument", "message"),
    [
        ({"lower": [0.0, 2.0], "upper": [1.0, 1.5]}, "upper", "upper[1] = 1.5 < lower[1] = 2"),
        ({"lower": [0.0, np.nan], "upper": [1.0, 1.5]}, "lower", "finite"),
        ({"lower": [0.0], "upper": [1.0, 2.0]}, "upper", "same shape"),
        ({"lower": [0.0], "upper": [1.0], "level": 1.0}, "level", "(0, 1)"),
        ({"lower": [0.0], "upper": [1.0], "level": 0.0}, "level", "(0, 1)"),
        ({"lower": [0.0], "upper": [1.0], "level": True}, "level", "number"),
        ({"lower": [0.0], "upper": [1.0], "level": "high"}, "level", "number"),
    ],
)
def test_interval_refuses_bad_input(kwargs: dict[str, Any], argument: str, message: str) -> None:
    with pytest.raises(UQValidationError, match=re.escape(message)) as e:
        P.Interval(**kwargs)
    assert e.value.argument == argument


def test_interval_refuses_another_level() -> None:
    with pytest.raises(UQValidationError, match=r"made at level 0\.9"):
        P.Interval([0.0], [1.0], level=0.9).interval(0.8)


def test_distributional_kinds_give_central_intervals() -> None:
    mu, sd = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    g = P.Gaussian(mu, sd)
    assert "interval" in g.capabilities
    lo, hi = g.interval(0.8)
    np.testing.assert_allclose(lo, norm.ppf(0.1, mu, sd), rtol=1e-12)
    np.testing.assert_allclose(hi, norm.ppf(0.9, mu, sd), rtol=1e-12)
    with pytest.raises(UQValidationError, match="pass level"):
        g.interval()
    with pytest.raises(UQValidationError, match=r"\(0, 1\)"):
        g.interval(1.2)
    assert "interval" not in P.PointUncertainty([0.0], [1.0]).capabilities
    q = P.Quantiles([0.1, 0.5, 0.9], [[-1.0, 0.0, 2.0]])
    np.testing.assert_allclose(np.stack(q.interval(0.8)), [[-1.0], [2.0]])


def test_interval_runs_on_other_backends(xp: Any) -> None:
    pred = P.Interval([0.0, 1.0], [2.0, 4.0], level=0.5)
    other, _ = to_backend(pred, np.zeros(2), xp)
    assert other.level == 0.5
    np.testing.assert_array_equal(np.asarray(other.width()), [2.0, 3.0])


def test_prediction_set_holds_sets_and_optional_probs() -> None:
    sets = np.array([[True, False, False], [True, True, False], [False, False, False]])
    bare = P.PredictionSet(sets)
    assert bare.kind == "prediction_set" and bare.n == 3 and bare.n_classes == 3
    assert bare.capabilities == frozenset({"sets"}) and not bare.has_probs
    assert bare.set_sizes().tolist() == [1, 2, 0]
    assert bare.estimator_names() == []
    with pytest.raises(UQValidationError, match="without probs"):
        bare.probs()
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [0.2, 0.3, 0.5]])
    full = P.PredictionSet(sets.astype(int), probs=probs)
    assert full.capabilities == frozenset({"sets", "probs", "estimates"})
    np.testing.assert_array_equal(full.sets(), sets)
    np.testing.assert_allclose(full.estimate("one_minus_max_prob_bma"), 1 - probs.max(axis=1))
    sub = full.take([2, 2])
    np.testing.assert_array_equal(sub.sets(), sets[[2, 2]])
    np.testing.assert_array_equal(sub.probs(), probs[[2, 2]])


@pytest.mark.parametrize(
    ("sets", "probs", "argument", "message"),
    [
        ([[0, 2], [1, 1]], None, "sets", r"sets\[0, 1\] = 2"),
        ([[0.5, 1.0]], None, "sets", "boolean"),
        ([["a", "b"]], None, "sets", "booleans"),
        ([True, False], None, "sets", "2-D"),
        ([[True]], None, "sets", "at least 2 classes"),
        (np.zeros((0, 3), bool), None, "sets", "empty"),
        ([[True, False]], [[0.5, 0.5, 0.0]], "probs", "shape of sets"),
        ([[True, False]], [[0.7, 0.5]], "probs", "sum"),
    ],
)
def test_prediction_set_refuses_bad_input(
    sets: Any, probs: Any, argument: str, message: str
) -> None:
    with pytest.raises(UQValidationError, match=message) as e:
        P.PredictionSet(sets, probs=probs)
    assert e.value.argument == argument
