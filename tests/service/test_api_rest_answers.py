"""Answers that speak REST, over HTTP with the real worker: notes and 422s name request fields,
an unknown metric gets "did you mean" and the metrics of its task, curves only when asked,
progress that advances during a long bootstrap (and a cancel that stops it), and a
comparison's progress."""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import pytest

from service.store import Store, now_iso
from tests.factories import applicable_curves, gaussian_arrays, gaussian_json
from tests.service._api import ADMIN, TestClient, error_of, wait_terminal
from tests.service.test_rest_text import PYTHON, python_words
from uqcore import registry
from worker.comparisons import run_comparison

pytest_plugins = ["tests.service._api"]


def _probs_body(n: int = 60, **analyses: Any) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(4), size=n)
    return {
        "model_name": "softmax",
        "prediction": {"kind": "probs", "probs": probs.tolist()},
        "labels": rng.integers(0, 4, size=n).tolist(),
        "analyses": analyses or {"metrics": "all"},
    }


def test_result_notes_name_request_fields(api: TestClient, submitter: dict[str, str], worker):
    body = _probs_body(
        metrics="all", bootstrap={"n_resamples": 30}, stability={"enabled": True, "repeats": 3}
    )
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    result = doc["result"]
    assert not python_words(result), python_words(result)
    na = result["not_applicable"]
    assert na["aleatoric_rank_corr"].endswith("(send `soft_labels` with the submission)")
    assert na["auroc_ood"].endswith("(send `ood` with the submission)")


def test_422s_name_request_fields(idle_api: TestClient):
    key = {"Authorization": f"Bearer {_key(idle_api)}"}
    # a metric that needs an input the submission did not send
    r = idle_api.post(
        "/v1/submissions", json=_probs_body(metrics=["accuracy", "auroc_ood"]), headers=key
    )
    err = error_of(r)
    assert (r.status_code, err["code"], err["field"], err["index"]) == (
        422,
        "metric_not_applicable",
        "analyses.metrics",
        1,
    )
    assert err["message"].endswith("(send `ood` with the submission)"), err
    # options that contradict each other: uqcore's check, in the request's fields
    body = _probs_body(metrics=["ece"], params={"ece": {"binning": "mass", "bins_closed": "left"}})
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    err = error_of(r)
    assert r.status_code == 422 and err["field"].startswith("analyses.params.ece"), err
    assert '`analyses.params.ece.binning = "mass"`' in err["message"], err
    assert not PYTHON.search(err["message"]), err
    # fractional weights and an option that needs integer ones
    body = gaussian_json(
        10,
        sample_weight=np.linspace(0.5, 1.5, 10).tolist(),
        analyses={"metrics": ["ause"], "params": {"ause": {"error": "rmse"}}},
    )
    r = idle_api.post("/v1/submissions", json=body, headers=key)
    err = error_of(r)
    assert (r.status_code, err["code"]) == (422, "metric_not_applicable"), err
    assert '`analyses.params.ause.error = "rmse"`' in err["message"]
    assert not PYTHON.search(err["message"]), err


