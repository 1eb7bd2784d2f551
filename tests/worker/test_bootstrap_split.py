"""A job's bootstrap split among real Celery workers: bit-identical to one worker, shared by
two, surviving a killed part task, and computed whole by a lone worker."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from service import keys
from service.analyses import Analyses
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays
from tests.stack import Db, WorkerProcess, clear_store, db_url
from tests.worker.test_worker import submit, wait_for
from uqcore.stability import bootstrap_block_size
from worker import fanout
from worker.backend import Backend
from worker.evaluation import compute
from worker.execution import run_job
from worker.fanout import FreeCores, Split, SplitBoard, plan_parts, run_part_job

NUMPY = Backend("numpy", "cpu", False)
WAIT_S = 180.0  # generous: the machine may be busy; no assertion relies on speed


def _own(settings: Settings, **update: Any) -> Settings:
    """Settings on a database of its own (the session worker cannot take these jobs), with
    every bootstrap split, and part tasks that take parts whatever the machine's load (the
    test workers share its cores with the job; the free-core check has tests of its own)."""
    assert settings.redis_url is not None
    url = db_url(settings.redis_url, Db.SPLIT)
    base = {"redis_url": url, "split_bootstrap_min_work": 1, "split_bootstrap_min_idle_cores": 0}
    return settings.model_copy(update={**base, **update})


@pytest.fixture
def split_store(settings: Settings) -> Iterator[tuple[Settings, Store]]:
    own = _own(settings)
    store = Store.from_url(str(own.redis_url), own)
    store.client.flushdb()
    try:
        yield own, store
    finally:
        clear_store(store)
        store.client.flushdb()
        store.close()


def _reference(arrays: dict[str, np.ndarray], analyses: dict[str, Any]) -> dict[str, Any]:
    """The metrics of the result computed in this process by one unsplit bootstrap."""
    doc = compute(
        "gaussian",
        arrays,
        Analyses.model_validate(analyses),
        backend=NUMPY,
        checkpoint=lambda _p: None,
    )
    return doc["metrics"]


def _wait(what: str, test: Any, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = test()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


# --- parts and claims ----------------------------------------------------------------------


def test_parts_are_whole_blocks_covering_every_resample() -> None:
    for n, b in [(10**6, 1000), (10**7, 1000), (2 * 10**5, 400), (10, 1000), (10**8, 7)]:
        parts = plan_parts(n, b)
        block = bootstrap_block_size(n, b)
        assert parts[0][0] == 0 and parts[-1][1] == b
        assert all(p[1] == q[0] for p, q in itertools.pairwise(parts))
        assert all(a % block == 0 for a, _ in parts)
        assert 1 <= len(parts) <= 16
        sizes = [stop - start for start, stop in parts[:-1]]
        assert not sizes or max(sizes) - min(sizes) <= block  # as even as blocks allow


def test_claims_are_exclusive_expire_and_belong_to_one_delivery(
    split_store: tuple[Settings, Store],
) -> None:
    _, store = split_store
    board = SplitBoard(store)
    board.publish("sub_a", Split("t1", ["mae"], 30, [(0, 10), (10, 20), (20, 30)]), 60)
    assert board.claim("sub_a", "t1", "alice", 3, 30.0) == 0
    assert board.claim("sub_a", "t1", "bob", 3, 0.3) == 1
    assert board.claim("sub_a", "t1", "carol", 3, 30.0) == 2
    assert board.claim("sub_a", "t1", "dave", 3, 30.0) == -1  # all held
    assert board.claim("sub_a", "t0", "dave", 3, 30.0) == -2  # another delivery's split
    # bob stops keeping his claim: it expires and part 1 is claimed again
    part = _wait("bob's claim to expire", lambda: board.claim("sub_a", "t1", "dave", 3, 30.0) + 1)
    assert part - 1 == 1
    assert not board.keep("sub_a", "t1", 1, "bob", 30.0)
    assert board.keep("sub_a", "t1", 1, "dave", 30.0)
    from uqcore.stability import BootstrapValues

    values = BootstrapValues({"mae": np.arange(10.0)}, undefined_reasons={}, warnings=[])
    assert not board.put("sub_a", "t1", 1, "bob", values)  # no longer his
    assert board.put("sub_a", "t1", 1, "dave", values)
    assert board.done("sub_a") == 1
    assert board.notes("sub_a")[1]["by"] == "dave"
    # a new delivery of the job starts afresh
    board.publish("sub_a", Split("t2", ["mae"], 30, [(0, 10), (10, 20), (20, 30)]), 60)
    assert board.done("sub_a") == 0
    assert not board.put("sub_a", "t1", 0, "alice", values)
    assert board.claim("sub_a", "t2", "erin", 3, 30.0) == 0
    board.drop("sub_a", 3)
    assert not [k for k in store.client.scan_iter(match=keys.split("sub_a") + "*")]


def test_a_part_task_ends_at_once_when_nothing_is_left(
    split_store: tuple[Settings, Store],
) -> None:
    own, store = split_store
    assert run_part_job(store, own, NUMPY, "sub_none", "t") == "skipped:gone"
    board = SplitBoard(store)
    board.publish("sub_b", Split("t", ["mae"], 20, [(0, 10), (10, 20)]), 60)
    assert run_part_job(store, own, NUMPY, "sub_b", "other") == "skipped:gone"
    assert board.claim("sub_b", "t", "x", 2, 30.0) == 0
    assert board.claim("sub_b", "t", "y", 2, 30.0) == 1
    # both held by live claimants: nothing is loaded (the submission does not even exist)
    assert run_part_job(store, own, NUMPY, "sub_b", "t") == "skipped:nothing-left"


def test_free_cores_are_the_idle_ones_and_this_processs_own() -> None:
    """From /proc/stat's idle and iowait share of all jiffies times the CPUs, plus this
    process's CPU time over the window; the window is at least FREE_CORES_WINDOW_S (slept
    up to it); None where the machine's times cannot be read."""
    readings = iter([(100.0, 1000.0, 4), (130.0, 1100.0, 4), (130.0, 1100.0, 4)])
    own = iter([5.0, 5.05, 5.05])
    clock = iter([0.0, 0.04, 0.1, 0.3, 0.3])
    slept: list[float] = []
    free = FreeCores(
        times=lambda: next(readings),
        own=lambda: next(own),
        clock=lambda: next(clock),
        sleep=slept.append,
    )
    # 30 of 100 jiffies idle on 4 CPUs = 1.2 cores, and 0.05 s of own CPU in 0.1 s = 0.5
    assert free() == pytest.approx(1.7)
    assert slept == [pytest.approx(0.06)]
    assert free() is None  # no jiffies passed: unknown
    unknown = FreeCores(times=lambda: None)
    assert unknown() is None
    real = FreeCores()()
    assert real is None or 0.0 <= real <= (os.cpu_count() or 1)


