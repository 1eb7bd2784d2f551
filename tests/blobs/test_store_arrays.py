"""Arrays of submissions and benchmarks in the blob store (both kinds) with a real Redis:
what goes where, how it is read back, and that a failed write leaves nothing behind."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service import keys
from service.analyses import Analyses
from service.blobs import StoredArray
from service.store import IdempotencyConflict, Quota, QuotaExceeded, Store, codec
from tests.factories import submission_record
from tests.service.test_store_benchmarks import benchmark


def arrays(n: int = 1000, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "mean": rng.normal(size=n),
        "std": rng.uniform(0.5, 2, size=n).astype(np.float32),
        "y": rng.normal(size=n),
        "estimate:q 0.9/ü": rng.normal(size=(n, 2)),  # a name that is no valid key segment
        "empty": np.zeros(0),
    }


def record(**fields: object):  # type: ignore[no-untyped-def]
    return submission_record(owner="key_b", n=1000, analyses=Analyses(seed=0), **fields)


def blob_keys(store: Store, prefix: str) -> list[str]:
    return sorted(b.key for b in store.blobs.list(prefix))


def test_arrays_go_to_the_blob_store_and_come_back_read_only(bstore: Store) -> None:
    data = arrays()
    rec, created = bstore.create_submission(record(), data)
    assert created
    prefix = keys.submission_blobs(rec.id)
    stored = blob_keys(bstore, prefix)
    assert len(stored) == len(data) and "submissions/" + rec.id + "/mean.npy" in stored
    # Redis keeps one small manifest field, no array bytes.
    fields = bstore.client.hgetall(keys.arrays(rec.id))
    assert list(fields) == [b"manifest"]
    assert len(fields[b"manifest"]) < 1000
    manifest = json.loads(fields[b"manifest"])
    assert {m["codec"] for m in manifest.values()} == {"npy"}
    # Each object is the array's plain .npy file.
    for name in data:
        assert "key" not in manifest[name]  # the default key, not repeated in Redis
        raw = bstore.blobs.get_bytes(codec.blob_name(prefix, name))
        assert raw[:6] == b"\x93NUMPY"
    loaded = bstore.load_arrays(rec.id)
    assert loaded is not None and set(loaded) == set(data)
    for name, array in data.items():
        assert loaded[name].dtype == array.dtype and loaded[name].shape == array.shape
        np.testing.assert_array_equal(loaded[name], array)
        # small arrays are read (a mapping costs more than the read), large ones mapped
        assert not isinstance(loaded[name], np.memmap)
        assert not loaded[name].flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        loaded["mean"][0] = 1.0
    # A download is unlinked once read: nothing piles up in scratch.
    assert not bstore.scratch.exists() or list(bstore.scratch.iterdir()) == []


def test_large_arrays_come_back_memory_mapped(bstore: Store) -> None:
    n = codec.MAP_FROM_BYTES // 8
    rng = np.random.default_rng(2)
    # float32 targets: half the bytes, below the threshold (read)
    data = {
        "mean": rng.normal(size=n),
        "std": np.ones(n),
        "y": rng.normal(size=n).astype(np.float32),
    }
    rec, _ = bstore.create_submission(record(), data)
    loaded = bstore.load_arrays(rec.id)
    assert loaded is not None
    for name in ("mean", "std"):
        assert isinstance(loaded[name], np.memmap) and not loaded[name].flags.writeable
        np.testing.assert_array_equal(loaded[name], data[name])
    assert not isinstance(loaded["y"], np.memmap) and not loaded["y"].flags.writeable
    np.testing.assert_array_equal(loaded["y"], data["y"])
    # A download is unlinked once mapped (the mapping keeps its data): nothing piles up.
    assert not bstore.scratch.exists() or list(bstore.scratch.iterdir()) == []
    del loaded


def test_stored_array_references_are_recorded_not_copied(bstore: Store) -> None:
    rec = record()
    y = np.arange(10.0)
    key = f"{keys.submission_blobs(rec.id)}y.npy"
    path = bstore.scratch / "y.npy"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, y)
    bstore.blobs.put_file(key, path)
    ref = StoredArray(key=key, dtype="float64", shape=(10,))
    bstore.create_submission(rec, {"y": ref, "mean": np.ones(10)})
    assert blob_keys(bstore, keys.submission_blobs(rec.id)) == sorted(
        [key, f"{keys.submission_blobs(rec.id)}mean.npy"]
    )
    manifest = json.loads(bstore.client.hget(keys.arrays(rec.id), "manifest"))
    assert manifest["y"]["key"] == key and "key" not in manifest["mean"]
    loaded = bstore.load_arrays(rec.id)
    assert loaded is not None
    np.testing.assert_array_equal(loaded["y"], y)
    # A reference whose object disagrees with it is refused at read.
    bad = record()
    bstore.create_submission(bad, {"y": StoredArray(key=key, dtype="float32", shape=(10,))})
    with pytest.raises(ValueError, match="manifest says"):
        bstore.load_arrays(bad.id)


def test_deleting_a_submission_deletes_its_blobs(bstore: Store) -> None:
    rec, _ = bstore.create_submission(record(), arrays())
    other, _ = bstore.create_submission(record(), arrays(seed=1))
    assert bstore.delete_submission(rec.id)
    assert blob_keys(bstore, keys.submission_blobs(rec.id)) == []
    assert bstore.load_arrays(rec.id) is None
    assert bstore.client.zscore(keys.blobs_due(), keys.submission_blobs(rec.id)) is None
    assert bstore.load_arrays(other.id) is not None  # the other one is untouched


def test_a_refused_or_replayed_submission_leaves_no_blobs(bstore: Store) -> None:
    quota = Quota(keys.quota("b1", "t1"), per_day=None, total=1)
    first, _ = bstore.create_submission(record(team="t1"), arrays(), quota=quota)
    refused = record(team="t1")
    with pytest.raises(QuotaExceeded):
        bstore.create_submission(refused, arrays(), quota=quota)
    assert blob_keys(bstore, keys.submission_blobs(refused.id)) == []

    rec, _ = bstore.create_submission(record(), arrays(), idempotency_key="k", body_hash="h1")
    replay = record()
    again, created = bstore.create_submission(replay, arrays(), idempotency_key="k", body_hash="h1")
    assert (again.id, created) == (rec.id, False)
    assert blob_keys(bstore, keys.submission_blobs(replay.id)) == []
    conflict = record()
    with pytest.raises(IdempotencyConflict):
        bstore.create_submission(conflict, arrays(), idempotency_key="k", body_hash="h2")
    assert blob_keys(bstore, keys.submission_blobs(conflict.id)) == []
    # Every object left belongs to a stored submission.
    assert {b.key.split("/")[1] for b in bstore.blobs.list("submissions/")} == {first.id, rec.id}


def test_benchmark_targets_in_the_blob_store(bstore: Store) -> None:
    bench = benchmark("bench_blob")
    y = np.random.default_rng(3).normal(size=1000)
    groups = np.arange(1000) % 3
    bstore.create_benchmark(bench, {"y": y, "groups": groups})
    assert blob_keys(bstore, keys.benchmark_blobs(bench.id)) == [
        "benchmarks/bench_blob/groups.npy",
        "benchmarks/bench_blob/y.npy",
    ]
    assert bstore.client.ttl(keys.benchmark_arrays(bench.id)) == -1  # kept until deleted
    loaded = bstore.load_benchmark_arrays(bench.id)
    assert loaded is not None
    np.testing.assert_array_equal(loaded["y"], y)
    np.testing.assert_array_equal(loaded["groups"], groups)
    assert bstore.delete_benchmark(bench.id)
    assert blob_keys(bstore, "benchmarks/") == []
    assert bstore.load_benchmark_arrays(bench.id) is None


def test_an_object_gone_before_its_manifest_reads_as_gone(bstore: Store) -> None:
    rec, _ = bstore.create_submission(record(), arrays())
    bstore.blobs.delete(f"{keys.submission_blobs(rec.id)}y.npy")
    assert bstore.load_arrays(rec.id) is None


def test_benchmark_targets_of_the_previous_codec_are_still_read(bstore: Store) -> None:
    bench = benchmark("bench_old")
    bstore.create_benchmark(bench, {"y": np.zeros(2)})
    y = np.random.default_rng(4).normal(size=300)
    bstore.client.delete(keys.benchmark_arrays(bench.id))
    pipe = bstore.client.pipeline(transaction=True)
    codec.put_arrays(pipe, keys.benchmark_arrays(bench.id), codec.array_fields({"y": y}))
    pipe.execute()
    loaded = bstore.load_benchmark_arrays(bench.id)
    assert loaded is not None
    np.testing.assert_array_equal(loaded["y"], y)
    assert not loaded["y"].flags.writeable
    assert bstore.delete_benchmark(bench.id)
    assert list(bstore.blobs.list("benchmarks/")) == []