def _key(client: TestClient) -> str:
    r = client.post("/v1/admin/keys", json={"name": "rest"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    return str(r.json()["key"])


def _listed(message: str) -> set[str]:
    """The metric names a message lists after "metrics: "."""
    return {m.strip() for m in message.split("metrics: ", 1)[1].split(",")}


def test_unknown_metric_did_you_mean_and_the_tasks_metrics(idle_api: TestClient):
    key = {"Authorization": f"Bearer {_key(idle_api)}"}
    regression = set(registry.names("regression"))
    classification = set(registry.names("classification"))
    cases = [
        (
            gaussian_json(5, analyses={"metrics": ["mae", "crsp"]}),
            ("analyses.metrics", 1),
            "'crps'",
            regression,
        ),
        (
            gaussian_json(5, analyses={"metrics": ["mae"], "params": {"crsp": {}}}),
            ("analyses.params.crsp", None),
            "'crps'",
            regression,
        ),
        (
            _probs_body(metrics=["accuracy", "brierr"]),
            ("analyses.metrics", 1),
            "'brier'",
            classification,
        ),
    ]
    for body, (field, index), suggestion, listed in cases:
        r = idle_api.post("/v1/submissions", json=body, headers=key)
        err = error_of(r)
        assert (r.status_code, err["code"], err["field"], err["index"]) == (
            422,
            "unknown_metric",
            field,
            index,
        ), err
        assert f"did you mean {suggestion}?" in err["message"], err
        assert _listed(err["message"]) == listed, err
    # a benchmark's metrics
    body = {
        "name": "typo",
        "primary_metric": "mae",
        "metrics": ["mae", "crsp"],
        "y": [0.0, 1.0, 2.0],
    }
    r = idle_api.post("/v1/benchmarks", json=body, headers=ADMIN)
    err = error_of(r)
    assert (r.status_code, err["code"], err["field"], err["index"]) == (
        422,
        "unknown_metric",
        "metrics",
        1,
    )
    assert "did you mean 'crps'?" in err["message"] and _listed(err["message"]) == regression
    # nothing close: no suggestion
    r = idle_api.post(
        "/v1/submissions", json=gaussian_json(5, analyses={"metrics": ["zzzz"]}), headers=key
    )
    assert "did you mean" not in error_of(r)["message"]


def test_curves_only_when_asked(api: TestClient, submitter: dict[str, str], worker):
    body = gaussian_json(3, analyses={"metrics": ["mae", "crps"]})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert doc["status"] == "succeeded", doc
    raw = api.get(f"/v1/submissions/{doc['id']}", headers=submitter).content
    assert len(raw) < 2500, len(raw)
    assert doc["result"]["curves"] == {}
    assert "curves" not in doc["result"]["provenance"]["timings_s"]

    body = gaussian_json(3, analyses={"metrics": ["mae", "crps"], "curves": True})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    doc = wait_terminal(api, submitter, r.json()["id"])
    assert set(doc["result"]["curves"]) == applicable_curves("gaussian", gaussian_arrays(3))
    # the same request without curves is another input (its own input hash)
    assert (
        json.loads(raw)["result"]["provenance"]["input_hash"]
        != (doc["result"]["provenance"]["input_hash"])
    )


LONG = {"metrics": ["mae", "ause", "spearman", "ence"]}


def _progress_until_done(store: Store, sub_id: str, timeout_s: float) -> list[float]:
    """The progress values the store holds while the job runs (polled every 10 ms)."""
    seen: list[float] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rec = store.get_submission(sub_id)
        assert rec is not None
        if not seen or seen[-1] != rec.progress:
            seen.append(rec.progress)
        if rec.status in ("succeeded", "failed", "cancelled"):
            return seen
        time.sleep(0.01)
    raise AssertionError(f"{sub_id} did not end within {timeout_s} s: {seen}")


def test_progress_advances_during_a_long_bootstrap(
    api: TestClient, store: Store, submitter: dict[str, str], worker
):
    body = gaussian_json(2000, analyses={**LONG, "bootstrap": {"n_resamples": 8000}})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    assert r.status_code == 202, r.text
    seen = _progress_until_done(store, r.json()["id"], 120)
    assert seen[-1] == 100.0 and seen == sorted(seen), seen
    # metrics end at 5 + 30 = 35, the bootstrap at 65 (two phases and the rest)
    inside = {p for p in seen if 35.0 < p < 65.0}
    assert len(inside) >= 3, seen


def test_cancel_during_a_long_bootstrap_ends_the_job_soon(
    api: TestClient, store: Store, submitter: dict[str, str], worker
):
    body = gaussian_json(2000, analyses={**LONG, "bootstrap": {"n_resamples": 100_000}})
    r = api.post("/v1/submissions", json=body, headers=submitter)
    sub_id = r.json()["id"]
    deadline = time.monotonic() + 60
    while True:  # wait until the bootstrap has begun
        rec = store.get_submission(sub_id)
        assert rec is not None and rec.status in ("queued", "running"), rec
        if rec.progress > 35.0:
            break
        assert time.monotonic() < deadline, rec
        time.sleep(0.01)
    t0 = time.monotonic()
    assert api.post(f"/v1/submissions/{sub_id}/cancel", headers=submitter).status_code == 202
    doc = wait_terminal(api, submitter, sub_id, timeout_s=30)
    elapsed = time.monotonic() - t0
    assert doc["status"] == "cancelled", doc
    # the bootstrap alone would take about a minute; the cancel is noticed within a block
    assert elapsed < 5.0, elapsed


def test_comparison_progress_follows_the_resamples(
    api: TestClient, store: Store, submitter: dict[str, str], worker
):
    y = np.random.default_rng(1).normal(size=200).tolist()
    r = api.post(
        "/v1/benchmarks",
        json={"name": "cmp", "primary_metric": "mae", "metrics": ["mae"], "y": y},
        headers=ADMIN,
    )
    bench = r.json()["id"]
    subs = []
    for seed in (1, 2):
        a = gaussian_arrays(200, seed)
        body = {
            "model_name": f"m{seed}",
            "benchmark_id": bench,
            "prediction": {
                "kind": "gaussian",
                "mean": a["mean"].tolist(),
                "std": a["std"].tolist(),
            },
        }
        r = api.post("/v1/submissions", json=body, headers=submitter)
        assert wait_terminal(api, submitter, r.json()["id"])["status"] == "succeeded"
        subs.append(r.json()["id"])
    cmp_id = "cmp_progress_test"
    request = {
        "benchmark_id": bench,
        "submission_ids": subs,
        "metrics": ["mae"],
        "n_resamples": 1000,
        "seed": 0,
        "level": 0.95,
        "method": "percentile",
    }
    # created without a task message: this test runs it, with a progress callback
    store.create_comparison(
        {"id": cmp_id, "owner": "k", "created_at": now_iso(), "request": request}
    )
    seen: list[float] = []
    assert run_comparison(store, cmp_id, seen.append) == "succeeded"
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] == pytest.approx(99.0), seen
    done = store.get_comparison(cmp_id)
    assert done is not None and done["progress"] == "100.0"
    assert set(done["result"]["submissions"]) == set(subs)
