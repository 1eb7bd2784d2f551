"""A Celery worker whose memory estimates are scaled down: ``python -m tests.worker.lowball_worker
<celery worker arguments>``.

A job then passes the worker's check before it runs although it needs more memory than its
budget, as after a wrong estimate: what the budget's enforcement during the job must catch.
The scale is ``UQEVAL_TEST_ESTIMATE_SCALE`` (default 0.001). Test use only.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import worker.execution
from service.memory import JobEstimate, estimate_job


def _scaled(*args: Any, **kwargs: Any) -> JobEstimate:
    scale = float(os.environ.get("UQEVAL_TEST_ESTIMATE_SCALE", "0.001"))
    real = estimate_job(*args, **kwargs)
    return dataclasses.replace(real, parts={k: int(v * scale) for k, v in real.parts.items()})


if __name__ == "__main__":
    worker.execution.estimate_job = _scaled  # type: ignore[assignment]
    from celery.__main__ import main

    sys.argv = ["celery", *sys.argv[1:]]
    main()
