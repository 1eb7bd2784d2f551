"""Large batches in the worker: stored arrays come back as read-only memory maps (never written
into, passed to uqcore in their own dtype), the progress moves while ``uqcore.evaluate``
runs, and the result does not wait for the curves kept for the plots."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from celery.exceptions import SoftTimeLimitExceeded

import worker.evaluation as evaluation
from service.analyses import Analyses
from service.kinds import build_prediction
from service.settings import Settings
from service.store import Store
from tests.factories import gaussian_arrays
from tests.stack import Db, db_url
from tests.worker.test_worker import submit
from uqcore.curves import curve_to_json, curves
from uqcore.report import json_safe
from worker.backend import Backend
from worker.evaluation import compute
from worker.execution import CURVES_AFTER_RESULT_ROWS, run_job
from worker.plots import decode_curves

NUMPY = Backend("numpy", "cpu", False)


def _mapped(tmp_path: Path, arrays: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """The arrays as the blob store hands them out: .npy files memory-mapped read-only."""
    out = {}
    for name, a in arrays.items():
        path = tmp_path / f"{name}.npy"
        np.save(path, a.astype(dtype))
        out[name] = np.load(path, mmap_mode="r")
        assert not out[name].flags.writeable
    return out


def _doc(arrays: dict[str, Any], analyses: dict[str, Any]) -> dict[str, Any]:
    doc = compute(
        "gaussian",
        arrays,
        Analyses.model_validate(analyses),
        backend=NUMPY,
        checkpoint=lambda _p: None,
    )
    doc["provenance"].pop("timings_s")
    return doc


def test_read_only_memory_maps_give_the_result_of_arrays_in_memory(tmp_path: Path) -> None:
    arrays = gaussian_arrays(4000, seed=3)
    analyses = {
        "metrics": "all",
        "seed": 2,
        "curves": True,
        "bootstrap": {"n_resamples": 30, "method": "bca"},
        "stability": {"enabled": True, "repeats": 3},
    }
    # float32 on disk: the reference is the same values as float64 arrays in memory
    mapped = _mapped(tmp_path, arrays, "float32")
    reference = {k: np.asarray(v, dtype=np.float64) for k, v in mapped.items()}
    before = {k: np.array(v) for k, v in mapped.items()}
    got = _doc(mapped, analyses)
    assert got == _doc(reference, analyses)
    for name, a in mapped.items():  # untouched (a write would have raised anyway)
        assert np.array_equal(a, before[name])


def test_progress_moves_while_a_large_batch_is_evaluated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ticks every 10 ms from 1000 rows, so that a batch evaluated in well under a second on
    # any machine still sees several; the phase's share is held below its end.
    monkeypatch.setattr(evaluation, "TICK_S", 0.01)
    monkeypatch.setattr(evaluation, "MIN_ROWS", 1000)
    arrays = gaussian_arrays(400_000, seed=4)
    seen: list[tuple[float, str]] = []
    main = threading.get_ident()

    def checkpoint(p: float) -> None:
        seen.append((p, "main" if threading.get_ident() == main else "ticker"))

    t0 = time.perf_counter()
    doc = compute(
        "gaussian",
        arrays,
        Analyses.model_validate({"metrics": "all", "bootstrap": {"n_resamples": 10}}),
        backend=NUMPY,
        checkpoint=checkpoint,
    )
    took = doc["provenance"]["timings_s"]["metrics"]
    assert time.perf_counter() - t0 >= took
    end_of_metrics = 5.0 + 90.0 / 3  # metrics and bootstrap: two phases plus the document
    ticks = [p for p, who in seen if who == "ticker"]
    assert ticks, seen  # 400 000 rows of every metric take far more than a tick
    assert all(5.0 < p < end_of_metrics for p in ticks)
    assert ticks == sorted(ticks)
    # the phase's end is reported by the computation itself, after every tick
    main_values = [p for p, who in seen if who == "main"]
    assert end_of_metrics in main_values
    assert seen.index((end_of_metrics, "main")) > max(
        (i for i, (_, who) in enumerate(seen) if who == "ticker"), default=-1
    )


def test_no_ticks_below_the_threshold() -> None:
    seen: list[float] = []
    compute(
        "gaussian",
        gaussian_arrays(500, seed=1),
        Analyses.model_validate({"metrics": "all"}),
        backend=NUMPY,
        checkpoint=seen.append,
    )
    assert seen == sorted(seen) and seen[0] == 5.0
    assert len(seen) == 2  # the inputs, then the metrics phase's end: nothing in between


@pytest.fixture
def own_store(settings: Settings) -> Iterator[tuple[Settings, Store]]:
    """A database of its own: no Celery worker of the test session takes its jobs."""
    assert settings.redis_url is not None
    own = settings.model_copy(update={"redis_url": db_url(settings.redis_url, Db.LARGE)})
    store = Store.from_url(str(own.redis_url), own)
    store.client.flushdb()
    try:
        yield own, store
    finally:
        store.client.flushdb()
        store.close()


def _assert_kept_curves(store: Store, sub_id: str, arrays: dict[str, np.ndarray]) -> None:
    """The curves kept for the submission's plots are uqcore's curves of its Gaussian batch."""
    kept = store.get_curves(sub_id)
    assert kept is not None
    pred = build_prediction("gaussian", {f: arrays[f] for f in ("mean", "std")})
    notes: list[str] = []
    want = {
        name: json_safe(curve_to_json(c), name, notes)
        for name, c in curves(pred, arrays["y"], seed=0).items()
    }
    assert decode_curves(kept) == json.loads(json.dumps(want))


def test_a_large_job_writes_its_result_before_keeping_its_curves(
    own_store: tuple[Settings, Store],
) -> None:
    """From CURVES_AFTER_RESULT_ROWS rows the client sees ``succeeded`` without waiting for
    the curves kept for the plots; they follow, and are uqcore's curves of the batch."""
    settings, store = own_store
    n = CURVES_AFTER_RESULT_ROWS
    arrays = gaussian_arrays(n, seed=6)
    rec = submit(store, settings, arrays, {"metrics": ["mae", "crps"]})
    outcome: list[str] = []
    job = threading.Thread(
        target=lambda: outcome.append(
            run_job(store, settings, NUMPY, rec.id, token="t", worker_name="w")
        )
    )
    job.start()
    try:
        seen_before_curves = False
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and job.is_alive():
            got = store.get_submission(rec.id)
            assert got is not None
            if got.status == "succeeded":
                seen_before_curves = store.get_curves(rec.id) is None
                break
            time.sleep(0.005)
    finally:
        job.join(timeout=300)
    assert outcome == ["succeeded"]
    assert seen_before_curves, "the result was written after the curves"
    _assert_kept_curves(store, rec.id, arrays)


