"""The worker registry and the job counters: which workers are live, and /metrics' numbers."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from service import keys
from service.store.base import StoreBase
from service.store.records import decode

__all__ = ["WorkerStore"]


class WorkerStore(StoreBase):
    """Live workers and job statistics (a part of :class:`service.store.Store`)."""

    def register_worker(self, name: str, info: Mapping[str, Any], ttl_s: float) -> None:
        """Announce a live worker (called periodically); it counts as live for ``ttl_s``."""

        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.set(keys.worker(name), json.dumps(dict(info)), px=max(int(ttl_s * 1000), 1))
            pipe.zadd(keys.workers(), {name: time.time() + ttl_s})
            pipe.execute()

        self._call(write)

    def unregister_worker(self, name: str) -> None:
        def write() -> None:
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(keys.worker(name))
            pipe.zrem(keys.workers(), name)
            pipe.execute()

        self._call(write)

    def live_workers(self) -> list[str]:
        """Names of workers seen within their announced time-to-live."""

        def read() -> list[str]:
            now = time.time()
            self.client.zremrangebyscore(keys.workers(), "-inf", now)
            return [decode(w) for w in self.client.zrange(keys.workers(), 0, -1)]

        return self._call(read)

    def worker_info(self, name: str) -> dict[str, Any] | None:
        raw = self._call(lambda: self.client.get(keys.worker(name)))
        return None if raw is None else json.loads(raw)

    def gpu_worker_alive(self) -> bool:
        """True when a live worker consumes the ``gpu`` queue."""
        for name in self.live_workers():
            info = self.worker_info(name)
            if info is not None and "gpu" in info.get("queues", []):
                return True
        return False

    def job_stats(self) -> dict[str, Any]:
        """Counters for /metrics.

        ``{"succeeded", "failed", "cancelled", "requeued": int, "durations": {queue:
        {"buckets": [[le, cumulative count], ...] (le = +inf last), "sum": s, "count": n}}}``.
        """

        def read() -> dict[str, Any]:
            pipe = self.client.pipeline(transaction=False)
            pipe.hgetall(keys.stats())
            for queue in keys.QUEUES:
                pipe.hgetall(keys.durations(queue))
            counters, *hists = pipe.execute()
            c = {decode(k): int(v) for k, v in counters.items()}
            out: dict[str, Any] = {
                name: c.get(name, 0) for name in ("succeeded", "failed", "cancelled", "requeued")
            }
            durations: dict[str, Any] = {}
            for queue, raw in zip(keys.QUEUES, hists, strict=True):
                h = {decode(k): decode(v) for k, v in raw.items()}
                buckets: list[list[float]] = [
                    [b, int(h.get(f"le:{b!r}", 0))] for b in keys.DURATION_BUCKETS
                ]
                buckets.append([math.inf, int(h.get("le:+Inf", 0))])
                durations[queue] = {
                    "buckets": buckets,
                    "sum": float(h.get("sum", 0.0)),
                    "count": int(h.get("count", 0)),
                }
            out["durations"] = durations
            return out

        return self._call(read)
