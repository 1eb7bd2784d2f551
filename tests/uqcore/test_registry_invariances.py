"""Registry-wide properties, written once for every registered regression metric × kind.

For each metric and each prediction kind it applies to: permuting rows changes nothing;
``sample_weight=None`` equals unit weights; an integer weight k equals k copies of the row; a
zero weight equals dropping the row; scaling all weights changes nothing; and every array
backend gives the numpy value. A metric that lacks one of these by definition lists it in its
``exempt`` mapping with the reason (see ``uqcore.registry.INVARIANCES``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pytest

from tests.factories import KINDS, make_prediction, to_backend
from uqcore import registry
from uqcore.batch import Batch

N = 37
RTOL = 1e-10


def _cases(invariance: str | None = None) -> list[Any]:
    out = []
    for spec in registry.specs("regression"):
        if invariance is not None and invariance in spec.exempt:
            continue
        for kind in KINDS:
            pred, _ = make_prediction(kind, 5)
            if spec.why_not(pred) is None:
                out.append(pytest.param(spec.name, kind, id=f"{spec.name}-{kind}"))
    return out


def _value(name: str, pred: Any, y: Any, w: Any = None) -> Any:
    spec = registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        return registry.call(spec, Batch(pred, y, w))


def assert_same(a: Any, b: Any, where: str = "value", rtol: float = RTOL) -> None:
    """Recursive comparison of metric values (floats to ``rtol``, None, dicts, lists)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), where
        assert set(a) == set(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}", rtol)
        return
    if isinstance(a, (list, tuple, np.ndarray)):
        a_arr = np.asarray(a, dtype=float)
        b_arr = np.asarray(b, dtype=float)
        assert a_arr.shape == b_arr.shape, where
        np.testing.assert_allclose(a_arr, b_arr, rtol=rtol, atol=rtol * 1e-3, err_msg=where)
        return
    if a is None or b is None:
        assert a is None and b is None, f"{where}: {a} vs {b}"
        return
    if isinstance(a, str):
        assert a == b, where
        return
    fa, fb = float(a), float(b)
    if math.isinf(fa) or math.isinf(fb):
        assert fa == fb, where
        return
    assert math.isclose(fa, fb, rel_tol=rtol, abs_tol=rtol * 1e-3), f"{where}: {fa!r} != {fb!r}"


@pytest.mark.parametrize(("name", "kind"), _cases("order"))
@pytest.mark.parametrize("ties", [False, True])
def test_order_invariance(name: str, kind: str, ties: bool) -> None:
    pred, y = make_prediction(kind, N, seed=1, ties=ties)
    perm = np.random.default_rng(2).permutation(N)
    assert_same(_value(name, pred, y), _value(name, pred.take(perm), y[perm]))


@pytest.mark.parametrize(("name", "kind"), _cases("unit_weights"))
def test_unit_weights_equal_none(name: str, kind: str) -> None:
    pred, y = make_prediction(kind, N, seed=3)
    assert_same(_value(name, pred, y), _value(name, pred, y, np.ones(N)))


@pytest.mark.parametrize(("name", "kind"), _cases("repeat_rows"))
@pytest.mark.parametrize("ties", [False, True])
def test_integer_weights_equal_repeated_rows(name: str, kind: str, ties: bool) -> None:
    pred, y = make_prediction(kind, N, seed=4, ties=ties)
    counts = np.random.default_rng(5).integers(0, 4, size=N)
    counts[0] = max(counts[0], 1)
    idx = np.repeat(np.arange(N), counts)
    assert_same(_value(name, pred, y, counts.astype(float)), _value(name, pred.take(idx), y[idx]))


@pytest.mark.parametrize(("name", "kind"), _cases("zero_weight"))
def test_zero_weight_equals_dropped_row(name: str, kind: str) -> None:
    pred, y = make_prediction(kind, N, seed=6)
    keep = np.random.default_rng(7).random(N) < 0.7
    keep[0] = True
    w = keep.astype(float)
    idx = np.flatnonzero(keep)
    assert_same(_value(name, pred, y, w), _value(name, pred.take(idx), y[idx]))


@pytest.mark.parametrize(("name", "kind"), _cases("scale_weights"))
def test_scaling_weights_changes_nothing(name: str, kind: str) -> None:
    pred, y = make_prediction(kind, N, seed=8)
    w = np.random.default_rng(9).uniform(0.1, 3.0, size=N)
    assert_same(_value(name, pred, y, w), _value(name, pred, y, 3.7 * w))


