"""The helper thread of the block paths: per-resample work that runs in numpy without the GIL
(the random groups of adversarial group calibration) overlaps the block's other metrics."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from uqcore.stability.blocks import tuning

__all__ = ["Deferred", "deferred"]

Floats = np.ndarray[Any, np.dtype[np.float64]]

_EXECUTOR: tuple[int, ThreadPoolExecutor] | None = None


def _executor() -> ThreadPoolExecutor:
    """One helper thread per process (a forked child starts its own)."""
    global _EXECUTOR
    pid = os.getpid()
    if _EXECUTOR is None or _EXECUTOR[0] != pid:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uqcore-stability")
        _EXECUTOR = (pid, pool)
    return _EXECUTOR[1]


class Deferred:
    """The values of a block that are being computed by the helper thread."""

    def __init__(self, jobs: list[Future[float]]) -> None:
        self.jobs = jobs

    def result(self) -> Floats:
        """Wait for the values (re-raising an error of the computation)."""
        return np.array([job.result() for job in self.jobs], dtype=np.float64)


def deferred(jobs: list[Callable[[], float]]) -> Floats | Deferred:
    """Run the per-resample ``jobs`` in the helper thread (:data:`tuning.BACKGROUND`), or now."""
    if not tuning.BACKGROUND:
        return np.array([job() for job in jobs], dtype=np.float64)
    pool = _executor()
    return Deferred([pool.submit(job) for job in jobs])
