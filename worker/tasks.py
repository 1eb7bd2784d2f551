"""The Celery tasks of the service: ``uqeval.evaluate(submission_id)``,
``uqeval.leaderboard_ranks(bench_id, metric, rule)``, ``uqeval.compare(comparison_id)``,
``uqeval.render_plot(scope, ident, name, format, digest)``,
``uqeval.bootstrap_part(submission_id, token)`` (parts of a split bootstrap) and
``uqeval.deliver_webhook(delivery_id)`` (a webhook delivery's next attempt).

Like a web view, a task only receives ids; :mod:`worker.execution` claims the job for this
delivery (the Celery task id), keeps its heartbeat, re-reads the data, computes and stores the
outcome, idempotently. Transient Redis errors are retried with exponential backoff and jitter
(at most 5 times); everything else ends the job with a reason.
"""

from __future__ import annotations

from typing import Any

from service import notifications
from service.celery_config import (
    BOOTSTRAP_PART_TASK_NAME,
    COMPARE_TASK_NAME,
    DELIVER_TASK_NAME,
    PLOT_TASK_NAME,
    RANKS_TASK_NAME,
    TASK_NAME,
)
from service.notifications.delivery import attempt as delivery_attempt
from service.store import StoreUnavailable
from service.suites import SUITE_TASK_NAME
from worker import runtime
from worker.celery_app import app
from worker.execution import run_comparison_job, run_job, run_rank_job
from worker.fanout import run_part_job
from worker.plots import render_plot as draw_plot
from worker.suites import compute_suite_intervals

#: The options every task shares: late acknowledgement, re-queued when its worker process dies
#: (also the app-wide defaults in :func:`service.celery_config.celery_conf`, repeated here so a
#: task keeps them whatever app it is bound to), and up to 5 retries with exponential backoff
#: and jitter on transient Redis errors.
TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": (StoreUnavailable,),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 5,
}


@app.task(name=TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def evaluate(self: Any, submission_id: str) -> str:
    """Evaluate the stored submission ``submission_id`` (see :func:`run_job`)."""
    outcome = run_job(
        runtime.store(),
        runtime.settings(),
        runtime.backend(),
        submission_id,
        token=str(self.request.id),
        worker_name=str(self.request.hostname or "worker"),
        memory_budget=runtime.memory_budget(),
        enqueue_parts=_enqueue_parts,
    )
    # Every outcome: a claim refused after the last attempt also ends the job (the hook
    # does nothing for a job still running, or one whose end was already notified).
    notifications.ended(runtime.store(), runtime.settings(), "submission", submission_id)
    return outcome


def _enqueue_parts(sub_id: str, token: str, count: int, queue: str) -> None:
    """Publish ``count`` part tasks of the split of job delivery ``token`` on ``queue``."""
    for _ in range(count):
        app.send_task(
            BOOTSTRAP_PART_TASK_NAME,
            args=[sub_id, token],
            queue=queue,
            routing_key=queue,
            retry=False,
            ignore_result=True,
        )


#: A part task is best effort: the job computes every part nobody else holds, so a part task
#: lost with its worker is neither re-queued nor retried.
PART_OPTIONS: dict[str, Any] = {"bind": True, "acks_late": False, "max_retries": 0}


@app.task(name=BOOTSTRAP_PART_TASK_NAME, **PART_OPTIONS)  # type: ignore[untyped-decorator]
def bootstrap_part(self: Any, sub_id: str, token: str) -> str:
    """Compute parts of the split bootstrap of job ``sub_id`` (see :mod:`worker.fanout`)."""
    return run_part_job(
        runtime.store(),
        runtime.settings(),
        runtime.backend(),
        sub_id,
        token,
        worker_name=str(self.request.hostname or "worker"),
        memory_budget=runtime.memory_budget(),
    )


@app.task(name=RANKS_TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def leaderboard_ranks(self: Any, bench_id: str, metric: str, rule: str) -> int:
    """Compute the rank intervals of one leaderboard (see :func:`run_rank_job`); returns the
    board version described."""
    return run_rank_job(
        runtime.store(), runtime.settings(), bench_id, metric, rule, token=str(self.request.id)
    )


@app.task(name=COMPARE_TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def compare_submissions(self: Any, comparison_id: str) -> str:
    """Run comparison ``comparison_id`` (see :func:`run_comparison_job`)."""
    outcome = run_comparison_job(
        runtime.store(), runtime.settings(), comparison_id, token=str(self.request.id)
    )
    notifications.ended(runtime.store(), runtime.settings(), "comparison", comparison_id)
    return outcome


@app.task(name=PLOT_TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def render_plot(self: Any, scope: str, ident: str, name: str, fmt: str, digest: str = "") -> str:
    """Draw one plot and store its bytes (see :func:`worker.plots.render_plot`)."""
    return draw_plot(runtime.store(), runtime.settings(), scope, ident, name, fmt, digest)


@app.task(name=DELIVER_TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def deliver_webhook(self: Any, delivery_id: str) -> str:
    """Make the next attempt of one webhook delivery (see
    :func:`service.notifications.delivery.attempt`)."""
    return delivery_attempt(runtime.store(), runtime.settings(), delivery_id)


# --- benchmark suites ----------------------------------------------------------------------


@app.task(name=SUITE_TASK_NAME, **TASK_OPTIONS)  # type: ignore[untyped-decorator]
def suite_intervals(self: Any, suite_id: str) -> int:
    """Compute the intervals of a suite's leaderboard (see
    :func:`worker.suites.compute_suite_intervals`); returns the number of views computed."""
    doc = compute_suite_intervals(runtime.store(), suite_id)
    return -1 if doc is None else len(doc.get("views") or {})
