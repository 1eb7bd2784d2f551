"""One helper thread per process for work that runs in numpy without the GIL and needs nothing
but its own inputs (the random groups of adversarial group calibration, see
:attr:`uqcore.registry.MetricSpec.start`): ``evaluate`` computes the other metrics meanwhile,
on the machine's other core. The values are the same with or without it; ``UQCORE_BACKGROUND=0``
runs such work at once, in the calling thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["ENABLED", "submit"]

T = TypeVar("T")

#: Whether :func:`submit` uses the helper thread (``UQCORE_BACKGROUND``, default on).
ENABLED = os.environ.get("UQCORE_BACKGROUND", "1") != "0"

_POOL: list[tuple[int, ThreadPoolExecutor]] = []


def _pool() -> ThreadPoolExecutor:
    """The helper thread of this process (a forked child starts its own)."""
    pid = os.getpid()
    if not _POOL or _POOL[0][0] != pid:
        _POOL[:] = [(pid, ThreadPoolExecutor(max_workers=1, thread_name_prefix="uqcore-bg"))]
    return _POOL[0][1]


def submit(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Callable[[], T]:
    """Start ``fn(*args, **kwargs)`` in the helper thread (or run it now when
    :data:`ENABLED` is off); the returned callable waits for its result and re-raises its
    error."""
    if not ENABLED:
        value = fn(*args, **kwargs)
        return lambda: value
    return _pool().submit(fn, *args, **kwargs).result
