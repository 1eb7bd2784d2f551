"""A blob store (a real S3 server process) that is briefly down: the API answers 503 with
Retry-After and /readyz says why, a worker's job is retried and succeeds once the server is
back, and a worker killed mid-job finds the arrays in the blob store again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service import keys
from service.api.app import create_app
from service.blobs.s3 import S3BlobStore
from service.redis_server import ManagedRedis
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_npz
from tests.service._api import NPZ, TestClient, error_of, new_key, wait_terminal
from tests.stack import S3_BUCKET, S3_ENV, TEST_SETTINGS, S3Server, WorkerProcess


@pytest.fixture
def outage(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A Redis, an S3 server and an API of this test alone (the server gets stopped); the
    test starts its workers (``stack["workers"]``, killed at the end: the Redis and the S3
    server go with the test, so a warm shutdown, seconds a worker, would only make it longer)."""
    import os

    for name, value in S3_ENV.items():
        os.environ[name] = value
    redis_server = ManagedRedis(tmp_path / "redis").start()
    s3 = S3Server(tmp_path / "s3").start()
    S3BlobStore(S3_BUCKET, endpoint_url=s3.url).create_bucket()
    settings = Settings(
        redis_url=redis_server.url,
        blob_url=f"s3://{S3_BUCKET}/outage",
        blob_endpoint_url=s3.url,
        scratch_dir=tmp_path / "scratch",
        **{**TEST_SETTINGS, "blob_sweep_interval_s": 0.5},
    )
    store = Store.from_url(redis_server.url, settings)
    stack: dict[str, Any] = {"store": store, "settings": settings, "s3": s3, "workers": []}
    try:
        with TestClient(create_app(settings, store=store)) as api:
            stack["api"] = api
            yield stack
    finally:
        for worker in stack["workers"]:
            worker.kill()
        store.close()
        s3.stop()
        redis_server.stop()


def start_worker(stack: dict[str, Any], name: str, tmp_path: Path) -> WorkerProcess:
    worker = WorkerProcess(stack["settings"], name, tmp_path / f"{name}.log", env=S3_ENV)
    stack["workers"].append(worker)
    return worker.start(stack["store"])


def start_workers(stack: dict[str, Any], names: list[str], tmp_path: Path) -> list[WorkerProcess]:
    """Start workers together (seconds each, most of them importing)."""
    workers = [
        WorkerProcess(stack["settings"], name, tmp_path / f"{name}.log", env=S3_ENV)
        for name in names
    ]
    stack["workers"].extend(workers)
    with ThreadPoolExecutor(len(workers)) as pool:
        for started in [pool.submit(w.start, stack["store"]) for w in workers]:
            started.result()
    return workers


def received(worker: WorkerProcess, task: str) -> bool:
    """Whether the worker's log shows ``task`` received."""
    lines = worker.log_path.read_text(errors="replace").splitlines()
    return any(f"Task {task}[" in ln and "received" in ln for ln in lines)


def wait_for(check: Any, timeout_s: float, what: str, poll_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(poll_s)


@pytest.mark.slow
def test_api_answers_503_and_worker_retries_while_the_blob_store_is_down(
    outage: dict[str, Any], tmp_path: Path
) -> None:
    api: TestClient = outage["api"]
    s3: S3Server = outage["s3"]
    store: Store = outage["store"]
    headers = new_key(api)
    # Stored while the server is up; no worker yet, so the job waits in its queue.
    r = api.post("/v1/submissions", content=gaussian_npz(200, seed=1), headers={**headers, **NPZ})
    assert r.status_code == 202, r.text
    sub_id = r.json()["id"]
    assert len(list(store.blobs.list(keys.submission_blobs(sub_id)))) == 3

    s3.stop()
    r = api.post("/v1/submissions", content=gaussian_npz(200, seed=2), headers={**headers, **NPZ})
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) > 0
    assert "blob store" in error_of(r)["message"]
    worker = start_worker(outage, "w-outage", tmp_path)
    ready = api.get("/readyz")
    assert ready.status_code == 503 and "blob store" in ready.json()["reason"]

    # The worker takes the job, cannot read its arrays, and retries instead of failing it.
    def retried() -> bool:
        lines = worker.log_path.read_text(errors="replace").splitlines()
        return any(
            "uqeval.evaluate[" in ln and "retry:" in ln and "blob store" in ln for ln in lines
        )

    wait_for(retried, 60, "the worker never tried to read the arrays")
    assert store.get_submission(sub_id).status in ("queued", "running")  # type: ignore[union-attr]

    s3.start()  # same port, same objects (replayed)
    doc = wait_terminal(api, headers, sub_id, timeout_s=120)
    assert doc["status"] == "succeeded", doc
    assert api.get("/readyz").status_code == 200
    r = api.post("/v1/submissions", content=gaussian_npz(200, seed=2), headers={**headers, **NPZ})
    assert r.status_code == 202, r.text


