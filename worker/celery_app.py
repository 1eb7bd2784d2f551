"""The worker's Celery app: ``celery -A worker.celery_app worker -Q cpu,gpu``.

Configured by :mod:`service.celery_config` from the environment (``REDIS_URL``,
``UQEVAL_*``); starts the housekeeping thread (liveness announcement + reaper) when the worker
is ready and stops it, unregistering the worker, at shutdown.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_init, worker_ready, worker_shutdown

from service.celery_config import QUEUES, make_celery
from service.settings import get_settings

app = make_celery(get_settings(), include=["worker.tasks"])

_housekeeping: list[Any] = []


def _consumed_queues(sender: Any) -> list[str]:
    try:
        return sorted(q.name for q in sender.task_consumer.queues)
    except AttributeError:
        return list(QUEUES)


@worker_init.connect  # type: ignore[untyped-decorator]
def _warm_blas(**_: Any) -> None:
    from worker.runtime import warm_blas

    warm_blas()  # before any job's memory limit, and before a pool forks


@worker_init.connect  # type: ignore[untyped-decorator]
def _warm_kernels(**_: Any) -> None:
    from worker.runtime import warm_kernels

    warm_kernels()  # as BLAS: compiled before any job's memory limit and before a fork


@worker_init.connect  # type: ignore[untyped-decorator]
def _record_concurrency(sender: Any = None, **_: Any) -> None:
    from worker.runtime import set_concurrency

    concurrency = getattr(sender, "concurrency", None)
    if isinstance(concurrency, int):
        set_concurrency(concurrency)  # per-job memory budget (derived: divided by it)


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start_housekeeping(sender: Any = None, **_: Any) -> None:
    from worker.runtime import Housekeeping, backend

    backend()  # choose (and log) the backend before the first job
    thread = Housekeeping(str(sender.hostname), _consumed_queues(sender))
    thread.start()
    _housekeeping.append(thread)


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_housekeeping(**_: Any) -> None:
    while _housekeeping:
        _housekeeping.pop().stop()
