"""Faults: Redis stopped or failing half-way — submissions fail fast and store nothing; a
worker killed in the middle of a rank or comparison job — the job is run again and completes
once."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service import jobs, keys
from service.analyses import Analyses
from service.api.app import create_app
from service.redis_server import ManagedRedis
from service.settings import Settings
from service.store import Store, StoreUnavailable, SubmissionRecord
from tests.factories import npz_bytes, submission_record
from tests.service._api import ADMIN, NPZ, TestClient, new_key, wait_terminal
from tests.stack import TEST_SETTINGS, WorkerProcess
from uqcore import predictions as P
from uqcore.stability import compare, rank_distribution


def arrays(n: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"mean": rng.normal(size=n), "std": np.ones(n), "y": rng.normal(size=n)}


def do_submit(store: Store, settings: Settings, key: str | None = None) -> SubmissionRecord:
    return jobs.submit(
        store,
        settings,
        owner="key_f",
        kind="gaussian",
        n=16,
        model_name="m",
        metadata={},
        analyses=Analyses(metrics=["mae"]),
        arrays=arrays(),
        idempotency_key=key,
        body_hash="h",
    )[0]


def uqeval_keys(store: Store) -> list[bytes]:
    return sorted(store.client.scan_iter(match=keys.PREFIX + "*"))


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[ManagedRedis]:
    """A Redis server of this test alone (it gets stopped)."""
    server = ManagedRedis(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own(own_redis: ManagedRedis, tmp_path: Path) -> Iterator[tuple[Store, Settings]]:
    # The arrays (and scratch files) of the test and of its workers under its own temporary
    # directory, never under the repository (the default data directory is relative).
    settings = Settings(redis_url=own_redis.url, data_dir=tmp_path / "data", **TEST_SETTINGS)
    store = Store.from_url(own_redis.url, settings)
    try:
        yield store, settings
    finally:
        store.close()


def test_redis_stopped_submit_fails_fast_and_stores_nothing(
    own_redis: ManagedRedis, own: tuple[Store, Settings]
) -> None:
    store, settings = own
    do_submit(store, settings)  # warm: connections, the producer, the queue declarations
    before = uqeval_keys(store)
    own_redis.stop()
    start = time.monotonic()
    with pytest.raises(StoreUnavailable):
        do_submit(store, settings, key="idem-1")
    elapsed = time.monotonic() - start
    # the API's 503 must come within the enqueue budget (3 s by default), with some slack
    assert elapsed < settings.enqueue_timeout_s + 2.0, elapsed
    with pytest.raises(StoreUnavailable):
        store.ping()
    own_redis.start()  # same port, same data (AOF)
    assert uqeval_keys(store) == before
    rec = do_submit(store, settings, key="idem-1")  # the key was never bound
    assert store.get_submission(rec.id) is not None


def test_enqueue_failure_rolls_back_everything(
    own: tuple[Store, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, settings = own

    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionError("broker went away")

    monkeypatch.setattr(jobs, "enqueue", broken)
    with pytest.raises(StoreUnavailable, match="could not enqueue"):
        do_submit(store, settings, key="idem-2")
    assert uqeval_keys(store) == []  # record, arrays, indexes and idempotency key: all gone
    assert store.list_submissions(None, None, 0, 10) == ([], 0)
    assert store.queue_depths() == {"cpu": 0, "gpu": 0}
    monkeypatch.undo()
    rec = do_submit(store, settings, key="idem-2")  # the key is free again
    assert store.get_submission(rec.id) is not None


def test_reaper_rolls_back_a_submission_that_was_never_enqueued(
    own: tuple[Store, Settings],
) -> None:
    store, settings = own
    record = submission_record(id="sub_orphan", owner="key_f", n=16, input_hash="")
    store.create_submission(record, arrays())  # stored; the producer "died" before enqueueing
    assert jobs.reap(store, settings)["rolled_back"] == []  # too recent to judge
    store.client.zadd(keys.pending(), {"sub_orphan": time.time() - 3600})
    assert jobs.reap(store, settings)["rolled_back"] == ["sub_orphan"]
    assert store.get_submission("sub_orphan") is None
    assert uqeval_keys(store) == []


def test_replay_publishes_what_its_first_request_left_unpublished(
    own: tuple[Store, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first request stored its submission and lost Redis before publishing it (the
    client got a 503); the client's retry with the same Idempotency-Key is answered with that
    submission, so the retry must publish it: else the reaper rolls back a submission that
    was answered 202, and it is lost."""
    store, settings = own
    published: list[str] = []
    real = jobs.enqueue

    def recording(settings: Settings, sub_id: str, *args: Any, **kwargs: Any) -> None:
        published.append(sub_id)
        real(settings, sub_id, *args, **kwargs)

    monkeypatch.setattr(jobs, "enqueue", recording)
    record = submission_record(id="sub_first", owner="key_f", n=16, input_hash="")
    store.create_submission(record, arrays(), idempotency_key="idem-r", body_hash="h")
    replayed = do_submit(store, settings, key="idem-r")
    assert replayed.id == "sub_first" and published == ["sub_first"]
    assert store.client.zcard(keys.pending()) == 0
    store.client.zadd(keys.pending(), {"unrelated": time.time() - 3600})  # a reaper pass runs
    assert jobs.reap(store, settings)["rolled_back"] == []
    assert store.get_submission("sub_first") is not None
    # A replay of an already published submission publishes nothing again.
    assert do_submit(store, settings, key="idem-r").id == "sub_first"
    assert published == ["sub_first"]


