"""Retention of the blob objects (both kinds of store, real Redis): they follow their
manifests — expired, deleted, kept — and nothing written is orphaned for good."""

from __future__ import annotations

import time

import numpy as np
import pytest

from service import keys
from service.analyses import Analyses
from service.blobs import BlobUnavailable
from service.store import Quota, QuotaExceeded, Store
from tests.factories import submission_record


def arrays(n: int = 50) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {"mean": rng.normal(size=n), "std": np.ones(n), "y": rng.normal(size=n)}


def submit(store: Store, **fields: object) -> str:
    rec = submission_record(owner="key_r", n=50, analyses=Analyses(seed=0), **fields)
    store.create_submission(rec, arrays())
    return rec.id


def objects(store: Store, sub_id: str) -> int:
    return len(list(store.blobs.list(keys.submission_blobs(sub_id))))


def later(store: Store, extra_s: float = 1.0) -> float:
    """A time past the grace period of everything written so far."""
    return time.time() + store.blob_grace_s + extra_s


def wait_gone(store: Store, key: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while store.client.exists(key):
        assert time.monotonic() < deadline, f"{key} did not expire"
        time.sleep(0.05)


def test_blobs_expire_after_their_manifest_and_never_before(bstore: Store) -> None:
    bstore.retention_s = 1
    sub = submit(bstore)
    bstore.mark_running(sub, "w1", 5.0, 3)
    assert bstore.finish(sub, {"metrics": {}}, 0.1) == "succeeded"
    assert 0 < bstore.client.pttl(keys.arrays(sub)) <= 1000
    # Due only after the grace period; then rescheduled to the manifest's expiry.
    assert bstore.sweep_blobs() == (0, 0)
    now = later(bstore)
    assert bstore.sweep_blobs(now=now) == (1, 0)
    assert objects(bstore, sub) == 3
    due = bstore.client.zscore(keys.blobs_due(), keys.submission_blobs(sub))
    assert due is not None and now < due < now + 5  # the manifest's expiry, not the grace
    wait_gone(bstore, keys.arrays(sub))
    assert bstore.sweep_blobs(now=now + 10) == (1, 3)
    assert objects(bstore, sub) == 0
    assert bstore.client.zcard(keys.blobs_due()) == 0
    assert bstore.get_result(sub) == {"metrics": {}}  # results stay


def test_zero_retention_drops_the_blobs_at_the_next_look(bstore: Store) -> None:
    bstore.retention_s = 0
    sub = submit(bstore)
    bstore.mark_running(sub, "w1", 5.0, 3)
    bstore.fail(sub, "bad input")
    assert bstore.load_arrays(sub) is None  # at once, as before
    assert bstore.sweep_blobs(now=later(bstore)) == (1, 3)
    assert objects(bstore, sub) == 0


def test_arrays_of_running_jobs_and_succeeded_benchmark_submissions_are_kept(
    bstore: Store,
) -> None:
    queued = submit(bstore)
    ranked = submit(bstore, benchmark="bench_k", team="t1")
    plain = submit(bstore)
    for sub in (ranked, plain):
        bstore.mark_running(sub, "w1", 5.0, 3)
        assert bstore.finish(sub, {"metrics": {}}, 0.1) == "succeeded"
    assert bstore.client.ttl(keys.arrays(ranked)) == -1
    assert bstore.client.ttl(keys.arrays(plain)) > 0
    # However late the sweeps, the kept arrays stay whole and readable.
    for days in (1, 30, 400):
        bstore.sweep_blobs(now=time.time() + days * 86400)
    assert objects(bstore, queued) == 3 and bstore.load_arrays(queued) is not None
    assert objects(bstore, ranked) == 3 and bstore.load_arrays(ranked) is not None
    assert bstore.client.zscore(keys.blobs_due(), keys.submission_blobs(ranked)) is not None
    # Deleting it deletes them.
    assert bstore.delete_submission(ranked)
    assert objects(bstore, ranked) == 0


def test_a_write_that_never_reached_redis_is_swept_after_the_grace_period(
    bstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process "dies" between the blob write and the transaction: its own clean-up never
    # runs (the fault: no way to kill the test process itself half-way).
    monkeypatch.setattr(bstore, "discard_blobs", lambda *a, **k: True)
    quota = Quota(keys.quota("b", "t"), per_day=None, total=0)
    rec = submission_record(owner="key_r", n=50, team="t")
    with pytest.raises(QuotaExceeded):
        bstore.create_submission(rec, arrays(), quota=quota)
    assert objects(bstore, rec.id) == 3  # orphans, for now
    assert bstore.sweep_blobs() == (0, 0)  # within the grace period: a write may be under way
    assert objects(bstore, rec.id) == 3
    assert bstore.sweep_blobs(now=later(bstore)) == (1, 3)
    assert objects(bstore, rec.id) == 0


def test_deletion_while_the_blob_store_is_down_is_finished_by_the_sweep(
    bstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = submit(bstore)

    def down(prefix: str) -> int:
        raise BlobUnavailable("down")

    with monkeypatch.context() as m:
        m.setattr(bstore.blobs, "delete", lambda key: down(key))
        m.setattr(bstore.blobs, "delete_prefix", down)
        assert bstore.delete_submission(sub)  # Redis' part is done
    assert objects(bstore, sub) == 3
    assert bstore.client.zscore(keys.blobs_due(), keys.submission_blobs(sub)) == 0
    # Due at once, not after the grace period (with the curves' prefix, empty here).
    assert bstore.sweep_blobs() == (2, 3)
    assert objects(bstore, sub) == 0


def test_reconcile_removes_old_objects_nothing_accounts_for(bstore: Store) -> None:
    live = submit(bstore)
    bstore.client.zrem(keys.blobs_due(), keys.submission_blobs(live))  # manifest only
    bstore.blobs.put_bytes("submissions/sub_lost/mean.npy", b"x")  # Redis lost its data
    bstore.blobs.put_bytes("benchmarks/bench_lost/y.npy", b"x")
    tracked = "submissions/sub_writing/"
    bstore.track_blobs(tracked, time.time() + 60)
    bstore.blobs.put_bytes(tracked + "y.npy", b"x")  # a write under way
    assert bstore.reconcile_blobs() == 0  # all younger than the grace period
    assert bstore.reconcile_blobs(older_than_s=0, now=time.time() + 5) == 2
    assert objects(bstore, "sub_lost") == 0
    assert list(bstore.blobs.list("benchmarks/")) == []
    assert objects(bstore, live) == 3
    assert objects(bstore, "sub_writing") == 1


def test_one_sweeper_per_interval(bstore: Store) -> None:
    bstore.client.delete(keys.blobs_sweep_lock(), keys.blobs_reconcile_lock())
    assert bstore.sweep_blobs_if_due(30.0) == (0, 0)
    assert bstore.sweep_blobs_if_due(30.0) is None
    assert 0 < bstore.client.pttl(keys.blobs_sweep_lock()) <= 30_000


def test_kept_curves_live_in_the_blob_store_as_long_as_the_submission(bstore: Store) -> None:
    bstore.retention_s = 0
    sub = submit(bstore)
    bstore.put_curves(sub, b"zlib bytes")
    assert not bstore.client.exists(keys.submission_curves(sub))  # not in Redis
    assert bstore.get_curves(sub) == b"zlib bytes"
    bstore.mark_running(sub, "w1", 5.0, 3)
    bstore.fail(sub, "bad input")  # the arrays go at once, the curves stay
    bstore.sweep_blobs(now=later(bstore))
    assert objects(bstore, sub) == 0
    assert bstore.get_curves(sub) == b"zlib bytes"
    # Seen with its record: no longer followed (no hourly look for each submission) ...
    assert bstore.client.zscore(keys.blobs_due(), keys.curves_blobs(sub)) is None
    # ... until the submission is deleted, which deletes them.
    assert bstore.delete_submission(sub)
    assert bstore.get_curves(sub) is None
    assert list(bstore.blobs.list(keys.curves_blobs(sub))) == []


def test_curves_kept_in_redis_by_earlier_versions_are_still_read(bstore: Store) -> None:
    sub = submit(bstore)
    bstore.client.set(keys.submission_curves(sub), b"old curves")
    assert bstore.get_curves(sub) == b"old curves"
    bstore.drop_curves(sub)
    assert bstore.get_curves(sub) is None


def test_curves_kept_in_the_blob_store_by_earlier_versions_are_still_read(bstore: Store) -> None:
    """Earlier versions kept the curves as ``curves.json.zz`` beside where they go now: read
    while nothing newer is kept, deleted with the submission's curves."""
    sub = submit(bstore)
    bstore.blobs.put_bytes(f"{keys.curves_blobs(sub)}curves.json.zz", b"older curves")
    assert bstore.get_curves(sub) == b"older curves"
    bstore.put_curves(sub, b"new curves")
    assert bstore.get_curves(sub) == b"new curves"
    bstore.drop_curves(sub)
    assert bstore.get_curves(sub) is None
    assert list(bstore.blobs.list(keys.curves_blobs(sub))) == []
