"""Every prediction kind through the client and back: the client turns a uqcore prediction
object into named arrays, a real server (uvicorn, Redis, Celery worker) evaluates them, and each
metric it reports equals ``uqcore.metric`` on the same object computed here."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pytest

import uqcore
from service.jobs import input_hash
from tests.factories import make_classification, make_prediction
from uqcore import predictions as P
from uqeval import Client
from uqeval.arrays import encode_npz, prediction_arrays

REGRESSION = ("gaussian", "laplace", "student_t", "mixture", "samples", "quantiles",
              "point_uncertainty", "interval")  # fmt: skip
CLASSIFICATION = ("probs", "logits", "ensemble", "ensemble_logits", "dirichlet",
                  "prediction_set", "prediction_set_probs")  # fmt: skip
N = 40


def some_metric_applies(pred: Any, **targets: Any) -> bool:
    """Whether ``metrics="all"`` computes anything for ``pred`` (the API refuses it
    otherwise: a kind whose metrics are not registered yet)."""
    task = "regression" if isinstance(pred, P.RegressionPrediction) else "classification"
    given = frozenset(targets)
    return any(s.why_not(pred, given) is None for s in uqcore.registry.specs(task))


def local_value(name: str, pred: Any, y: Any, params: dict[str, Any], **targets: Any) -> Any:
    """``uqcore.metric`` here, or None for a structured metric (a dict of values, which the
    result reports in ``details``)."""
    value = uqcore.metric(name, pred, y, **targets, **params)
    return None if isinstance(value, dict) else float(value)


def same(server: float | None, local: float | None) -> bool:
    if server is None or local is None or (isinstance(local, float) and math.isnan(local)):
        return server is None and (local is None or math.isnan(local))
    return server == pytest.approx(local, rel=1e-12, abs=1e-300)


@pytest.mark.filterwarnings("ignore::uqcore.UndefinedMetricWarning")
def test_every_kind_round_trips(live_server: Any) -> None:
    cases: list[tuple[str, Any, np.ndarray, dict[str, Any]]] = []
    for i, kind in enumerate(REGRESSION):
        pred, y = make_prediction(kind, N, seed=i)
        cases.append((kind, pred, y, {}))
    for i, kind in enumerate(CLASSIFICATION):
        pred, labels, targets = make_classification(kind, N, seed=10 + i)
        cases.append((kind, pred, labels, targets))
    cases = [c for c in cases if some_metric_applies(c[1], **c[3])]
    assert {"prediction_set_probs"} <= {c[0] for c in cases}
    with Client(live_server.url, live_server.new_key("kinds")) as client:
        subs = [
            client.submit(pred, y, model_name=name, metrics="all", **targets)
            for name, pred, y, targets in cases
        ]
        checked = 0
        for sub, (name, pred, y, targets) in zip(subs, cases, strict=True):
            final = client.wait(sub.id, timeout=60)
            assert final.kind == prediction_arrays(pred)[0]
            assert final.n == N
            result = final.result
            assert result is not None and result.metrics, (name, result)
            for metric, mv in result.metrics.items():
                local = local_value(metric, pred, y, mv.params, **targets)
                if local is None:
                    continue
                assert same(mv.value, local), (name, metric, mv.value, local)
                checked += 1
        assert checked > 100  # every kind contributed its applicable metrics


def test_estimates_travel_with_a_classification_prediction(live_server: Any) -> None:
    pred, labels, _ = make_classification("probs", N, seed=3)
    kind, arrays = prediction_arrays(pred)
    assert kind == "probs" and set(arrays) == {"probs", "estimate:score"}
    with Client(live_server.url, live_server.new_key("estimates")) as client:
        final = client.submit(
            pred, labels, metrics=["auroc_correctness"], estimators=["score"], wait=True,
            timeout=60,
        )  # fmt: skip
    assert final.result is not None and final.result.by_estimator is not None
    got = final.result.by_estimator["auroc_correctness"]["score"]
    want = float(uqcore.metric("auroc_correctness", pred, labels, estimator="score"))
    assert got == pytest.approx(want, rel=1e-12)


def test_float32_ensemble_arrives_as_float32(live_server: Any) -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(size=(5, 2000, 4))
    member = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    member32 = member.astype(np.float32)
    labels = rng.integers(0, 4, size=2000)
    ens = P.Ensemble(member_probs=member32)
    # The NPZ member keeps its dtype byte for byte.
    body = encode_npz({"member_probs": member32, "labels": labels}, {"kind": "ensemble"})
    with np.load(io.BytesIO(body)) as npz:
        assert npz["member_probs"].dtype == np.float32
        assert np.array_equal(npz["member_probs"], member32)
    with Client(live_server.url, live_server.new_key("f32")) as client:
        final = client.submit(ens, labels, metrics=["nll", "ece"], wait=True, timeout=60)
    assert final.result is not None
    for name in ("nll", "ece"):
        want = float(uqcore.metric(name, ens, labels))
        assert final.result.value(name) == pytest.approx(want, rel=1e-12)
    # The server hashes every array with its dtype: the hash of the float32 arrays, not of
    # float64 copies, is the one it reports.
    assert final.analyses is not None
    arrays32 = {"member_probs": member32, "labels": labels}
    arrays64 = {"member_probs": member32.astype(np.float64), "labels": labels}
    reported = final.result.provenance["input_hash"]
    assert reported == input_hash("ensemble", arrays32, final.analyses)
    assert reported != input_hash("ensemble", arrays64, final.analyses)