def test_replay_racing_the_reaper_is_never_answered_for_a_rolled_back_submission(
    own: tuple[Store, Settings],
) -> None:
    """Once the reaper has taken a stale pending submission for rollback, a replay of its
    request is a 503 (not a 202 for a submission about to vanish); after the rollback the
    retry stores and publishes a new one."""
    store, settings = own
    record = submission_record(id="sub_stale", owner="key_f", n=16, input_hash="")
    store.create_submission(record, arrays(), idempotency_key="idem-s", body_hash="h")
    store.client.zadd(keys.pending(), {"sub_stale": time.time() - 3600})
    assert store.take_stale_pending("sub_stale", 2 * settings.enqueue_timeout_s + 1.0)
    with pytest.raises(StoreUnavailable, match="rolled back"):
        do_submit(store, settings, key="idem-s")
    assert not store.mark_enqueued("sub_stale")  # its first request, still publishing: no 202
    assert jobs.reap(store, settings)["rolled_back"] == ["sub_stale"]
    fresh = do_submit(store, settings, key="idem-s")
    assert fresh.id != "sub_stale" and store.get_submission(fresh.id) is not None
    assert store.client.zcard(keys.pending()) == 0
    # A claim keeps a pending submission from the reaper: a replay that claimed it wins.
    other = submission_record(id="sub_claimed", owner="key_f", n=16, input_hash="")
    store.create_submission(other, arrays(), idempotency_key="idem-c", body_hash="h")
    store.client.zadd(keys.pending(), {"sub_claimed": time.time() - 3600})
    assert store.claim_pending("sub_claimed") == "claimed"
    assert not store.take_stale_pending("sub_claimed", 2 * settings.enqueue_timeout_s + 1.0)


def test_a_queued_job_whose_task_message_was_lost_is_published_again(
    own: tuple[Store, Settings],
) -> None:
    """A consumer popped the job's message and died before claiming it (or Redis died
    between the pop and Celery's record of it): the job stays queued with no message, which
    Celery would never (or only after the visibility timeout) deliver again. Once it has been
    queued past unclaimed_requeue_s with its broker list empty, the reaper publishes it
    again, once."""
    store, settings = own
    waiting = do_submit(store, settings)
    lost = do_submit(store, settings)
    assert store.client.llen("cpu") == 2
    past = time.time() - settings.unclaimed_requeue_s - 1
    store.client.zadd(keys.queued("cpu"), {lost.id: past})
    # While messages wait in the list, the job may be among them: nothing is published.
    assert jobs.reap(store, settings)["republished"] == []
    store.client.delete("cpu")  # both messages taken by consumers that died
    store.client.zadd(keys.queued("cpu"), {waiting.id: time.time()})  # just queued again
    assert jobs.reap(store, settings)["republished"] == [lost.id]
    message = store.client.lrange("cpu", 0, -1)
    assert len(message) == 1 and lost.id.encode() in message[0]
    store.client.delete("cpu")
    assert jobs.reap(store, settings)["republished"] == []  # counts as queued from now
    # A pending submission (its request is still publishing it) is not the reaper's.
    pending = submission_record(id="sub_pending", owner="key_f", n=16, input_hash="")
    store.create_submission(pending, arrays())
    store.client.zadd(keys.queued(pending.queue), {"sub_pending": past})
    assert "sub_pending" not in jobs.reap(store, settings)["republished"]


