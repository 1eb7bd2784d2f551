"""The Celery configuration shared by the producer (the API) and the workers.

Choices, and why:

- ``task_acks_late`` + ``task_reject_on_worker_lost``: a message is acknowledged only after the
  task returns, and a worker child that dies re-queues it; tasks are idempotent (keyed by the
  submission id, see :mod:`worker.execution`), so running one twice is harmless.
- ``worker_prefetch_multiplier = 1``: a worker holds one job at a time, so a long job does not
  strand queued ones behind it.
- The Redis transport's ``visibility_timeout`` (after which an unacknowledged message is
  delivered again) must exceed the hard time limit, else a long job runs twice; it is set in
  ``broker_transport_options`` and in ``result_backend_transport_options`` (both places the
  Redis transport reads it), and :func:`make_celery` refuses a configuration that breaks the
  rule. A worker that vanished is detected sooner, by the job heartbeat
  (:func:`service.jobs.reap`).
- No Celery result backend: results are written by the task to the store.
- Producers publish without Celery's retry loop and with short socket timeouts, so that a
  submission fails within ``enqueue_timeout_s`` when Redis is down (the API answers 503).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from celery import Celery

from service.settings import Settings

__all__ = [
    "BOOTSTRAP_PART_TASK_NAME",
    "COMPARE_TASK_NAME",
    "DELIVER_TASK_NAME",
    "PLOT_TASK_NAME",
    "QUEUES",
    "RANKS_TASK_NAME",
    "TASK_NAME",
    "celery_conf",
    "make_celery",
    "producer",
]

#: The one task of the service: evaluate a stored submission (argument: its id).
TASK_NAME = "uqeval.evaluate"
#: The rank intervals of a leaderboard: ``uqeval.leaderboard_ranks(bench_id, metric, rule)``.
RANKS_TASK_NAME = "uqeval.leaderboard_ranks"
#: A comparison of submissions: ``uqeval.compare(comparison_id)``.
COMPARE_TASK_NAME = "uqeval.compare"
#: Draw one plot and store its bytes: ``uqeval.render_plot(scope, ident, name, format, digest)``.
PLOT_TASK_NAME = "uqeval.render_plot"
#: Parts of a job's bootstrap, computed by idle workers: ``uqeval.bootstrap_part(sub_id, token)``
#: (published by the job on its own queue, see :mod:`worker.fanout`).
BOOTSTRAP_PART_TASK_NAME = "uqeval.bootstrap_part"
#: One attempt of a webhook delivery: ``uqeval.deliver_webhook(delivery_id)``.
DELIVER_TASK_NAME = "uqeval.deliver_webhook"
QUEUES: tuple[str, ...] = ("cpu", "gpu")


def celery_conf(settings: Settings) -> dict[str, Any]:
    """The Celery settings derived from ``settings`` (see the module docstring)."""
    if settings.visibility_timeout_s <= settings.job_hard_time_limit_s:
        raise ValueError(
            "visibility_timeout_s must exceed job_hard_time_limit_s; found "
            f"{settings.visibility_timeout_s} <= {settings.job_hard_time_limit_s}"
        )
    if settings.job_soft_time_limit_s >= settings.job_hard_time_limit_s:
        raise ValueError(
            "job_soft_time_limit_s must be below job_hard_time_limit_s; found "
            f"{settings.job_soft_time_limit_s} >= {settings.job_hard_time_limit_s}"
        )
    timeout = min(settings.redis_socket_timeout_s, settings.enqueue_timeout_s)
    transport = {
        "visibility_timeout": settings.visibility_timeout_s,
        "socket_timeout": max(timeout, 2.0),  # above the consumer's 1 s BRPOP
        "socket_connect_timeout": min(timeout, 1.0),
        "max_retries": 0,
    }
    return {
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "task_time_limit": settings.job_hard_time_limit_s,
        "task_soft_time_limit": settings.job_soft_time_limit_s,
        "broker_transport_options": transport,
        "result_backend_transport_options": {"visibility_timeout": settings.visibility_timeout_s},
        "task_ignore_result": True,
        "task_store_errors_even_if_ignored": False,
        "task_default_queue": "cpu",
        # Queues "cpu" and "gpu" are declared on first use (direct exchange, key = name).
        "task_create_missing_queues": True,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_publish_retry": False,
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": min(timeout, 1.0),
        "worker_cancel_long_running_tasks_on_connection_loss": False,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "enable_utc": True,
    }


def make_celery(settings: Settings, include: Sequence[str] = ()) -> Celery:
    """A Celery app on ``settings.redis_url`` (broker) with :func:`celery_conf`."""
    if not settings.redis_url:
        raise ValueError("REDIS_URL must be set for Celery (uqeval serve sets it for you)")
    app = Celery("uqeval", broker=settings.redis_url, include=list(include))
    app.conf.update(celery_conf(settings))
    return app


_apps: dict[str, Celery] = {}
_apps_lock = threading.Lock()


def producer(settings: Settings) -> Celery:
    """The process's Celery app for publishing on ``settings.redis_url`` (created once)."""
    url = settings.redis_url or ""
    with _apps_lock:
        app = _apps.get(url)
        if app is None:
            app = _apps[url] = make_celery(settings)
        return app
