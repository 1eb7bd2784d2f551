"""Submissions end to end on the ASGI app with a real Redis and a real Celery worker."""

from __future__ import annotations

import gzip
import json
import math
from typing import Any

import numpy as np
import pytest

from tests.factories import gaussian_arrays, gaussian_json, npz_bytes
from tests.service._api import NPZ, TestClient, error_of, new_key, wait_terminal

pytest_plugins = ["tests.service._api"]


def _no_nan(value: Any) -> None:
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for v in value.values():
            _no_nan(v)
    elif isinstance(value, list):
        for v in value:
            _no_nan(v)


def test_json_submission_runs_to_results(api: TestClient, submitter: dict[str, str], worker):
    body = gaussian_json(
        200,
        analyses={
            "metrics": ["mae", "nll", "crps", "nmerci"],
            "params": {"nmerci": {"alpha": 0.9}},
            "bootstrap": {"n_resamples": 50},
            "seed": 3,
        },
    )
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    accepted = r.json()
    assert accepted["status"] == "queued"
    assert accepted["replayed"] is False
    assert accepted["status_url"] == f"/v1/submissions/{accepted['id']}"
    assert r.headers["Location"] == accepted["status_url"]
    assert accepted["queue_position"] is None or accepted["queue_position"] >= 0

    doc = wait_terminal(api, submitter, accepted["id"])
    assert doc["status"] == "succeeded", doc
    assert doc["progress"] == 100.0
    assert doc["started_at"] and doc["finished_at"]
    assert doc["queue_position"] is None
    result = doc["result"]
    assert set(result["metrics"]) == {"mae", "nll", "crps", "nmerci"}
    mae = np.mean(np.abs(np.asarray(body["y"]) - np.asarray(body["prediction"]["mean"])))
    assert result["metrics"]["mae"]["value"] == pytest.approx(mae, rel=1e-12)
    assert result["metrics"]["mae"]["direction"] == "lower"
    assert result["metrics"]["nmerci"]["params"]["alpha"] == 0.9
    interval = result["metrics"]["mae"]["interval"]
    assert interval["low"] <= mae <= interval["high"]
    assert interval["n_resamples"] == 50
    prov = result["provenance"]
    assert (prov["n"], prov["kind"], prov["seed"]) == (200, "gaussian", 3)
    assert prov["uqcore_version"] and prov["backend"] == "numpy"
    _no_nan(doc)


def test_npz_submission_of_a_million_points(api: TestClient, submitter: dict[str, str], worker):
    a = gaussian_arrays(1_000_000, seed=1)
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "big", "analyses": {"metrics": ["mae", "rmse"]}}, **a
    )
    assert len(body) > 24_000_000
    r = api.post("/v1/submissions", content=body, headers={**submitter, **NPZ})
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    assert doc["n"] == 1_000_000
    rmse = float(np.sqrt(np.mean((a["y"] - a["mean"]) ** 2)))
    assert doc["result"]["metrics"]["rmse"]["value"] == pytest.approx(rmse, rel=1e-9)


def test_all_metrics_reports_not_applicable(api: TestClient, submitter: dict[str, str], worker):
    body = gaussian_json(
        50,
        prediction={
            "kind": "point_uncertainty",
            "prediction": gaussian_arrays(50)["mean"].tolist(),
            "uncertainty": gaussian_arrays(50)["std"].tolist(),
        },
        analyses={"metrics": "all"},
    )
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    assert "ause" in result["metrics"]
    assert "nll" in result["not_applicable"]
    _no_nan(doc)


def test_fractional_weights_with_every_metric(api: TestClient, submitter: dict[str, str], worker):
    # The default analyses ("all") with non-integer weights: the metric that needs integer
    # weights is reported as not applicable, with the reason, and the rest is computed.
    weights = np.random.default_rng(3).uniform(0.5, 2.0, 60).round(3).tolist()
    body = gaussian_json(60, sample_weight=weights, analyses={"metrics": "all"})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"], timeout_s=120)
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    assert (
        "needs integer sample weights" in result["not_applicable"]["adversarial_group_calibration"]
    )
    assert result["metrics"]["crps"]["value"] is not None
    _no_nan(doc)
    # Named explicitly, the metric is refused before the 202.
    body = gaussian_json(
        60, sample_weight=weights, analyses={"metrics": ["adversarial_group_calibration"]}
    )
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 422, r.text
    err = error_of(r)
    assert (err["code"], err["field"], err["index"]) == (
        "metric_not_applicable",
        "analyses.metrics",
        0,
    )
    assert "integer sample weights" in err["message"]


