"""Short forms of the reliability measurements (``benchmarks/reliability.py``), with hard
assertions: workers SIGKILLed at random (nothing lost, duplicated or wrong), Redis SIGKILLed
(nothing accepted is lost with AOF; the control without persistence shows the measurement
sees loss), SIGTERM of a worker and of the API, the API killed mid-upload (nothing partial
visible), and a soak smoke (keys back to baseline after retention, no stuck job).

Each test runs one part of :mod:`benchmarks._reliability` at a small size on a stack of its
own (Redis, workers, API: separate processes on 127.0.0.1, :mod:`benchmarks._chaos`). The
parts stop their stack whatever happens; :func:`reaped` also kills the process group of any
child of this process that a test left behind, and fails the test for it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import _chaos
from benchmarks import _reliability as R
from benchmarks._chaos import alive, children
from tests import zygote

pytestmark = pytest.mark.slow


def started() -> list[int]:
    """The processes this test process started: its children, where the pre-warmed
    interpreter's place is taken by the children it forked for the tests (``tests.zygote``)."""
    own = children(os.getpid())
    prewarmed = zygote.shared()
    if prewarmed is None:
        return own
    return [p for p in own if p != prewarmed.proc.pid] + children(prewarmed.proc.pid)


@pytest.fixture(autouse=True)
def reaped(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No process started by the test may outlive it (the session's own children stay). The
    stacks' workers and API fork from the pre-warmed interpreter (``tests.zygote``); the
    measurements in ``benchmarks/`` start fresh ones."""
    monkeypatch.setattr(_chaos, "spawn", zygote.popen)
    before = set(started())
    yield
    left = [p for p in started() if p not in before and alive(p)]
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left behind: {left}"


def assert_exactly_once(r: dict[str, Any]) -> None:
    """Every accepted submission ended, succeeded once, with uqcore's values."""
    assert r["refused"] == 0, r["refusals"]
    assert r["accepted"] == r["submitted"]
    assert r["lost"] == 0, (r["missing_attempts"], r["stuck_detail"])
    assert r["duplicated"] == 0, (r["written_twice"], r["idem_two_ids"])
    assert r["extra_records"] == 0
    assert r["wrong"] == 0, r["wrong_detail"]
    assert r["failed"] == 0, r["failed_reasons"]
    assert r["succeeded"] == r["accepted"]
    # The job counter counts each success once; no task run wrote a second success.
    assert r["stats_succeeded"] == r["succeeded"]
    assert r["log_succeeded_runs"] <= r["succeeded"]
    assert r["survivors"] == []


def test_workers_sigkilled_lose_duplicate_and_corrupt_nothing(tmp_path: Path) -> None:
    """(a) 30 submissions from 4 clients; a pool child, a whole worker and another pool
    child, each holding a running job, SIGKILLed (the last may find every job ended on a
    busy machine: the killer stops once all jobs have ended)."""
    r = R.chaos(
        tmp_path,
        count=30,
        kills=3,
        interval_s=(0.2, 0.8),
        bootstrap=2000,
        plan=["child", "worker", "child"],
        wait_s=240.0,
    )
    assert r["killer_error"] is None
    assert r["kills_child"] >= 1 and r["kills_worker"] == 1
    assert r["kills_busy"] == r["kills_child"] + r["kills_worker"]
    assert_exactly_once(r)


def test_redis_sigkilled_loses_nothing_accepted_with_aof(tmp_path: Path) -> None:
    """(b) Redis SIGKILLed under load and restarted from its AOF: every accepted submission
    is there and ends once; the API answered 503 meanwhile."""
    r = R.redis_kill(tmp_path, count=30, kills=1, down_s=2.0, rate=6.0, wait_s=240.0)
    assert_exactly_once(r)
    assert r["readyz_503_s"] > 0.5


def test_redis_sigkilled_without_persistence_is_seen_to_lose(tmp_path: Path) -> None:
    """(b) control: the same with persistence off; the accounting must see the loss (else
    the test above could not fail)."""
    r = R.redis_kill(
        tmp_path, appendonly=False, count=30, kills=1, down_s=2.0, rate=6.0, wait_s=30.0
    )
    assert r["lost"] > 0
    assert r["survivors"] == []


def test_sigterm_of_worker_and_api_under_load(tmp_path: Path) -> None:
    """(c) SIGTERM to a worker holding a job and then to the API, both restarted."""
    r = R.sigterm(tmp_path, count=30, rate=6.0, bootstrap=1000, wait_s=240.0)
    assert r["worker_jobs_held"] >= 1
    assert r["worker_exit_s"] < 120 and r["api_exit_s"] < 30
    assert_exactly_once(r)


def test_api_killed_or_client_gone_mid_upload_leaves_nothing(tmp_path: Path) -> None:
    """(d) Half a body, then the API SIGKILLed or the client gone: nothing visible, then or
    after the reaper's window; the interrupted Idempotency-Key was never bound."""
    r = R.upload(tmp_path, n=250_000)
    before = r["before"]
    assert len(r["cases"]) == 4
    for case in r["cases"]:
        seen = {k: case[k] for k in before}
        assert seen == before, case
    assert r["after"] == before
    assert r["replay"] == {"status": 202, "replayed": False, "final": "succeeded"}
    assert r["survivors"] == []


def test_soak_smoke_keys_back_to_baseline_and_no_stuck_job(tmp_path: Path) -> None:
    """(e) 15 s at 1.25 submissions/s, raw arrays kept 4 s: every job ends within the bound,
    the arrays and rate counters expire, each submission keeps its record, result and
    curves, and the API does not grow (the soak itself, at its full length, is
    ``benchmarks/reliability.py``)."""
    r = R.soak(tmp_path, minutes=0.25, rate=1.25, retention_s=4, bound_s=30.0)
    n = r["count"]
    assert r["lost"] == 0 and r["failed"] == 0 and r["wrong"] == 0 and r["duplicated"] == 0
    assert r["over_bound"] == 0, r["job_s_max"]
    after, before = r["census_after"], r["census_before"]
    assert r["census_end"].get("sub:arrays", 0) > 0  # they existed ...
    for gone in ("sub:arrays", "sub:hb", "rate"):
        assert after.get(gone, 0) == 0, (gone, after)  # ... and expired
    # (the kept curves are in the blob store, no longer in Redis)
    for kept in ("sub", "sub:result", "idem"):
        assert after.get(kept, 0) == n, (kept, after)
    assert r["idem_without_ttl"] == 0
    assert after.get("celery", 0) == before.get("celery", 0)
    # generous: a leak of the kind the soak looks for grows with every request
    assert r["rss_growth"]["api"] < 50 * 2**20
    assert r["survivors"] == []
