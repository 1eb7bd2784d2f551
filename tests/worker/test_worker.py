"""Jobs through a real Celery worker (subprocess, never eager) on a real Redis server."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service import jobs, keys
from service.analyses import Analyses
from service.settings import Settings
from service.store import Store, SubmissionRecord
from tests.factories import applicable_curves, gaussian_arrays
from tests.stack import Db, WorkerProcess, clear_store, db_url
from worker.backend import select_backend
from worker.execution import run_rank_job

WAIT_S = 90.0  # generous: the machine may be busy; no test relies on speed


def submit(
    store: Store,
    settings: Settings,
    arrays: dict[str, np.ndarray],
    analyses: dict[str, Any] | None = None,
    kind: str = "gaussian",
) -> SubmissionRecord:
    record, created = jobs.submit(
        store,
        settings,
        owner="key_test",
        kind=kind,
        n=len(arrays["y"]),
        model_name="model",
        metadata={"run": 7},
        analyses=Analyses.model_validate(analyses or {"metrics": "all", "seed": 0}),
        arrays=arrays,
        idempotency_key=None,
        body_hash="",
    )
    assert created
    return record


def wait_for(store: Store, sub_id: str, statuses: set[str]) -> SubmissionRecord:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rec = store.get_submission(sub_id)
        assert rec is not None
        if rec.status in statuses:
            return rec
        time.sleep(0.02)
    raise AssertionError(f"{sub_id} still {rec.status} after {WAIT_S} s (wanted {statuses})")


def strict_json(doc: Any) -> Any:
    """Round trip through JSON that refuses NaN and infinities."""

    def refuse(name: str) -> None:
        raise AssertionError(f"non-finite {name} in the result")

    return json.loads(json.dumps(doc), parse_constant=refuse)


@pytest.mark.usefixtures("worker")
def test_job_runs_to_a_full_result_document(store: Store, settings: Settings) -> None:
    analyses = {
        "metrics": "all",
        "params": {"nmerci": {"alpha": 0.9}},
        "bootstrap": {"n_resamples": 40, "method": "percentile", "level": 0.9},
        "stability": {"enabled": True, "repeats": 5},
        "seed": 3,
        "curves": True,
    }
    arrays = gaussian_arrays(128)
    rec = submit(store, settings, arrays, analyses)
    assert rec.queue == "cpu" and rec.status == "queued"
    done = wait_for(store, rec.id, {"succeeded", "failed"})
    assert done.status == "succeeded", done.error
    assert (done.progress, done.attempts) == (100.0, 1)
    assert done.started_at is not None and done.finished_at is not None
    result = store.get_result(rec.id)
    assert result is not None
    strict_json(result)
    mae = result["metrics"]["mae"]
    assert mae["direction"] == "lower" and mae["bounds"] == [0.0, None]
    interval = mae["interval"]
    assert interval["low"] <= mae["value"] <= interval["high"]
    assert (interval["method"], interval["level"], interval["n_resamples"]) == (
        "percentile",
        0.9,
        40,
    )
    assert result["metrics"]["nmerci"]["params"]["alpha"] == 0.9
    assert (
        "value" in result["metrics"]["pit"] and "histogram" in result["metrics"]["pit"]["details"]
    )
    assert set(result["curves"]) == applicable_curves("gaussian", arrays)
    assert result["stability"]["results"]["mae"]["value"] == pytest.approx(mae["value"])
    prov = result["provenance"]
    assert (prov["backend"], prov["device"], prov["kind"], prov["n"], prov["seed"]) == (
        "numpy",
        "cpu",
        "gaussian",
        128,
        3,
    )
    assert prov["input_hash"] == rec.input_hash and len(rec.input_hash) == 64
    assert {"load", "metrics", "bootstrap", "stability", "total"} <= set(prov["timings_s"])


@pytest.mark.usefixtures("worker")
def test_metric_subset_and_not_applicable(store: Store, settings: Settings) -> None:
    rng = np.random.default_rng(1)
    arrays = {
        "prediction": rng.normal(size=64),
        "uncertainty": rng.uniform(0.1, 1.0, size=64),
        "y": rng.normal(size=64),
    }
    rec = submit(
        store, settings, arrays, {"metrics": "all", "curves": True}, kind="point_uncertainty"
    )
    done = wait_for(store, rec.id, {"succeeded", "failed"})
    assert done.status == "succeeded", done.error
    result = store.get_result(rec.id)
    assert result is not None
    assert "ause" in result["metrics"]
    assert "crps" in result["not_applicable"] and "crps" not in result["metrics"]
    assert set(result["curves"]) == applicable_curves("point_uncertainty", arrays)
    assert result["stability"] is None

    rec = submit(store, settings, gaussian_arrays(50), {"metrics": ["mae", "crps"]})
    done = wait_for(store, rec.id, {"succeeded", "failed"})
    assert done.status == "succeeded", done.error
    result = store.get_result(rec.id)
    assert result is not None and set(result["metrics"]) == {"mae", "crps"}
    assert result["metrics"]["crps"]["interval"] is None


@pytest.mark.usefixtures("worker")
def test_poison_input_fails_at_once_with_the_reason(store: Store, settings: Settings) -> None:
    arrays = gaussian_arrays(20)
    arrays["std"][7] = -0.5
    rec = submit(store, settings, arrays)
    done = wait_for(store, rec.id, {"succeeded", "failed"})
    assert done.status == "failed" and done.attempts == 1
    assert done.error is not None and done.error.startswith("invalid input: ")
    assert "std" in done.error and "7" in done.error
    assert store.get_result(rec.id) is None


@pytest.mark.usefixtures("worker")
def test_inapplicable_metric_fails_with_the_reason(store: Store, settings: Settings) -> None:
    rng = np.random.default_rng(2)
    arrays = {"prediction": rng.normal(size=10), "uncertainty": np.ones(10), "y": np.zeros(10)}
    rec = submit(store, settings, arrays, {"metrics": ["crps"]}, kind="point_uncertainty")
    done = wait_for(store, rec.id, {"succeeded", "failed"})
    assert done.status == "failed"
    assert done.error is not None and "crps needs" in done.error


def test_redelivered_task_finds_the_result_and_stops(
    store: Store, settings: Settings, worker: WorkerProcess
) -> None:
    first = submit(store, settings, gaussian_arrays(30), {"metrics": ["mae"]})
    wait_for(store, first.id, {"succeeded"})
    before = store.get_result(first.id)
    jobs.enqueue(settings, first.id, "cpu")  # the same task delivered again
    # one job at a time in FIFO order: once a later job is done, the duplicate was handled
    second = submit(store, settings, gaussian_arrays(30, seed=1), {"metrics": ["mae"]})
    wait_for(store, second.id, {"succeeded"})
    after = store.get_submission(first.id)
    assert after is not None and after.attempts == 1
    assert store.get_result(first.id) == before
    assert store.job_stats()["succeeded"] == 2


@pytest.mark.usefixtures("worker")
def test_cancel_a_running_job(store: Store, settings: Settings) -> None:
    slow = {"metrics": "all", "bootstrap": {"n_resamples": 100}}
    rec = submit(store, settings, gaussian_arrays(1000), slow)
    wait_for(store, rec.id, {"running", "succeeded"})
    cancelled = store.cancel_submission(rec.id)
    assert cancelled is not None
    if cancelled.status == "succeeded":  # pragma: no cover - the machine was very fast
        pytest.fail("the slow job finished before it could be cancelled; make it slower")
    assert cancelled.cancel_requested
    done = wait_for(store, rec.id, {"cancelled", "succeeded", "failed"})
    assert done.status == "cancelled"
    assert store.get_result(rec.id) is None
    assert store.job_stats()["cancelled"] == 1


def test_a_rank_job_that_finds_its_board_current_releases_the_claim(
    store: Store, settings: Settings
) -> None:
    """A reader saw stale intervals and claimed the rank job just as another job wrote current
    ones: the queued job finds them current and does nothing — but releases the reader's
    claim, so that the board's next change queues its job at once (not after the claim's
    600 s)."""
    bench = "bench_claimed"
    version = store.leaderboard_version(bench)
    store.put_ranks(bench, "mae", "best", {"version": version, "entries": {}})
    lock = keys.ranks_lock(bench, "mae", "best")
    assert store.claim_ranks(bench, "mae", "best", 600.0)  # the reader's claim
    assert run_rank_job(store, settings, bench, "mae", "best", token="t1") == version
    assert not store.client.exists(lock)
    assert store.claim_ranks(bench, "mae", "best", 600.0)  # the next reader can queue a job


def test_live_worker_is_announced(store: Store, worker: WorkerProcess) -> None:
    names = [w for w in store.live_workers() if w.startswith(worker.name + "@")]
    assert len(names) == 1
    info = store.worker_info(names[0])
    assert info is not None
    assert (info["backend"], sorted(info["queues"])) == ("numpy", ["cpu", "gpu"])


def test_auto_backend_without_cuda_is_numpy_or_gpu() -> None:
    chosen = select_backend("auto")
    assert chosen.gpu == (chosen.name in ("cupy", "torch"))
    if not chosen.gpu:
        assert (chosen.name, chosen.device) == ("numpy", "cpu")
    with pytest.raises(RuntimeError, match="UQEVAL_BACKEND must be"):
        select_backend("tpu")


@pytest.mark.slow
def test_worker_killed_mid_job_completes_once(
    settings: Settings, tmp_path: Path, session_settings: Settings
) -> None:
    """SIGKILL the worker running a job: the heartbeat expires, another worker's reaper
    re-queues the job, and it completes exactly once (attempt 2)."""
    assert session_settings.redis_url is not None
    # A database of its own, so that the session worker cannot take the job.
    url = db_url(session_settings.redis_url, Db.RESCUE)
    own = settings.model_copy(update={"redis_url": url})
    store = Store.from_url(url, own)
    store.client.flushdb()
    first = WorkerProcess(own, "doomed", tmp_path / "doomed.log").start(store)
    second = None
    try:
        rec = submit(store, own, gaussian_arrays(1000), {"bootstrap": {"n_resamples": 100}})
        running = wait_for(store, rec.id, {"running", "succeeded"})
        assert running.status == "running", "the job finished before the worker was killed"
        first.kill()
        assert store.get_submission(rec.id).status == "running"  # type: ignore[union-attr]
        second = WorkerProcess(own, "rescuer", tmp_path / "rescuer.log").start(store)
        done = wait_for(store, rec.id, {"succeeded", "failed"})
        assert done.status == "succeeded", done.error
        assert done.attempts == 2
        stats = store.job_stats()
        assert (stats["succeeded"], stats["requeued"], stats["failed"]) == (1, 1, 0)
        assert store.get_result(rec.id) is not None
    finally:
        first.stop()
        if second is not None:
            second.stop()
        clear_store(store)
        store.client.flushdb()
        store.close()


def test_submit_is_idempotent_and_routes_large_batches_to_a_live_gpu_worker(
    session_settings: Settings,
) -> None:
    assert session_settings.redis_url is not None
    # A database without workers: only the gpu worker this test announces is alive there.
    url = db_url(session_settings.redis_url, Db.GPU_ROUTE)
    small = session_settings.model_copy(update={"redis_url": url, "gpu_min_points": 10})
    store = Store.from_url(url, small)
    store.client.flushdb()
    kw: dict[str, Any] = {
        "owner": "key_test",
        "kind": "gaussian",
        "model_name": "m",
        "metadata": {},
        "analyses": Analyses(metrics=["mae"]),
        "arrays": gaussian_arrays(16),
        "body_hash": "b1",
    }
    try:
        first, created = jobs.submit(store, small, n=16, idempotency_key="k", **kw)
        assert created and first.queue == "cpu"  # no gpu worker alive
        again, created = jobs.submit(store, small, n=16, idempotency_key="k", **kw)
        assert not created and again.id == first.id
        assert store.queue_depths() == {"cpu": 1, "gpu": 0}
        store.register_worker("gpu-test", {"queues": ["gpu"], "backend": "cupy"}, 30.0)
        assert jobs.choose_queue(store, small, 16) == "gpu"
        assert jobs.choose_queue(store, small, 9) == "cpu"
        big, _ = jobs.submit(store, small, n=16, idempotency_key=None, **kw)
        assert big.queue == "gpu" and store.queue_position(big.id) == 0
        store.unregister_worker("gpu-test")
        assert jobs.choose_queue(store, small, 16) == "cpu"
    finally:
        store.client.flushdb()
        store.close()


def test_input_hash_depends_on_values_not_on_transport() -> None:
    a = gaussian_arrays(8)
    same = {k: v.copy() for k, v in reversed(a.items())}
    assert jobs.input_hash("gaussian", a, {"m": 1}) == jobs.input_hash("gaussian", same, {"m": 1})
    changed = {**a, "y": a["y"] + 1e-12}
    assert jobs.input_hash("gaussian", a, {}) != jobs.input_hash("gaussian", changed, {})
    assert jobs.input_hash("gaussian", a, {}) != jobs.input_hash("gaussian", a, {"seed": 1})


def ignore(progress: float) -> None:
    """A checkpoint that lets the computation run on."""


def test_compute_on_torch_matches_numpy() -> None:
    pytest.importorskip("torch")
    from worker.backend import Backend
    from worker.evaluation import compute

    arrays = gaussian_arrays(200, seed=5)
    analyses = Analyses.model_validate(
        {"metrics": ["mae", "crps", "nll", "ause"], "bootstrap": {"n_resamples": 20}}
    )
    ref = compute("gaussian", arrays, analyses, backend=select_backend("numpy"), checkpoint=ignore)
    got = compute(
        "gaussian", arrays, analyses, backend=Backend("torch", "cpu", False), checkpoint=ignore
    )
    assert got["provenance"]["backend"] == "torch"
    for name, entry in ref["metrics"].items():
        assert got["metrics"][name]["value"] == pytest.approx(entry["value"], rel=1e-9), name
        assert got["metrics"][name]["interval"]["low"] == pytest.approx(
            entry["interval"]["low"], rel=1e-9
        )
    strict_json(got)


def test_compute_reports_undefined_values_as_null_with_a_warning() -> None:
    from worker.evaluation import compute

    rng = np.random.default_rng(4)
    arrays = {
        "prediction": rng.normal(size=30),
        "uncertainty": np.ones(30),
        "y": rng.normal(size=30),
    }
    steps: list[float] = []
    doc = compute(
        "point_uncertainty",
        arrays,
        Analyses(metrics=["spearman", "mae"]),
        backend=select_backend("numpy"),
        checkpoint=steps.append,
    )
    assert doc["metrics"]["spearman"]["value"] is None
    assert any("spearman" in w for w in doc["warnings"])
    assert steps == sorted(steps) and steps[0] > 0 and steps[-1] < 100
    strict_json(doc)


def test_compute_stops_at_a_checkpoint() -> None:
    from worker.evaluation import compute

    class Stop(Exception):
        pass

    def cancel(progress: float) -> None:
        raise Stop

    with pytest.raises(Stop):
        compute(
            "gaussian",
            gaussian_arrays(10),
            Analyses(),
            backend=select_backend("numpy"),
            checkpoint=cancel,
        )


def test_interrupter_raises_only_while_armed() -> None:
    from worker.execution import Cancelled, Interrupter

    interrupter = Interrupter()
    assert not interrupter.interrupt(Cancelled)  # not armed: nothing happens
    started = threading.Event()

    def fire() -> None:
        started.wait()
        interrupter.interrupt(Cancelled)

    def busy() -> None:
        interrupter.arm()
        started.set()
        for _ in range(10**9):  # pure Python, no checkpoint: only the interrupt stops it
            pass

    thread = threading.Thread(target=fire)
    thread.start()
    with pytest.raises(Cancelled):
        busy()
    interrupter.disarm()
    thread.join()
    total = sum(range(1000))  # after disarm, nothing pending fires
    assert total == 499500


def test_cancel_interrupts_a_long_phase(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancel arriving in the middle of a long bootstrap stops it there, not at the next
    checkpoint (run in-process, so that the bootstrap can be watched)."""
    import worker.evaluation as evaluation
    from worker.execution import run_job

    finished: list[bool] = []
    real = evaluation.bootstrap

    def watched(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        finished.append(True)
        return out

    monkeypatch.setattr(evaluation, "bootstrap", watched)
    # a database without workers: the job runs only here
    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.IN_PROCESS)
    own = settings.model_copy(update={"redis_url": url})
    st = Store.from_url(url, own)
    st.client.flushdb()
    try:
        rec = submit(st, own, gaussian_arrays(2000), {"bootstrap": {"n_resamples": 5000}})
        outcome: list[str] = []
        thread = threading.Thread(
            target=lambda: outcome.append(
                run_job(st, own, select_backend("numpy"), rec.id, token="t1", worker_name="w")
            )
        )
        thread.start()
        deadline = time.monotonic() + WAIT_S
        while (st.get_submission(rec.id) or rec).progress < 10:  # in the bootstrap phase
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.01)
        st.cancel_submission(rec.id)
        thread.join(WAIT_S)
        assert outcome == ["cancelled"] and finished == []
        got = st.get_submission(rec.id)
        assert got is not None and got.status == "cancelled"
    finally:
        st.client.flushdb()
        st.close()