def test_idempotency_key(idle_api: TestClient):
    key = new_key(idle_api, "idem")
    body = gaussian_json(10)
    h = {**key, "Idempotency-Key": "batch-42"}
    first = idle_api.post("/v1/submissions", json=body, headers=h)
    assert first.status_code == 202
    again = idle_api.post("/v1/submissions", json=body, headers=h)
    assert again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["replayed"] is True
    assert again.headers["Idempotent-Replayed"] == "true"
    assert idle_api.get("/v1/submissions", headers=key).json()["total"] == 1

    other = idle_api.post("/v1/submissions", json=gaussian_json(10, seed=1), headers=h)
    assert other.status_code == 409
    err = error_of(other)
    assert (err["code"], err["field"]) == ("idempotency_conflict", "Idempotency-Key")

    # The same bytes gzip-encoded are the same body.
    raw = json.dumps(body).encode()
    h2 = {**key, "Idempotency-Key": "raw-1", "Content-Type": "application/json"}
    plain = idle_api.post("/v1/submissions", content=raw, headers=h2)
    zipped = idle_api.post(
        "/v1/submissions", content=gzip.compress(raw), headers={**h2, "Content-Encoding": "gzip"}
    )
    assert zipped.status_code == 202
    assert zipped.json()["id"] == plain.json()["id"]
    assert zipped.json()["replayed"] is True
    # Keys are per API key: another submitter may use the same Idempotency-Key.
    bob = {**new_key(idle_api, "bob"), "Idempotency-Key": "batch-42"}
    r = idle_api.post("/v1/submissions", json=body, headers=bob)
    assert r.status_code == 202
    assert r.json()["id"] != first.json()["id"]
    # A new key is a new submission.
    r = idle_api.post("/v1/submissions", json=body, headers={**key, "Idempotency-Key": "b-43"})
    assert r.json()["id"] != first.json()["id"]
    r = idle_api.post("/v1/submissions", json=body, headers={**key, "Idempotency-Key": ""})
    assert r.status_code == 422
    assert error_of(r)["field"] == "Idempotency-Key"


def test_list_filter_and_pagination(idle_api: TestClient):
    key = new_key(idle_api, "lister")
    ids = []
    for seed in range(5):
        r = idle_api.post("/v1/submissions", json=gaussian_json(5, seed=seed), headers=key)
        assert r.status_code == 202
        ids.append(r.json()["id"])
    page = idle_api.get("/v1/submissions?limit=2", headers=key).json()
    assert (page["total"], page["offset"], page["limit"]) == (5, 0, 2)
    assert [s["id"] for s in page["items"]] == ids[::-1][:2]
    rest = idle_api.get("/v1/submissions?offset=2&limit=10", headers=key).json()
    assert [s["id"] for s in rest["items"]] == ids[::-1][2:]
    assert idle_api.post(f"/v1/submissions/{ids[0]}/cancel", headers=key).status_code == 202
    cancelled = idle_api.get("/v1/submissions?status=cancelled", headers=key).json()
    assert [s["id"] for s in cancelled["items"]] == [ids[0]]
    queued = idle_api.get("/v1/submissions?status=queued", headers=key).json()
    assert queued["total"] == 4
    for bad in ("status=done", "limit=0", "limit=101", "offset=-1", "limit=abc"):
        r = idle_api.get(f"/v1/submissions?{bad}", headers=key)
        assert r.status_code == 422, bad
        assert error_of(r)["field"] == bad.split("=")[0]


def test_queue_position_cancel_and_delete(idle_api: TestClient):
    key = new_key(idle_api, "canceller")
    first = idle_api.post("/v1/submissions", json=gaussian_json(5), headers=key).json()
    second = idle_api.post("/v1/submissions", json=gaussian_json(5, seed=1), headers=key).json()
    assert (first["queue_position"], second["queue_position"]) == (0, 1)
    doc = idle_api.get(second["status_url"], headers=key).json()
    assert (doc["status"], doc["queue_position"], doc["result"]) == ("queued", 1, None)

    r = idle_api.post(f"/v1/submissions/{first['id']}/cancel", headers=key)
    assert r.status_code == 202
    assert r.json()["status"] == "cancelled"
    assert idle_api.get(second["status_url"], headers=key).json()["queue_position"] == 0
    r = idle_api.post(f"/v1/submissions/{first['id']}/cancel", headers=key)
    assert r.status_code == 409
    assert "already ended (cancelled)" in error_of(r)["message"]

    assert idle_api.delete(second["status_url"], headers=key).status_code == 204
    assert idle_api.get(second["status_url"], headers=key).status_code == 404
    assert idle_api.delete(second["status_url"], headers=key).status_code == 404
    assert idle_api.delete(first["status_url"], headers=key).status_code == 204
    assert idle_api.get("/v1/submissions", headers=key).json()["total"] == 0


def test_failed_job_reason_and_cancel_of_finished(
    api: TestClient, submitter: dict[str, str], worker
):
    r = api.post("/v1/submissions", json=gaussian_json(30), headers=submitter)
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded"
    r = api.post(f"/v1/submissions/{doc['id']}/cancel", headers=submitter)
    assert r.status_code == 409
    assert api.delete(f"/v1/submissions/{doc['id']}", headers=submitter).status_code == 204
    assert api.get(f"/v1/submissions/{doc['id']}", headers=submitter).status_code == 404


def test_result_read_is_the_documented_model(api: TestClient, submitter: dict[str, str], worker):
    """A succeeded submission's response (the stored result spliced in as raw JSON) parses as
    ``SubmissionDetail`` and equals that model's own serialisation: nothing added or lost."""
    from service.api.schemas import SubmissionDetail

    body = gaussian_json(80, analyses={"metrics": "all", "bootstrap": {"n_resamples": 20}})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    raw = api.get(f"/v1/submissions/{doc['id']}", headers=submitter)
    assert raw.headers["content-type"] == "application/json"
    parsed = json.loads(raw.content)
    assert parsed == SubmissionDetail.model_validate(parsed).model_dump(mode="json")
    assert parsed["result"]["metrics"]["mae"]["interval"]["n_resamples"] == 20
    assert parsed["result"] == api.app.state.store.get_result(doc["id"])
