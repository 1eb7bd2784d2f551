"""Faults: Redis stopped or failing half-way — submissions fail fast and store nothing."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from service import jobs, keys
from service.redis_server import ManagedRedis
from service.settings import Settings
from service.store import Store, StoreUnavailable, SubmissionRecord, now_iso
from tests.service.conftest import TEST_SETTINGS


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
        analyses={"metrics": ["mae"]},
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
def own(own_redis: ManagedRedis) -> Iterator[tuple[Store, Settings]]:
    settings = Settings(redis_url=own_redis.url, **TEST_SETTINGS)
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
    record = SubmissionRecord(
        id="sub_orphan",
        owner="key_f",
        status="queued",
        progress=0.0,
        created_at=now_iso(),
        started_at=None,
        finished_at=None,
        attempts=0,
        error=None,
        model_name="m",
        metadata={},
        kind="gaussian",
        n=16,
        queue="cpu",
        input_hash="",
        analyses={},
    )
    store.create_submission(record, arrays())  # stored; the producer "died" before enqueueing
    assert jobs.reap(store, settings)["rolled_back"] == []  # too recent to judge
    store.client.zadd(keys.pending(), {"sub_orphan": time.time() - 3600})
    assert jobs.reap(store, settings)["rolled_back"] == ["sub_orphan"]
    assert store.get_submission("sub_orphan") is None
    assert uqeval_keys(store) == []


def test_producer_timeout_is_bounded_when_redis_never_answers(tmp_path: Path) -> None:
    """A URL where nothing listens: StoreUnavailable, not a hang."""
    server = ManagedRedis(tmp_path / "r")
    server.start()
    url = server.url
    server.stop()
    settings = Settings(redis_url=url, **TEST_SETTINGS)
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
