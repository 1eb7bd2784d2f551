"""The Redis store against a real Redis server: keys, arrays, records, transitions, stats."""

from __future__ import annotations

import json
import uuid
import zlib

import numpy as np
import pytest

from service import keys
from service import store as store_module
from service.redis_server import free_port
from service.store import (
    IdempotencyConflict,
    Store,
    StoreUnavailable,
    SubmissionRecord,
    now_iso,
)


def make_record(owner: str = "key_a", *, queue: str = "cpu", n: int = 4) -> SubmissionRecord:
    return SubmissionRecord(
        id=uuid.uuid4().hex,
        owner=owner,
        status="queued",
        progress=0.0,
        created_at=now_iso(),
        started_at=None,
        finished_at=None,
        attempts=0,
        error=None,
        model_name="m",
        metadata={"run": 1},
        kind="gaussian",
        n=n,
        queue=queue,
        input_hash="0" * 64,
        analyses={"metrics": "all", "seed": 0},
    )


def arrays(n: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"mean": rng.normal(size=n), "std": rng.uniform(0.5, 2, size=n), "y": rng.normal(size=n)}


def submit(store: Store, owner: str = "key_a", queue: str = "cpu") -> SubmissionRecord:
    rec, created = store.create_submission(make_record(owner, queue=queue), arrays())
    assert created
    return rec


# --- API keys ----------------------------------------------------------------------------------


def test_api_key_lifecycle(store: Store) -> None:
    record, token = store.create_api_key("alice")
    assert record.role == "submitter" and not record.revoked
    assert store.authenticate(token) == record
    assert store.authenticate(token + "x") is None
    assert store.authenticate("") is None
    # only the hash is stored
    dumped = b"".join(v for v in store.client.hgetall(keys.api_key(record.key_id)).values())
    assert token.encode() not in dumped
    assert [k.key_id for k in store.list_api_keys()] == [record.key_id]
    assert store.revoke_api_key(record.key_id) is True
    assert store.authenticate(token) is None
    assert store.list_api_keys()[0].revoked
    assert store.revoke_api_key("key_unknown") is False


def test_create_api_key_rejects_unknown_role(store: Store) -> None:
    with pytest.raises(ValueError, match="role must be"):
        store.create_api_key("x", role="root")  # type: ignore[arg-type]


def test_admin_key_from_environment_is_registered_once(store: Store) -> None:
    assert store.ensure_admin_key("env-admin-token") is None
    assert store.ensure_admin_key("env-admin-token") is None
    rec = store.authenticate("env-admin-token")
    assert rec is not None and rec.role == "admin"
    assert len(store.list_api_keys()) == 1


def test_rotating_the_environment_admin_key_revokes_the_old_one(store: Store) -> None:
    store.ensure_admin_key("old-token")
    submitter, token = store.create_api_key("bob")
    store.ensure_admin_key("new-token")
    assert store.authenticate("old-token") is None
    new = store.authenticate("new-token")
    assert new is not None and new.role == "admin"
    assert store.authenticate(token) == submitter  # other keys are untouched


def test_admin_key_generated_only_at_first_start(store: Store) -> None:
    token = store.ensure_admin_key(None)
    assert token is not None
    rec = store.authenticate(token)
    assert rec is not None and rec.role == "admin"
    assert store.ensure_admin_key(None) is None
    assert len(store.list_api_keys()) == 1


# --- arrays ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "array",
    [
        np.arange(10, dtype=np.float64),
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([1, 2, 3], dtype=np.int64),
        np.zeros((0,), dtype=np.float64),
    ],
    ids=["f64", "f32-matrix", "int", "empty"],
)
def test_array_codec_round_trip(array: np.ndarray) -> None:
    meta, chunks = Store.encode_array(array)
    out = Store.decode_array(meta, chunks)
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)


