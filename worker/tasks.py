"""The Celery task of the service: ``uqeval.evaluate(submission_id)``.

Like a web view, the task only receives an id; :func:`worker.execution.run_job` re-reads the
data, computes and stores the outcome, idempotently. Transient Redis errors are retried with
exponential backoff and jitter (at most 5 times); everything else ends the job with a reason.
"""

from __future__ import annotations

from typing import Any

from service.celery_config import COMPARE_TASK_NAME, RANKS_TASK_NAME, TASK_NAME
from service.store import StoreUnavailable
from worker import runtime
from worker.celery_app import app
from worker.comparisons import run_comparison
from worker.execution import run_job
from worker.ranks import compute_ranks


@app.task(  # type: ignore[untyped-decorator]
    name=TASK_NAME,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(StoreUnavailable,),
    retry_backoff=1,
    retry_backoff_max=30,
    retry_jitter=True,
    max_retries=5,
)
def evaluate(self: Any, submission_id: str) -> str:
    """Evaluate the stored submission ``submission_id`` (see :func:`run_job`)."""
    return run_job(
        runtime.store(),
        runtime.settings(),
        runtime.backend(),
        submission_id,
        token=str(self.request.id),
        worker_name=str(self.request.hostname or "worker"),
    )


@app.task(  # type: ignore[untyped-decorator]
    name=RANKS_TASK_NAME,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(StoreUnavailable,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=5,
)
def leaderboard_ranks(bench_id: str, metric: str, rule: str) -> int:
    """Compute the rank intervals of one leaderboard (see :mod:`worker.ranks`); returns the
    board version described."""
    limit = runtime.settings().leaderboard_rank_limit
    doc = compute_ranks(runtime.store(), bench_id, metric, rule, limit)
    return -1 if doc is None else int(doc["version"])


@app.task(  # type: ignore[untyped-decorator]
    name=COMPARE_TASK_NAME,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(StoreUnavailable,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=5,
)
def compare_submissions(comparison_id: str) -> str:
    """Run comparison ``comparison_id`` (see :mod:`worker.comparisons`)."""
    return run_comparison(runtime.store(), comparison_id)
