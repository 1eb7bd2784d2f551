"""The Redis store against a real Redis server: keys, arrays, records, transitions, stats."""

from __future__ import annotations

import json
import re
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import redis

from service import keys
from service import store as store_module
from service.analyses import Analyses
from service.redis_server import free_port
from service.settings import Settings
from service.store import (
    BoardDeps,
    IdempotencyConflict,
    Quota,
    Ranking,
    RenderedPage,
    Store,
    StoreUnavailable,
    SubmissionRecord,
    codec,
    now_iso,
    sha256_hex,
)
from tests.factories import submission_record
from tests.stack import Db, clear_store, db_url


def make_record(owner: str = "key_a", *, queue: str = "cpu", n: int = 4) -> SubmissionRecord:
    return submission_record(
        owner=owner, queue=queue, n=n, metadata={"run": 1}, analyses=Analyses(seed=0)
    )


def arrays(n: int = 4, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"mean": rng.normal(size=n), "std": rng.uniform(0.5, 2, size=n), "y": rng.normal(size=n)}


def submit(store: Store, owner: str = "key_a", queue: str = "cpu") -> SubmissionRecord:
    rec, created = store.create_submission(make_record(owner, queue=queue), arrays())
    assert created
    return rec


# --- API keys ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def session_settings(session_settings: Settings) -> Iterator[Settings]:
    """The session's settings on :attr:`Db.STORE` (no worker reads it), emptied at the end.

    The session's Celery worker, started by whichever test of this process needed it first,
    sweeps database 0 for jobs and comparisons without a heartbeat: it would race the tests
    below that make them orphans by hand (and answer the test's own requeue with "skip")."""
    assert session_settings.redis_url is not None
    own = session_settings.model_copy(
        update={"redis_url": db_url(session_settings.redis_url, Db.STORE)}
    )
    yield own
    assert own.redis_url is not None
    client = redis.Redis.from_url(own.redis_url)
    try:
        client.flushdb()
    finally:
        client.close()


def test_the_module_store_is_not_the_workers_database(store: Store) -> None:
    assert store.client.connection_pool.connection_kwargs["db"] == Db.STORE


@pytest.fixture(autouse=True)
def empty(store: Store) -> None:
    """Each test of the store starts from an empty one (no admin key registered either)."""
    clear_store(store, admin=False)


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


def test_authentication_is_one_round_trip_and_revocation_reaches_the_copy(store: Store) -> None:
    record, token = store.create_api_key("bob")
    digest = sha256_hex(token)
    calls: list[str] = []
    original = store.client.execute_command

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(str(args[0]))
        return original(*args, **kwargs)

    store.client.execute_command = counting  # type: ignore[method-assign]
    try:
        assert store.authenticate(token) == record
    finally:
        store.client.execute_command = original  # type: ignore[method-assign]
    assert calls == ["HGETALL"]
    assert store.revoke_api_key(record.key_id) is True
    assert store.client.hget(keys.api_key_auth(digest), "revoked") == b"1"
    assert store.authenticate(token) is None


def test_keys_created_before_the_auth_copy_still_authenticate(store: Store) -> None:
    record, token = store.create_api_key("legacy")
    digest = sha256_hex(token)
    store.client.delete(keys.api_key_auth(digest))  # as stored by earlier versions
    assert store.authenticate(token) == record
    assert store.revoke_api_key(record.key_id) is True
    assert store.authenticate(token) is None
    assert not store.client.exists(keys.api_key_auth(digest))  # no partial copy created


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


def test_api_processes_starting_together_register_the_environment_admin_key_once(
    store: Store, session_settings: Settings
) -> None:
    """Several API processes (``uqeval serve --api-workers N``) register the same admin key at
    the same moment: one record, live — not one each, each revoking the others."""
    assert session_settings.redis_url is not None
    stores = [Store.from_url(session_settings.redis_url, session_settings) for _ in range(6)]
    start = threading.Barrier(len(stores))

    def register(s: Store) -> str | None:
        start.wait()
        return s.ensure_admin_key("shared-env-admin-token")

    try:
        for round_ in range(5):
            clear_store(store, admin=False)
            with ThreadPoolExecutor(len(stores)) as pool:
                assert list(pool.map(register, stores)) == [None] * len(stores)
            records = store.list_api_keys()
            assert [(r.name, r.revoked) for r in records] == [(store_module.ENV_ADMIN_NAME, False)]
            rec = store.authenticate("shared-env-admin-token")
            assert rec == records[0], round_
    finally:
        for s in stores:
            s.close()


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


