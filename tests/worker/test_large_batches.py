"""Large batches in the worker: stored arrays come back as read-only memory maps (never written
into, passed to uqcore in their own dtype) and the progress moves while ``uqcore.evaluate``
runs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import worker.evaluation as evaluation
from service.analyses import Analyses
from tests.factories import gaussian_arrays
from worker.backend import Backend
from worker.evaluation import compute

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
