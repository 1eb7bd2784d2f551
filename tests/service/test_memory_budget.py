"""The per-job memory budget at the API (422 before the 202), its default rule, the estimate
against a measured job, and the limit that enforces it."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from service.analyses import Analyses
from service.api.app import create_app
from service.memory import (
    FLOOR_BYTES,
    default_budget,
    enforced,
    estimate_job,
    job_memory_budget,
    machine_memory_bytes,
)
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays
from tests.service._api import ADMIN, TestClient, error_of, new_key
from tests.stack import ROOT, clear_store

pytest_plugins = ["tests.service._api"]

#: Fits a plain job at N = 20 000 (about 40 MiB), not a bootstrap there (a block of 256
#: resamples of 20 000 weights alone is 39 MiB).
BUDGET = 80 << 20
N = 20_000


@pytest.fixture
def budget_api(idle_settings: Settings) -> Iterator[tuple[TestClient, Store]]:
    """An app with a small job memory budget whose jobs stay queued (no worker)."""
    s = idle_settings.model_copy(update={"job_memory_budget_bytes": BUDGET})
    store = Store.from_url(str(s.redis_url), s)
    store.client.flushdb()
    try:
        with TestClient(create_app(s, store=store)) as client:
            yield client, store
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


def _submission(n: int = N, **analyses: Any) -> dict[str, Any]:
    a = gaussian_arrays(n, seed=3)
    return {
        "model_name": "m",
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
        "y": a["y"].tolist(),
        "analyses": {"metrics": ["mae", "nll", "crps"], **analyses},
    }


def _refusal(response: Any) -> str:
    assert response.status_code == 422, response.text
    err = error_of(response)
    assert err["code"] == "over_memory_budget"
    message: str = err["message"]
    assert "UQEVAL_JOB_MEMORY_BUDGET_BYTES" in message
    assert str(BUDGET) in message and "80.0 MiB" in message
    return message


def test_a_submission_over_the_budget_is_refused_before_the_202(
    budget_api: tuple[TestClient, Store],
) -> None:
    client, _ = budget_api
    team = new_key(client)
    ok = client.post("/v1/submissions", json=_submission(), headers=team)
    assert ok.status_code == 202, ok.text
    r = client.post(
        "/v1/submissions", json=_submission(bootstrap={"n_resamples": 1000}), headers=team
    )
    message = _refusal(r)
    # the biggest part, with the estimate: 256 resamples per block of N weights, at least
    # 256 · 8 · N bytes (39 MiB), over the budget with the rest
    assert "bootstrap.n_resamples × N" in message
    estimate = float(message.split("an estimated ")[1].split(" MiB")[0])
    assert estimate > 256 * 8 * N / 2**20
    assert estimate > BUDGET / 2**20
    listed = client.get("/v1/submissions", headers=team).json()
    assert len(listed["items"]) == 1  # nothing of the refused one was stored
    r = client.post(
        "/v1/submissions",
        json=_submission(stability={"enabled": True, "repeats": 1000}),
        headers=team,
    )
    assert "stability.repeats × N" in _refusal(r)


def test_a_benchmark_submission_counts_the_hidden_targets(
    budget_api: tuple[TestClient, Store],
) -> None:
    """A benchmark whose analyses fit at its N is created; a prediction too wide for the
    budget on it is refused (its width is known only with the submission)."""
    client, _ = budget_api
    n = 4000
    y = gaussian_arrays(n, seed=3)["y"]
    bench = {
        "name": "b",
        "description": "",
        "primary_metric": "crps",
        "metrics": ["crps", "mae"],
        "bootstrap": {"n_resamples": 20},
        "y": y.tolist(),
    }
    r = client.post("/v1/benchmarks", json=bench, headers=ADMIN)
    assert r.status_code == 201, r.text
    team = new_key(client)
    draws = np.random.default_rng(5).normal(size=(n, 1000))
    body = {
        "model_name": "wide",
        "benchmark_id": r.json()["id"],
        "prediction": {"kind": "samples", "draws": draws.round(3).tolist()},
    }
    refused = client.post("/v1/submissions", json=body, headers=team)
    assert "metrics × N × prediction width" in _refusal(refused)


def test_a_benchmark_whose_analyses_cannot_fit_is_refused(
    budget_api: tuple[TestClient, Store],
) -> None:
    client, _ = budget_api
    y = gaussian_arrays(N, seed=3)["y"]
    bench = {
        "name": "b",
        "description": "",
        "primary_metric": "crps",
        "metrics": ["crps", "mae"],
        "bootstrap": {"n_resamples": 2000},
        "y": y.tolist(),
    }
    r = client.post("/v1/benchmarks", json=bench, headers=ADMIN)
    assert "bootstrap.n_resamples × N" in _refusal(r)
    assert client.get("/v1/benchmarks", headers=ADMIN).json()["benchmarks"] == []
    bench["bootstrap"] = {"n_resamples": 0}
    assert client.post("/v1/benchmarks", json=bench, headers=ADMIN).status_code == 201


def test_the_default_budget_rule() -> None:
    gib = 1 << 30
    assert default_budget(1, memory=16 * gib) == 8 * gib
    assert default_budget(4, memory=16 * gib) == 2 * gib
    assert default_budget(64, memory=4 * gib) == FLOOR_BYTES
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    machine = machine_memory_bytes()
    assert machine is not None and 0 < machine <= physical
    unset = Settings(job_memory_budget_bytes=None, worker_concurrency=2)
    assert job_memory_budget(unset) == max(FLOOR_BYTES, machine // 4)
    assert job_memory_budget(Settings(job_memory_budget_bytes=12345)) == 12345


def _limit_stops_an_allocation_and_is_restored() -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    size = 512 << 20
    with enforced(64 << 20) as limit:
        assert limit is not None
        with pytest.raises(MemoryError):
            np.ones(size // 8)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert np.ones(size // 8).nbytes == size  # the same allocation succeeds after it
    with enforced(256 << 20):
        assert np.ones((64 << 20) // 8).sum() == (64 << 20) // 8  # within it: fine


def _a_thread_refused_by_the_limit_is_a_memory_error() -> None:
    """A thread's stack is data the limit counts: a thread the block cannot start leaves it
    as a MemoryError (the worker fails the job as past its budget), and the limit is
    restored."""
    before = resource.getrlimit(resource.RLIMIT_DATA)
    # A stack larger than glibc's cached ones (freed threads' stacks, reused without a new
    # mapping): this thread needs 64 MiB more data, past the limit.
    threading.stack_size(64 << 20)
    refused = pytest.raises(MemoryError, match="thread could not be started")
    with refused as info, enforced(1 << 20):
        threading.Thread(target=lambda: None).start()
    threading.stack_size(0)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    started = threading.Thread(target=lambda: None)
    started.start()  # after it, fine
    started.join()
    # Other RuntimeErrors leave the block as they are.
    with pytest.raises(RuntimeError, match="another"), enforced(64 << 20):
        raise RuntimeError("another error")


def _in_a_forked_child(check: Callable[[], None]) -> None:
    child = multiprocessing.get_context("fork").Process(target=check)
    child.start()
    child.join(120)
    if child.exitcode is None:  # hung: it must not outlive the test
        child.kill()
        child.join(10)
        pytest.fail("the check did not end in 120 s")
    assert child.exitcode == 0, "the check failed in the child (its traceback is above)"


@pytest.mark.parametrize(
    "check",
    [_limit_stops_an_allocation_and_is_restored, _a_thread_refused_by_the_limit_is_a_memory_error],
)
def test_the_limit_is_enforced_and_restored(check: Callable[[], None]) -> None:
    """In a forked child of the test process: the limit is the whole process's, set from its
    data size of the moment, and the child has no other thread (a test's server, a pool) that
    could free memory or reset the limit meanwhile."""
    _in_a_forked_child(check)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "n", "width", "analyses"),
    [
        ("gaussian", 100_000, 1, {"bootstrap": {"n_resamples": 100}}),
        ("probs", 200_000, 20, {"stability": {"enabled": True, "repeats": 3}}),
    ],
)
def test_the_estimate_bounds_a_measured_job(
    kind: str, n: int, width: int, analyses: dict[str, Any]
) -> None:
    """The worker's computation in a fresh process (benchmarks/memory.py measures it): its
    peak (inputs + traced or resident growth) <= the estimate <= 4 × it."""
    out = subprocess.run(
        [sys.executable, "benchmarks/memory.py", "--one", json.dumps([kind, n, width, analyses])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    measured = json.loads(out.stdout.strip().splitlines()[-1])["measured"]
    from benchmarks.memory import make_arrays

    shapes = {k: a.shape for k, a in make_arrays(kind, n, width).items()}
    est = estimate_job(kind, n, Analyses.model_validate(analyses), shapes=shapes).total
    assert measured <= est <= 4 * measured, (measured, est)
