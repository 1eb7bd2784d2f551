"""Every metric option's declared domain, for every registered metric: the check agrees with
the published JSON Schema, the defaults lie inside, and every value the check accepts is one
the implementation computes with (so a service that checks options before accepting a
submission never accepts one its worker refuses)."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import jsonschema
import numpy as np
import pytest

from tests.factories import (
    CLASSIFICATION_KINDS,
    KINDS,
    QUANTILE_LEVELS,
    make_classification,
    make_prediction,
)
from uqcore import UQValidationError, registry
from uqcore.batch import make_batch
from uqcore.options import MAX_BINS, Option, Range

SPECS = registry.specs()


def _ids(spec: registry.MetricSpec, option: str) -> str:
    return f"{spec.task}-{spec.name}-{option}"


OPTIONS = [pytest.param(spec, key, id=_ids(spec, key)) for spec in SPECS for key in spec.options]


def _near(r: Range | None) -> list[float]:
    """Numbers at and just beyond the edges of ``r`` (and some plain ones)."""
    out = [-1.0, 0.0, 0.5, 1.0, 1.5, 3.0, 1e9]
    if r is not None:
        for edge in (r.lo, r.hi):
            if edge is not None:
                out += [edge, math.nextafter(edge, -math.inf), math.nextafter(edge, math.inf)]
    return out


def _probes(option: Option) -> list[Any]:
    """Values of every JSON type, in and out of the option's domain."""
    numbers = _near(option.range)
    ints = sorted({int(x) for x in numbers if abs(x) < 1e12} | {2, 10, 2**70})
    values: list[Any] = [None, True, False, "", "bogus", {}, *ints, *numbers]
    values += [c for c in option.choices if c is not None]
    values += [[], [0.5], [0.2, 0.8], [0.8, 0.2], [0.5, "a"], [True], [[0.5]], [0.5] * 20_000]
    values += [[x] for x in numbers] + [[x] * 40 for x in numbers]
    values.append(option.default)
    return values


def _refusal(option: Option, value: Any) -> UQValidationError | None:
    try:
        option.check(value)
    except UQValidationError as exc:
        return exc
    return None


@pytest.mark.parametrize(("spec", "key"), OPTIONS)
def test_check_agrees_with_published_schema(spec: registry.MetricSpec, key: str) -> None:
    option = spec.options[key]
    schema = option.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in _probes(option):
        if isinstance(value, tuple):
            value = list(value)
        refusal = _refusal(option, value)
        accepted = refusal is None
        if refusal is not None:
            assert refusal.argument == key
            assert f"metric {spec.name!r}: {key} must be" in str(refusal)
        published = validator.is_valid(value)
        if option.increasing and isinstance(value, list) and published and not accepted:
            # "strictly increasing" is said in the schema's description, not checked by it
            assert any(b <= a for a, b in itertools.pairwise(value)), value
            continue
        assert accepted == published, f"{spec.name}.{key} = {value!r}: check {accepted}"


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.task}-{s.name}")
def test_defaults_lie_in_their_domains(spec: registry.MetricSpec) -> None:
    assert set(spec.options) == set(spec.defaults)
    assert spec.resolve_params(None) == dict(spec.defaults)
    described = spec.describe()["options"]
    for key, default in spec.defaults.items():
        want = list(default) if isinstance(default, tuple) else default
        assert described[key]["default"] == want


def test_options_that_size_memory_are_bounded() -> None:
    for spec in SPECS:
        for key, option in spec.options.items():
            counts = key.startswith(("n_", "num_")) or key in ("grid",)
            if counts and "integer" in option.types:
                assert option.range is not None and option.range.hi is not None, (spec.name, key)
                assert option.range.hi <= 1_000_000, (spec.name, key)
            if "array" in option.types and key not in spec.row_options:
                # a per-row option has one value per row (checked against the batch's N)
                assert option.max_items is not None, (spec.name, key)
    assert MAX_BINS <= 100_000


def _batch(spec: registry.MetricSpec) -> Any:
    """A small batch of a kind the metric applies to (classification with OOD flags and soft
    labels); for options about quantile levels, a prediction that can give any level."""
    if spec.task == "classification":
        for kind in CLASSIFICATION_KINDS:
            pred, y, targets = make_classification(kind, 40, seed=3)
            if spec.why_not(pred, frozenset(targets)) is None:
                return make_batch(pred, y, None, **targets)
        raise AssertionError(spec.name)
    for kind in KINDS:
        pred, y = make_prediction(kind, 40, seed=3)
        if spec.why_not(pred) is None:
            return make_batch(pred, y, None)
    raise AssertionError(spec.name)


def _accepted(spec: registry.MetricSpec, key: str, n: int) -> list[Any]:
    option = spec.options[key]
    out = []
    for value in _probes(option):
        if isinstance(value, list) and len(value) > 100:
            continue  # long lists: the bound is checked above; computing with them is slow
        count = key.startswith(("num_", "n_")) or key == "grid"
        if count and isinstance(value, int) and not isinstance(value, bool) and value > 50:
            continue  # large counts: checked for the bound, not computed (slow)
        try:
            out.append(spec.resolve_params({key: value}, n)[key])
        except UQValidationError:
            continue
    return out


@pytest.mark.parametrize(("spec", "key"), OPTIONS)
def test_every_accepted_value_computes(spec: registry.MetricSpec, key: str) -> None:
    batch = _batch(spec)
    estimators = batch.prediction.estimator_names() if spec.task == "classification" else []
    for value in _accepted(spec, key, batch.n):
        named = spec.task == "classification" and key in ("estimator", "aleatoric", "epistemic")
        if named and value not in estimators:
            continue  # names are checked against the prediction (service: before the 202)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", registry.UndefinedMetricWarning)
            got = registry.call(spec, batch, {key: value})
        if isinstance(got, dict):
            got = got["value"]
        assert got is None or np.isfinite(got), (spec.name, key, value, got)


def test_quantile_levels_of_the_factory_cover_the_probes() -> None:
    # the quantiles kind interpolates between its levels; probes at 0.2/0.5/0.8 lie inside
    assert QUANTILE_LEVELS[0] <= 0.2 and QUANTILE_LEVELS[-1] >= 0.8
