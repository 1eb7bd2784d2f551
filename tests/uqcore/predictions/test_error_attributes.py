"""UQValidationError carries the argument, the first bad index and value beside its message."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from uqcore import UQValidationError, evaluate
from uqcore import predictions as P
from uqcore.batch import make_batch
from uqcore.predictions import classification as PC

N = 20


def _vec(**at: float) -> np.ndarray:
    """N ones with entries replaced: ``_vec(i17=-0.3)`` sets entry 17 to -0.3."""
    v = np.ones(N)
    for key, value in at.items():
        v[int(key[1:])] = value
    return v


def _probs(c: int = 3) -> np.ndarray:
    return np.full((N, c), 1.0 / c)


def _members(m: int = 4, c: int = 3) -> np.ndarray:
    return np.full((m, N, c), 1.0 / c)


def _with(arr: np.ndarray, idx: tuple[int, ...], value: float) -> np.ndarray:
    out = arr.copy()
    out[idx] = value
    return out


def _quantile_values() -> np.ndarray:
    v = np.tile([0.0, 1.0, 2.0], (N, 1))
    v[4, 2] = 0.5  # values[4, 2] < values[4, 1]
    return v


def _mixture_weights() -> np.ndarray:
    w = np.full((N, 2), 0.5)
    w[6] = [0.7, 0.7]  # row 6 sums to 1.4
    return w


# (case, build, argument, index, value); value None where no single entry is at fault
CASES: list[tuple[str, Callable[[], Any], str, Any, Any]] = [
    # regression kinds
    ("gaussian std <= 0", lambda: P.Gaussian(_vec(), _vec(i17=-0.3)), "std", 17, -0.3),
    ("gaussian mean nan", lambda: P.Gaussian(_vec(i3=np.nan), _vec()), "mean", 3, np.nan),
    ("gaussian std inf", lambda: P.Gaussian(_vec(), _vec(i0=np.inf)), "std", 0, np.inf),
    ("gaussian std missing", lambda: P.Gaussian(_vec(), None), "std", None, None),
    ("gaussian std shape", lambda: P.Gaussian(_vec(), np.ones(3)), "std", None, None),
    ("gaussian mean 2-D", lambda: P.Gaussian(np.ones((N, 2)), _vec()), "mean", None, None),
    ("gaussian mean text", lambda: P.Gaussian(["a"] * N, _vec()), "mean", None, None),
    ("gaussian mean empty", lambda: P.Gaussian([], []), "mean", None, None),
    ("laplace scale 0", lambda: P.Laplace(_vec(), _vec(i9=0.0)), "scale", 9, 0.0),
    ("student_t df <= 0", lambda: P.StudentT(_vec(), _vec(), _vec(i2=-1.0)), "df", 2, -1.0),
    (
        "student_t std needs df > 2",
        lambda: P.StudentT(_vec(), _vec(), _with(np.full(N, 3.0), (5,), 1.5)).std(),
        "df",
        5,
        1.5,
    ),
    (
        "mixture weights < 0",
        lambda: P.Mixture(
            _with(np.full((N, 2), 0.5), (3, 1), -0.2), np.zeros((N, 2)), np.ones((N, 2))
        ),
        "weights",
        (3, 1),
        -0.2,
    ),
    (
        "mixture row sum",
        lambda: P.Mixture(_mixture_weights(), np.zeros((N, 2)), np.ones((N, 2))),
        "weights",
        6,
        1.4,
    ),
    (
        "mixture stds 0",
        lambda: P.Mixture(
            np.full((N, 2), 0.5), np.zeros((N, 2)), _with(np.ones((N, 2)), (8, 0), 0)
        ),
        "stds",
        (8, 0),
        0.0,
    ),
    ("samples no draws", lambda: P.Samples(np.zeros((N, 0))), "draws", None, None),
    (
        "samples nan",
        lambda: P.Samples(_with(np.zeros((N, 4)), (11, 2), np.nan)),
        "draws",
        (11, 2),
        np.nan,
    ),
    (
        "samples equal draws",
        lambda: P.Samples(np.zeros((N, 4))).logpdf(np.zeros(N)),
        "draws",
        0,
        None,
    ),
    (
        "samples bandwidth",
        lambda: P.Samples(np.arange(N * 4.0).reshape(N, 4)).bandwidth(-1.0),
        "bandwidth",
        None,
        -1.0,
    ),
    (
        "quantiles levels order",
        lambda: P.Quantiles([0.1, 0.5, 0.5], np.zeros((N, 3))),
        "levels",
        2,
        0.5,
    ),
    ("quantiles levels range", lambda: P.Quantiles([0.0, 0.5], np.zeros((N, 2))), "levels", 0, 0.0),
    ("quantiles columns", lambda: P.Quantiles([0.1, 0.9], np.zeros((N, 3))), "values", None, None),
    (
        "quantiles values order",
        lambda: P.Quantiles([0.1, 0.5, 0.9], _quantile_values()),
        "values",
        (4, 2),
        0.5,
    ),
    (
        "quantiles ppf outside",
        lambda: P.Quantiles([0.1, 0.9], np.tile([0.0, 1.0], (N, 1))).ppf([0.5, 0.95]),
        "levels",
        1,
        0.95,
    ),
    (
        "point_uncertainty < 0",
        lambda: P.PointUncertainty(_vec(), _vec(i19=-2.0)),
        "uncertainty",
        19,
        -2.0,
    ),
    # classification kinds
    ("probs < 0", lambda: PC.Probs(_with(_probs(), (2, 2), -0.1)), "probs", (2, 2), -0.1),
    (
        "probs row sum",
        lambda: PC.Probs(_with(_probs(), (7, 0), 1.0)),
        "probs",
        7,
        pytest.approx(5 / 3),
    ),
    ("probs nan", lambda: PC.Probs(_with(_probs(), (1, 1), np.nan)), "probs", (1, 1), np.nan),
    ("probs 1-D", lambda: PC.Probs(np.ones(N)), "probs", None, None),
    ("probs one class", lambda: PC.Probs(np.ones((N, 1))), "probs", None, None),
    (
        "logits inf",
        lambda: PC.Logits(_with(np.zeros((N, 3)), (13, 1), np.inf)),
        "logits",
        (13, 1),
        np.inf,
    ),
    (
        "ensemble member row sum",
        lambda: PC.Ensemble(member_probs=_with(_members(), (2, 3, 0), 0.9)),
        "member_probs",
        (2, 3),
        pytest.approx(0.9 + 2 / 3),
    ),
    (
        "ensemble logits nan",
        lambda: PC.Ensemble(member_logits=_with(np.zeros((4, N, 3)), (1, 4, 2), np.nan)),
        "member_logits",
        (1, 4, 2),
        np.nan,
    ),
    ("ensemble neither", lambda: PC.Ensemble(), "member_probs", None, None),
    (
        "dirichlet alpha 0",
        lambda: PC.Dirichlet(_with(np.ones((N, 3)), (1, 0), 0.0)),
        "alpha",
        (1, 0),
        0.0,
    ),
    (
        "estimate nan",
        lambda: PC.Probs(_probs(), estimates={"maha": _vec(i12=np.nan)}),
        "estimates['maha']",
        12,
        np.nan,
    ),
    (
        "estimate shape",
        lambda: PC.Probs(_probs(), estimates={"maha": np.ones(3)}),
        "estimates['maha']",
        None,
        None,
    ),
    (
        "estimate named as an aggregator",
        lambda: PC.Probs(_probs(), estimates={"entropy_bma": _vec()}),
        "estimates",
        None,
        "entropy_bma",
    ),
    # targets, weights and the evaluation's own arguments
    ("y nan", lambda: make_batch(P.Gaussian(_vec(), _vec()), _vec(i4=np.nan)), "y", 4, np.nan),
    ("y length", lambda: make_batch(P.Gaussian(_vec(), _vec()), np.ones(3)), "y", None, None),
    (
        "sample_weight < 0",
        lambda: make_batch(P.Gaussian(_vec(), _vec()), _vec(), _vec(i10=-1.0)),
        "sample_weight",
        10,
        -1.0,
    ),
    (
        "sample_weight all zero",
        lambda: make_batch(P.Gaussian(_vec(), _vec()), _vec(), np.zeros(N)),
        "sample_weight",
        None,
        None,
    ),
    (
        "labels range",
        lambda: make_batch(PC.Probs(_probs()), _vec(i5=3).astype(int)),
        "labels",
        5,
        3,
    ),
    ("labels integers", lambda: make_batch(PC.Probs(_probs()), _vec(i6=0.5)), "labels", 6, 0.5),
    (
        "ood flags",
        lambda: make_batch(PC.Probs(_probs()), np.zeros(N, int), ood=_vec(i7=2).astype(int)),
        "ood",
        7,
        2,
    ),
    (
        "soft_labels row sum",
        lambda: make_batch(
            PC.Probs(_probs()), np.zeros(N, int), soft_labels=_with(_probs(), (9, 0), 0.0)
        ),
        "soft_labels",
        9,
        pytest.approx(2 / 3),
    ),
    (
        "ood for regression",
        lambda: make_batch(P.Gaussian(_vec(), _vec()), _vec(), ood=np.zeros(N, bool)),
        "ood",
        None,
        None,
    ),
    (
        "metrics empty",
        lambda: evaluate(P.Gaussian(_vec(), _vec()), _vec(), metrics=[]),
        "metrics",
        None,
        None,
    ),
    (
        "metric does not apply",
        lambda: evaluate(P.PointUncertainty(_vec(), _vec()), _vec(), metrics=["rmse", "crps"]),
        "metrics",
        1,
        "crps",
    ),
    (
        "estimator does not apply",
        lambda: evaluate(PC.Probs(_probs()), np.zeros(N, int), estimators=["entropy_bma", "nope"]),
        "estimators",
        1,
        "nope",
    ),
]


def _same(found: Any, expected: Any) -> bool:
    if isinstance(expected, float) and np.isnan(expected):
        return isinstance(found, float) and np.isnan(found)
    return bool(found == expected)


@pytest.mark.parametrize(
    ("build", "argument", "index", "value"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_errors_name_argument_index_and_value(
    build: Callable[[], Any], argument: str, index: Any, value: Any
) -> None:
    with pytest.raises(UQValidationError) as info:
        build()
    exc = info.value
    assert exc.argument == argument, str(exc)
    assert exc.index == index, str(exc)
    assert _same(exc.value, value), (exc.value, str(exc))
    # the value is a plain Python scalar, whatever the array's dtype
    assert not isinstance(exc.value, np.generic)


def test_the_message_is_unchanged_and_the_attributes_default_to_none() -> None:
    exc = UQValidationError("something is wrong")
    assert str(exc) == "something is wrong"
    assert (exc.argument, exc.index, exc.value) == (None, None, None)
    assert exc.args == ("something is wrong",)


def test_an_index_is_a_number_for_a_vector_and_none_for_a_scalar() -> None:
    assert UQValidationError("m", index=(4,)).index == 4
    assert UQValidationError("m", index=(4, 2)).index == (4, 2)
    assert UQValidationError("m", index=()).index is None


def test_pickling_keeps_the_attributes() -> None:
    with pytest.raises(UQValidationError) as info:
        P.Gaussian(_vec(), _vec(i17=-0.3))
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is UQValidationError
    assert str(back) == "std must be > 0; std[17] = -0.3"
    assert (back.argument, back.index, back.value) == ("std", 17, -0.3)
    with pytest.raises(UQValidationError) as info:
        PC.Probs(_with(_probs(), (2, 1), -0.5))
    back = pickle.loads(pickle.dumps(info.value))
    assert (back.argument, back.index, back.value) == ("probs", (2, 1), -0.5)
