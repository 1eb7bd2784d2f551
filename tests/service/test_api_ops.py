"""The metric catalogue, health, readiness, Prometheus metrics, and failure answers
(Redis down: 503; unexpected errors: 500 without a stack trace)."""

from __future__ import annotations

import gc
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from service.api.app import create_app
from service.kinds import CLASSIFICATION_KINDS, REGRESSION_KINDS
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_json
from tests.service._api import ADMIN, TestClient, error_of, wait_terminal
from uqcore import registry

pytest_plugins = ["tests.service._api"]


def test_catalogue_lists_the_registry(api: TestClient):
    r = api.get("/v1/metrics")
    assert r.status_code == 200
    entries = r.json()["metrics"]
    # Regression first, then classification; "ece" and "nll" exist in both tasks.
    assert [(m["task"], m["name"]) for m in entries] == [
        (s.task, s.name) for t in ("regression", "classification") for s in registry.specs(t)
    ]
    metrics = {m["name"]: m for m in entries if m["task"] == "regression"}
    cls = {m["name"]: m for m in entries if m["task"] == "classification"}
    mae = metrics["mae"]
    assert (mae["task"], mae["direction"], mae["needs"]) == ("regression", "lower", ["point"])
    # every regression kind but an interval, which has no point prediction
    assert mae["kinds"] == [k for k in REGRESSION_KINDS if k != "interval"]
    assert metrics["nmerci"]["defaults"]["alpha"] == 0.95
    # Each parameter's domain, as uqcore checks it (tests/uqcore/test_options.py).
    assert metrics["nmerci"]["options"]["alpha"] == {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "default": 0.95,
    }
    assert metrics["mdae"]["options"]["method"]["enum"] == ["linear", "inverted_cdf"]
    for m in entries:
        spec = registry.get(m["name"], m["task"])
        assert m["options"] == {k: o.schema() for k, o in spec.options.items()}
    assert "point_uncertainty" not in metrics["nll"]["kinds"]
    # Classification metrics list the classification kinds only; second-order metrics only
    # the second-order kinds; OOD metrics apply when the submission sends OOD flags; the
    # probability metrics apply to prediction sets sent with their probabilities.
    first_order = ["probs", "logits", "ensemble", "dirichlet", "prediction_set"]
    assert cls["nll"]["kinds"] == first_order
    assert cls["disentanglement_rank_corr"]["kinds"] == ["ensemble", "dirichlet"]
    assert cls["auroc_ood"]["kinds"] == first_order
    for m in entries:
        assert m["summary"] and m["kinds"], m["name"]
        kinds = CLASSIFICATION_KINDS if m["task"] == "classification" else set(REGRESSION_KINDS)
        assert set(m["kinds"]) <= kinds, m["name"]


def test_catalogue_filters(api: TestClient):
    names = [m["name"] for m in api.get("/v1/metrics?kind=point_uncertainty").json()["metrics"]]
    assert "ause" in names and "mae" in names
    assert "nll" not in names and "crps" not in names
    spec_ok = [
        s.name for s in registry.specs("regression") if not (s.needs - {"point", "uncertainty"})
    ]
    assert names == spec_ok
    reg = api.get("/v1/metrics?task=regression").json()["metrics"]
    assert len(reg) == len(registry.specs("regression"))
    cls = api.get("/v1/metrics?task=classification").json()["metrics"]
    assert [m["name"] for m in cls] == [s.name for s in registry.specs("classification")]
    assert {m["task"] for m in cls} == {"classification"}
    second = [m["name"] for m in api.get("/v1/metrics?kind=dirichlet").json()["metrics"]]
    assert "disentanglement_rank_corr" in second and "mae" not in second
    first = [m["name"] for m in api.get("/v1/metrics?kind=probs").json()["metrics"]]
    assert "disentanglement_rank_corr" not in first and "accuracy" in first
    r = api.get("/v1/metrics?task=astrology")
    assert r.status_code == 422
    assert error_of(r)["field"] == "task"
    r = api.get("/v1/metrics?kind=banana")
    assert r.status_code == 422
    assert error_of(r)["field"] == "kind"


