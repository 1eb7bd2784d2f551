"""glibc's thresholds set by :func:`uqcore._memory.keep_freed_heap`: temporaries of a few
hundred kB come from freed heap memory instead of fresh pages, in a process of its own."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt's thresholds are glibc's",
)

#: A fresh process: evaluate (or not) once, then allocate and free arrays of 10^5 float64 as
#: metrics do (several alive at once), and print the minor page faults of that loop.
_PROBE = """
import resource, sys
import numpy as np
from uqcore import evaluate, predictions as P
from uqcore._memory import keep_freed_heap
rng = np.random.default_rng(0)
mu, y = rng.standard_normal(100_000), rng.standard_normal(100_000)
evaluate(P.Gaussian(mu, np.ones_like(mu)), y, metrics=["crps", "nll"])
x = rng.standard_normal(100_000)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    a = x * 2.0
    b = np.exp(-0.5 * a * a)
    c = a + b
    del a, b, c
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(keep_freed_heap(), after - before)
"""


def _probe(**env: str) -> tuple[bool, int]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("UQCORE_MALLOC_TUNING", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")
    }
    out = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    return out[0] == "True", int(out[1])


def test_freed_temporaries_are_reused_without_page_faults() -> None:
    kept, faults = _probe()
    assert kept
    # 50 rounds of four 800 kB temporaries: 200 pages each if every one were fresh
    assert faults < 200, faults


def test_the_default_thresholds_fault_every_temporary() -> None:
    """The same loop with the thresholds left alone (the reason for the setting)."""
    kept, faults = _probe(UQCORE_MALLOC_TUNING="0")
    assert not kept
    assert faults > 50 * 200, faults


def test_the_process_own_threshold_is_respected() -> None:
    """A threshold set through glibc's environment is the process's choice: left alone."""
    kept, _ = _probe(MALLOC_TRIM_THRESHOLD_=str(1 << 20))
    assert not kept
