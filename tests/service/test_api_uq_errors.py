"""A uqcore validation error becomes a 422 whose field and index are its argument and index.

The mapping reads the error's attributes (never its message): the argument names a field of
the body as sent (``prediction.std`` in JSON, ``std`` in NPZ; an estimate is
``prediction.estimates.<name>`` or ``estimate:<name>``), and the index is the first component
of the error's index: the row of an N×C array, the member of an M×N×C one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.api.errors import uq_location
from service.api.payload import DecodedSubmission
from service.api.schemas import Analyses
from service.api.validation import _uq_error
from service.kinds import ESTIMATE_PREFIX, build_prediction
from tests.service._api import TestClient, error_of, new_key
from uqcore import UQValidationError
from uqcore.batch import make_batch

pytest_plugins = ["tests.service._api"]

N, C, M = 8, 3, 4


def _error(
    fmt: str,
    kind: str,
    prediction: dict[str, Any],
    estimates: dict[str, Any] | None = None,
    **targets: Any,
) -> tuple[UQValidationError, Any]:
    """The uqcore error of a submission and the API error it becomes."""
    sub = DecodedSubmission(
        format=fmt,  # type: ignore[arg-type]
        kind=kind,
        model_name="m",
        metadata={},
        analyses=Analyses(),
        prediction=prediction,
        y=targets.get("y"),
        labels=targets.get("labels"),
        sample_weight=targets.get("sample_weight"),
        soft_labels=targets.get("soft_labels"),
        ood=targets.get("ood"),
        estimates=estimates or {},
    )
    named = {f"{ESTIMATE_PREFIX}{k}": v for k, v in sub.estimates.items()}

    def check() -> None:
        pred = build_prediction(kind, {**prediction, **named})
        make_batch(pred, sub.targets, sub.sample_weight, ood=sub.ood, soft_labels=sub.soft_labels)

    with pytest.raises(UQValidationError) as info:
        check()
    return info.value, _uq_error(info.value, sub)


def _set(arr: np.ndarray, idx: tuple[int, ...], value: float) -> np.ndarray:
    out = np.array(arr, dtype=np.float64)
    out[idx] = value
    return out


PROBS = np.full((N, C), 1.0 / C)
MEMBERS = np.full((M, N, C), 1.0 / C)
LABELS = np.zeros(N, dtype=np.int64)
GAUSS = {"mean": np.zeros(N), "std": np.ones(N)}

CASES: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any], Any, str, Any]] = [
    # (case, kind, prediction, estimates, targets, uqcore index, field in JSON, API index)
    (
        "vector",
        "gaussian",
        {**GAUSS, "std": _set(GAUSS["std"], (4,), -0.3)},
        {},
        {"y": np.zeros(N)},
        4,
        "prediction.std",
        4,
    ),
    (
        "N×C entry: the row",
        "probs",
        {"probs": _set(PROBS, (5, 2), -0.1)},
        {},
        {"labels": LABELS},
        (5, 2),
        "prediction.probs",
        5,
    ),
    (
        "N×C row sum: the row",
        "probs",
        {"probs": _set(PROBS, (3, 0), 0.9)},
        {},
        {"labels": LABELS},
        3,
        "prediction.probs",
        3,
    ),
    (
        "M×N×C row sum: the member",
        "ensemble",
        {"member_probs": _set(MEMBERS, (2, 6, 1), 0.9)},
        {},
        {"labels": LABELS},
        (2, 6),
        "prediction.member_probs",
        2,
    ),
    (
        "M×N×C entry: the member",
        "ensemble",
        {"member_logits": _set(np.zeros((M, N, C)), (1, 7, 2), np.nan)},
        {},
        {"labels": LABELS},
        (1, 7, 2),
        "prediction.member_logits",
        1,
    ),
    (
        "N×Q pair: the row",
        "quantiles",
        {
            "levels": np.array([0.1, 0.5, 0.9]),
            "values": _set(np.tile([0, 1, 2.0], (N, 1)), (6, 2), 0.5),
        },
        {},
        {"y": np.zeros(N)},
        (6, 2),
        "prediction.values",
        6,
    ),
    (
        "estimate",
        "logits",
        {"logits": np.zeros((N, C))},
        {"score": _set(np.zeros(N), (7,), np.inf)},
        {"labels": LABELS},
        7,
        "prediction.estimates.score",
        7,
    ),
    (
        "estimate named with a quote",
        "logits",
        {"logits": np.zeros((N, C))},
        {"it's": np.zeros(N - 1)},
        {"labels": LABELS},
        None,
        "prediction.estimates.it's",
        None,
    ),
    (
        "targets",
        "probs",
        {"probs": PROBS},
        {},
        {"labels": _set(LABELS, (2,), 5).astype(np.int64)},
        2,
        "labels",
        2,
    ),
    (
        "soft labels row",
        "probs",
        {"probs": PROBS},
        {},
        {"labels": LABELS, "soft_labels": _set(PROBS, (4, 1), 0.0)},
        4,
        "soft_labels",
        4,
    ),
    (
        "weights",
        "gaussian",
        GAUSS,
        {},
        {"y": np.zeros(N), "sample_weight": np.zeros(N)},
        None,
        "sample_weight",
        None,
    ),
    (
        "missing field",
        "gaussian",
        {"mean": np.zeros(N)},
        {},
        {"y": np.zeros(N)},
        None,
        "prediction.std",
        None,
    ),
    (
        "neither of the one-of fields",
        "ensemble",
        {},
        {},
        {"labels": LABELS},
        None,
        "prediction.member_probs",
        None,
    ),
]


@pytest.mark.parametrize("fmt", ["json", "npz"])
@pytest.mark.parametrize(
    ("kind", "prediction", "estimates", "targets", "uq_index", "json_field", "index"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_the_argument_and_index_become_field_and_index(
    fmt: str,
    kind: str,
    prediction: dict[str, Any],
    estimates: dict[str, Any],
    targets: dict[str, Any],
    uq_index: Any,
    json_field: str,
    index: int | None,
) -> None:
    exc, err = _error(fmt, kind, prediction, estimates, **targets)
    assert exc.index == uq_index
    field = json_field
    if fmt == "npz":
        field = json_field.replace("prediction.estimates.", ESTIMATE_PREFIX)
        field = field.removeprefix("prediction.")
    assert (err.status, err.field, err.index) == (422, field, index)
    # JSON answers say where the field lives before uqcore's message, NPZ answers do not
    prefix = f"{field}: " if field.startswith("prediction.") else ""
    assert err.message == f"{prefix}{exc}"


def test_an_error_about_no_field_of_the_body_has_no_field() -> None:
    # the estimate's name (an argument of the mapping, not an array) and no argument at all
    _, err = _error("json", "probs", {"probs": PROBS}, {"entropy_bma": np.zeros(N)}, labels=LABELS)
    assert (err.field, err.index) == (None, None)
    assert err.message.startswith("estimate name 'entropy_bma' is the name of a built-in")
    sub = DecodedSubmission(
        format="json",
        kind="gaussian",
        model_name="m",
        metadata={},
        analyses=Analyses(),
        prediction=GAUSS,
        y=np.zeros(N),
    )
    plain = UQValidationError("something went wrong", argument="bandwidth", index=3)
    err = _uq_error(plain, sub)
    assert (err.field, err.index, err.message) == (None, None, "something went wrong")
    err = _uq_error(UQValidationError("no argument at all"), sub)
    assert (err.field, err.index) == (None, None)


def test_uq_location_maps_arguments_to_fields() -> None:
    fields = {"labels": "labels", "estimates['s']": "estimate:s"}
    exc = UQValidationError("m", argument="labels", index=(3,), value=7)
    assert uq_location(exc, fields) == ("labels", 3)
    exc = UQValidationError("m", argument="estimates['s']", index=(2, 5))
    assert uq_location(exc, fields) == ("estimate:s", 2)
    assert uq_location(UQValidationError("m", argument="y", index=1), fields) == (None, None)
    assert uq_location(UQValidationError("m"), fields) == (None, None)


def test_a_json_probs_submission_names_the_row_of_the_entry(idle_api: TestClient) -> None:
    key = new_key(idle_api, "uq-errors")
    probs = np.full((N, C), 1.0 / C)
    probs[5, 2] = -0.1
    body = {
        "model_name": "m",
        "prediction": {
            "kind": "probs",
            "probs": probs.tolist(),
            "estimates": {"score": [0.0] * N},
        },
        "labels": [0] * N,
    }
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == ("prediction.probs", 5)
    assert err["message"] == "prediction.probs: probs must be >= 0; probs[5, 2] = -0.1"
    # an estimate of the wrong length (the request model leaves its length to uqcore)
    body["prediction"] = {
        "kind": "probs",
        "probs": np.full((N, C), 1.0 / C).tolist(),
        "estimates": {"score": [0.0] * (N - 1)},
    }
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == ("prediction.estimates.score", None)
    assert err["message"] == (
        f"prediction.estimates.score: estimates['score'] must have shape ({N},), found ({N - 1},)"
    )
