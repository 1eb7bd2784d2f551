"""service.kinds: named arrays -> uqcore prediction, with precise errors."""

from __future__ import annotations

import numpy as np
import pytest

from service.kinds import CLASSIFICATION_KINDS, KIND_FIELDS, MATRIX_FIELDS, build_prediction
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
