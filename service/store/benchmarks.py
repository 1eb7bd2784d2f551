"""Benchmarks: their records and hidden targets (the targets only ever reach the workers).

The targets are written to the blob store (``benchmarks/<id>/``) before the record, their
prefix recorded in ``blobs:due`` first (see :mod:`service.store.blobsweep`); Redis keeps their
manifest in ``bench:{id}:arrays`` (no expiry: a benchmark keeps its targets until deleted).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from service import keys
from service.blobs import StoredArray
from service.splits import MASK, Part, cut_rows, part_rows
from service.store import codec
from service.store.base import StoreBase
from service.store.records import BenchmarkRecord, now_iso

__all__ = ["BenchmarkStore"]


class BenchmarkStore(StoreBase):
    """Benchmark records and targets (a part of :class:`service.store.Store`)."""

    def create_benchmark(
        self,
        record: BenchmarkRecord,
        arrays: Mapping[str, np.ndarray[Any, Any] | StoredArray],
    ) -> BenchmarkRecord:
        """Store a benchmark and its hidden targets (``y`` or ``labels``, optionally
        ``soft_labels``, ``ood`` and ``groups``) at once: the arrays to the blob store under
        ``benchmarks/<id>/``, then the record and their manifest in one transaction."""
        prefix = keys.benchmark_blobs(record.id)
        self.track_blobs(prefix, time.time() + self.blob_grace_s)
        manifest, written = self._call(
            lambda: codec.write_blobs(self.blobs, prefix, arrays, self.scratch)
        )

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(
                keys.benchmark_arrays(record.id),
                "manifest",
                json.dumps(manifest, separators=(",", ":")),
            )
            pipe.set(keys.benchmark(record.id), record.to_json())
            pipe.zadd(keys.benchmarks(), {record.id: time.time()})
            pipe.execute()

        try:
            self._call(write)
        except BaseException:
            self.discard_blobs(prefix, written)
            raise
        return record

    def get_benchmark(self, bench_id: str) -> BenchmarkRecord | None:
        raw = self._call(lambda: self.client.get(keys.benchmark(bench_id)))
        return None if raw is None else BenchmarkRecord.from_json(raw)

    def list_benchmarks(self) -> list[BenchmarkRecord]:
        """Every benchmark, oldest first."""
        return self._indexed_records(keys.benchmarks(), keys.benchmark, BenchmarkRecord.from_json)

    def update_benchmark(self, bench_id: str, changes: Mapping[str, Any]) -> BenchmarkRecord | None:
        """Replace the given metadata fields (never the targets); None when unknown."""
        return self._update_record(
            keys.benchmark(bench_id),
            lambda raw: dataclasses.replace(
                BenchmarkRecord.from_json(raw), **changes, updated_at=now_iso()
            ),
        )

    def delete_benchmark(self, bench_id: str) -> bool:
        """Remove a benchmark, its targets and its quota counters (its submissions stay)."""

        prefix = keys.benchmark_blobs(bench_id)
        blob_keys: list[str] = []

        def write() -> bool:
            if not self.client.exists(keys.benchmark(bench_id)):
                return False
            manifest = self.client.hget(keys.benchmark_arrays(bench_id), "manifest")
            blob_keys.extend(codec.blob_keys(manifest, prefix))
            quota_keys = list(self.client.scan_iter(match=keys.quota(bench_id, "*"), count=1000))
            quota_keys += list(
                self.client.scan_iter(match=keys.leaderboard_pattern(bench_id), count=1000)
            )
            quota_keys += list(
                self.client.scan_iter(match=keys.finals_pattern(bench_id), count=1000)
            )
            quota_keys.append(keys.bench_submissions(bench_id))
            quota_keys.append(keys.bench_succeeded_legacy(bench_id))
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.benchmark(bench_id), keys.benchmark_arrays(bench_id), *quota_keys)
            pipe.zrem(keys.benchmarks(), bench_id)
            # Due now: should the blob store be down below, the sweep removes them later.
            pipe.zadd(keys.blobs_due(), {prefix: 0})
            pipe.execute()
            return True

        deleted = self._call(write)
        if deleted:
            self.discard_blobs(prefix, blob_keys, forget=True)
        return deleted

    def load_benchmark_arrays(
        self, bench_id: str, part: Part = "public"
    ) -> dict[str, np.ndarray[Any, Any]] | None:
        """The hidden targets of a benchmark (for the worker only; no route returns them),
        restricted to the rows of ``part``: the public rows by default, ``"private"`` the
        private rows, ``"all"`` every row (a benchmark without a split: every row for each).
        Read-only and memory-mapped where not cut (see :meth:`load_arrays`)."""
        found = self.benchmark_part(bench_id, part)
        return None if found is None else found[0]

    def benchmark_part(
        self, bench_id: str, part: Part = "public"
    ) -> tuple[dict[str, np.ndarray[Any, Any]], np.ndarray[Any, Any] | None, int] | None:
        """(the targets of ``part``, its row indices — None: every row —, the benchmark's N);
        None when the benchmark is gone. The mask of the parts itself is never returned."""
        arrays = self._call(
            lambda: codec.read_arrays(
                self.client,
                keys.benchmark_arrays(bench_id),
                self.blobs,
                self.scratch,
                keys.benchmark_blobs(bench_id),
            )
        )
        if arrays is None:
            return None
        arrays = dict(arrays)
        mask = arrays.pop(MASK, None)
        n = int(np.shape(mask if mask is not None else next(iter(arrays.values())))[0])
        rows = part_rows(mask, part)
        return cut_rows(arrays, rows, n), rows, n