def test_producer_timeout_is_bounded_when_redis_never_answers(tmp_path: Path) -> None:
    """A URL where nothing listens: StoreUnavailable, not a hang."""
    server = ManagedRedis(tmp_path / "r")
    server.start()
    url = server.url
    server.stop()
    settings = Settings(redis_url=url, data_dir=tmp_path / "data", **TEST_SETTINGS)
    store = Store.from_url(url, settings)
    start = time.monotonic()
    with pytest.raises(StoreUnavailable):
        do_submit(store, settings)
    assert time.monotonic() - start < settings.enqueue_timeout_s + 2.0


def test_hung_redis_fails_within_the_socket_timeout_and_is_cleaned_up(
    own_redis: ManagedRedis, own: tuple[Store, Settings]
) -> None:
    """A frozen server (SIGSTOP): the submit fails after one socket timeout; what the server
    still applies when it wakes up is never enqueued, and the reaper removes it."""
    store, settings = own
    do_submit(store, settings)
    assert own_redis.process is not None
    pid = own_redis.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(StoreUnavailable):
            do_submit(store, settings, key="idem-3")
        assert time.monotonic() - start < settings.redis_socket_timeout_s + 2.0
    finally:
        os.kill(pid, signal.SIGCONT)
    fresh = Store.from_url(own_redis.url, settings)
    try:
        for sub_id in fresh.stale_pending(0.0):
            fresh.client.zadd(keys.pending(), {sub_id: time.time() - 3600})
        jobs.reap(fresh, settings)
        _, total = fresh.list_submissions(None, None, 0, 10)
        assert total == 1  # only the warm-up submission, which was enqueued
        assert fresh.client.zcard(keys.pending()) == 0
    finally:
        fresh.close()


