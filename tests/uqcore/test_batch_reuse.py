"""``uqcore.reusing_batches``: within the block, ``make_batch`` returns the batch it made for
the same objects, so that ``evaluate`` and the curves of one prediction share its caches; the
values are those of separate batches."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

import uqcore
from uqcore import predictions as P
from uqcore import report
from uqcore.batch import Batch, is_reused, make_batch
from uqcore.curves import curve_to_json, curves


def _data(n: int = 3000, seed: int = 0) -> tuple[Any, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 1.5, n)
    w = rng.integers(1, 4, n).astype(np.float64)
    return P.Gaussian(mu, sd), mu + sd * rng.normal(size=n), w


def _json(found: dict[str, Any]) -> str:
    return json.dumps({k: curve_to_json(v) for k, v in found.items()}, sort_keys=True)


def test_the_same_objects_give_the_same_batch_only_within_the_block() -> None:
    pred, y, w = _data()
    outside = make_batch(pred, y)
    assert make_batch(pred, y) is not outside
    with uqcore.reusing_batches():
        first = make_batch(pred, y)
        assert is_reused(first) and not is_reused(outside)
        assert make_batch(pred, y) is first
        assert make_batch(pred, y, defer_finite=True) is first
        weighted = make_batch(pred, y, w)
        assert weighted is not first and make_batch(pred, y, w) is weighted
        assert make_batch(pred, y.copy()) is not first  # by identity, not by value
        with uqcore.reusing_batches():  # an inner block is part of the outer one
            assert make_batch(pred, y) is first
        assert make_batch(pred, y) is first
        seen: list[Any] = []
        other = threading.Thread(target=lambda: seen.append(make_batch(pred, y)))
        other.start()
        other.join()
        assert seen[0] is not first  # the block is this thread's
    assert make_batch(pred, y) is not first
    assert not is_reused(first)


def test_evaluate_drops_a_groups_working_set_outside_a_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control of the test below: without a block, the skill scores' sorted targets are
    dropped after their group, and so are the PIT values when adversarial group calibration
    is started in its turn (as from 2^20 rows) rather than before the others."""
    pred, y, _ = _data()
    batch = make_batch(pred, y)
    monkeypatch.setattr(report, "make_batch", lambda *a, **k: batch)
    uqcore.evaluate(pred, y)
    assert not batch.has_shared("skill:y_sorted") and batch.has_shared("abs_error")
    assert batch.has_shared("pit")  # started before the others: cached before the groups
    batch = make_batch(pred, y)
    monkeypatch.setattr(report, "_EARLY_START_ROWS", 0)
    uqcore.evaluate(pred, y)
    assert not batch.has_shared("pit") and not batch.has_shared("skill:y_sorted")


def test_large_batches_are_not_kept() -> None:
    pred, y, _ = _data(500)
    with uqcore.reusing_batches(max_rows=500):
        big = make_batch(pred, y)
        assert not is_reused(big) and make_batch(pred, y) is not big
    with uqcore.reusing_batches(max_rows=501):
        small = make_batch(pred, y)
        assert make_batch(pred, y) is small


@pytest.mark.parametrize("weighted", [False, True])
def test_curves_after_evaluate_in_one_block_equal_separate_ones(
    weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """evaluate keeps a reused batch's caches (no group's working set dropped) and the
    curves read them: the same metrics and the same curves, to the last digit."""
    pred, y, w = _data(seed=3)
    sw = w if weighted else None
    alone_batch = make_batch(pred, y, sw)
    with monkeypatch.context() as patched:
        patched.setattr(report, "make_batch", lambda *a, **k: alone_batch)
        uqcore.evaluate(pred, y, sample_weight=sw)
    dropping = set().union(*alone_batch.cached_keys())
    alone = uqcore.evaluate(pred, y, sample_weight=sw).to_dict()["values"]
    alone_curves = _json(curves(pred, y, sample_weight=sw))
    with uqcore.reusing_batches():
        together = uqcore.evaluate(pred, y, sample_weight=sw).to_dict()["values"]
        kept = set().union(*make_batch(pred, y, sw).cached_keys())
        together_curves = _json(curves(pred, y, sample_weight=sw))
    assert dropping < kept  # what evaluate kept for the curves
    assert json.dumps(together, sort_keys=True) == json.dumps(alone, sort_keys=True)
    assert together_curves == alone_curves
    with_curves = uqcore.evaluate(pred, y, sample_weight=sw, curves=True)
    assert _json(with_curves.curves) == alone_curves


def test_every_curve_reads_the_batch_of_the_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each regression curve function takes its batch through ``make_batch`` or
    ``regression_batch``: in one block, evaluate and every curve of a Gaussian make one batch
    in all; outside a block, each curve makes its own. (The curve by groups makes a batch of
    each group's rows, other objects.)"""
    from uqcore import batch as batch_module

    pred, y, _ = _data(seed=4)
    made: list[int] = []
    real = batch_module.Batch.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(batch_module.Batch, "__init__", counted)
    with uqcore.reusing_batches():
        uqcore.evaluate(pred, y)
        found = curves(pred, y)
    assert len(found) >= 8 and len(made) == 1
    made.clear()
    curves(pred, y)
    assert len(made) >= 5


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 100_003])
def test_unweighted_mean_is_numpys_mean_bit_for_bit(n: int) -> None:
    """``Batch.mean`` skips numpy's Python layers for 1-D float64 arrays: the same pairwise
    sum divided by N, so the very value of ``numpy.mean`` (other dtypes go through it)."""
    rng = np.random.default_rng(n)
    batch = Batch(P.Gaussian(np.zeros(n), np.ones(n)), rng.normal(size=n))
    for scale in (1e-300, 1.0, 1e300):
        v = rng.normal(size=n) * scale
        assert batch.mean(v) == float(np.mean(v))
        assert batch.mean(v[::-1]) == float(np.mean(v[::-1]))
    v32 = rng.normal(size=n).astype(np.float32)  # numpy's own mean (float32 sums)
    assert batch.mean(v32) == float(np.mean(v32))
