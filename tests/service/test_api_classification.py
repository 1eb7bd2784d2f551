"""Classification submissions end to end: JSON and NPZ bodies, labels, soft labels, OOD flags,
named estimates, the metric × estimator table, and 422s naming the field and the index."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import uqcore
from service.kinds import build_prediction
from service.store import Store
from tests.factories import npz_bytes
from tests.service._api import NPZ, TestClient, error_of, wait_terminal
from uqcore.predictions import classification as PC

pytest_plugins = ["tests.service._api"]

N, C, M = 60, 4, 5


def _probs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(C), size=N)
    labels = np.array([rng.choice(C, p=p) for p in probs])
    return probs, labels


def _ensemble(seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    members = rng.dirichlet(np.full(C, 0.7), size=(M, N)).astype(np.float32)
    # Rows of float32 draws may sum to 1 only within float32 rounding: well inside 1e-4.
    labels = rng.integers(0, C, size=N)
    soft = rng.dirichlet(np.ones(C), size=N)
    ood = rng.random(N) < 0.3
    score = rng.random(N)
    return {
        "member_probs": members,
        "labels": labels,
        "soft_labels": soft,
        "ood": ood,
        "estimate:score": score,
    }


def test_json_probs_submission(api: TestClient, submitter: dict[str, str], worker) -> None:
    probs, labels = _probs()
    body = {
        "model_name": "softmax-net",
        "prediction": {"kind": "probs", "probs": probs.tolist()},
        "labels": labels.tolist(),
        "analyses": {
            "metrics": ["accuracy", "nll", "ece", "aurc"],
            "bootstrap": {"n_resamples": 50},
        },
    }
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    assert doc["kind"] == "probs" and doc["n"] == N
    result = doc["result"]
    direct = uqcore.evaluate(PC.Probs(probs), labels, ["accuracy", "nll", "ece", "aurc"])
    for name in ("accuracy", "nll", "ece", "aurc"):
        assert result["metrics"][name]["value"] == pytest.approx(direct.scalar(name), rel=1e-12)
        ci = result["metrics"][name]["interval"]
        assert ci["low"] <= result["metrics"][name]["value"] <= ci["high"], name
    assert result["metrics"]["nll"]["direction"] == "lower"
    assert result["metrics"]["accuracy"]["direction"] == "higher"
    assert result["provenance"]["task"] == "classification"
    assert "by_estimator" not in result


def test_npz_float32_ensemble_by_estimator(
    api: TestClient, submitter: dict[str, str], store: Store, worker
) -> None:
    a = _ensemble()
    request = {
        "kind": "ensemble",
        "model_name": "deep-ensemble-5",
        "analyses": {
            "metrics": "all",
            "estimators": "all",
            "bootstrap": {"n_resamples": 20},
        },
    }
    body = npz_bytes(request, **a)
    r = api.post("/v1/submissions", content=body, headers={**submitter, **NPZ})
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    # The members are stored as sent: float32, never widened to float64 wholesale.
    stored = store.load_arrays(doc["id"])
    assert stored is not None
    assert stored["member_probs"].dtype == np.float32
    np.testing.assert_array_equal(stored["member_probs"], a["member_probs"])
    assert stored["ood"].dtype == bool and stored["labels"].dtype.kind == "i"

    pred = PC.Ensemble(member_probs=a["member_probs"], estimates={"score": a["estimate:score"]})
    direct = uqcore.evaluate(
        pred, a["labels"], "all", estimators="all", ood=a["ood"], soft_labels=a["soft_labels"]
    ).to_dict()
    assert result["estimators"] == direct["estimators"]
    assert result["estimators"][-1] == "score"
    assert set(result["by_estimator"]) == set(direct["by_estimator"])
    for metric, row in direct["by_estimator"].items():
        assert list(result["by_estimator"][metric]) == list(row), metric
        for est, value in row.items():
            got = result["by_estimator"][metric][est]
            if value is None:
                assert got is None, (metric, est)
            elif isinstance(value, dict):
                assert got["value"] == pytest.approx(value["value"], rel=1e-12), (metric, est)
            else:
                assert got == pytest.approx(value, rel=1e-12), (metric, est)
    # The OOD and aleatoric metrics ran (their targets came with the upload).
    assert "auroc_ood" in result["metrics"] and "auroc_aleatoric" in result["metrics"]
    assert set(result["metrics"]) == set(direct["values"])
    # Intervals for the table: each (metric, estimator) cell has its bootstrap interval.
    cells = result["by_estimator_intervals"]
    assert set(cells) == set(direct["by_estimator"])
    ci = cells["auroc_ood"]["mutual_information"]
    assert ci["n_resamples"] == 20 and ci["low"] <= ci["high"]


def test_estimators_list_and_logits_json(
    api: TestClient, submitter: dict[str, str], worker
) -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(N, C))
    labels = rng.integers(0, C, size=N)
    body = {
        "model_name": "logit-net",
        "prediction": {
            "kind": "logits",
            "logits": logits.tolist(),
            "estimates": {"energy": rng.random(N).tolist()},
        },
        "labels": labels.tolist(),
        "analyses": {
            "metrics": ["aurc", "accuracy"],
            "estimators": ["entropy_bma", "energy"],
            "stability": {"enabled": True, "repeats": 10},
        },
    }
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    assert result["estimators"] == ["entropy_bma", "energy"]
    assert set(result["stability"]["results"]) >= {"aurc", "accuracy"}
    assert list(result["by_estimator"]) == ["aurc"]
    pred = build_prediction(
        "logits", {"logits": logits, "estimate:energy": body["prediction"]["estimates"]["energy"]}
    )
    direct = uqcore.evaluate(pred, labels, ["aurc"], estimators=["entropy_bma", "energy"])
    assert result["by_estimator"]["aurc"]["energy"] == pytest.approx(
        direct.by_estimator["aurc"]["energy"], rel=1e-12
    )


def _json_probs(**changes: Any) -> dict[str, Any]:
    probs, labels = _probs()
    body: dict[str, Any] = {
        "model_name": "m",
        "prediction": {"kind": "probs", "probs": probs.tolist()},
        "labels": labels.tolist(),
    }
    body.update(changes)
    return body


def test_bad_json_inputs_name_field_and_index(api: TestClient, submitter: dict[str, str]) -> None:
    probs, labels = _probs()
    off = probs.copy()
    off[7] *= 1.2
    r = api.post(
        "/v1/submissions",
        json=_json_probs(prediction={"kind": "probs", "probs": off.tolist()}),
        headers=submitter,
    )
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["field"], err["index"]) == ("prediction.probs", 7)
    assert "sum to 1" in err["message"]

    bad = labels.copy()
    bad[11] = C
    r = api.post("/v1/submissions", json=_json_probs(labels=bad.tolist()), headers=submitter)
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("labels", 11)
    assert f"[0, {C})" in err["message"]

    r = api.post(
        "/v1/submissions", json=_json_probs(labels=labels[:-1].tolist()), headers=submitter
    )
    assert r.status_code == 422
    assert error_of(r)["field"] == "labels"

    soft = np.full((N, C), 1.0 / C)
    soft[4, 0] = -0.1
    r = api.post("/v1/submissions", json=_json_probs(soft_labels=soft.tolist()), headers=submitter)
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("soft_labels", 4)

    r = api.post(
        "/v1/submissions",
        json=_json_probs(soft_labels=np.full((N, C + 1), 1.0 / (C + 1)).tolist()),
        headers=submitter,
    )
    assert r.status_code == 422
    assert error_of(r)["field"] == "soft_labels"

    r = api.post("/v1/submissions", json=_json_probs(ood=[True] * (N - 1)), headers=submitter)
    assert r.status_code == 422
    assert error_of(r)["field"] == "ood"

    # A regression kind with labels, a classification kind with y, unknown estimator.
    r = api.post("/v1/submissions", json=_json_probs(labels=None, y=[0.0] * N), headers=submitter)
    assert r.status_code == 422
    r = api.post(
        "/v1/submissions",
        json=_json_probs(analyses={"metrics": ["aurc"], "estimators": ["aurc", "nope"]}),
        headers=submitter,
    )
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("analyses.estimators", 0)
    r = api.post(
        "/v1/submissions",
        json=_json_probs(analyses={"metrics": ["mae"]}),
        headers=submitter,
    )
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("analyses.metrics", 0)
    # A metric's own estimator must be one the prediction gives (probs: no mutual information).
    analyses = {"metrics": ["aurc"], "params": {"aurc": {"estimator": "mutual_information"}}}
    r = api.post("/v1/submissions", json=_json_probs(analyses=analyses), headers=submitter)
    assert r.status_code == 422
    assert error_of(r)["field"] == "analyses.params.aurc.estimator"
    # A metric that needs OOD flags the submission does not send.
    r = api.post(
        "/v1/submissions", json=_json_probs(analyses={"metrics": ["auroc_ood"]}), headers=submitter
    )
    assert r.status_code == 422
    assert error_of(r)["code"] == "metric_not_applicable"


def test_bad_npz_inputs_name_field_and_index(api: TestClient, submitter: dict[str, str]) -> None:
    a = _ensemble()
    req = {"kind": "ensemble", "model_name": "m"}

    def post(**arrays: Any) -> dict[str, Any]:
        r = api.post(
            "/v1/submissions", content=npz_bytes(req, **arrays), headers={**submitter, **NPZ}
        )
        assert r.status_code == 422, r.text
        return error_of(r)

    members = a["member_probs"].copy()
    members[2, 9, 1] += 0.5
    err = post(**{**a, "member_probs": members})
    assert err["field"] == "member_probs" and "sum to 1" in err["message"]
    assert "member_probs[2, 9]" in err["message"]

    err = post(**{**a, "member_probs": a["member_probs"][0]})
    assert err["field"] == "member_probs" and "M×N×C" in err["message"]

    bad = a["labels"].copy()
    bad[5] = -1
    err = post(**{**a, "labels": bad})
    assert (err["field"], err["index"]) == ("labels", 5)

    ood = a["ood"].astype(np.int64)
    ood[3] = 2
    err = post(**{**a, "ood": ood})
    assert (err["field"], err["index"]) == ("ood", 3)

    score = a["estimate:score"].copy()
    score[8] = np.nan
    err = post(**{**a, "estimate:score": score})
    assert (err["field"], err["index"]) == ("estimate:score", 8)

    no_members = {k: v for k, v in a.items() if k != "member_probs"}
    err = post(**no_members)
    assert err["field"] == "member_probs" and "exactly one" in err["message"]

    err = post(**{**a, "y": np.zeros(N)})
    assert err["field"] == "y"

    # Against a benchmark (tests/service/test_api_classification_benchmarks.py): the labels
    # are the benchmark's and cannot be sent; an unknown benchmark is a 404.
    r = api.post(
        "/v1/submissions",
        content=npz_bytes({**req, "benchmark_id": "b1"}, member_probs=a["member_probs"]),
        headers={**submitter, **NPZ},
    )
    assert r.status_code == 404
    assert error_of(r)["field"] == "benchmark_id"
    r = api.post(
        "/v1/submissions",
        content=npz_bytes(
            {**req, "benchmark_id": "b1"}, member_probs=a["member_probs"], labels=a["labels"]
        ),
        headers={**submitter, **NPZ},
    )
    assert r.status_code == 422
    assert error_of(r)["field"] == "labels" and "benchmark" in error_of(r)["message"]


def test_json_ensemble_and_dirichlet_are_accepted(
    api: TestClient, submitter: dict[str, str]
) -> None:
    a = _ensemble()
    members = a["member_probs"].astype(np.float64).tolist()
    body = {
        "model_name": "ens",
        "prediction": {"kind": "ensemble", "member_probs": members},
        "labels": a["labels"].tolist(),
        "ood": a["ood"].tolist(),
        "analyses": {"metrics": ["auroc_ood"], "estimators": "all"},
    }
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    ragged = [m[:-1] if i == 3 else m for i, m in enumerate(members)]
    r = api.post(
        "/v1/submissions",
        json={**body, "prediction": {"kind": "ensemble", "member_probs": ragged}},
        headers=submitter,
    )
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("prediction.member_probs", 3)
    alpha = np.full((N, C), 2.0)
    alpha[6, 2] = 0.0
    r = api.post(
        "/v1/submissions",
        json={**body, "prediction": {"kind": "dirichlet", "alpha": alpha.tolist()}},
        headers=submitter,
    )
    assert r.status_code == 422
    err = error_of(r)
    assert (err["field"], err["index"]) == ("prediction.alpha", 6)


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        (
            {"ece": {"binning": "width", "ties": "split"}},
            "ece.ties",
            # uqcore's "binning='mass'", in the request's fields
            'ties applies to `analyses.params.ece.binning = "mass"`',
        ),
        ({"ece": {"n_bins": 10**9}}, "ece.n_bins", "n_bins must be an integer in [1, 10000]"),
        ({"eaurc": {"optimum": "continuous", "convention": "trapezoid"}}, "eaurc.optimum", "mean"),
        ({"brier": {"variant": "half"}}, "brier.variant", "one of 'bma'"),
    ],
)
def test_parameter_values_the_worker_would_refuse_get_422(
    api: TestClient, submitter: dict[str, str], params: dict[str, Any], field: str, words: str
) -> None:
    body = _json_probs(analyses={"params": params})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert err["field"] == f"analyses.params.{field}", err
    assert words in err["message"], err