def test_arrays_are_stored_as_compressed_binary_chunks(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "CHUNK_BYTES", 1000)
    rng = np.random.default_rng(0)
    big = {"noise": rng.normal(size=1000), "y": np.ones(1000)}
    rec, _ = store.create_submission(make_record(n=1000), big)
    stored = store.client.hgetall(keys.arrays(rec.id))
    manifest = json.loads(stored.pop(b"manifest"))
    assert manifest["y"]["chunks"] == 9  # 8000 bytes + the .npy header, 1000 per chunk
    assert manifest["y"]["codec"] == "npy+zlib"
    for name, chunk in stored.items():
        if name.startswith(b"y:"):  # constant: compressed
            assert chunk[:1] == b"z" and len(chunk) < 200
            assert zlib.decompress(chunk[1:])
        else:  # random doubles do not compress: stored raw, still binary
            assert chunk[:1] == b"r" and (len(chunk) == 1001 or name == b"noise:8")
    loaded = store.load_arrays(rec.id)
    assert loaded is not None
    np.testing.assert_array_equal(loaded["noise"], big["noise"])
    np.testing.assert_array_equal(loaded["y"], big["y"])


def test_load_arrays_of_unknown_submission_is_none(store: Store) -> None:
    assert store.load_arrays("nope") is None


# --- records, listing, queue -------------------------------------------------------------------


def test_submission_round_trip_and_listing(store: Store) -> None:
    a1 = submit(store, "key_a")
    b1 = submit(store, "key_b", queue="gpu")
    a2 = submit(store, "key_a")
    got = store.get_submission(a1.id)
    assert got is not None
    assert (got.status, got.metadata, got.analyses) == ("queued", {"run": 1}, a1.analyses)
    assert got.started_at is None and got.error is None and not got.cancel_requested
    assert store.get_submission("unknown") is None

    page, total = store.list_submissions("key_a", None, 0, 10)
    assert total == 2 and [r.id for r in page] == [a2.id, a1.id]  # newest first
    page, total = store.list_submissions(None, None, 1, 1)
    assert total == 3 and [r.id for r in page] == [b1.id]
    page, total = store.list_submissions(None, None, 0, 0)
    assert (page, total) == ([], 3)

    assert store.queue_position(a1.id) == 0
    assert store.queue_position(a2.id) == 1
    assert store.queue_position(b1.id) == 0
    assert store.queue_depths() == {"cpu": 2, "gpu": 1}

    store.mark_running(a1.id, "w1", 5.0, 3)
    assert store.queue_position(a1.id) is None
    assert store.queue_position(a2.id) == 0
    page, total = store.list_submissions("key_a", "running", 0, 10)
    assert total == 1 and page[0].id == a1.id
    page, total = store.list_submissions(None, "queued", 0, 10)
    assert total == 2 and [r.id for r in page] == [a2.id, b1.id]


def test_delete_submission_removes_everything(store: Store) -> None:
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    store.finish(rec.id, {"metrics": {}}, 0.1)
    assert store.delete_submission(rec.id) is True
    assert store.delete_submission(rec.id) is False
    assert store.get_submission(rec.id) is None and store.get_result(rec.id) is None
    left = [k for k in store.client.scan_iter(match="*" + rec.id + "*")]
    assert left == []
    for index in (keys.submissions(), keys.owner_submissions("key_a"), keys.running()):
        assert store.client.zscore(index, rec.id) is None


# --- idempotency -------------------------------------------------------------------------------


def test_idempotent_replay_and_conflict(store: Store) -> None:
    first, created = store.create_submission(
        make_record(), arrays(), idempotency_key="k1", body_hash="h1"
    )
    assert created
    again, created = store.create_submission(
        make_record(), arrays(), idempotency_key="k1", body_hash="h1"
    )
    assert not created and again.id == first.id
    with pytest.raises(IdempotencyConflict):
        store.create_submission(make_record(), arrays(), idempotency_key="k1", body_hash="h2")
    # another owner may use the same key
    _, created = store.create_submission(
        make_record("key_b"), arrays(), idempotency_key="k1", body_hash="h2"
    )
    assert created
    assert store.list_submissions(None, None, 0, 10)[1] == 2


def test_idempotency_key_of_a_deleted_submission_is_reusable(store: Store) -> None:
    first, _ = store.create_submission(make_record(), arrays(), idempotency_key="k", body_hash="h")
    store.delete_submission(first.id)
    second, created = store.create_submission(
        make_record(), arrays(), idempotency_key="k", body_hash="other"
    )
    assert created and second.id != first.id