def test_a_part_task_takes_no_part_without_a_free_core(
    split_store: tuple[Settings, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below ``split_bootstrap_min_idle_cores`` free cores a part task ends before loading
    anything and the parts stay for the job; with enough, it goes on to load."""
    own, store = split_store
    busy = own.model_copy(update={"split_bootstrap_min_idle_cores": 1.0})
    board = SplitBoard(store)
    board.publish("sub_c", Split("t", ["mae"], 20, [(0, 10), (10, 20)]), 60)
    monkeypatch.setattr(fanout, "FreeCores", lambda: lambda: 0.6)
    assert run_part_job(store, busy, NUMPY, "sub_c", "t") == "skipped:no-free-core"
    assert board.free("sub_c", 2)  # nothing claimed
    monkeypatch.setattr(fanout, "FreeCores", lambda: lambda: 1.0)
    # enough: it loads the submission (which does not exist here)
    assert run_part_job(store, busy, NUMPY, "sub_c", "t") == "skipped:gone"


def test_a_part_task_stops_taking_parts_when_the_cores_fill(
    split_store: tuple[Settings, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs before each claim: free cores for the first part, none for the next,
    so the task computes one part and leaves the other for the job."""
    own, store = split_store
    busy = own.model_copy(update={"split_bootstrap_min_idle_cores": 1.0})
    arrays = gaussian_arrays(1_000, seed=3)
    rec = submit(store, busy, arrays, {"metrics": ["mae"], "bootstrap": {"n_resamples": 40}})
    board = SplitBoard(store)
    block = bootstrap_block_size(1_000, 40)
    parts = [(0, block), (block, 40)]
    board.publish(rec.id, Split("t", ["mae"], 40, parts), 60)
    readings = iter([2.0, 2.0, 0.5])  # the task's own check, then one before each claim
    monkeypatch.setattr(fanout, "FreeCores", lambda: lambda: next(readings))
    assert run_part_job(store, busy, NUMPY, rec.id, "t") == "computed:1"
    assert board.done(rec.id) == 1 and board.free(rec.id, 2)


# --- one process: the job computes every part -------------------------------------------------


@pytest.mark.slow
def test_a_split_job_without_other_workers_is_bit_identical(
    split_store: tuple[Settings, Store],
) -> None:
    own, store = split_store
    given = gaussian_arrays(2000, seed=5)
    # BCa: its intervals read every resample's value (as the percentile ones do) and the
    # jackknife's; the percentile intervals of a split are checked across processes below.
    for boot in ({"n_resamples": 300, "method": "bca"},):
        analyses = {"metrics": "all", "seed": 4, "bootstrap": boot}
        rec = submit(store, own, given, analyses)
        out = run_job(store, own, NUMPY, rec.id, token="tok-1", worker_name="solo")
        assert out == "succeeded", store.get_submission(rec.id)
        result = store.get_result(rec.id)
        assert result is not None
        how = result["provenance"]["bootstrap_split"]
        assert len(how["parts"]) > 1 and set(how["computed_by"]) == {0}
        assert result["metrics"] == _reference(given, analyses)
        # the split's keys are gone with the job
        assert not list(store.client.scan_iter(match=keys.split(rec.id) + "*"))


# --- real workers -------------------------------------------------------------------------


def _two_workers(own: Settings, store: Store, tmp_path: Path) -> list[WorkerProcess]:
    procs = []
    try:
        for name in ("alpha", "beta"):
            procs.append(WorkerProcess(own, name, tmp_path / f"{name}.log").start(store))
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs


#: Big enough (at N = 100,000) that each of the job's four parts takes about a second, so
#: that an idle worker joins in. A few metrics of each kind (means over rows, sorted and
#: ranked, binned): that the split gives every metric's value bit for bit is the test without
#: other workers above ("all"); here it is the parts crossing processes and Redis.
ANALYSES: dict[str, Any] = {
    "metrics": ["mae", "crps", "nll", "ause", "spearman", "ence"],
    "seed": 8,
    "bootstrap": {"n_resamples": 600, "method": "percentile"},
}


@pytest.mark.slow
def test_two_workers_share_the_parts_and_match_one_worker(
    split_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    own, store = split_store
    arrays = gaussian_arrays(100_000, seed=9)
    procs = _two_workers(own, store, tmp_path)
    try:
        rec = submit(store, own, arrays, ANALYSES)
        done = wait_for_long(store, rec.id)
        assert done.status == "succeeded", done.error
        result = store.get_result(rec.id)
        assert result is not None
        how = result["provenance"]["bootstrap_split"]
        assert set(how["computed_by"]) == {0, 1}, how  # the job's process and the other
        assert result["metrics"] == _reference(arrays, ANALYSES)
        assert not list(store.client.scan_iter(match=keys.split(rec.id) + "*"))
    finally:
        for p in procs:
            p.stop()


def wait_for_long(store: Store, sub_id: str) -> Any:
    rec = _wait(
        "the job to end",
        lambda: (
            (r := store.get_submission(sub_id)) is not None
            and r.status in ("succeeded", "failed", "cancelled")
            and r
        ),
    )
    return rec


@pytest.mark.slow
def test_a_part_task_killed_mid_part_leaves_the_result_identical(
    split_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    own, store = split_store
    arrays = gaussian_arrays(100_000, seed=10)
    procs = _two_workers(own, store, tmp_path)
    try:
        rec = submit(store, own, arrays, ANALYSES)
        wait_for(store, rec.id, {"running"})
        job_worker = store.client.hget(keys.submission(rec.id), "worker").decode()
        helper = next(p for p in procs if not job_worker.startswith(p.name + "@"))

        def helper_claim() -> int | None:
            for key in store.client.scan_iter(match=keys.split(rec.id) + ":claim:*"):
                holder = store.client.get(key)
                if holder is not None and holder.decode().startswith(helper.name + "@"):
                    return int(key.decode().rsplit(":", 1)[1]) + 1
            return None

        held = _wait("the other worker to claim a part", helper_claim) - 1
        helper.kill()  # SIGKILL mid-part: its claim expires, the job takes the part back
        done = wait_for_long(store, rec.id)
        assert done.status == "succeeded", done.error
        assert done.attempts == 1  # the job itself was never lost
        result = store.get_result(rec.id)
        assert result is not None
        assert result["provenance"]["bootstrap_split"]["computed_by"][held] == 0
        assert result["metrics"] == _reference(arrays, ANALYSES)
        assert not list(store.client.scan_iter(match=keys.split(rec.id) + "*"))
    finally:
        for p in procs:
            p.stop()


@pytest.mark.slow
def test_one_worker_alone_computes_every_part(
    split_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    own, store = split_store
    arrays = gaussian_arrays(2_000, seed=11)
    analyses = {**ANALYSES, "seed": 1, "bootstrap": {"n_resamples": 600}}
    proc = WorkerProcess(own, "lone", tmp_path / "lone.log").start(store)
    try:
        rec = submit(store, own, arrays, analyses)
        done = wait_for_long(store, rec.id)
        assert done.status == "succeeded", done.error
        result = store.get_result(rec.id)
        assert result is not None
        how = result["provenance"]["bootstrap_split"]
        assert len(how["parts"]) > 1 and set(how["computed_by"]) == {0}
        assert result["metrics"] == _reference(arrays, analyses)
        # its own part tasks, queued behind the job, then end at once
        log = proc.log_path
        _wait("the part tasks to end", lambda: "skipped:gone" in log.read_text())
    finally:
        proc.stop()


@pytest.mark.slow
def test_a_cancelled_split_job_stops_its_parts(
    split_store: tuple[Settings, Store], tmp_path: Path
) -> None:
    own, store = split_store
    arrays = gaussian_arrays(100_000, seed=12)
    procs = _two_workers(own, store, tmp_path)
    try:
        rec = submit(store, own, arrays, ANALYSES)
        wait_for(store, rec.id, {"running"})
        _wait("a part to be done", lambda: store.client.hlen(keys.split_values(rec.id)) >= 1)
        store.cancel_submission(rec.id)
        done = wait_for_long(store, rec.id)
        assert done.status == "cancelled"
        _wait(
            "the split's keys to go",
            lambda: not list(store.client.scan_iter(match=keys.split(rec.id) + "*")),
        )
    finally:
        for p in procs:
            p.stop()
