"""service.kinds: named arrays -> uqcore prediction, with precise errors."""

from __future__ import annotations

import numpy as np
import pytest

from service.kinds import (
    CLASSIFICATION_KINDS,
    KIND_FIELDS,
    MATRIX_FIELDS,
    build_prediction,
    required_fields,
)
from uqcore import UQValidationError
from uqcore import predictions as P
from uqcore.predictions import classification as PC

ALL_KINDS = {**P.KINDS, **PC.KINDS}

RNG = np.random.default_rng(7)
N = 5


def _arrays(kind: str) -> dict[str, np.ndarray]:
    vec = RNG.normal(size=N)
    pos = RNG.uniform(0.5, 2.0, size=N)
    return {
        "gaussian": {"mean": vec, "std": pos},
        "laplace": {"loc": vec, "scale": pos},
        "student_t": {"loc": vec, "scale": pos, "df": np.full(N, 4.0)},
        "mixture": {
            "weights": np.full((N, 2), 0.5),
            "means": RNG.normal(size=(N, 2)),
            "stds": RNG.uniform(0.5, 1.0, size=(N, 2)),
        },
        "samples": {"draws": RNG.normal(size=(N, 8))},
        "quantiles": {
            "levels": np.array([0.1, 0.5, 0.9]),
            "values": np.sort(RNG.normal(size=(N, 3)), axis=1),
        },
        "point_uncertainty": {"prediction": vec, "uncertainty": pos},
        "probs": {"probs": RNG.dirichlet(np.ones(3), size=N)},
        "logits": {"logits": RNG.normal(size=(N, 3))},
        "ensemble": {
            "member_probs": RNG.dirichlet(np.ones(3), size=(4, N)).astype(np.float32),
            "estimate:score": pos,
        },
        "dirichlet": {"alpha": RNG.uniform(0.5, 3.0, size=(N, 3))},
        "interval": {"lower": vec - pos, "upper": vec + pos, "level": np.asarray(0.8)},
        "prediction_set": {"sets": RNG.random((N, 3)) < 0.5},
    }[kind]


def test_fields_cover_every_uqcore_kind() -> None:
    assert set(KIND_FIELDS) == set(ALL_KINDS)
    assert set(PC.KINDS) == CLASSIFICATION_KINDS


@pytest.mark.parametrize("kind", sorted(KIND_FIELDS))
def test_builds_the_uqcore_kind(kind: str) -> None:
    pred = build_prediction(kind, _arrays(kind))
    assert isinstance(pred, ALL_KINDS[kind])
    assert pred.kind == kind


def test_ensemble_stays_float32_and_takes_estimates() -> None:
    arrays = _arrays("ensemble")
    pred = build_prediction("ensemble", arrays)
    assert pred.arrays()["member_probs"].dtype == np.float32
    assert pred.arrays()["member_probs"] is arrays["member_probs"]
    assert pred.estimator_names()[-1] == "score"
    np.testing.assert_array_equal(pred.estimate("score"), arrays["estimate:score"])


def test_classification_rules() -> None:
    members = RNG.dirichlet(np.ones(3), size=(2, N))
    with pytest.raises(UQValidationError, match=r"exactly one of them; found \[\]"):
        build_prediction("ensemble", {})
    with pytest.raises(UQValidationError, match="exactly one"):
        build_prediction("ensemble", {"member_probs": members, "member_logits": members})
    with pytest.raises(UQValidationError, match=r"member_probs must be an M×N×C array"):
        build_prediction("ensemble", {"member_probs": members[0]})
    bad = RNG.dirichlet(np.ones(3), size=N)
    bad[2] *= 1.5
    with pytest.raises(UQValidationError, match=r"sum\(probs\[2\]\)"):
        build_prediction("probs", {"probs": bad})
    with pytest.raises(UQValidationError, match=r"unexpected field\(s\) \['estimate:x'\]"):
        build_prediction("gaussian", {"mean": np.zeros(2), "std": np.ones(2), "estimate:x": [1, 2]})


def test_unknown_kind() -> None:
    with pytest.raises(UQValidationError, match="kind must be one of"):
        build_prediction("poisson", {})