# --- transitions -------------------------------------------------------------------------------


def test_run_progress_finish(store: Store) -> None:
    rec = submit(store)
    assert store.mark_running(rec.id, "w1", 5.0, 3) == ("started", "1")
    got = store.get_submission(rec.id)
    assert got is not None and got.status == "running" and got.started_at is not None
    assert store.heartbeat(rec.id, "w1", 5.0) == ("running", False, True)
    assert store.heartbeat(rec.id, "w2", 5.0) == ("running", False, False)  # not its holder
    assert store.client.get(keys.heartbeat(rec.id)) == b"w1"
    assert store.set_progress(rec.id, 42.5)
    assert store.get_submission(rec.id).progress == 42.5  # type: ignore[union-attr]
    assert store.finish(rec.id, {"metrics": {"mae": {"value": 1.0}}}, 0.3) == "succeeded"
    got = store.get_submission(rec.id)
    assert got is not None
    assert (got.status, got.progress, got.attempts) == ("succeeded", 100.0, 1)
    assert got.finished_at is not None
    assert store.get_result(rec.id) == {"metrics": {"mae": {"value": 1.0}}}
    # a re-delivered task finds the job done and changes nothing
    assert store.mark_running(rec.id, "w2", 5.0, 3) == ("terminal", "succeeded")
    assert store.finish(rec.id, {"other": 1}, 0.3) == "succeeded"
    assert store.get_result(rec.id) == {"metrics": {"mae": {"value": 1.0}}}
    assert not store.set_progress(rec.id, 10.0)
    assert store.running_count() == 0
    # raw arrays expire after the retention period, results stay
    ttl = store.client.ttl(keys.arrays(rec.id))
    assert 0 < ttl <= store.retention_s
    assert store.client.ttl(keys.result(rec.id)) == -1
    stats = store.job_stats()
    assert stats["succeeded"] == 1 and stats["failed"] == 0
    cpu = stats["durations"]["cpu"]
    assert cpu["count"] == 1 and cpu["sum"] == pytest.approx(0.3)
    assert dict((b, c) for b, c in cpu["buckets"])[0.25] == 0
    assert dict((b, c) for b, c in cpu["buckets"])[0.5] == 1
    assert cpu["buckets"][-1] == [float("inf"), 1]


def test_finish_refuses_nan(store: Store) -> None:
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    with pytest.raises(ValueError, match="JSON compliant"):
        store.finish(rec.id, {"v": float("nan")}, 0.1)
    assert store.get_submission(rec.id).status == "running"  # type: ignore[union-attr]


def test_zero_retention_deletes_arrays_at_the_end(store: Store) -> None:
    store.retention_s = 0
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    store.fail(rec.id, "bad input: std[0] = -1")
    assert store.load_arrays(rec.id) is None
    got = store.get_submission(rec.id)
    assert got is not None and (got.status, got.error) == ("failed", "bad input: std[0] = -1")
    assert store.job_stats()["failed"] == 1


def test_busy_job_is_not_claimed_twice(store: Store) -> None:
    rec = submit(store)
    assert store.mark_running(rec.id, "task-1", 5.0, 3)[0] == "started"
    assert store.mark_running(rec.id, "task-2", 5.0, 3) == ("busy", "task-1")
    assert store.mark_running("unknown", "task-2", 5.0, 3) == ("missing", "")
    # the same delivery (a retried task) takes it back, counting an attempt
    assert store.mark_running(rec.id, "task-1", 5.0, 3) == ("started", "2")