def test_arrays_of_the_previous_codec_in_redis_are_still_read(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Data stored before the blob store: compressed binary chunks in the arrays hash.
    monkeypatch.setattr(codec, "CHUNK_BYTES", 1000)
    rng = np.random.default_rng(0)
    big = {"noise": rng.normal(size=1000), "y": np.ones(1000)}
    rec, _ = store.create_submission(make_record(n=1000), {"y": np.zeros(3)})
    store.client.delete(keys.arrays(rec.id))
    pipe = store.client.pipeline(transaction=True)
    codec.put_arrays(pipe, keys.arrays(rec.id), codec.array_fields(big))
    pipe.execute()
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
    assert not loaded["y"].flags.writeable


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
    assert store.queue_position(a2.id, a2.queue) == 1  # the queue known: one read fewer
    assert store.queue_depths() == {"cpu": 2, "gpu": 1}

    store.mark_running(a1.id, "w1", 5.0, 3)
    assert store.queue_position(a1.id) is None
    assert store.queue_position(a2.id) == 0
    page, total = store.list_submissions("key_a", "running", 0, 10)
    assert total == 1 and page[0].id == a1.id
    page, total = store.list_submissions(None, "queued", 0, 10)
    assert total == 2 and [r.id for r in page] == [a2.id, b1.id]


def test_status_listings_read_the_in_flight_indexes_or_the_scope_the_same_page(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status=queued`` and ``running`` listings: from the queues or the running set when they
    hold fewer ids than the scope's index, else from the statuses of the scope; either way the
    page of the unfiltered listing filtered by status (newest first, equal creation times by id
    descending), for the global, key and team scopes, every offset and a few limits."""
    made: list[SubmissionRecord] = []
    for i in range(18):
        owner, team = ("key_a", "team_x") if i % 3 else ("key_b", None)
        rec = submission_record(
            owner=owner,
            team=team,
            queue="gpu" if i % 4 == 0 else "cpu",
            created_ts=1000.0 + i // 3,  # three submissions per creation time: ties
        )
        got, created = store.create_submission(rec, arrays())
        assert created
        made.append(got)
    for rec in made[:6]:
        store.mark_running(rec.id, "w1", 5.0, 3)
    store.finish(made[0].id, {"metrics": {}}, 0.1)
    store.fail(made[1].id, "boom")
    assert store.cancel_submission(made[2].id) is not None
    assert store.cancel_submission(made[9].id) is not None  # queued: cancelled at once
    scans: list[str] = []
    real = store.client.zrevrange

    def zrevrange(name: str, start: int, end: int, *args: object, **kw: object) -> object:
        if (start, end) == (0, -1):
            scans.append(name)  # the scope's whole index: its statuses are read
        return real(name, start, end, *args, **kw)

    monkeypatch.setattr(store.client, "zrevrange", zrevrange)
    scopes = [(None, None), ("key_a", None), ("key_b", None), (None, "team_x")]
    seen_paths = set()
    for owner, team in scopes:
        everything, total = store.list_submissions(owner, None, 0, 100, team=team)
        assert total == len(everything) > 0
        for status in ("queued", "running", "succeeded", "cancelled"):
            want = [r.id for r in everything if r.status == status]
            for offset in range(len(want) + 2):
                for limit in (1, 2, 100):
                    del scans[:]
                    page, total = store.list_submissions(owner, status, offset, limit, team=team)
                    assert total == len(want), (owner, team, status)
                    assert [r.id for r in page] == want[offset : offset + limit]
                    assert all(r.status == status for r in page)
                    seen_paths.add((status in ("queued", "running"), bool(scans)))
    # both ways were taken for the in-flight statuses (the small scope of key_b scans); the
    # final statuses never read the scope's whole index (they come from the ended indexes)
    assert seen_paths == {(True, False), (True, True), (False, False)}


def test_final_status_listings_come_from_the_ended_indexes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``succeeded``, ``failed`` and ``cancelled`` listings: the page of the unfiltered
    listing filtered by status, for every scope, offset and a few limits; the statuses of the
    ended submissions are read once (the first listing indexes them), those of the jobs in
    flight (in the queues or the running set) never, and a later listing reads those of the
    jobs that ended since; a deleted submission leaves the index and its count; a deletion
    between the status read and the indexing leaves nothing indexed; no listing leaves a key
    behind."""
    made: list[SubmissionRecord] = []
    for i in range(24):
        owner, team = ("key_a", "team_x") if i % 3 else ("key_b", None)
        rec = submission_record(owner=owner, team=team, created_ts=2000.0 + i // 4)  # ties
        got, created = store.create_submission(rec, arrays())
        assert created
        made.append(got)
    for rec in made[:16]:
        store.mark_running(rec.id, "w1", 5.0, 3)
    for rec in made[:6]:
        store.finish(rec.id, {"metrics": {}}, 0.1)
    for rec in made[6:9]:
        store.fail(rec.id, "boom")
    store.cancel_submission(made[9].id)  # running: cancel requested, then the worker stops
    assert store.mark_cancelled(made[9].id) == "cancelled"
    store.cancel_submission(made[20].id)  # queued: cancelled at once
    ended_ids = {r.id for r in made[:10]} | {made[20].id}
    status_reads: list[str] = []  # the ids whose statuses the indexing script reads
    real_index = store._scripts["index_ended"]

    def index(keys: list[str], args: list[str]) -> Any:
        status_reads.extend(args)
        return real_index(keys=keys, args=args)

    monkeypatch.setitem(store._scripts, "index_ended", index)
    scopes = [(None, None), ("key_a", None), ("key_b", None), (None, "team_x")]

    def check_every_page() -> None:
        for owner, team in scopes:
            everything, _ = store.list_submissions(owner, None, 0, 100, team=team)
            for status in keys.ENDED:
                want = [r.id for r in everything if r.status == status]
                for offset in range(len(want) + 2):
                    for limit in (1, 3, 100):
                        page, total = store.list_submissions(
                            owner, status, offset, limit, team=team
                        )
                        assert total == len(want), (owner, team, status)
                        assert [r.id for r in page] == want[offset : offset + limit]
                        assert all(r.status == status for r in page)

    differences: list[object] = []  # the set differences the listings ask Redis for
    real_zdiff = store.client.zdiff

    def zdiff(names: Any, *args: Any, **kw: Any) -> Any:
        differences.append(names)
        return real_zdiff(names, *args, **kw)

    monkeypatch.setattr(store.client, "zdiff", zdiff)
    store.list_submissions(None, "succeeded", 0, 10)  # the first listing indexes them all
    assert sorted(status_reads) == sorted(ended_ids)  # the jobs in flight are not read
    assert len(differences) == 1
    del status_reads[:], differences[:]
    check_every_page()
    assert status_reads == []  # every later listing: no status read
    # and no set difference: the indexes and the jobs in flight count every submission
    assert differences == []
    indexed = {s: store.client.zcard(keys.ended(s)) for s in keys.ENDED}
    assert indexed == {"succeeded": 6, "failed": 3, "cancelled": 2}

    # a job that ends after the first listings is listed by the next one
    later = made[13]
    assert later.owner == "key_a"
    store.finish(later.id, {"metrics": {}}, 0.1)
    page, total = store.list_submissions("key_a", "succeeded", 0, 100)
    assert status_reads == [later.id] and len(differences) == 1
    assert later.id in {r.id for r in page}
    assert total == len([r for r in [*made[:6], later] if r.owner == "key_a"])
    check_every_page()

    # a deleted submission leaves the index, its page and its count
    gone = made[1]
    assert store.delete_submission(gone.id)
    for s in keys.ENDED:
        assert store.client.zscore(keys.ended(s), gone.id) is None
    page, total = store.list_submissions(None, "succeeded", 0, 100)
    assert gone.id not in {r.id for r in page} and total == 6
    check_every_page()

    # deleted between the status read and the indexing: the script indexes nothing
    late = made[14]
    store.finish(late.id, {"metrics": {}}, 0.1)
    assert store.delete_submission(late.id)
    indexes = [keys.ended(s) for s in keys.ENDED]
    added = store._scripts["index_ended"](keys=[*indexes, keys.submission(late.id)], args=[late.id])
    assert added == 0 and store.client.zscore(keys.ended("succeeded"), late.id) is None
    assert list(store.client.scan_iter(match=keys.listing_scratch("*"))) == []


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


def test_a_benchmark_submission_is_indexed_with_its_record(store: Store) -> None:
    """The candidates of default finals are indexed in the creation transaction (not after
    the job, where a worker dying between its finish script and the index lost them) and
    leave the index with the submission."""
    rec, created = store.create_submission(
        submission_record(benchmark="bench_idx", n=4), arrays(), idempotency_key=None
    )
    assert created
    assert store.client.zscore(keys.bench_submissions("bench_idx"), rec.id) == rec.created_ts
    plain = submit(store)
    assert store.client.zcard(keys.bench_submissions("bench_idx")) == 1
    assert plain.benchmark is None
    store.delete_submission(rec.id)
    assert store.client.zscore(keys.bench_submissions("bench_idx"), rec.id) is None


def test_large_result_is_stored_compressed_and_reads_back(store: Store) -> None:
    from service.store.documents import PACK_MIN

    rng = np.random.default_rng(3)
    doc = {"metrics": {f"m{i}": {"value": float(v)} for i, v in enumerate(rng.normal(size=200))}}
    plain = json.dumps(doc, separators=(",", ":")).encode()
    assert len(plain) > PACK_MIN
    rec = submit(store)
    store.mark_running(rec.id, "w1", 5.0, 3)
    assert store.finish(rec.id, doc, 0.1) == "succeeded"
    stored = store.client.get(keys.result(rec.id))
    assert stored is not None and zlib.decompress(stored) == plain
    assert len(stored) < len(plain)
    assert store.get_result(rec.id) == doc
    record, raw = store.get_submission_and_result(rec.id)
    assert record is not None and raw == plain
    # a plain document written by an earlier version reads as it is
    store.client.set(keys.result(rec.id), plain)
    assert store.get_result(rec.id) == doc
    assert store.get_submission_and_result(rec.id)[1] == plain
    # the sealed private result too
    store.put_private_result(rec.id, doc)
    assert zlib.decompress(store.client.get(keys.private_result(rec.id)) or b"") == plain
    assert store.get_private_result(rec.id) == doc
    assert store.get_private_results([rec.id, "missing"]) == [doc, None]


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


# --- visibility changes and the leaderboards ---------------------------------------------------

BENCH = "bench_v"


def bench_record(team: str, ts: float, visibility: str = "public") -> SubmissionRecord:
    rec = make_record(f"key_{team}")
    rec.analyses = Analyses(metrics=["mae"])
    rec.created_ts, rec.team, rec.benchmark = ts, team, BENCH
    rec.visibility = visibility  # type: ignore[assignment]
    return rec


def ensure_benchmark(store: Store) -> None:
    from tests.service.test_store_benchmarks import benchmark

    if store.get_benchmark(BENCH) is None:
        store.create_benchmark(benchmark(BENCH), {"y": np.zeros(3)})


def finish_on_board(store: Store, rec: SubmissionRecord, value: float) -> str:
    """Run ``rec`` to success with a leaderboard entry of ``value`` (mae: badness = value)."""
    ensure_benchmark(store)
    store.create_submission(rec, arrays())
    store.mark_running(rec.id, "w", 5.0, 3)
    assert rec.team is not None
    ranking = Ranking(BENCH, rec.team, rec.created_ts, {"mae": (value, {"value": value})})
    assert store.finish(rec.id, {"metrics": {}}, 0.1, ranking=ranking) == "succeeded"
    return rec.id


def expected_boards(
    subs: dict[str, tuple[str, float, float]], public: set[str]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The best and the latest board, (team, submission) best first, written from the rules:
    per team its lowest value (best) or its newest public submission (latest)."""
    best: dict[str, str] = {}
    latest: dict[str, str] = {}
    for sub, (team, value, ts) in subs.items():
        if sub not in public:
            continue
        if team not in best or value < subs[best[team]][1]:
            best[team] = sub
        if team not in latest or ts > subs[latest[team]][2]:
            latest[team] = sub

    def order(chosen: dict[str, str]) -> list[tuple[str, str]]:
        return sorted(((t, s) for t, s in chosen.items()), key=lambda ts: subs[ts[1]][1])

    return order(best), order(latest)


def assert_boards(
    store: Store, subs: dict[str, tuple[str, float, float]], public: set[str]
) -> None:
    best, latest = expected_boards(subs, public)
    assert store.leaderboard_board(BENCH, "mae", "best") == best
    assert store.leaderboard_board(BENCH, "mae", "latest") == latest
    ranked = {s for s in subs if s in public}
    members = {m.decode() for m in store.client.zrange(keys.leaderboard_subs(BENCH, "mae"), 0, -1)}
    assert members == ranked
    shown = {k.decode() for k in store.client.hkeys(keys.leaderboard_entries(BENCH, "mae"))}
    assert shown == ranked
    for sub in ranked:
        assert store.leaderboard_entry(BENCH, "mae", sub) == {"value": subs[sub][1]}


def test_visibility_changes_move_a_submission_on_and_off_the_boards(store: Store) -> None:
    specs = {"a_good": ("team_a", 0.1, 1.0), "a_late": ("team_a", 0.5, 2.0)}
    specs |= {"b": ("team_b", 0.3, 1.5), "b_private": ("team_b", 0.2, 3.0)}
    subs: dict[str, tuple[str, float, float]] = {}
    public: set[str] = set()
    for name, (team, value, ts) in specs.items():
        visibility = "private" if name == "b_private" else "public"
        sub_id = finish_on_board(store, bench_record(team, ts, visibility), value)
        subs[sub_id] = (team, value, ts)
        if visibility == "public":
            public.add(sub_id)
    ids = {name: sub_id for name, sub_id in zip(specs, subs, strict=True)}
    assert_boards(store, subs, public)

    # Each change: the boards equal the rules applied to the new public set, and the board
    # version moves on (rank intervals of the old version are stale).
    for name, visibility in [
        ("a_good", "private"),  # team a falls back to a_late on the best board
        ("a_late", "private"),  # team a leaves the boards
        ("b_private", "public"),  # team b's best and latest become b_private
        ("a_late", "public"),
        ("a_good", "public"),  # team a's best is a_good again, its latest stays a_late
        ("b", "private"),
    ]:
        version = store.leaderboard_version(BENCH)
        assert store.set_visibility(ids[name], visibility) == "changed"  # type: ignore[arg-type]
        (public.add if visibility == "public" else public.discard)(ids[name])
        assert_boards(store, subs, public)
        assert store.leaderboard_version(BENCH) == version + 1
        got = store.get_submission(ids[name])
        assert got is not None and got.visibility == visibility

    version = store.leaderboard_version(BENCH)
    assert store.set_visibility(ids["b"], "private") == "unchanged"
    assert store.leaderboard_version(BENCH) == version
    assert store.set_visibility("sub_unknown", "public") == "missing"
    with pytest.raises(ValueError, match="visibility must be"):
        store.set_visibility(ids["b"], "everyone")  # type: ignore[arg-type]


def test_visibility_changed_while_the_job_runs_decides_at_finish(store: Store) -> None:
    ensure_benchmark(store)
    went_private = bench_record("team_a", 1.0, "public")
    went_public = bench_record("team_b", 2.0, "private")
    for rec in (went_private, went_public):
        store.create_submission(rec, arrays())
        store.mark_running(rec.id, "w", 5.0, 3)
    # The worker read the old visibility; the change lands before it finishes.
    assert store.set_visibility(went_private.id, "private") == "changed"
    assert store.set_visibility(went_public.id, "public") == "changed"
    for rec, value in ((went_private, 0.1), (went_public, 0.2)):
        assert rec.team is not None
        ranking = Ranking(BENCH, rec.team, rec.created_ts, {"mae": (value, {"value": value})})
        assert store.finish(rec.id, {"metrics": {}}, 0.1, ranking=ranking) == "succeeded"
    assert store.leaderboard_board(BENCH, "mae", "best") == [("team_b", went_public.id)]
    # The private one's entries were kept: made public, it ranks.
    assert store.set_visibility(went_private.id, "public") == "changed"
    assert store.leaderboard_board(BENCH, "mae", "best") == [
        ("team_a", went_private.id),
        ("team_b", went_public.id),
    ]


def test_visibility_of_unranked_submissions_changes_without_board_writes(store: Store) -> None:
    ensure_benchmark(store)
    inline = submit(store)  # inline targets: no benchmark
    assert store.set_visibility(inline.id, "public") == "changed"
    got = store.get_submission(inline.id)
    assert got is not None and got.visibility == "public"
    failed = bench_record("team_a", 1.0, "private")
    store.create_submission(failed, arrays())
    store.mark_running(failed.id, "w", 5.0, 3)
    store.fail(failed.id, "invalid input: std[0] = -1")
    assert store.set_visibility(failed.id, "public") == "changed"
    # A benchmark submission whose every value was undefined has an empty ranking.
    empty = bench_record("team_b", 2.0, "private")
    store.create_submission(empty, arrays())
    store.mark_running(empty.id, "w", 5.0, 3)
    store.finish(empty.id, {"metrics": {}}, 0.1, ranking=Ranking(BENCH, "team_b", 2.0, {}))
    assert store.set_visibility(empty.id, "public") == "changed"
    assert list(store.client.scan_iter(match=keys.leaderboard_pattern(BENCH))) == []
    # A succeeded benchmark submission finished without a stored ranking is left as it is.
    legacy = bench_record("team_c", 3.0, "private")
    store.create_submission(legacy, arrays())
    store.mark_running(legacy.id, "w", 5.0, 3)
    store.finish(legacy.id, {"metrics": {}}, 0.1)
    assert store.set_visibility(legacy.id, "public") == "unranked"
    got = store.get_submission(legacy.id)
    assert got is not None and got.visibility == "private"


def test_a_deleted_benchmark_gets_no_boards_back(store: Store) -> None:
    sub = finish_on_board(store, bench_record("team_a", 1.0, "private"), 0.1)
    assert store.delete_benchmark(BENCH)
    assert store.set_visibility(sub, "public") == "changed"
    got = store.get_submission(sub)
    assert got is not None and got.visibility == "public"
    assert list(store.client.scan_iter(match=keys.leaderboard_pattern(BENCH))) == []


# --- quota refunds -----------------------------------------------------------------------------


def quota_submission(store: Store) -> tuple[SubmissionRecord, Quota]:
    quota = Quota(keys.quota(BENCH, "team_q"), None, 10)
    rec = bench_record("team_q", 1.0, "private")
    store.create_submission(rec, arrays(), quota=quota)
    assert store.client.zscore(quota.key, rec.id) is not None
    return rec, quota


def test_system_failures_give_the_quota_slot_back(store: Store) -> None:
    # Failed by the system (crash, time limit, lost arrays): refunded.
    rec, quota = quota_submission(store)
    store.mark_running(rec.id, "w", 5.0, 3)
    assert store.fail(rec.id, "internal error", system=True) == "failed"
    assert store.client.zscore(quota.key, rec.id) is None
    assert store.client.hget(keys.submission(rec.id), "quota_refunded") == b"1"
    # Failed by its input: still counted.
    rec, quota = quota_submission(store)
    store.mark_running(rec.id, "w", 5.0, 3)
    assert store.fail(rec.id, "invalid input: std[0] = -1") == "failed"
    assert store.client.zscore(quota.key, rec.id) is not None
    # Its worker lost on every attempt, found by the reaper: refunded.
    rec, quota = quota_submission(store)
    store.mark_running(rec.id, "w", 5.0, 1)
    store.client.delete(keys.heartbeat(rec.id))
    assert store.requeue_orphan(rec.id, 1, 5.0) == "failed"
    assert store.client.zscore(quota.key, rec.id) is None
    # ... or by the delivery that finds the attempts spent: refunded.
    rec, quota = quota_submission(store)
    store.mark_running(rec.id, "w1", 5.0, 1)
    store.client.delete(keys.heartbeat(rec.id))
    assert store.mark_running(rec.id, "w2", 5.0, 1) == ("terminal", "failed")
    assert store.client.zscore(quota.key, rec.id) is None
    # A submission without a quota fails the same way.
    plain = submit(store)
    store.mark_running(plain.id, "w", 5.0, 3)
    assert store.fail(plain.id, "internal error", system=True) == "failed"


def test_a_refund_with_an_undeclared_quota_key_writes_nothing(store: Store) -> None:
    rec, quota = quota_submission(store)
    store.mark_running(rec.id, "w", 5.0, 3)
    script = store._scripts["fail"]
    args = [rec.id, now_iso(), "internal error", store.retention_s, "1"]
    with pytest.raises(redis.ResponseError, match="quota key"):
        script(keys=store._keys(rec.id), args=args)
    got = store.get_submission(rec.id)
    assert got is not None and (got.status, got.error) == ("running", None)
    assert store.client.zscore(quota.key, rec.id) is not None


# --- comparison claims and the rank job's claim ---------------------------------------------


def new_comparison(store: Store) -> str:
    cmp_id = "cmp_" + uuid.uuid4().hex
    store.create_comparison(
        {"id": cmp_id, "owner": "key_a", "created_at": now_iso(), "request": {"seed": 1}}
    )
    return cmp_id


def test_comparison_claim_heartbeat_requeue_and_attempts(store: Store) -> None:
    cmp_id = new_comparison(store)
    assert store.claim_comparison(cmp_id, "t1", 5.0, 2) == ("started", "1")
    assert store.claim_comparison(cmp_id, "t2", 5.0, 2) == ("busy", "t1")
    assert store.comparison_heartbeat(cmp_id, "t1", 5.0)
    assert not store.comparison_heartbeat(cmp_id, "t2", 5.0)  # not its holder
    assert store.orphaned_comparisons() == []
    assert store.requeue_comparison(cmp_id, 2, 5.0) == "alive"
    store.client.delete(keys.comparison_heartbeat(cmp_id))  # its worker vanished
    assert store.orphaned_comparisons() == [cmp_id]
    assert store.requeue_comparison(cmp_id, 2, 5.0) == "requeued"
    doc = store.get_comparison(cmp_id)
    assert doc is not None and doc["status"] == "queued"
    assert store.comparisons_to_resend() == [cmp_id]
    store.mark_comparison_resent(cmp_id)
    assert store.comparisons_to_resend() == []
    assert not store.comparison_heartbeat(cmp_id, "t1", 5.0)  # the lost delivery let go
    # The second attempt is lost too: the comparison fails with the reason.
    assert store.claim_comparison(cmp_id, "t3", 5.0, 2) == ("started", "2")
    store.client.delete(keys.comparison_heartbeat(cmp_id))
    assert store.requeue_comparison(cmp_id, 2, 5.0) == "failed"
    doc = store.get_comparison(cmp_id)
    assert doc is not None and doc["status"] == "failed"
    assert "max_attempts=2" in doc["error"] and doc["finished_at"]
    assert store.orphaned_comparisons() == []
    assert store.claim_comparison(cmp_id, "t4", 5.0, 2) == ("terminal", "failed")
    assert store.claim_comparison("cmp_unknown", "t4", 5.0, 2) == ("missing", "")


def test_a_finished_comparison_leaves_the_reaper_and_a_redelivery_finds_it(
    store: Store,
) -> None:
    cmp_id = new_comparison(store)
    assert store.claim_comparison(cmp_id, "t1", 5.0, 3)[0] == "started"
    store.set_comparison_status(cmp_id, "succeeded", result={"pairs": []})
    assert store.client.zscore(keys.running_comparisons(), cmp_id) is None
    assert not store.client.exists(keys.comparison_heartbeat(cmp_id))
    assert store.claim_comparison(cmp_id, "t2", 5.0, 3) == ("terminal", "succeeded")
    # Exhausted attempts on a new delivery: failed with the reason.
    other = new_comparison(store)
    store.claim_comparison(other, "t1", 5.0, 1)
    store.client.delete(keys.comparison_heartbeat(other))
    assert store.claim_comparison(other, "t2", 5.0, 1) == ("terminal", "failed")
    store.delete_comparison(other)
    assert store.get_comparison(other) is None
    assert store.client.zscore(keys.running_comparisons(), other) is None


def test_a_running_rank_job_holds_its_claim_only_while_it_beats(store: Store) -> None:
    lock = keys.ranks_lock(BENCH, "mae", "best")
    assert store.claim_ranks(BENCH, "mae", "best", 600.0)  # a reader queued the job
    assert store.hold_ranks(BENCH, "mae", "best", "job-1", 5.0, take=True)
    assert store.client.get(lock) == b"job-1"
    assert 0 < store.client.pttl(lock) <= 5000  # the reader's 600 s claim became short
    assert store.hold_ranks(BENCH, "mae", "best", "job-1", 5.0, take=False)
    # Another delivery took it: the first no longer refreshes it.
    assert store.hold_ranks(BENCH, "mae", "best", "job-2", 5.0, take=True)
    assert not store.hold_ranks(BENCH, "mae", "best", "job-1", 5.0, take=False)
    store.put_ranks(BENCH, "mae", "best", {"version": 0})  # done: the claim is released
    assert not store.hold_ranks(BENCH, "mae", "best", "job-2", 5.0, take=False)
    assert not store.client.exists(lock)


# --- every script touches only the keys it declares --------------------------------------------

_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b", '"': b'"', "\\": b"\\"}


def _unrepr(text: str) -> bytes:
    """Inverse of the quoting of MONITOR's output (Redis' sdscatrepr)."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if text[i + 1] == "x":
                out.append(int(text[i + 2 : i + 4], 16))
                i += 4
                continue
            out += _ESCAPES[text[i + 1]]
            i += 2
            continue
        out += text[i].encode()
        i += 1
    return bytes(out)


def script_key_violations(store: Store, action: Callable[[], object]) -> tuple[int, list[str]]:
    """Run ``action`` under MONITOR; every command a script runs must name only keys of its
    EVALSHA's KEYS (as ``COMMAND GETKEYS`` reads the command). Returns the number of script
    commands seen and the violations."""
    conn = store.client.connection_pool.get_connection()
    conn.send_command("MONITOR")
    assert conn.read_response() in (b"OK", "OK")
    marker = "monitor-end-" + uuid.uuid4().hex
    try:
        action()
        store.client.echo(marker)
        lines: list[str] = []
        while True:
            line = conn.read_response()
            line = line.decode() if isinstance(line, bytes) else str(line)
            if marker in line:
                break
            lines.append(line)
    finally:
        conn.disconnect()
        store.client.connection_pool.release(conn)
    declared: set[bytes] = set()
    seen = 0
    violations: list[str] = []
    for line in lines:
        source, _, rest = line.partition("] ")
        args = [_unrepr(a) for a in _ARG.findall(rest)]
        if not source.endswith(" lua"):
            if args and args[0].upper() in (b"EVALSHA", b"EVAL"):
                numkeys = int(args[2])
                declared = set(args[3 : 3 + numkeys])
            continue
        seen += 1
        try:
            touched = store.client.command_getkeys(*args)
        except redis.ResponseError:  # a command without keys
            touched = []
        for key in touched:
            if (key.encode() if isinstance(key, str) else key) not in declared:
                violations.append(f"{args[0].decode()} {key!r} not in KEYS")
    return seen, violations


def test_every_script_touches_only_the_keys_it_declares(store: Store) -> None:
    def lifecycle() -> None:
        record, token = store.create_api_key("alice")
        assert store.authenticate(token) is not None
        store.revoke_api_key(record.key_id)
        rec, _ = quota_submission(store)
        store.mark_running(rec.id, "w", 5.0, 3)
        store.heartbeat(rec.id, "w", 5.0)
        store.set_progress(rec.id, 50.0)
        store.fail(rec.id, "internal error", system=True)
        rec, _ = quota_submission(store)
        store.mark_running(rec.id, "w", 5.0, 1)
        store.client.delete(keys.heartbeat(rec.id))
        store.requeue_orphan(rec.id, 1, 5.0)
        rec, _ = quota_submission(store)
        store.mark_running(rec.id, "w1", 5.0, 1)
        store.client.delete(keys.heartbeat(rec.id))
        store.mark_running(rec.id, "w2", 5.0, 1)
        orphan = submit(store)
        store.mark_running(orphan.id, "w", 5.0, 3)
        store.client.delete(keys.heartbeat(orphan.id))
        store.requeue_orphan(orphan.id, 3, 5.0)
        store.cancel_submission(orphan.id)
        running = submit(store)
        store.mark_running(running.id, "w", 5.0, 3)
        store.cancel_submission(running.id)
        store.mark_cancelled(running.id)
        a = finish_on_board(store, bench_record("team_a", 1.0), 0.1)
        finish_on_board(store, bench_record("team_a", 2.0), 0.2)
        store.set_visibility(a, "private")
        store.set_visibility(a, "public")
        store.delete_submission(a)
        cmp_id = new_comparison(store)
        store.claim_comparison(cmp_id, "t1", 5.0, 1)
        store.comparison_heartbeat(cmp_id, "t1", 5.0)
        store.client.delete(keys.comparison_heartbeat(cmp_id))
        store.requeue_comparison(cmp_id, 1, 5.0)
        store.hold_ranks(BENCH, "mae", "best", "t1", 5.0, take=True)
        store.hold_ranks(BENCH, "mae", "best", "t1", 5.0, take=False)
        reads()

    def reads() -> None:
        # The one-round-trip reads: authentication (an unknown token, a wrong guess of the
        # key's id, the rate count and its refusal) with a submission (queued, succeeded,
        # unknown) or a leaderboard page (no guess of its dependencies, a miss, a hit).
        _, token = store.create_api_key("reader")
        assert store.read_submission("nope", "x", rate_limit=0, window_s=60).key is None
        store._key_ids[sha256_hex(token)] = "key_wrong"
        queued = submit(store)
        done = finish_on_board(store, bench_record("team_r", 3.0), 0.3)
        for sub_id, rate_limit in ((queued.id, 0), (done, 0), ("unknown", 5), (done, 1)):
            read = store.read_submission(token, sub_id, rate_limit=rate_limit, window_s=60)
            assert read.key is not None
        assert read.retry_after_s is not None  # the limit of 1 was spent by the read before
        page = keys.leaderboard_page_cache(BENCH, "test")
        assert store.leaderboard_cached(token, page, BENCH, rate_limit=0, window_s=60).body is None
        deps = BoardDeps(board="mae", rule="best", baseline=done)
        store.leaderboard_render(BENCH, page, lambda _: deps, lambda _: RenderedPage(b"[]"), 60)
        assert store.leaderboard_cached(token, page, BENCH, rate_limit=0, window_s=60).body == b"[]"

    seen, violations = script_key_violations(store, lifecycle)
    assert seen > 50  # the scripts ran under the monitor
    assert violations == []
