"""The analyses contract (service.analyses): one typed model, its stored document, and the
analyses a benchmark sets."""

from __future__ import annotations

import json
import pickle

import pytest
from pydantic import ValidationError

from service.analyses import Analyses


def test_the_defaults_are_the_documented_ones() -> None:
    # Written out here from the API's documentation (GET /docs, the Analyses component), not
    # read from the model: a changed default must show up as a failing test.
    assert Analyses().document() == {
        "metrics": "all",
        "params": {},
        "bootstrap": {"n_resamples": 0, "method": "percentile", "level": 0.95},
        "stability": {"enabled": False, "repeats": 100},
        "seed": 0,
    }


def test_document_round_trip_keeps_every_field() -> None:
    doc = {
        "metrics": ["mae", "nmerci"],
        "params": {"nmerci": {"alpha": 0.9}},
        "bootstrap": {"n_resamples": 50, "method": "bca", "level": 0.9},
        "stability": {"enabled": True, "repeats": 7},
        "seed": 3,
        "estimators": ["entropy_bma"],
    }
    a = Analyses.from_document(doc)
    assert a.document() == doc
    assert Analyses.from_json(json.dumps(doc)) == a
    assert a.bootstrap.unit == "row" and a.stability.repeats == 7


def test_curves_are_off_by_default_and_stored_only_when_asked() -> None:
    # a document stored before the field existed has no "curves": it reads as false and
    # stores (and hashes) the same document again
    old = {
        "metrics": ["mae"],
        "params": {},
        "bootstrap": {"n_resamples": 0, "method": "percentile", "level": 0.95},
        "stability": {"enabled": False, "repeats": 100},
        "seed": 0,
    }
    a = Analyses.from_document(old)
    assert a.curves is False and a.document() == old
    on = Analyses.from_document({**old, "curves": True})
    assert on.curves is True and on.document() == {**old, "curves": True} and on != a
    with pytest.raises(ValidationError):
        Analyses.model_validate({"curves": "yes"})
    # a benchmark's submissions carry curves only with its setting curves="coarse"
    bench = Analyses.of_benchmark(["mae"], params={}, bootstrap={}, seed=0)
    assert bench.curves is False and "curves" not in bench.document()
    coarse = Analyses.of_benchmark(["mae"], params={}, bootstrap={}, seed=0, curves=True)
    assert coarse.curves is True and coarse.document()["curves"] is True


def test_estimators_appear_in_the_document_only_when_set() -> None:
    assert "estimators" not in Analyses(metrics=["mae"]).document()
    assert Analyses(estimators="all").document()["estimators"] == "all"


def test_a_benchmark_sets_the_unit_the_params_of_its_metrics_and_the_seed() -> None:
    a = Analyses.of_benchmark(
        ["mae", "crps"],
        params={"crps": {"estimator": "pwm"}, "nmerci": {"alpha": 0.8}},
        bootstrap={"n_resamples": 100, "method": "percentile", "level": 0.95, "unit": "cluster"},
        seed=9,
        estimators=None,
    )
    assert a.bootstrap.unit == "cluster"
    assert a.document() == {
        "metrics": ["mae", "crps"],
        "params": {"crps": {"estimator": "pwm"}},
        "bootstrap": {"n_resamples": 100, "method": "percentile", "level": 0.95, "unit": "cluster"},
        "stability": {"enabled": False, "repeats": 100},
        "seed": 9,
    }
    # The unit is part of the value: the same fields with row resampling differ.
    rows = Analyses.from_document({**a.document(), "bootstrap": {"n_resamples": 100}})
    assert rows != a and rows.bootstrap.unit == "row"


def test_a_request_cannot_set_the_unit() -> None:
    with pytest.raises(ValidationError, match="unit"):
        Analyses.model_validate({"bootstrap": {"n_resamples": 10, "unit": "cluster"}})


def test_a_bad_stored_unit_is_refused() -> None:
    with pytest.raises(ValueError, match=r"bootstrap\.unit"):
        Analyses.from_document({"bootstrap": {"unit": "team"}})


def test_the_model_is_frozen_and_parsed_once_per_document() -> None:
    raw = json.dumps({"metrics": ["mae"], "seed": 1})
    a, b = Analyses.from_json(raw), Analyses.from_json(raw.encode())
    assert a is b
    with pytest.raises(ValidationError):
        a.seed = 2  # type: ignore[misc]


def test_pickling_keeps_the_unit() -> None:
    a = Analyses.of_benchmark(["mae"], params={}, bootstrap={"unit": "cluster"}, seed=0)
    again = pickle.loads(pickle.dumps(a))
    assert again == a and again.bootstrap.unit == "cluster"
