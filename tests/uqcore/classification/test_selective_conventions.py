"""The selective-prediction conventions by name, against torch-uncertainty and the formulas.

``convention="trapezoid_rows"`` of ``aurc``/``augrc`` against torch-uncertainty's ``AURC`` and
``AUGRC``; ``eaurc(optimum="continuous")`` against Geifman et al.'s formula, written out here
as their code computes it (no installable package has it).
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.peers import torch_uncertainty_float64
from uqcore import UndefinedMetricWarning, UQValidationError, metric
from uqcore import predictions as P


@pytest.fixture
def tu() -> Iterator[Any]:
    """torch-uncertainty's metrics, with torch's default float type float64 meanwhile (its
    coverage grid ``arange(1, N + 1) / N`` takes the default type)."""
    with torch_uncertainty_float64() as mod:
        yield mod


def _case(seed: int, n: int, ties: bool) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = 4
    if ties:
        p = rng.choice([1.0, 2.0, 5.0], size=(n, c))
    else:
        p = np.exp(rng.normal(scale=1.5, size=(n, c)))
    p /= p.sum(axis=1, keepdims=True)
    y = rng.integers(0, c, size=n)
    return p, y


def _ours(name: str, p: np.ndarray, y: np.ndarray, w: Any = None, **options: Any) -> Any:
    # the estimate −confidence orders rows exactly as the peer's descending confidence
    pred = P.Probs(p, estimates={"neg_conf": -p.max(axis=1)})
    return metric(name, pred, y, sample_weight=w, estimator="neg_conf", **options)


def _peer(tu: Any, cls: str, scores: np.ndarray, errors: np.ndarray) -> float:
    """The peer's value from its own ``compute`` on given scores and (possibly fractional)
    errors, set as its state exactly as its ``update`` would set them."""
    import torch

    m = getattr(tu, cls)()
    m.scores.append(torch.as_tensor(scores, dtype=torch.float64))
    m.errors.append(torch.as_tensor(errors, dtype=torch.float64))
    with warnings.catch_warnings():  # "compute called before update": the state is set above
        warnings.filterwarnings("ignore", "The ``compute`` method", UserWarning)
        return float(m.compute())


def _peer_from_probs(tu: Any, cls: str, p: np.ndarray, y: np.ndarray) -> float:
    import torch

    m = getattr(tu, cls)()
    m.update(torch.as_tensor(p), torch.as_tensor(y))
    return float(m.compute())


def _tie_averaged_errors(conf: np.ndarray, err: np.ndarray) -> np.ndarray:
    """Each row's error replaced by the error rate of its block of tied confidences: the
    peer's value is linear in the errors in sorted order, so its mean over all orders of tied
    rows is its value on these errors (whatever order its sort then takes)."""
    out = np.empty_like(err)
    for v in np.unique(conf):
        out[conf == v] = err[conf == v].mean()
    return out


@pytest.mark.parametrize(("name", "cls"), [("aurc", "AURC"), ("augrc", "AUGRC")])
@pytest.mark.parametrize(("seed", "n"), [(1, 2), (2, 3), (3, 17), (4, 250)])
def test_trapezoid_rows_equals_torch_uncertainty_without_ties(
    tu: Any, name: str, cls: str, seed: int, n: int
) -> None:
    p, y = _case(seed, n, ties=False)
    ours = _ours(name, p, y, convention="trapezoid_rows")
    assert ours == pytest.approx(_peer_from_probs(tu, cls, p, y), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(("name", "cls"), [("aurc", "AURC"), ("augrc", "AUGRC")])
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_trapezoid_rows_with_ties_is_the_peer_averaged_over_tie_orders(
    tu: Any, name: str, cls: str, seed: int
) -> None:
    p, y = _case(seed, 120, ties=True)
    conf = p.max(axis=1)
    err = (p.argmax(axis=1) != y).astype(float)
    assert len(np.unique(conf)) < 20  # tie-heavy
    ref = _peer(tu, cls, conf, _tie_averaged_errors(conf, err))
    assert _ours(name, p, y, convention="trapezoid_rows") == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(("name", "cls"), [("aurc", "AURC"), ("augrc", "AUGRC")])
def test_trapezoid_rows_with_ties_enumerates_every_order(tu: Any, name: str, cls: str) -> None:
    # blocks of tied confidences (0.9 ×3, 0.7 ×2, 0.6 ×2) with mixed errors: the mean of the
    # peer over all 3!·2!·2! orders of the tied rows, each order forced by distinct scores
    conf = np.array([0.9, 0.9, 0.9, 0.7, 0.7, 0.6, 0.6, 0.5])
    err = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    p = np.stack([conf, 1 - conf], axis=1)
    y = (err == 1).astype(int)  # wrong exactly where err = 1 (argmax is class 0)
    blocks = [np.flatnonzero(conf == v) for v in np.unique(conf)[::-1]]
    values = []
    for perms in itertools.product(*(itertools.permutations(b) for b in blocks)):
        order = np.concatenate([np.asarray(q) for q in perms])
        scores = np.empty(len(conf))
        scores[order] = np.arange(len(conf), 0, -1)  # descending in this order
        values.append(_peer(tu, cls, scores, err))
    assert len(values) == 24
    assert _ours(name, p, y, convention="trapezoid_rows") == pytest.approx(
        float(np.mean(values)), rel=1e-12
    )


@pytest.mark.parametrize(("name", "cls"), [("aurc", "AURC"), ("augrc", "AUGRC")])
def test_trapezoid_rows_integer_weights_are_repeated_rows_of_the_peer(
    tu: Any, name: str, cls: str
) -> None:
    p, y = _case(8, 40, ties=True)
    counts = np.random.default_rng(9).integers(0, 4, size=40)
    counts[0] = 2
    idx = np.repeat(np.arange(40), counts)
    conf, err = p[idx].max(axis=1), (p[idx].argmax(axis=1) != y[idx]).astype(float)
    ref = _peer(tu, cls, conf, _tie_averaged_errors(conf, err))
    got = _ours(name, p, y, counts.astype(float), convention="trapezoid_rows")
    assert got == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("name", ["aurc", "augrc", "auac", "eaurc", "raulc"])
def test_trapezoid_rows_weights_act_as_counts(name: str) -> None:
    p, y = _case(10, 30, ties=True)
    rng = np.random.default_rng(11)
    w = rng.uniform(0.2, 3.0, size=30)
    value = _ours(name, p, y, w, convention="trapezoid_rows")
    perm = rng.permutation(30)
    assert _ours(name, p[perm], y[perm], w[perm], convention="trapezoid_rows") == pytest.approx(
        value, rel=1e-12
    )
    assert _ours(name, p, y, np.ones(30), convention="trapezoid_rows") == pytest.approx(
        _ours(name, p, y, convention="trapezoid_rows"), rel=1e-12
    )
    w0 = w.copy()
    w0[::3] = 0.0
    keep = w0 > 0
    assert _ours(name, p, y, w0, convention="trapezoid_rows") == pytest.approx(
        _ours(name, p[keep], y[keep], w0[keep], convention="trapezoid_rows"), rel=1e-12
    )
    # doubling every weight is every row twice, not the same value (N is the total weight)
    twice = np.repeat(np.arange(30), 2)
    assert _ours(name, p, y, np.full(30, 2.0), convention="trapezoid_rows") == pytest.approx(
        _ours(name, p[twice], y[twice], convention="trapezoid_rows"), rel=1e-12
    )


def test_trapezoid_rows_of_one_row_is_undefined_as_in_the_peer(tu: Any) -> None:
    p, y = np.array([[0.8, 0.2]]), np.array([1])
    assert math.isnan(_peer_from_probs(tu, "AURC", p, y))
    for name in ("aurc", "augrc", "auac", "eaurc", "raulc"):
        with pytest.warns(UndefinedMetricWarning, match="total weight above 1"):
            assert _ours(name, p, y, convention="trapezoid_rows") is None
    # two rows whose weights sum to 1: W − 1 = 0
    p2, y2 = np.array([[0.8, 0.2], [0.6, 0.4]]), np.array([1, 0])
    with pytest.warns(UndefinedMetricWarning, match="total weight above 1"):
        assert _ours("aurc", p2, y2, [0.5, 0.5], convention="trapezoid_rows") is None


def test_trapezoid_rows_feeds_auac_eaurc_and_raulc_through_the_same_area(tu: Any) -> None:
    p, y = _case(12, 60, ties=False)
    conf = p.max(axis=1)
    err = (p.argmax(axis=1) != y).astype(float)
    area = _peer(tu, "AURC", conf, err)
    oracle = _peer(tu, "AURC", 1.0 - err, err)  # all correct rows ranked first
    acc = 1.0 - err.mean()
    opts = {"convention": "trapezoid_rows"}
    assert _ours("auac", p, y, **opts) == pytest.approx(1.0 - area, rel=1e-12)
    assert _ours("eaurc", p, y, **opts) == pytest.approx(area - oracle, rel=1e-10)
    assert _ours("raulc", p, y, **opts) == pytest.approx(
        ((1.0 - area) - acc) / ((1.0 - oracle) - acc), rel=1e-10
    )


# -- E-AURC with Geifman et al.'s continuous optimum --------------------------------------------
def _geifman_eaurc(conf: np.ndarray, err: np.ndarray) -> float:
    """Geifman et al.'s E-AURC as their code computes it: rows by descending confidence, the
    mean of the running error rates, minus r + (1 − r) ln(1 − r)."""
    rows = sorted(zip(conf.tolist(), err.tolist(), strict=True), key=lambda t: -t[0])
    risks, errors = [], 0.0
    for i, (_, e) in enumerate(rows, start=1):
        errors += e
        risks.append(errors / i)
    r = risks[-1]
    optimum = r + ((1 - r) * math.log(1 - r) if r < 1 else 0.0)
    return sum(risks) / len(risks) - optimum


@pytest.mark.parametrize(("seed", "n"), [(13, 5), (14, 80), (15, 400)])
def test_eaurc_continuous_optimum_matches_geifman(seed: int, n: int) -> None:
    p, y = _case(seed, n, ties=False)
    conf = p.max(axis=1)
    err = (p.argmax(axis=1) != y).astype(float)
    got = _ours("eaurc", p, y, optimum="continuous")
    assert got == pytest.approx(_geifman_eaurc(conf, err), rel=1e-12, abs=1e-15)
    # the continuous optimum lies below the exact one: a larger excess
    assert got >= _ours("eaurc", p, y) - 1e-15
    # weights: integer weights are repeated rows
    counts = np.random.default_rng(seed).integers(1, 4, size=n)
    idx = np.repeat(np.arange(n), counts)
    assert _ours("eaurc", p, y, counts.astype(float), optimum="continuous") == pytest.approx(
        _geifman_eaurc(conf[idx], err[idx]), rel=1e-12, abs=1e-15
    )


def test_eaurc_continuous_optimum_at_the_extremes() -> None:
    p = np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3]])
    # every prediction wrong: r = 1 and AURC* = 1 (0 log 0 = 0), so E-AURC = 0
    assert _ours("eaurc", p, np.array([1, 1, 1]), optimum="continuous") == 0.0
    # every prediction right: r = 0, AURC* = 0
    assert _ours("eaurc", p, np.array([0, 0, 0]), optimum="continuous") == 0.0


def test_eaurc_continuous_optimum_goes_with_the_mean_convention_only() -> None:
    p, y = _case(16, 10, ties=False)
    for convention in ("trapezoid", "trapezoid_rows"):
        with pytest.raises(UQValidationError, match="convention='mean' only"):
            _ours("eaurc", p, y, optimum="continuous", convention=convention)
    with pytest.raises(UQValidationError, match="optimum must be one of 'exact', 'continuous'"):
        _ours("eaurc", p, y, optimum="geifman")
    with pytest.raises(UQValidationError, match="convention must be one of 'trapezoid',"):
        _ours("augrc", p, y, convention="mean")


def test_new_options_are_in_the_registry_defaults_and_the_report() -> None:
    from uqcore import evaluate, registry

    assert registry.get("eaurc", "classification").defaults["optimum"] == "exact"
    assert registry.get("augrc", "classification").defaults["convention"] == "trapezoid"
    p, y = _case(17, 20, ties=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        report = evaluate(
            P.Probs(p),
            y,
            ["eaurc", "augrc"],
            params={"eaurc": {"optimum": "continuous"}, "augrc": {"convention": "trapezoid_rows"}},
        )
    assert report.params["eaurc"]["optimum"] == "continuous"
    assert report.params["augrc"]["convention"] == "trapezoid_rows"
