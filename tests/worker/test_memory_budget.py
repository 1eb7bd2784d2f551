"""The per-job memory budget in a real Celery worker: a job over the budget fails with a
reason naming it and is not retried, and the same worker process serves the next job."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays
from tests.stack import Db, WorkerProcess, clear_store, db_url
from tests.worker.test_worker import submit, wait_for

#: A budget far below what the bootstrap of all metrics at N = 200 000 holds (run in a process
#: under :func:`service.memory.enforced`, it fails with 200 MiB and succeeds with 400).
BUDGET = 48 << 20


def _settings(settings: Settings) -> Settings:
    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.MEMORY_BUDGET)  # a database of its own workers
    return settings.model_copy(update={"redis_url": url, "job_memory_budget_bytes": BUDGET})


@pytest.fixture
def budget_store(settings: Settings) -> Iterator[tuple[Settings, Store]]:
    s = _settings(settings)
    store = Store.from_url(str(s.redis_url), s)
    store.client.flushdb()
    try:
        yield s, store
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


def _big_job() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(21)
    n = 200_000
    return {"mean": rng.normal(size=n), "std": rng.uniform(0.5, 2.0, n), "y": rng.normal(size=n)}


def _assert_served_next(store: Store, settings: Settings, proc: WorkerProcess) -> None:
    """The same worker process runs a small job to success and is still registered."""
    small = submit(store, settings, gaussian_arrays(200, seed=4), {"metrics": ["mae", "nll"]})
    done = wait_for(store, small.id, {"succeeded", "failed"})
    assert done.status == "succeeded", done.error
    assert proc.proc is not None and proc.proc.poll() is None
    assert any(w.startswith(proc.name + "@") for w in store.live_workers())


def test_a_job_past_the_budget_fails_and_the_worker_serves_the_next(
    budget_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    """The worker's estimate is scaled down (as a wrong estimate would be), so only the limit
    enforced while the job runs can stop it: without it the job succeeds."""
    settings, store = budget_store
    proc = WorkerProcess(
        settings,
        f"budget-{os.getpid()}",
        tmp_path / "worker.log",
        module="tests.worker.lowball_worker",
        env={"UQEVAL_TEST_ESTIMATE_SCALE": "0.001"},
    )
    proc.start(store)
    try:
        big = submit(
            store, settings, _big_job(), {"metrics": "all", "bootstrap": {"n_resamples": 300}}
        )
        rec = wait_for(store, big.id, {"succeeded", "failed", "cancelled"})
        assert rec.status == "failed", f"{rec.status}: the job ran past its budget"
        assert rec.error is not None and "memory budget" in rec.error
        assert str(BUDGET) in rec.error and "UQEVAL_JOB_MEMORY_BUDGET_BYTES" in rec.error
        assert rec.attempts == 1  # not retried
        _assert_served_next(store, settings, proc)
        assert store.get_submission(big.id).status == "failed"  # type: ignore[union-attr]
    finally:
        proc.stop()


def test_the_worker_refuses_a_job_whose_estimate_exceeds_its_budget(
    budget_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    """A job the API accepted (its own budget may be larger) is checked again by the worker
    before it runs."""
    settings, store = budget_store
    proc = WorkerProcess(settings, f"budget-check-{os.getpid()}", tmp_path / "worker.log")
    proc.start(store)
    try:
        big = submit(
            store, settings, _big_job(), {"metrics": "all", "bootstrap": {"n_resamples": 300}}
        )
        rec = wait_for(store, big.id, {"succeeded", "failed", "cancelled"})
        assert rec.status == "failed"
        assert rec.error is not None and "memory budget" in rec.error
        assert "bootstrap.n_resamples × N" in rec.error
        assert rec.attempts == 1
        _assert_served_next(store, settings, proc)
    finally:
        proc.stop()


def test_blas_has_its_buffers_before_a_job_limit() -> None:
    """A worker warms BLAS at start: a matrix product under a job's memory limit then needs no
    new BLAS buffer. (Without the warm-up OpenBLAS allocates its buffer at the first product;
    refused by the limit, it gives up with "Memory allocation still failed" instead of raising
    MemoryError, which hung a job at its limit.) Run in a fresh process: its BLAS is cold."""
    code = textwrap.dedent(
        """
        import resource
        import numpy as np
        from service.memory import data_bytes
        from worker.runtime import warm_blas
        warm_blas()
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (data_bytes() + (16 << 20), hard))
        a = np.ones((512, 512))
        print(float((a @ a)[0, 0]), float((a @ a[0])[0]))
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["512.0", "512.0"]


def test_compiled_kernels_are_ready_before_a_job_limit() -> None:
    """A worker readies uqcore's numba kernels at start (worker.runtime.warm_kernels): a
    quantile CORP under a job's tight memory limit then compiles and loads nothing and
    completes, with the compiled fit (not the numpy fallback). Run in a fresh process, whose
    kernels are not yet in memory; numba's cache is the shared one (scripts/test fills it
    before the tests), so the warm-up loads rather than compiles: that it leaves no kernel
    for a job to compile, whatever the cache holds, is tests/uqcore/test_compiled_warm.py's
    check, and an empty cache would cost this test a minute of compiling."""
    code = textwrap.dedent(
        """
        import resource
        import numpy as np
        from service.memory import data_bytes
        from uqcore import _compiled
        from uqcore._isotonic import corp
        from worker.runtime import warm_kernels
        warm_kernels()
        assert _compiled.kernels() is not None
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (data_bytes() + (16 << 20), hard))
        rng = np.random.default_rng(0)
        x = rng.normal(size=2000)
        y = x + rng.normal(size=2000)
        d = corp(x, y, rng.integers(1, 3, 2000).astype(float), functional="quantile", level=0.25)
        print(round(d.mcb - d.dsc + d.unc - d.score, 9) == 0.0)
        """
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]