def test_cancel_queued_running_and_terminal(store: Store) -> None:
    queued = submit(store)
    got = store.cancel_submission(queued.id)
    assert got is not None and got.status == "cancelled" and got.finished_at is not None
    assert store.queue_depths()["cpu"] == 0
    assert store.mark_running(queued.id, "w1", 5.0, 3) == ("terminal", "cancelled")

    running = submit(store)
    store.mark_running(running.id, "w1", 5.0, 3)
    got = store.cancel_submission(running.id)
    assert got is not None and got.status == "running" and got.cancel_requested
    assert store.heartbeat(running.id, "w1", 5.0) == ("running", True, True)
    assert store.mark_cancelled(running.id) == "cancelled"
    assert store.finish(running.id, {}, 0.1) == "cancelled"
    assert store.get_result(running.id) is None

    done = submit(store)
    store.mark_running(done.id, "w1", 5.0, 3)
    store.finish(done.id, {}, 0.1)
    got = store.cancel_submission(done.id)
    assert got is not None and got.status == "succeeded"
    assert store.cancel_submission("unknown") is None
    assert store.job_stats()["cancelled"] == 2


def test_orphaned_job_is_requeued_then_failed_after_max_attempts(store: Store) -> None:
    rec = submit(store)
    for attempt in (1, 2):
        assert store.mark_running(rec.id, f"w{attempt}", 5.0, 2) == ("started", str(attempt))
        assert store.orphaned() == []
        assert store.requeue_orphan(rec.id, 2, 5.0) == "alive"
        store.client.delete(keys.heartbeat(rec.id))  # the worker vanished
        assert store.orphaned() == [rec.id]
        outcome = store.requeue_orphan(rec.id, 2, 5.0)
        if attempt == 1:
            assert outcome == "requeued"
            # the vanished delivery, should it come back, no longer holds the job
            assert store.heartbeat(rec.id, "w1", 5.0) == ("queued", False, False)
            got = store.get_submission(rec.id)
            assert got is not None and got.status == "queued"
            assert store.queue_position(rec.id) == 0
    assert outcome == "failed"
    got = store.get_submission(rec.id)
    assert got is not None and got.status == "failed" and got.error is not None
    assert "max_attempts=2" in got.error and "heartbeat" in got.error
    assert store.orphaned() == []
    stats = store.job_stats()
    assert (stats["requeued"], stats["failed"]) == (1, 1)


def test_redelivery_after_max_attempts_fails_with_reason(store: Store) -> None:
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 1)
    store.client.delete(keys.heartbeat(rec.id))
    assert store.mark_running(rec.id, "w2", 5.0, 1) == ("terminal", "failed")
    got = store.get_submission(rec.id)
    assert got is not None and "max_attempts=1" in (got.error or "")


def test_orphan_with_cancel_request_is_cancelled(store: Store) -> None:
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    store.cancel_submission(rec.id)
    store.client.delete(keys.heartbeat(rec.id))
    assert store.requeue_orphan(rec.id, 3, 5.0) == "cancelled"


def test_writes_to_a_deleted_job_do_not_recreate_it(store: Store) -> None:
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    store.delete_submission(rec.id)
    assert store.heartbeat(rec.id, "w1", 5.0) == ("missing", False, False)
    assert not store.set_progress(rec.id, 50.0)
    assert store.finish(rec.id, {}, 0.1) == "missing"
    assert store.fail(rec.id, "x") == "missing"
    assert store.get_submission(rec.id) is None
    assert store.client.exists(keys.result(rec.id)) == 0


# --- workers, availability ---------------------------------------------------------------------


def test_live_workers(store: Store) -> None:
    store.register_worker("gpu-1", {"queues": ["gpu"], "backend": "cupy"}, 5.0)
    store.register_worker("cpu-1", {"queues": ["cpu"], "backend": "numpy"}, 5.0)
    assert {"gpu-1", "cpu-1"} <= set(store.live_workers())
    assert store.gpu_worker_alive()
    store.unregister_worker("gpu-1")
    assert "gpu-1" not in store.live_workers()
    store.register_worker("gone", {"queues": ["gpu"]}, 0.001)
    store.client.zadd(keys.workers(), {"gone": 1.0})  # last seen long ago
    assert "gone" not in store.live_workers()
    store.unregister_worker("cpu-1")


def test_unreachable_redis_raises_store_unavailable() -> None:
    store = Store.from_url(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(StoreUnavailable, match="Redis unavailable"):
        store.ping()
    with pytest.raises(StoreUnavailable):
        store.get_submission("x")
