"""Prometheus metrics of the API process: requests, queue depths, job counters and durations.

Request counts and latencies are recorded by :class:`RequestMetrics`, a plain ASGI middleware
(it does not buffer bodies), labelled by the route *template* (``/v1/submissions/{sub_id}``), so
ids never become label values. Queue depths, live workers and the job counters/duration
histograms that workers keep in Redis are read at scrape time by :class:`StoreCollector`.
Each app has its own registry, so several apps can live in one process (tests; one API
process).

Several API processes (``uqeval serve --api-workers N``, N > 1): ``PROMETHEUS_MULTIPROC_DIR``
names a directory, fresh for the run, where every process's request metrics are kept
(prometheus_client's multiprocess mode, chosen when the variable is set before it is
imported); a scrape, served by any of the processes, sums them all
(``MultiProcessCollector``), so the counts and the latency histogram are those of the whole
API whichever process answers.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.store import Store, StoreUnavailable

#: The directory of prometheus_client's multiprocess mode when this process is one of several
#: API processes, else None: read at import, as prometheus_client reads it (the mode of its
#: metric values is fixed when it is imported).
MULTIPROCESS_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    """The registry of one app (what ``GET /metrics`` shows) and its request metrics."""

    def __init__(self) -> None:
        #: The request metrics of this app. In multiprocess mode their values live in the
        #: shared directory (one file per process) and this registry is not scraped.
        own = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "uqeval_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=own,
        )
        self.latency = Histogram(
            "uqeval_http_request_duration_seconds",
            "HTTP request duration (to the end of the response) by method and route template.",
            ["method", "route"],
            registry=own,
        )
        self.multiprocess_dir = MULTIPROCESS_DIR
        if self.multiprocess_dir is None:
            self.registry = own
        else:
            # Every API process's request metrics, summed at scrape time.
            self.registry = CollectorRegistry()
            MultiProcessCollector(self.registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]

    def watch_store(self, get_store: Callable[[], Store | None]) -> None:
        self.registry.register(StoreCollector(get_store))

    def process_exit(self) -> None:
        """This process stops serving (multiprocess mode: its live gauges are dropped; its
        counts stay in the sums, as Prometheus counters must)."""
        if self.multiprocess_dir is not None:
            mark_process_dead(os.getpid(), self.multiprocess_dir)  # type: ignore[no-untyped-call]


class RequestMetrics:
    """ASGI middleware counting requests per (method, route template, status)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)


class StoreCollector(Collector):
    """Reads queue depths, live workers and job statistics from the store at scrape time."""

    def __init__(self, get_store: Callable[[], Store | None]) -> None:
        self.get_store = get_store

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        up = GaugeMetricFamily("uqeval_store_up", "1 when Redis answered this scrape.")
        store = self.get_store()
        if store is None:
            up.add_metric([], 0)
            yield up
            return
        try:
            depths = store.queue_depths()
            running = store.running_count()
            workers = store.live_workers()
            stats = store.job_stats()
        except StoreUnavailable:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            "uqeval_queue_depth", "Queued (not yet running) jobs per queue.", labels=["queue"]
        )
        for queue, count in sorted(depths.items()):
            depth.add_metric([queue], count)
        yield depth
        yield GaugeMetricFamily("uqeval_jobs_running", "Jobs running now.", value=running)
        yield GaugeMetricFamily(
            "uqeval_workers_live", "Workers seen within their time-to-live.", value=len(workers)
        )
        jobs = CounterMetricFamily(
            "uqeval_jobs",
            "Jobs that ended (succeeded, failed, cancelled) or were re-queued after a worker loss.",
            labels=["outcome"],
        )
        for outcome in ("succeeded", "failed", "cancelled", "requeued"):
            jobs.add_metric([outcome], float(stats.get(outcome, 0)))
        yield jobs
        hist = HistogramMetricFamily(
            "uqeval_job_duration_seconds",
            "Duration of finished jobs (start to end) per queue.",
            labels=["queue"],
        )
        for queue, h in sorted((stats.get("durations") or {}).items()):
            buckets = [
                ("+Inf" if math.isinf(float(le)) else repr(float(le)), float(count))
                for le, count in h.get("buckets", [])
            ]
            if not buckets or buckets[-1][0] != "+Inf":
                buckets.append(("+Inf", float(h.get("count", 0))))
            hist.add_metric([queue], buckets, sum_value=float(h.get("sum", 0.0)))
        yield hist