@pytest.mark.slow
def test_the_worker_sweep_removes_blobs_of_deleted_and_orphaned_arrays(
    outage: dict[str, Any], tmp_path: Path
) -> None:
    api: TestClient = outage["api"]
    store: Store = outage["store"]
    headers = new_key(api)
    start_worker(outage, "w-sweep", tmp_path)
    r = api.post("/v1/submissions", content=gaussian_npz(100, seed=3), headers={**headers, **NPZ})
    assert r.status_code == 202, r.text
    sub_id = r.json()["id"]
    assert wait_terminal(api, headers, sub_id)["status"] == "succeeded"
    # An orphan of a write that died, made due now; a deleted submission whose objects were
    # left behind while the blob store was down (due now as well).
    store.blobs.put_bytes("submissions/sub_dead/mean.npy", b"x")
    store.track_blobs("submissions/sub_dead/", 0)
    store.client.zadd(keys.blobs_due(), {keys.submission_blobs(sub_id): 0})
    store.client.delete(keys.arrays(sub_id))
    wait_for(
        lambda: not list(store.blobs.list("submissions/")),
        60,
        "the workers' sweep did not remove the blobs",
    )
    # Nothing due is left (the kept curves of the succeeded one are followed until later).
    assert store.client.zcount(keys.blobs_due(), "-inf", time.time()) == 0
    assert store.get_curves(sub_id) is not None


@pytest.mark.slow
def test_a_worker_killed_mid_job_leaves_the_arrays_to_the_next(
    outage: dict[str, Any], tmp_path: Path
) -> None:
    api: TestClient = outage["api"]
    store: Store = outage["store"]
    headers = new_key(api)
    # Two workers, started together: the one that takes the job is killed, the other is the
    # next (a worker started after the kill would add its start, seconds, to the test).
    workers = start_workers(outage, ["w-a", "w-b"], tmp_path)
    n = 20_000
    rng = np.random.default_rng(5)
    y = rng.normal(size=n)
    from tests.factories import npz_bytes

    # One metric's bootstrap keeps the job computing for about a second (longer on a busy
    # machine): the worker is killed as soon as the job is seen running (polled every 10 ms),
    # so it is killed mid-job with a wide margin, and the job is computed again soon after.
    analyses = {"metrics": ["mae"], "bootstrap": {"n_resamples": 3000}}
    body = npz_bytes(
        {"kind": "gaussian", "model_name": "m", "analyses": analyses},
        mean=y + rng.normal(size=n),
        std=np.ones(n),
        y=y,
    )
    r = api.post("/v1/submissions", content=body, headers={**headers, **NPZ})
    assert r.status_code == 202, r.text
    sub_id = r.json()["id"]
    wait_for(
        lambda: store.get_submission(sub_id).status == "running",  # type: ignore[union-attr]
        60,
        "the job never started",
        poll_s=0.01,
    )
    (doomed,) = [w for w in workers if received(w, "uqeval.evaluate")]
    doomed.kill()
    doc = wait_terminal(api, headers, sub_id, timeout_s=180)
    assert doc["status"] == "succeeded", doc
    assert doc["attempts"] >= 2
    assert len(list(store.blobs.list(keys.submission_blobs(sub_id)))) == 3


@pytest.mark.slow
def test_a_comparison_waits_out_a_blob_outage_without_using_attempts(
    outage: dict[str, Any], tmp_path: Path
) -> None:
    """A comparison reads its submissions' arrays from the blob store: while it is down the
    task is retried before its claim (as an evaluation's), so the comparison stays queued
    with no attempt used, and succeeds once the store is back."""
    api: TestClient = outage["api"]
    s3: S3Server = outage["s3"]
    store: Store = outage["store"]
    headers = new_key(api)
    rng = np.random.default_rng(8)
    y = rng.normal(size=200)
    bench = api.post(
        "/v1/benchmarks",
        json={"name": "b", "primary_metric": "mae", "y": y.tolist()},
        headers={"Authorization": f"Bearer {TEST_SETTINGS['admin_key']}"},
    )
    assert bench.status_code == 201, bench.text
    bid = bench.json()["id"]
    worker = start_worker(outage, "w-cmp", tmp_path)
    subs = []
    for scale in (0.5, 1.0):
        body = {
            "model_name": "m",
            "benchmark_id": bid,
            "prediction": {
                "kind": "gaussian",
                "mean": (y + scale * rng.normal(size=200)).tolist(),
                "std": [1.0] * 200,
            },
        }
        r = api.post("/v1/submissions", json=body, headers=headers)
        assert r.status_code == 202, r.text
        assert wait_terminal(api, headers, r.json()["id"])["status"] == "succeeded"
        subs.append(r.json()["id"])
    s3.stop()
    r = api.post(
        "/v1/comparisons", json={"benchmark_id": bid, "submission_ids": subs}, headers=headers
    )
    assert r.status_code == 202, r.text
    cmp_id = r.json()["id"]

    def retried() -> bool:
        lines = worker.log_path.read_text(errors="replace").splitlines()
        return any("uqeval.compare[" in ln and "retry:" in ln for ln in lines)

    wait_for(retried, 60, "the worker never tried the comparison")
    doc = store.get_comparison(cmp_id)
    assert doc is not None and doc["status"] == "queued" and int(doc.get("attempts") or 0) == 0
    s3.start()
    wait_for(
        lambda: (store.get_comparison(cmp_id) or {}).get("status") == "succeeded",
        120,
        "the comparison never succeeded once the blob store was back",
    )