def test_requeued_job_is_published_again_once_the_broker_is_back(
    own: tuple[Store, Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, settings = own
    rec = do_submit(store, settings)
    store.mark_running(rec.id, "task-1", 5.0, settings.max_attempts)
    store.client.delete(keys.heartbeat(rec.id))  # its worker vanished
    sent: list[str] = []

    def broken(*args: object, **kwargs: object) -> None:
        raise ConnectionError("broker went away")

    monkeypatch.setattr(jobs, "enqueue", broken)
    assert jobs.reap(store, settings)["requeued"] == [rec.id]
    assert store.to_resend() == [rec.id]  # kept for the next pass
    monkeypatch.setattr(jobs, "enqueue", lambda s, sub_id, queue, **kw: sent.append(sub_id))
    jobs.reap(store, settings)
    assert sent == [rec.id] and store.to_resend() == []
    got = store.get_submission(rec.id)
    assert got is not None and got.status == "queued" and got.attempts == 1


# --- a worker killed in the middle of a rank or comparison job ---------------------------------

#: Large enough that each killed job computes for a second or more (longer on a busy machine),
#: no sleeps added: the test kills its worker as soon as it sees the job's claim (polled every
#: 10 ms), so the job is still running then with a wide margin, and an assertion after the
#: kill fails the test should it ever have ended first. Any larger, and the job is only
#: computed again (by the other worker, and by the test to compare) for longer.
KILL_N = 60_000
WAIT_S = 180.0  # generous: the machine may be busy; no assertion relies on speed


def kill_targets() -> np.ndarray:
    return np.random.default_rng(99).normal(size=KILL_N)


def kill_prediction(scale: float, seed: int) -> dict[str, np.ndarray]:
    y = kill_targets()
    rng = np.random.default_rng(seed)
    return {"mean": y + scale * rng.normal(size=KILL_N), "std": np.full(KILL_N, 0.5 + scale)}


def kill_benchmark(api: TestClient, n_resamples: int, seed: int) -> str:
    r = api.post(
        "/v1/benchmarks",
        json={
            "name": "killed",
            "primary_metric": "mae",
            "metrics": ["mae"],
            "bootstrap": {"n_resamples": n_resamples},
            "seed": seed,
            "y": kill_targets().tolist(),
        },
        headers=ADMIN,
    )
    assert r.status_code == 201, r.text
    bench_id: str = r.json()["id"]
    return bench_id


def kill_submit(
    api: TestClient, headers: dict[str, str], bench_id: str, arrays: dict[str, np.ndarray]
) -> str:
    request = {
        "kind": "gaussian",
        "model_name": "m",
        "benchmark_id": bench_id,
        "visibility": "public",
    }
    r = api.post(
        "/v1/submissions", content=npz_bytes(request, **arrays), headers={**headers, **NPZ}
    )
    assert r.status_code == 202, r.text
    sub_id: str = r.json()["id"]
    return sub_id


def task_lines(log: Path, task: str, event: str) -> int:
    """How many runs of ``task`` the worker's log reports as ``event`` ("received",
    "succeeded")."""
    text = log.read_text(errors="replace") if log.exists() else ""
    return sum(1 for line in text.splitlines() if f"Task {task}[" in line and event in line)


def took(workers: list[WorkerProcess], task: str) -> tuple[WorkerProcess, WorkerProcess]:
    """(the worker that received the one ``task`` sent, the other one)."""
    doomed = [w for w in workers if task_lines(w.log_path, task, "received")]
    assert len(doomed) == 1, [w.name for w in doomed]
    (rescuer,) = [w for w in workers if w is not doomed[0]]
    return doomed[0], rescuer


@pytest.fixture
def killable(own: tuple[Store, Settings], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """An API on a Redis of this test alone, with two workers, started together (seconds
    each, most of them importing, which a worker started after the kill would add to the
    test): the test kills the one that takes its job, and the other is left to run it again.
    ``stack["workers"]`` are killed at the end whatever happens (the Redis is this test's
    alone: a warm shutdown, seconds a worker, would only make the test longer)."""
    store, settings = own
    workers = [WorkerProcess(settings, name, tmp_path / f"{name}.log") for name in ("w1", "w2")]
    stack: dict[str, Any] = {"store": store, "settings": settings, "workers": workers}
    try:
        with ThreadPoolExecutor(len(workers)) as pool:
            for started in [pool.submit(w.start, store) for w in workers]:
                started.result()
        with TestClient(create_app(settings, store=store)) as api:
            stack["api"] = api
            yield stack
    finally:
        for worker in workers:
            worker.kill()


#: The noise scales of the rank test's four models: three about as good, one far behind.
RANK_SCALES = (0.3, 0.3, 0.3, 0.6)


@pytest.mark.slow
def test_rank_job_killed_mid_job_is_queued_again_and_completes_once(
    killable: dict[str, Any],
) -> None:
    """SIGKILL the worker computing a board's rank intervals: the job's claim lapses with its
    heartbeat, the next leaderboard read queues the job again, the other worker computes it
    once, and the intervals equal uqcore's rank distribution with the benchmark's seed.

    The benchmark asks for no bootstrap, so each submission's evaluation is quick (it is not
    what is tested); its rank job then draws the default B = 1000 resamples. Three of the four
    models are about as good (the same noise scale), so their ranks and chances of being best
    are spread by the resampling: a rank job run with another seed would not match."""
    store: Store = killable["store"]
    settings: Settings = killable["settings"]
    api: TestClient = killable["api"]
    b, seed = 1000, 17
    bench = kill_benchmark(api, 0, seed)
    preds = {
        kill_submit(api, new_key(api), bench, kill_prediction(RANK_SCALES[i], i)): i
        for i in range(4)
    }
    for sub_id in preds:
        assert wait_terminal(api, ADMIN, sub_id, WAIT_S)["status"] == "succeeded"
    board = f"/v1/benchmarks/{bench}/leaderboard"
    lock = keys.ranks_lock(bench, "mae", "best")

    first = api.get(board, headers=ADMIN).json()
    assert first["ranks"]["status"] == "computing" and first["total"] == 4
    # The reader's claim lasts minutes; the running job holds it for a heartbeat TTL.
    deadline = time.monotonic() + WAIT_S
    while not 0 < store.client.pttl(lock) <= settings.heartbeat_ttl_s * 1000:
        assert store.client.exists(lock), "the rank job ended before the kill"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    task = "uqeval.leaderboard_ranks"
    doomed, rescuer = took(killable["workers"], task)
    doomed.kill()
    assert store.get_ranks(bench, "mae", "best") is None

    # The expected intervals, in the board's order, computed meanwhile in a thread (uqcore's
    # kernels release the GIL): the reads that queue the job again go on.
    models = {}
    for e in first["entries"]:
        i = preds[e["submission_id"]]
        a = kill_prediction(RANK_SCALES[i], i)
        models[e["submission_id"]] = P.Gaussian(a["mean"], a["std"])
    with ThreadPoolExecutor(1) as pool:
        expected = pool.submit(
            rank_distribution, models, kill_targets(), metric="mae", n_resamples=b, seed=seed
        )
        deadline = time.monotonic() + WAIT_S
        while True:
            doc = api.get(board, headers=ADMIN).json()
            if doc["ranks"]["status"] == "current":
                break
            assert time.monotonic() < deadline, doc["ranks"]
            time.sleep(0.1)
        direct = expected.result()
    assert doc["ranks"]["n_resamples"] == b and doc["ranks"]["seed"] == seed
    assert [e["submission_id"] for e in doc["entries"]] == list(models)
    for e in doc["entries"]:
        sub = e["submission_id"]
        assert (e["rank_low"], e["rank_high"]) == (
            direct[sub]["rank_low"],
            direct[sub]["rank_high"],
        )
        assert e["p_best"] == pytest.approx(direct[sub]["p_best"], abs=0)
    # The seed shows: three chances of being best that are neither 0 nor 1.
    assert sum(0 < e["p_best"] < 1 for e in doc["entries"]) == 3, doc["entries"]
    assert task_lines(doomed.log_path, task, "succeeded") == 0
    assert task_lines(rescuer.log_path, task, "succeeded") == 1
    assert not store.client.exists(lock)


@pytest.mark.slow
def test_comparison_killed_mid_job_is_requeued_and_completes_once(
    killable: dict[str, Any],
) -> None:
    """SIGKILL the worker running a comparison: its heartbeat expires, the other worker's
    reaper re-queues it, and it completes exactly once (attempt 2), equal to
    ``uqcore.stability.compare`` with the same seed."""
    store: Store = killable["store"]
    api: TestClient = killable["api"]
    bench = kill_benchmark(api, 20, 5)
    headers = new_key(api)
    arrays = [kill_prediction(0.3, 1), kill_prediction(0.35, 2)]
    subs = [kill_submit(api, headers, bench, a) for a in arrays]
    for sub_id in subs:
        assert wait_terminal(api, headers, sub_id, WAIT_S)["status"] == "succeeded"
    b, seed = 1500, 3
    body = {"benchmark_id": bench, "submission_ids": subs, "n_resamples": b, "seed": seed}
    # Only admins choose a comparison's B and seed on a benchmark (hidden targets).
    r = api.post("/v1/comparisons", json=body, headers=ADMIN)
    assert r.status_code == 202, r.text
    cmp_id = r.json()["id"]
    deadline = time.monotonic() + WAIT_S
    while (store.get_comparison(cmp_id) or {}).get("status") == "queued":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert (store.get_comparison(cmp_id) or {}).get("status") == "running", "ended before kill"
    task = "uqeval.compare"
    doomed, rescuer = took(killable["workers"], task)
    doomed.kill()
    doc = store.get_comparison(cmp_id)
    assert doc is not None and doc["status"] == "running" and doc["result"] is None

    # The expected difference, computed meanwhile in a thread (uqcore's kernels release the
    # GIL).
    models = [P.Gaussian(a["mean"], a["std"]) for a in arrays]
    with ThreadPoolExecutor(1) as pool:
        expected = pool.submit(
            compare, models[0], models[1], kill_targets(), ["mae"], n_resamples=b, seed=seed
        )
        deadline = time.monotonic() + WAIT_S
        while True:
            doc = api.get(f"/v1/comparisons/{cmp_id}", headers=ADMIN).json()
            if doc["status"] in ("succeeded", "failed"):
                break
            assert time.monotonic() < deadline, doc["status"]
            time.sleep(0.1)
        direct = expected.result()
    assert doc["status"] == "succeeded", doc["error"]
    stored = store.get_comparison(cmp_id)
    assert stored is not None and stored["attempts"] == "2"
    (pair,) = doc["result"]["pairs"]
    assert (pair["a"], pair["b"]) == (subs[0], subs[1])
    for field in ("diff", "low", "high", "std", "p_better", "p_value"):
        assert pair["metrics"]["mae"][field] == pytest.approx(direct["mae"][field], abs=0), field
    assert task_lines(doomed.log_path, task, "succeeded") == 0
    assert task_lines(rescuer.log_path, task, "succeeded") == 1
    assert store.orphaned_comparisons() == [] and store.comparisons_to_resend() == []