@pytest.mark.parametrize(("name", "kind"), _cases())
def test_backends_agree_with_numpy(name: str, kind: str, xp: Any) -> None:
    pred, y = make_prediction(kind, N, seed=10, ties=False)
    w = np.random.default_rng(11).integers(0, 3, size=N).astype(float)
    w[0] = 1.0
    expected = _value(name, pred, y, w)
    pred_b, y_b = to_backend(pred, y, xp)
    w_b = to_backend(pred, w, xp)[1]
    assert_same(_value(name, pred_b, y_b, w_b), expected, rtol=1e-9)


@pytest.mark.parametrize(("name", "kind"), _cases())
@pytest.mark.parametrize("ties", [False, True])
def test_chunked_passes_equal_one_pass(
    name: str, kind: str, ties: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Splitting the per-row passes into chunks (uqcore._stats.chunks, 65,536 rows in use)
    changes nothing: here chunks of 5 rows against one chunk of all rows, with and without
    weights."""
    pred, y = make_prediction(kind, N, seed=12, ties=ties)
    w = np.random.default_rng(13).integers(0, 3, size=N).astype(float)
    w[0] = 1.0
    monkeypatch.setattr("uqcore._stats.CHUNK_ROWS", N + 1)
    whole = [_value(name, pred, y), _value(name, pred, y, w)]
    monkeypatch.setattr("uqcore._stats.CHUNK_ROWS", 5)
    assert_same(_value(name, pred, y), whole[0], "unweighted")
    assert_same(_value(name, pred, y, w), whole[1], "weighted")


def test_every_metric_is_fully_described() -> None:
    for spec in registry.specs():
        assert spec.reference, spec.name
        assert spec.summary and spec.summary != spec.name, spec.name
        assert spec.impl.__doc__ and len(spec.impl.__doc__) > 60, spec.name
        lo, hi = spec.bounds
        if spec.best is not None:
            assert lo is None or spec.best >= lo, spec.name
            assert hi is None or spec.best <= hi, spec.name


def _mean_term_cases() -> list[Any]:
    return [
        pytest.param(name, kind, id=f"{name}-{kind}")
        for name, kind in (p.values for p in _cases())
        if registry.get(name).mean_terms is not None
    ]


@pytest.mark.parametrize(("name", "kind"), _mean_term_cases())
def test_mean_terms_agree_with_the_metric(name: str, kind: str) -> None:
    """Metrics that declare per-row terms equal finalize(weighted mean of the terms)."""
    spec = registry.get(name)
    pred, y = make_prediction(kind, N, seed=12)
    w = np.random.default_rng(13).uniform(0.0, 2.0, size=N)
    batch = Batch(pred, y, w)
    terms = np.asarray(spec.mean_terms(batch, **spec.defaults), dtype=float)
    assert terms.shape == (N,)
    value = float(np.sum(w * terms) / np.sum(w))
    if spec.finalize is not None:
        value = spec.finalize(value)
    got = _value(name, pred, y, w)
    assert_same(got["value"] if isinstance(got, dict) else got, value)


def _oracle_input(family: str) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(14)
    y = rng.normal(size=N) * 3.0
    if family == "accuracy":  # the point prediction hits every target
        from uqcore import predictions as P

        return P.Gaussian(mean=y.copy(), std=np.ones(N)), y
    # ranking: the uncertainty is the absolute error itself (the oracle)
    from uqcore import predictions as P

    pred = y + rng.normal(size=N)
    return P.PointUncertainty(prediction=pred, uncertainty=np.abs(y - pred)), y


@pytest.mark.parametrize(
    "name",
    [
        s.name
        for s in registry.specs("regression")
        if s.family in ("accuracy", "ranking") and s.best is not None
    ],
)
def test_oracle_input_gets_the_best_value(name: str) -> None:
    spec = registry.get(name)
    pred, y = _oracle_input(spec.family)
    value = _value(name, pred, y)
    value = value["value"] if isinstance(value, dict) else value
    assert value == pytest.approx(spec.best, abs=1e-12)
    if spec.direction != "target":
        # and a deliberately worse input is not better
        worse, y2 = make_prediction("point_uncertainty", N, seed=15)
        other = _value(name, worse, y2)
        if other is not None:
            assert (other >= spec.best) if spec.direction == "lower" else (other <= spec.best)


# -- classification ----------------------------------------------------------------------------
_TARGETS = frozenset({"ood", "soft_labels"})


def _class_cases(invariance: str | None = None) -> list[Any]:
    from tests.factories import CLASSIFICATION_KINDS, make_classification

    out = []
    for spec in registry.specs("classification"):
        if invariance is not None and invariance in spec.exempt:
            continue
        for kind in CLASSIFICATION_KINDS:
            pred, _, _ = make_classification(kind, 5)
            if spec.why_not(pred, _TARGETS) is None:
                out.append(pytest.param(spec.name, kind, id=f"{spec.name}-{kind}"))
    return out


def _class_value(name: str, pred: Any, y: Any, targets: dict[str, Any], w: Any = None) -> Any:
    from uqcore.batch import ClassificationBatch

    spec = registry.get(name, "classification")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
        return registry.call(spec, ClassificationBatch(pred, y, w, **targets))


def _class_input(kind: str, seed: int, ties: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    from tests.factories import make_classification

    return make_classification(kind, N, seed=seed, ties=ties)


def _rows(targets: dict[str, Any], idx: Any) -> dict[str, Any]:
    return {k: v[idx] for k, v in targets.items()}


@pytest.mark.parametrize(("name", "kind"), _class_cases("order"))
@pytest.mark.parametrize("ties", [False, True])
def test_classification_order_invariance(name: str, kind: str, ties: bool) -> None:
    pred, y, t = _class_input(kind, 21, ties)
    perm = np.random.default_rng(22).permutation(N)
    assert_same(
        _class_value(name, pred, y, t),
        _class_value(name, pred.take(perm), y[perm], _rows(t, perm)),
    )


@pytest.mark.parametrize(("name", "kind"), _class_cases("unit_weights"))
def test_classification_unit_weights_equal_none(name: str, kind: str) -> None:
    pred, y, t = _class_input(kind, 23)
    assert_same(_class_value(name, pred, y, t), _class_value(name, pred, y, t, np.ones(N)))


@pytest.mark.parametrize(("name", "kind"), _class_cases("repeat_rows"))
@pytest.mark.parametrize("ties", [False, True])
def test_classification_integer_weights_equal_repeated_rows(
    name: str, kind: str, ties: bool
) -> None:
    pred, y, t = _class_input(kind, 24, ties)
    counts = np.random.default_rng(25).integers(0, 4, size=N)
    counts[0] = max(counts[0], 1)
    idx = np.repeat(np.arange(N), counts)
    assert_same(
        _class_value(name, pred, y, t, counts.astype(float)),
        _class_value(name, pred.take(idx), y[idx], _rows(t, idx)),
    )


@pytest.mark.parametrize(("name", "kind"), _class_cases("zero_weight"))
def test_classification_zero_weight_equals_dropped_row(name: str, kind: str) -> None:
    pred, y, t = _class_input(kind, 26)
    keep = np.random.default_rng(27).random(N) < 0.7
    keep[0] = True
    idx = np.flatnonzero(keep)
    assert_same(
        _class_value(name, pred, y, t, keep.astype(float)),
        _class_value(name, pred.take(idx), y[idx], _rows(t, idx)),
    )


@pytest.mark.parametrize(("name", "kind"), _class_cases("scale_weights"))
def test_classification_scaling_weights_changes_nothing(name: str, kind: str) -> None:
    pred, y, t = _class_input(kind, 28)
    w = np.random.default_rng(29).uniform(0.1, 3.0, size=N)
    assert_same(_class_value(name, pred, y, t, w), _class_value(name, pred, y, t, 3.7 * w))


@pytest.mark.parametrize(
    ("name", "kind"),
    [p for p in _class_cases() if registry.get(p.values[0], "classification").mean_terms],
)
def test_classification_mean_terms_agree_with_the_metric(name: str, kind: str) -> None:
    from uqcore.batch import ClassificationBatch

    spec = registry.get(name, "classification")
    pred, y, t = _class_input(kind, 30)
    w = np.random.default_rng(31).uniform(0.0, 2.0, size=N)
    assert spec.mean_terms is not None
    terms = np.asarray(spec.mean_terms(ClassificationBatch(pred, y, w), **spec.defaults))
    assert terms.shape == (N,)
    assert_same(_class_value(name, pred, y, t, w), float(np.sum(w * terms) / np.sum(w)))