def test_an_interrupt_dropped_in_a_finalizer_is_sent_again(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python drops an exception raised inside ``__del__``: a Cancelled that lands in a
    finalizer running in the computing thread (here one that runs for several beats) is lost,
    and the heartbeat sends it again while the computation is still armed, so the
    computation stops there and not at the next checkpoint."""
    from worker.execution import Cancelled, Interrupter, JobHeartbeat

    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.HEARTBEAT)  # a database without workers
    fast = settings.model_copy(update={"redis_url": url, "heartbeat_interval_s": 0.05})
    st = Store.from_url(url, fast)
    st.client.flushdb()
    dropped: list[type[BaseException] | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_type))
    interrupter = Interrupter()
    try:
        rec = submit(st, fast, gaussian_arrays(10))
        assert st.mark_running(rec.id, "t1", fast.heartbeat_ttl_s, 3, "w")[0] == "started"
        assert st.cancel_submission(rec.id) is not None  # requested while it runs
        heartbeat = JobHeartbeat(st, fast, rec.id, "t1", interrupter)

        class Finalized:
            def __del__(self) -> None:
                heartbeat.start()  # it sees the request at its first beat
                end = time.monotonic() + 20 * fast.heartbeat_interval_s
                while time.monotonic() < end:
                    pass

        interrupter.arm()
        stopped_at = None
        deadline = time.monotonic() + 30.0
        try:
            obj = Finalized()
            del obj  # the first Cancelled lands in __del__ and is dropped
            while time.monotonic() < deadline:
                pass
        except Cancelled:
            stopped_at = time.monotonic()
        finally:
            interrupter.disarm_now()
            heartbeat.stop()
        assert dropped == [Cancelled]
        assert stopped_at is not None and stopped_at < deadline
    finally:
        st.client.flushdb()
        st.close()


@pytest.mark.slow
def test_pool_child_killed_mid_job_is_redelivered_and_completes_once(
    settings: Settings, tmp_path: Path
) -> None:
    """Prefork pool: SIGKILL the child running the job; the parent rejects the message
    (reject_on_worker_lost), it is delivered again and the job completes once (attempt 2)."""
    from tests.uqeval.test_cli import descendants

    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.PREFORK)
    own = settings.model_copy(update={"redis_url": url})
    store = Store.from_url(url, own)
    store.client.flushdb()
    proc = WorkerProcess(own, "prefork", tmp_path / "prefork.log", pool="prefork").start(store)
    try:
        rec = submit(store, own, gaussian_arrays(1000), {"bootstrap": {"n_resamples": 100}})
        running = wait_for(store, rec.id, {"running", "succeeded"})
        assert running.status == "running", "the job finished before its process was killed"
        assert proc.proc is not None
        children = descendants(proc.proc.pid)
        assert children, "the prefork pool has no child process"
        for child in children:
            os.kill(child, signal.SIGKILL)
        done = wait_for(store, rec.id, {"succeeded", "failed"})
        assert done.status == "succeeded", done.error
        assert done.attempts == 2
        assert store.job_stats()["succeeded"] == 1
    finally:
        proc.stop()
        store.client.flushdb()
        store.close()


def test_celery_configuration(settings: Settings) -> None:
    from service.celery_config import celery_conf

    conf = celery_conf(settings)
    assert conf["task_acks_late"] and conf["task_reject_on_worker_lost"]
    assert conf["worker_prefetch_multiplier"] == 1
    vt = settings.visibility_timeout_s
    assert conf["broker_transport_options"]["visibility_timeout"] == vt
    assert conf["result_backend_transport_options"]["visibility_timeout"] == vt
    assert vt > conf["task_time_limit"] > conf["task_soft_time_limit"]
    short = settings.model_copy(update={"visibility_timeout_s": settings.job_hard_time_limit_s})
    with pytest.raises(ValueError, match="visibility_timeout_s must exceed"):
        celery_conf(short)


def test_progress_writes_are_throttled() -> None:
    """A value is written when it is 1 percent above the last one written, or 0.25 s after
    it; values that do not increase are dropped."""
    from worker.execution import ProgressWriter

    now = [0.0]
    written: list[float] = []
    write = ProgressWriter(written.append, clock=lambda: now[0])
    for value, at in [
        (5.0, 0.0),  # the first: written
        (5.5, 0.1),  # +0.5 within 0.25 s: dropped
        (6.0, 0.2),  # +1.0: written
        (6.2, 0.3),  # +0.2 after 0.1 s: dropped
        (6.3, 0.5),  # 0.3 s after the last write: written
        (6.3, 1.0),  # not above: dropped
        (4.0, 2.0),  # lower: dropped
        (99.0, 2.0),
    ]:
        now[0] = at
        write(value)
    assert written == [5.0, 6.0, 6.3, 99.0]


def test_progress_is_not_written_in_a_jobs_first_moments() -> None:
    """Within ``delay_s`` of its creation the writer drops every value (a short job writes
    none); after it the throttle above applies."""
    from worker.execution import ProgressWriter

    now = [10.0]
    written: list[float] = []
    write = ProgressWriter(written.append, delay_s=0.1, clock=lambda: now[0])
    for value, at in [(5.0, 10.0), (50.0, 10.05), (60.0, 10.1), (60.5, 10.15), (70.0, 10.2)]:
        now[0] = at
        write(value)
    assert written == [60.0, 70.0]
