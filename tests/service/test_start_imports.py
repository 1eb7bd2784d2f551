"""What a process of the service loads when it starts: the API and ``import uqcore`` leave
scipy.stats and scipy.optimize (about a second of CPU at every start of an API process) to the
first computation that needs them, and a worker loads them before it forks its pool, so that
its pool processes inherit them rather than each importing them at its first job. Each in a
fresh interpreter, as the process starts."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.stack import ROOT

LAZY = ("scipy.stats", "scipy.optimize")


def _loaded(code: str, **env: str) -> list[str]:
    """The modules of :data:`LAZY` loaded after ``code`` runs in a fresh interpreter."""
    program = f"{code}\nimport sys\nprint(' '.join(m for m in {LAZY!r} if m in sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", program],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_uqcore_and_the_api_start_without_scipy_stats() -> None:
    # (the API imports uqcore, every metric of it, and the service)
    assert _loaded("import service.api.app") == []


def test_a_worker_loads_them_before_its_pool_forks() -> None:
    got = _loaded(
        "from worker.runtime import warm_kernels\nwarm_kernels()",
        REDIS_URL="redis://127.0.0.1:1/0",
    )
    assert got == list(LAZY)
