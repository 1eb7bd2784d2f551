"""The Celery task of the service: ``uqeval.evaluate(submission_id)``.

Like a web view, the task only receives an id; :func:`worker.execution.run_job` re-reads the
data, computes and stores the outcome, idempotently. Transient Redis errors are retried with
exponential backoff and jitter (at most 5 times); everything else ends the job with a reason.
"""

from __future__ import annotations

from typing import Any

from service.celery_config import TASK_NAME
from service.store import StoreUnavailable
from worker import runtime
from worker.celery_app import app
from worker.execution import run_job


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