def test_missing_and_unexpected_fields() -> None:
    with pytest.raises(UQValidationError, match=r"needs field\(s\) \['std'\]") as info:
        build_prediction("gaussian", {"mean": np.zeros(3)})
    assert info.value.argument == "std"
    with pytest.raises(UQValidationError, match=r"unexpected field\(s\) \['scale'\]") as info:
        build_prediction("gaussian", {"mean": np.zeros(3), "std": np.ones(3), "scale": np.ones(3)})
    assert info.value.argument == "scale"
    with pytest.raises(UQValidationError, match="exactly one of them") as info:
        build_prediction("ensemble", {})
    assert info.value.argument == "member_probs"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("std", np.array([1.0, -1.0, 1.0]), r"std must be > 0; std\[1\] = -1"),
        ("mean", np.array([0.0, 0.0, np.nan]), r"mean\[2\]"),
        ("std", np.ones((3, 1)), r"std must be a vector; found shape \(3, 1\)"),
        ("mean", np.array(["a", "b", "c"]), "mean must hold real numbers"),
        ("mean", np.zeros(3, dtype=complex), "mean must hold real numbers"),
    ],
)
def test_bad_values_name_field_rule_and_index(field: str, value: np.ndarray, message: str) -> None:
    arrays = {"mean": np.zeros(3), "std": np.ones(3)}
    arrays[field] = value
    with pytest.raises(UQValidationError, match=message) as info:
        build_prediction("gaussian", arrays)
    assert info.value.argument == field


def test_matrix_fields_must_be_matrices() -> None:
    assert "draws" in MATRIX_FIELDS
    with pytest.raises(UQValidationError, match=r"draws must be a matrix"):
        build_prediction("samples", {"draws": np.zeros(4)})


def test_interval_level_is_an_optional_number() -> None:
    lo, hi = np.array([0.0, 1.0, -2.0]), np.array([1.0, 1.0, 0.5])
    assert required_fields("interval") == ("lower", "upper")
    with_level = build_prediction("interval", {"lower": lo, "upper": hi, "level": 0.9})
    assert with_level.level == 0.9
    np.testing.assert_array_equal(with_level.width(), hi - lo)
    assert build_prediction("interval", {"lower": lo, "upper": hi}).level is None
    # a 0-d array, as an NPZ member holds it
    assert (
        build_prediction("interval", {"lower": lo, "upper": hi, "level": np.float32(0.5)}).level
        == 0.5
    )


@pytest.mark.parametrize(
    ("arrays", "field", "message"),
    [
        ({"upper": np.ones(3)}, "lower", r"needs field\(s\) \['lower'\]"),
        ({"lower": np.zeros((3, 1)), "upper": np.ones(3)}, "lower", "lower must be a vector"),
        ({"lower": np.zeros(3), "upper": np.array([1.0, -1.0, 1.0])}, "upper", r"upper\[1\]"),
        ({"lower": np.zeros(3), "upper": np.ones(3), "level": 1.0}, "level", r"\(0, 1\)"),
        ({"lower": np.zeros(3), "upper": np.ones(3), "level": np.nan}, "level", r"\(0, 1\)"),
        ({"lower": np.zeros(3), "upper": np.ones(3), "level": [0.9]}, "level", "one number"),
        ({"lower": np.zeros(3), "upper": np.ones(3), "level": True}, "level", "real numbers"),
        ({"lower": np.zeros(3), "upper": np.ones(3), "level": "0.9"}, "level", "real numbers"),
    ],
)
def test_interval_rules(arrays: dict[str, object], field: str, message: str) -> None:
    with pytest.raises(UQValidationError, match=message) as info:
        build_prediction("interval", arrays)
    assert info.value.argument == field


def test_prediction_set_with_and_without_probs() -> None:
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1]])
    probs = np.array([[0.8, 0.1, 0.1], [0.5, 0.4, 0.1], [0.4, 0.3, 0.3], [0.3, 0.3, 0.4]])
    alone = build_prediction("prediction_set", {"sets": sets})
    assert required_fields("prediction_set") == ("sets",)
    assert alone.capabilities == {"sets"}
    assert alone.set_sizes().tolist() == [1, 2, 0, 3]
    both = build_prediction("prediction_set", {"sets": sets.astype(bool), "probs": probs})
    assert both.has_probs and "probs" in both.capabilities
    np.testing.assert_array_equal(both.probs(), probs)


@pytest.mark.parametrize(
    ("arrays", "field", "message", "index"),
    [
        ({}, "sets", r"needs field\(s\) \['sets'\]", None),
        ({"sets": np.ones(3, dtype=bool)}, "sets", "sets must be a matrix", None),
        ({"sets": np.array([[1, 0], [0, 2]])}, "sets", r"boolean \(0 or 1\)", (1, 1)),
        ({"sets": np.array([["a", "b"]])}, "sets", "booleans", None),
        ({"sets": np.eye(2, dtype=bool), "probs": np.full((2, 3), 1 / 3)}, "probs", "shape", None),
        (
            {"sets": np.eye(2, dtype=bool), "probs": np.array([[0.5, 0.5], [0.9, 0.3]])},
            "probs",
            r"probs\[1\]",
            1,
        ),
    ],
)
def test_prediction_set_rules(
    arrays: dict[str, object], field: str, message: str, index: object
) -> None:
    with pytest.raises(UQValidationError, match=message) as info:
        build_prediction("prediction_set", arrays)
    assert info.value.argument == field
    if index is not None:
        got = info.value.index
        assert (
            got if isinstance(index, tuple) else got[0] if isinstance(got, tuple) else got
        ) == index
