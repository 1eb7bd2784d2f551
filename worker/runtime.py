"""Per-process worker state: settings, store, backend, and the housekeeping thread.

The housekeeping thread runs in the worker's main process from ``worker_ready`` to
``worker_shutdown``: every ``heartbeat_interval_s`` it announces the worker as live (with its
queues and backend, for ``/readyz`` and for routing large batches to ``gpu``) and runs one
pass of :func:`service.jobs.reap`, which re-queues jobs whose worker vanished.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from functools import lru_cache

from service.jobs import reap
from service.memory import job_memory_budget
from service.settings import Settings, get_settings
from service.store import Store, StoreUnavailable
from worker.backend import Backend, select_backend
from worker.execution import worker_info

__all__ = ["Housekeeping", "backend", "memory_budget", "set_concurrency", "settings", "store"]

log = logging.getLogger(__name__)


def warm_blas() -> None:
    """Make BLAS allocate its buffers now, before any job runs under its memory limit
    (:func:`service.memory.enforced`): OpenBLAS allocates them on first use and, refused by
    the limit, hangs instead of raising MemoryError. A forked pool process inherits them."""
    import numpy as np

    a = np.ones((512, 512))
    for _ in range(2):
        a @ a  # the products allocate the buffers
        a @ a[0]


def warm_kernels() -> None:
    """Compile uqcore's numba kernels (or load them from numba's cache) now, before any job
    runs under its memory limit: LLVM's compiler needs tens of MB and may abort the process
    rather than raise when refused. A forked pool process inherits the compiled code, and the
    parts of scipy that uqcore imports at their first use (scipy.stats, scipy.optimize), loaded
    here once rather than in each pool process."""
    import scipy.optimize  # noqa: F401

    from uqcore._backend import numpy_sorts_values_faster
    from uqcore._binomial import _scipy_routines
    from uqcore._compiled import kernels
    from uqcore._kolmogorov import _scipy_kolmogn

    kernels()
    numpy_sorts_values_faster()  # which value sort is the faster on this CPU, timed once
    _scipy_routines()
    _scipy_kolmogn()


def settings() -> Settings:
    return get_settings()


@lru_cache(maxsize=1)
def _store(pid: int) -> Store:
    s = settings()
    if not s.redis_url:
        raise RuntimeError("REDIS_URL must be set for the worker")
    return Store.from_url(s.redis_url, s)


def store() -> Store:
    """The process's store (a new connection pool after a fork)."""
    return _store(os.getpid())


#: The worker's concurrency as Celery runs it (the command line may override the setting).
_concurrency: list[int] = []


def set_concurrency(concurrency: int) -> None:
    """Record the worker's concurrency (before its pool starts: its children inherit it)."""
    _concurrency[:] = [max(1, int(concurrency))]


def memory_budget() -> int:
    """The memory one job of this worker may use (bytes): the setting, or derived from the
    machine and the worker's concurrency (:func:`service.memory.job_memory_budget`)."""
    return job_memory_budget(settings(), _concurrency[0] if _concurrency else None)


@lru_cache(maxsize=1)
def backend() -> Backend:
    """The backend chosen by ``UQEVAL_BACKEND`` (once per process)."""
    return select_backend(settings().backend)


class Housekeeping(threading.Thread):
    """Announces the worker and reaps orphaned jobs, every ``heartbeat_interval_s``; sweeps
    the blob store every ``blob_sweep_interval_s`` (see :mod:`service.store.blobsweep`)."""

    def __init__(self, name: str, queues: list[str]) -> None:
        super().__init__(name="uqeval-housekeeping", daemon=True)
        self.worker_name = name
        self.queues = queues
        self.stopped = threading.Event()

    def tick(self) -> None:
        s = settings()
        st = store()
        try:
            st.register_worker(
                self.worker_name,
                worker_info(backend(), self.queues, os.getpid()),
                s.heartbeat_ttl_s,
            )
            reap(st, s)
            # One worker at a time (a lock in Redis) deletes the blobs whose arrays are gone.
            st.sweep_blobs_if_due(s.blob_sweep_interval_s)
        except StoreUnavailable as exc:
            log.warning("housekeeping: %s", exc)
        except Exception:  # the thread must survive anything (e.g. a broker hiccup)
            log.exception("housekeeping failed")

    def run(self) -> None:
        self.tick()
        while not self.stopped.wait(settings().heartbeat_interval_s):
            self.tick()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)
        with contextlib.suppress(StoreUnavailable):
            store().unregister_worker(self.worker_name)