def test_health_readiness_and_prometheus(api: TestClient, idle_api: TestClient, worker):
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz")
    assert ready.status_code == 200
    body = ready.json()
    assert body["status"] == "ready" and body["redis"] is True
    assert any(w.startswith(worker.name) for w in body["workers"])
    # The idle app's database has no worker.
    r = idle_api.get("/readyz")
    assert r.status_code == 503
    assert r.json()["reason"] == "no live worker"

    key = {
        "Authorization": "Bearer "
        + api.post("/v1/admin/keys", json={"name": "prom"}, headers=ADMIN).json()["key"]
    }
    sub = api.post("/v1/submissions", json=gaussian_json(20), headers=key).json()
    wait_terminal(api, key, sub["id"])
    api.get("/v1/submissions/sub_missing", headers=key)
    text = api.get("/metrics").text
    assert (
        'uqeval_http_requests_total{method="POST",route="/v1/submissions",status="202"} 1.0' in text
    )
    assert (
        'uqeval_http_requests_total{method="GET",route="/v1/submissions/{sub_id}",status="404"} 1.0'
        in text
    )
    assert 'uqeval_queue_depth{queue="cpu"}' in text
    assert 'uqeval_queue_depth{queue="gpu"}' in text
    assert "uqeval_store_up 1.0" in text
    assert 'uqeval_jobs_total{outcome="succeeded"}' in text
    assert 'uqeval_job_duration_seconds_bucket{le="+Inf",queue="cpu"}' in text
    assert "uqeval_workers_live" in text
    assert "sub_missing" not in text


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture
def dead_api() -> Iterator[TestClient]:
    """An app whose Redis does not exist (every store call fails fast)."""
    settings = Settings(
        redis_url=f"redis://127.0.0.1:{_dead_port()}/0",
        admin_key="k",
        redis_socket_timeout_s=0.2,
        enqueue_timeout_s=0.5,
    )
    with TestClient(create_app(settings)) as client:
        yield client


def test_redis_down_answers_503(dead_api: TestClient):
    r = dead_api.post(
        "/v1/submissions", json=gaussian_json(5), headers={"Authorization": "Bearer k"}
    )
    assert r.status_code == 503
    err = error_of(r)
    assert err["code"] == "service_unavailable"
    assert "Redis" in err["message"]
    assert r.headers["Retry-After"]
    assert dead_api.get("/v1/submissions", headers={"X-API-Key": "k"}).status_code == 503
    ready = dead_api.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["reason"] == "Redis is unreachable"
    assert dead_api.get("/healthz").status_code == 200
    assert dead_api.get("/v1/metrics").status_code == 200
    assert "uqeval_store_up 0.0" in dead_api.get("/metrics").text


def test_unexpected_errors_hide_the_traceback(settings: Settings, store: Store, monkeypatch):
    app = create_app(settings, store=store)
    with TestClient(app, raise_server_exceptions=False) as client:

        def boom(*args: object, **kwargs: object) -> None:
            raise RuntimeError("secret internals at /srv/app.py line 12")

        monkeypatch.setattr(store, "list_submissions", boom)
        r = client.get("/v1/submissions", headers=ADMIN)
    assert r.status_code == 500
    err = error_of(r)
    assert err["code"] == "internal_error"
    assert "secret" not in r.text and "Traceback" not in r.text
    assert err["message"].startswith("internal error (reference ")


def test_gc_freeze_at_startup_is_undone_at_shutdown(settings: Settings, store: Store):
    assert Settings().gc_freeze is True  # the default
    assert gc.get_freeze_count() == 0
    app = create_app(settings.model_copy(update={"gc_freeze": True}), store=store)
    with TestClient(app) as client:
        assert gc.get_freeze_count() > 10_000  # the imported code and the app
        assert client.get("/healthz").status_code == 200
    assert gc.get_freeze_count() == 0
    with TestClient(create_app(settings, store=store)) as client:  # gc_freeze=False
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() == 0


def test_hot_reads_run_in_their_own_small_pool(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
):
    """GET /v1/submissions/{id} runs in the app's read pool: with read_threads=2, eight
    concurrent reads (each held 0.2 s in the store, after its real Redis read) never run more
    than two at a time, and all answer."""
    app = create_app(settings.model_copy(update={"read_threads": 2}), store=store)
    active = peak = 0
    lock = threading.Lock()
    real = store.read_submission

    def held(*args: Any, **kwargs: Any) -> Any:
        nonlocal active, peak
        found = real(*args, **kwargs)
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.2)
        with lock:
            active -= 1
        return found

    monkeypatch.setattr(store, "read_submission", held)
    with TestClient(app) as client:
        assert app.state.read_limiter.total_tokens == 2
        with ThreadPoolExecutor(8) as pool:
            codes = list(
                pool.map(
                    lambda i: client.get(f"/v1/submissions/none-{i}", headers=ADMIN).status_code,
                    range(8),
                )
            )
    assert codes == [404] * 8
    assert peak == 2


def test_unknown_route_and_method_use_the_error_shape(api: TestClient):
    r = api.get("/v1/nothing")
    assert r.status_code == 404
    assert error_of(r)["code"] == "not_found"
    r = api.put("/v1/metrics")
    assert r.status_code == 405
    assert error_of(r)["code"] == "method_not_allowed"
