"""Benchmarks: their records and hidden targets (the targets only ever reach the workers)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import redis

from service import keys
from service.store import codec
from service.store.base import StoreBase
from service.store.records import BenchmarkRecord, decode, now_iso

__all__ = ["BenchmarkStore"]


class BenchmarkStore(StoreBase):
    """Benchmark records and targets (a part of :class:`service.store.Store`)."""

    def create_benchmark(
        self, record: BenchmarkRecord, arrays: Mapping[str, np.ndarray[Any, Any]]
    ) -> BenchmarkRecord:
        """Store a benchmark and its hidden targets (``y`` or ``labels``, optionally
        ``soft_labels``, ``ood`` and ``groups``) at once."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            codec.put_arrays(pipe, keys.benchmark_arrays(record.id), codec.array_fields(arrays))
            pipe.set(keys.benchmark(record.id), record.to_json())
            pipe.zadd(keys.benchmarks(), {record.id: time.time()})
            pipe.execute()

        self._call(write)
        return record

    def get_benchmark(self, bench_id: str) -> BenchmarkRecord | None:
        raw = self._call(lambda: self.client.get(keys.benchmark(bench_id)))
        return None if raw is None else BenchmarkRecord.from_json(raw)

    def list_benchmarks(self) -> list[BenchmarkRecord]:
        """Every benchmark, oldest first."""

        def read() -> list[BenchmarkRecord]:
            ids = [decode(i) for i in self.client.zrange(keys.benchmarks(), 0, -1)]
            if not ids:
                return []
            raws = self.client.mget([keys.benchmark(i) for i in ids])
            return [BenchmarkRecord.from_json(r) for r in raws if r is not None]

        return self._call(read)

    def update_benchmark(self, bench_id: str, changes: Mapping[str, Any]) -> BenchmarkRecord | None:
        """Replace the given metadata fields (never the targets); None when unknown."""

        def write() -> BenchmarkRecord | None:
            key = keys.benchmark(bench_id)
            while True:
                pipe: Any
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(key)
                        raw = pipe.get(key)
                        if raw is None:
                            return None
                        record = dataclasses.replace(
                            BenchmarkRecord.from_json(raw), **changes, updated_at=now_iso()
                        )
                        pipe.multi()
                        pipe.set(key, record.to_json())
                        pipe.execute()
                        return record
                    except redis.WatchError:
                        continue

        return self._call(write)

    def delete_benchmark(self, bench_id: str) -> bool:
        """Remove a benchmark, its targets and its quota counters (its submissions stay)."""

        def write() -> bool:
            if not self.client.exists(keys.benchmark(bench_id)):
                return False
            quota_keys = list(self.client.scan_iter(match=keys.quota(bench_id, "*"), count=1000))
            quota_keys += list(
                self.client.scan_iter(match=keys.leaderboard_pattern(bench_id), count=1000)
            )
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.benchmark(bench_id), keys.benchmark_arrays(bench_id), *quota_keys)
            pipe.zrem(keys.benchmarks(), bench_id)
            pipe.execute()
            return True

        return self._call(write)

    def load_benchmark_arrays(self, bench_id: str) -> dict[str, np.ndarray[Any, Any]] | None:
        """The hidden targets of a benchmark (for the worker only; no route returns them)."""
        return self._call(lambda: codec.read_arrays(self.client, keys.benchmark_arrays(bench_id)))
