"""The worker's side of the interval and prediction-set kinds: the prediction built from stored
arrays (a level stored as a 0-d array, on the host and on a torch backend), the result document
of a prediction set with its probabilities, a clear note when no metric applies, and the
memory estimate of both kinds."""

from __future__ import annotations

import numpy as np
import pytest

from service.analyses import Analyses
from service.memory import estimate_job
from uqcore import predictions as P
from uqcore import registry
from worker.backend import Backend
from worker.evaluation import compute, inputs

N, C = 40, 3
NUMPY = Backend("numpy", "cpu", False)


def interval_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    centre = rng.normal(size=N)
    return {
        "lower": centre - 1.0,
        "upper": centre + rng.uniform(0.5, 1.5, size=N),
        "level": np.asarray(0.9),
        "y": centre + rng.normal(size=N),
    }


def set_arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(C), size=N)
    return {"sets": probs > 0.3, "probs": probs, "labels": rng.integers(0, C, size=N)}


def test_interval_inputs_keep_the_level_on_every_backend() -> None:
    a = interval_arrays()
    got = inputs("interval", a, NUMPY)
    assert isinstance(got.prediction, P.Interval) and got.prediction.level == 0.9
    np.testing.assert_array_equal(got.prediction.lower, a["lower"])
    torch = pytest.importorskip("torch")
    on_torch = inputs("interval", a, Backend("torch", "cpu", False))
    assert on_torch.prediction.level == 0.9
    assert isinstance(on_torch.prediction.upper, torch.Tensor)
    np.testing.assert_array_equal(on_torch.prediction.upper.numpy(), a["upper"])
    # without a level, none
    del a["level"]
    assert inputs("interval", a, NUMPY).prediction.level is None


def test_prediction_set_document() -> None:
    a = set_arrays()
    doc = compute(
        "prediction_set",
        a,
        Analyses.model_validate({"metrics": ["brier", "accuracy"]}),
        backend=NUMPY,
        checkpoint=lambda _: None,
    )
    onehot = np.eye(C)[a["labels"]]
    want = float(np.mean(((a["probs"] - onehot) ** 2).sum(axis=1)))
    assert doc["metrics"]["brier"]["value"] == pytest.approx(want, rel=1e-12)
    accuracy = float(np.mean(a["probs"].argmax(axis=1) == a["labels"]))
    assert doc["metrics"]["accuracy"]["value"] == pytest.approx(accuracy, rel=1e-12)


def test_all_metrics_of_an_interval() -> None:
    """``metrics: "all"`` computes what applies; with nothing applicable the document says so."""
    a = interval_arrays()
    pred = P.Interval(a["lower"], a["upper"], level=0.9)
    expected = [s.name for s in registry.specs("regression") if s.why_not(pred) is None]
    doc = compute(
        "interval",
        a,
        Analyses.model_validate({"metrics": "all"}),
        backend=NUMPY,
        checkpoint=lambda _: None,
    )
    assert sorted(doc["metrics"]) == sorted(expected)
    noted = [w for w in doc["warnings"] if "no regression metric applies" in w]
    assert bool(noted) == (not expected)
    if noted:
        assert "interval prediction (it provides interval)" in noted[0]


@pytest.mark.parametrize(
    ("kind", "shapes", "width"),
    [
        ("interval", {"lower": (N,), "upper": (N,), "level": (), "y": (N,)}, 1),
        ("prediction_set", {"sets": (N, 7), "probs": (N, 7), "labels": (N,)}, 7),
        ("prediction_set", {"sets": (N, 5), "labels": (N,)}, 5),
    ],
)
def test_memory_estimate_of_the_new_kinds(
    kind: str, shapes: dict[str, tuple[int, ...]], width: int
) -> None:
    """The metrics part is 8N(16 + 2.5W) with W the values per row (C for sets), and the
    inputs part counts every element sent (the level as one)."""
    n = 10_000
    shapes = {k: tuple(n if d == N else d for d in s) for k, s in shapes.items()}
    est = estimate_job(kind, n, Analyses.model_validate({"metrics": "all"}), shapes=shapes)
    assert est.parts["metrics × N × prediction width"] == int(8 * n * (16 + 2.5 * width))
    elements = sum(int(np.prod(s)) for s in shapes.values())
    assert est.parts["inputs (N × prediction width)"] == 2 * 8 * elements
