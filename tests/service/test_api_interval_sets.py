"""Interval and prediction-set submissions end to end: JSON and NPZ bodies through the real
worker, the metrics that apply (checked against formulas written here), the stored arrays, a
benchmark of prediction sets, and a 422 naming the field and the first bad row for every rule
of the two kinds (JSON and NPZ alike)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.store import Store
from tests.factories import npz_bytes
from tests.service._api import ADMIN, NPZ, TestClient, error_of, wait_terminal
from uqcore import predictions as P
from uqcore import registry

pytest_plugins = ["tests.service._api"]

N, C = 60, 4


def interval_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    """Asymmetric intervals around a noisy centre, one of zero width, and targets."""
    rng = np.random.default_rng(seed)
    centre = rng.normal(size=N)
    lower = centre - rng.uniform(0.2, 1.5, size=N)
    upper = centre + rng.uniform(0.2, 2.0, size=N)
    upper[3] = lower[3]
    y = centre + rng.normal(size=N)
    return {"lower": lower, "upper": upper, "y": y}


def set_arrays(seed: int = 1) -> dict[str, np.ndarray]:
    """Class probabilities, the sets {c : p_c >= 0.2} (some empty, some of every class), and
    labels drawn from the probabilities."""
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(C, 0.8), size=N)
    sets = probs >= 0.2
    sets[0] = False
    sets[1] = True
    labels = np.array([rng.choice(C, p=p) for p in probs])
    return {"sets": sets, "probs": probs, "labels": labels}


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """The multiclass Brier score: mean over rows of sum_c (p_c - 1[c = label])^2."""
    return float(np.mean(((probs - np.eye(probs.shape[1])[labels]) ** 2).sum(axis=1)))


def nll(probs: np.ndarray, labels: np.ndarray) -> float:
    return float(-np.mean(np.log(probs[np.arange(len(labels)), labels])))


def interval_json(a: dict[str, np.ndarray], **prediction: Any) -> dict[str, Any]:
    return {
        "model_name": "conformal",
        "prediction": {
            "kind": "interval",
            "lower": a["lower"].tolist(),
            "upper": a["upper"].tolist(),
            **prediction,
        },
        "y": a["y"].tolist(),
        "analyses": {"metrics": "all"},
    }


def sets_json(a: dict[str, np.ndarray], metrics: Any, **prediction: Any) -> dict[str, Any]:
    pred: dict[str, Any] = {"kind": "prediction_set", "sets": a["sets"].tolist()}
    if "probs" in a:
        pred["probs"] = a["probs"].tolist()
    pred.update(prediction)
    return {
        "model_name": "aps",
        "prediction": pred,
        "labels": a["labels"].tolist(),
        "analyses": {"metrics": metrics},
    }


def _applicable(pred: Any, task: str) -> list[str]:
    return [s.name for s in registry.specs(task) if s.why_not(pred, frozenset()) is None]


# --------------------------------------------------------------------------------------------
# accepted and evaluated
# --------------------------------------------------------------------------------------------


def test_prediction_set_with_probs_json_and_npz(
    api: TestClient, submitter: dict[str, str], store: Store, worker: Any
) -> None:
    a = set_arrays()
    metrics = ["brier", "nll", "accuracy"]
    # JSON: sets as true/false; NPZ: sets as 0/1 integers (uqcore reads 0/1 as booleans)
    r_json = api.post("/v1/submissions", json=sets_json(a, metrics), headers=submitter)
    assert r_json.status_code == 202, r_json.text
    request = {"kind": "prediction_set", "model_name": "aps", "analyses": {"metrics": metrics}}
    body = npz_bytes(request, sets=a["sets"].astype(np.int8), probs=a["probs"], labels=a["labels"])
    r_npz = api.post("/v1/submissions", content=body, headers={**submitter, **NPZ})
    assert r_npz.status_code == 202, r_npz.text
    accuracy = float(np.mean(np.argmax(a["probs"], axis=1) == a["labels"]))
    for r in (r_json, r_npz):
        doc = wait_terminal(api, submitter, r.json()["id"])
        assert doc["status"] == "succeeded", doc
        assert (doc["kind"], doc["n"]) == ("prediction_set", N)
        got = doc["result"]["metrics"]
        assert got["brier"]["value"] == pytest.approx(brier(a["probs"], a["labels"]), rel=1e-12)
        assert got["nll"]["value"] == pytest.approx(nll(a["probs"], a["labels"]), rel=1e-12)
        assert got["accuracy"]["value"] == pytest.approx(accuracy, rel=1e-12)
    stored = store.load_arrays(r_json.json()["id"])
    assert stored is not None and stored["sets"].dtype == np.bool_
    np.testing.assert_array_equal(stored["sets"], a["sets"])
    stored = store.load_arrays(r_npz.json()["id"])
    assert stored is not None and stored["sets"].dtype == np.int8
    np.testing.assert_array_equal(stored["sets"], a["sets"])


def test_prediction_set_without_probs(
    api: TestClient, submitter: dict[str, str], worker: Any
) -> None:
    a = {k: v for k, v in set_arrays().items() if k != "probs"}
    r = api.post("/v1/submissions", json=sets_json(a, ["brier"]), headers=submitter)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["code"], err["field"], err["index"]) == (
        "metric_not_applicable",
        "analyses.metrics",
        0,
    )
    assert "brier" in err["message"]
    # "all": the metrics of sets alone (none before the set metrics exist: then a clear 422)
    r = api.post("/v1/submissions", json=sets_json(a, "all"), headers=submitter)
    expected = _applicable(P.PredictionSet(a["sets"]), "classification")
    assert "brier" not in expected
    _check_all(api, submitter, r, expected, "prediction_set")


def _check_all(
    api: TestClient, submitter: dict[str, str], r: Any, expected: list[str], kind: str
) -> None:
    """``metrics: "all"`` computes exactly the metrics that apply; none applying is a 422."""
    if not expected:
        assert r.status_code == 422, r.text
        err = error_of(r)
        assert (err["code"], err["field"]) == ("metric_not_applicable", "analyses.metrics")
        assert f"no metric applies to this {kind} prediction" in err["message"].replace(
            "no regression metric", "no metric"
        ).replace("no classification metric", "no metric")
        return
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert sorted(doc["result"]["metrics"]) == sorted(expected)


def test_interval_json_and_npz(
    api: TestClient, submitter: dict[str, str], store: Store, worker: Any
) -> None:
    a = interval_arrays()
    expected = _applicable(P.Interval(a["lower"], a["upper"], level=0.9), "regression")
    r = api.post("/v1/submissions", json=interval_json(a, level=0.9), headers=submitter)
    _check_all(api, submitter, r, expected, "interval")
    # a metric that needs a point prediction does not apply to an interval
    body = interval_json(a)
    body["analyses"] = {"metrics": ["mae"]}
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 422
    assert (error_of(r)["code"], error_of(r)["index"]) == ("metric_not_applicable", 0)
    # NPZ: the level is a 0-d member; float32 bounds stay float32
    request = {"kind": "interval", "model_name": "cqr", "analyses": {"metrics": "all"}}
    lo32, hi32 = a["lower"].astype(np.float32), a["upper"].astype(np.float32)
    body = npz_bytes(request, lower=lo32, upper=hi32, level=np.float64(0.8), y=a["y"])
    r = api.post("/v1/submissions", content=body, headers={**submitter, **NPZ})
    _check_all(api, submitter, r, expected, "interval")
    if r.status_code == 202:
        stored = store.load_arrays(r.json()["id"])
        assert stored is not None
        assert stored["level"].shape == () and float(stored["level"]) == 0.8
        assert stored["lower"].dtype == np.float32
        np.testing.assert_array_equal(stored["upper"], hi32)


def test_catalogue_lists_the_new_kinds(api: TestClient) -> None:
    doc = api.get("/v1/metrics", params={"kind": "prediction_set"}).json()
    names = {m["name"] for m in doc["metrics"]}
    # sent with its probs, a prediction set gets the probability metrics
    assert {"brier", "nll", "ece"} <= names
    everything = api.get("/v1/metrics").json()["metrics"]
    brier_entry = next(m for m in everything if m["name"] == "brier")
    assert "prediction_set" in brier_entry["kinds"]
    assert "interval" not in brier_entry["kinds"]
    interval = {m["name"] for m in everything if "interval" in m["kinds"]}
    assert interval == set(
        _applicable(P.Interval([0.0, 1.0, 2.0], [1.0, 2.0, 4.0], level=0.9), "regression")
    )
    r = api.get("/v1/metrics", params={"kind": "intervals"})
    assert r.status_code == 422 and error_of(r)["field"] == "kind"


def test_prediction_set_benchmark(api: TestClient, submitter: dict[str, str], worker: Any) -> None:
    a = set_arrays(seed=4)
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": "sets-hidden",
            "task": "classification",
            "primary_metric": "brier",
            "metrics": ["brier", "nll"],
            "kinds": ["prediction_set", "probs"],
            "labels": a["labels"].tolist(),
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bench = r.json()
    assert bench["kinds"] == ["prediction_set", "probs"]
    body = sets_json(a, ["brier"])
    del body["labels"], body["analyses"]
    body.update(benchmark_id=bench["id"], visibility="public")
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert doc["result"]["metrics"]["brier"]["value"] == pytest.approx(
        brier(a["probs"], a["labels"]), rel=1e-12
    )
    # without probs the primary metric cannot apply: refused before the 202
    del body["prediction"]["probs"]
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 422
    assert error_of(r)["code"] == "metric_not_applicable"
    # an interval is no kind of this benchmark
    r = api.post(
        "/v1/submissions",
        json={**body, "prediction": {"kind": "interval", "lower": [0.0] * N, "upper": [1.0] * N}},
        headers=submitter,
    )
    assert r.status_code == 422 and error_of(r)["field"] == "prediction.kind"


# --------------------------------------------------------------------------------------------
# refused: every rule, field and first bad row
# --------------------------------------------------------------------------------------------


def _interval_body(fmt: str, **change: Any) -> tuple[Any, bool]:
    """An interval body (JSON document or NPZ bytes) with fields changed (None drops one)."""
    a: dict[str, Any] = {**interval_arrays(), "level": 0.9}
    for k, v in change.items():
        if v is None:
            a.pop(k)
        else:
            a[k] = v
    if fmt == "json":
        pred = {k: np.asarray(v).tolist() if not isinstance(v, str) else v for k, v in a.items()}
        y = pred.pop("y")
        doc = {
            "model_name": "m",
            "prediction": {"kind": "interval", **pred},
            "y": y,
            "analyses": {"metrics": "all"},
        }
        return doc, True
    request = {"kind": "interval", "model_name": "m", "analyses": {"metrics": "all"}}
    return npz_bytes(request, **{k: np.asarray(v) for k, v in a.items()}), False


def _sets_body(fmt: str, **change: Any) -> tuple[Any, bool]:
    a: dict[str, Any] = dict(set_arrays())
    for k, v in change.items():
        if v is None:
            a.pop(k)
        else:
            a[k] = v
    if fmt == "json":
        pred = {k: np.asarray(v).tolist() for k, v in a.items() if k != "labels"}
        if isinstance(pred.get("sets"), list) and np.asarray(a["sets"]).dtype.kind == "f":
            # the 0/1 entries as JSON integers, the bad entry as it is
            pred["sets"] = [[int(x) if x in (0, 1) else x for x in row] for row in pred["sets"]]
        doc = {
            "model_name": "m",
            "prediction": {"kind": "prediction_set", **pred},
            "labels": a["labels"].tolist(),
            "analyses": {"metrics": ["accuracy"]},
        }
        return doc, True
    request = {"kind": "prediction_set", "model_name": "m", "analyses": {"metrics": ["accuracy"]}}
    return npz_bytes(request, **{k: np.asarray(v) for k, v in a.items()}), False


def _upper_below_lower() -> np.ndarray:
    a = interval_arrays()
    upper = a["upper"].copy()
    upper[37] = a["lower"][37] - 0.5
    return upper


def _sets_with(row: int, value: Any, dtype: Any) -> np.ndarray:
    sets = set_arrays()["sets"].astype(dtype)
    sets[row, 2] = value
    return sets


def _probs_off_simplex(row: int) -> np.ndarray:
    probs = set_arrays()["probs"].copy()
    probs[row] = [0.5, 0.3, 0.3, 0.3]  # each in [0, 1], summing to 1.4
    return probs


#: case -> (body maker, changes, JSON (field, index), NPZ (field, index), message fragment)
REFUSED: dict[str, tuple[Any, dict[str, Any], tuple[Any, Any], tuple[Any, Any], str]] = {
    "interval-missing-upper": (
        _interval_body,
        {"upper": None},
        ("prediction.upper", None),
        ("upper", None),
        "upper",
    ),
    "interval-lower-matrix": (
        _interval_body,
        {"lower": np.zeros((N, 2))},
        ("prediction.lower", 0),
        ("lower", None),
        "lower",
    ),
    "interval-upper-below-lower": (
        _interval_body,
        {"upper": _upper_below_lower()},
        ("prediction.upper", 37),
        ("upper", 37),
        "lower[37]",
    ),
    "interval-level-one": (
        _interval_body,
        {"level": 1.0},
        ("prediction.level", None),
        ("level", None),
        "",
    ),
    "interval-level-zero": (
        _interval_body,
        {"level": 0.0},
        ("prediction.level", None),
        ("level", None),
        "",
    ),
    "interval-level-string": (
        _interval_body,
        {"level": "0.9"},
        ("prediction.level", None),
        ("level", None),
        "",
    ),
    "interval-level-vector": (
        _interval_body,
        {"level": [0.9, 0.9]},
        ("prediction.level", None),
        ("level", None),
        "",
    ),
    "interval-lower-nan": (
        _interval_body,
        {"lower": np.r_[np.zeros(20), np.nan, np.zeros(N - 21)]},
        None,  # JSON cannot say NaN
        ("lower", 20),
        "lower[20]",
    ),
    "sets-missing": (_sets_body, {"sets": None}, ("prediction.sets", None), ("sets", None), "sets"),
    "sets-vector": (
        _sets_body,
        {"sets": np.ones(N, dtype=bool)},
        ("prediction.sets", 0),
        ("sets", None),
        "sets",
    ),
    "sets-entry-two": (
        _sets_body,
        {"sets": _sets_with(41, 2, np.int64)},
        ("prediction.sets", 41),
        ("sets", 41),
        "sets",
    ),
    "sets-entry-half": (
        _sets_body,
        {"sets": _sets_with(12, 0.5, np.float64)},
        ("prediction.sets", 12),
        ("sets", 12),
        "sets",
    ),
    "sets-entry-string": (
        _sets_body,
        {"sets": np.where(set_arrays()["sets"], "yes", "no")},
        ("prediction.sets", 0),
        ("sets", None),
        "sets",
    ),
    "probs-shape": (
        _sets_body,
        {"probs": np.full((N, C + 1), 1.0 / (C + 1))},
        ("prediction.probs", None),
        ("probs", None),
        "shape",
    ),
    "probs-off-simplex": (
        _sets_body,
        {"probs": _probs_off_simplex(29)},
        ("prediction.probs", 29),
        ("probs", 29),
        "probs[29]",
    ),
}


@pytest.mark.parametrize(
    ("case", "fmt"),
    [
        (case, fmt)
        for case, (_, _, in_json, _, _) in sorted(REFUSED.items())
        for fmt in ("json", "npz")
        if fmt == "npz" or in_json is not None  # JSON cannot say NaN
    ],
)
def test_every_rule_is_a_422_with_field_and_row(idle_api: TestClient, case: str, fmt: str) -> None:
    make, change, json_where, npz_where, fragment = REFUSED[case]
    where = json_where if fmt == "json" else npz_where
    headers = {"Authorization": ADMIN["Authorization"]}
    body, is_json = make(fmt, **change)
    if is_json:
        r = idle_api.post("/v1/submissions", json=body, headers=headers)
    else:
        r = idle_api.post("/v1/submissions", content=body, headers={**headers, **NPZ})
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == where, err
    assert err["code"] == "validation_error"
    assert fragment in err["message"], err