def test_a_small_job_packs_its_curves_while_its_metrics_finish(
    own_store: tuple[Settings, Store], monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """Below CURVES_AFTER_RESULT_ROWS the curves are packed inside the evaluation (while the
    metrics' helper thread draws the groups), once, and kept before the result; curves that
    cannot be computed are logged and never fail the job (nor are they tried twice)."""
    import worker.plots as plots

    settings, store = own_store
    arrays = gaussian_arrays(3000, seed=8)
    packs: list[int] = []
    real = plots._curves_json

    def counted(*args: Any, **kwargs: Any) -> Any:
        packs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "_curves_json", counted)
    rec = submit(store, settings, arrays, {"metrics": ["adversarial_group_calibration", "mae"]})
    assert run_job(store, settings, NUMPY, rec.id, token="t", worker_name="w") == "succeeded"
    assert packs == [1]
    result = store.get_result(rec.id)
    assert result is not None
    assert result["provenance"]["timings_s"]["plot_curves"] > 0
    _assert_kept_curves(store, rec.id, arrays)

    def broken(*args: Any, **kwargs: Any) -> Any:
        packs.append(1)
        raise RuntimeError("no curves today")

    monkeypatch.setattr(plots, "_curves_json", broken)
    packs.clear()
    rec = submit(store, settings, arrays, {"metrics": ["adversarial_group_calibration", "mae"]})
    assert run_job(store, settings, NUMPY, rec.id, token="t", worker_name="w") == "succeeded"
    assert packs == [1]
    assert store.get_curves(rec.id) is None
    assert "not kept" in caplog.text

    def late(*args: Any, **kwargs: Any) -> Any:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(plots, "_curves_json", late)
    rec = submit(store, settings, arrays, {"metrics": ["adversarial_group_calibration", "mae"]})
    assert run_job(store, settings, NUMPY, rec.id, token="t", worker_name="w") == "failed"
    failed = store.get_submission(rec.id)
    assert failed is not None and "time limit" in (failed.error or "")
