"""The value sort's choice per CPU (:func:`uqcore._backend.numpy_sorts_values_faster`): numpy's
``sort`` or the radix sort, the same values either way, in ``sort_host``, the batch's sorted
values and a whole report."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import uqcore
from uqcore import _backend
from uqcore import predictions as P


@pytest.fixture
def choice(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The cached choice emptied for the test (and restored after)."""
    monkeypatch.setattr(_backend, "_NUMPY_VALUE_SORT", [])
    return monkeypatch


@pytest.mark.parametrize("numpy_first", [False, True])
def test_either_sort_gives_numpys_values(choice: pytest.MonkeyPatch, numpy_first: bool) -> None:
    choice.setattr(_backend, "_NUMPY_VALUE_SORT", [numpy_first])
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(size=5000), np.repeat(rng.normal(size=20), 30), [np.inf]])
    x[7] = np.nan
    got = _backend.sort_host(x)
    np.testing.assert_array_equal(got, np.sort(x))
    assert (_backend.value_sort(np, x) is None) == numpy_first
    assert _backend.value_sort(np, x[:100]) is None  # below the radix sort's sizes


@pytest.mark.parametrize("fixed", ["numpy", "radix"])
def test_the_environment_fixes_the_choice(choice: pytest.MonkeyPatch, fixed: str) -> None:
    choice.setenv("UQCORE_VALUE_SORT", fixed)
    assert _backend.numpy_sorts_values_faster() is (fixed == "numpy")
    choice.setenv("UQCORE_VALUE_SORT", "radix" if fixed == "numpy" else "numpy")
    assert _backend.numpy_sorts_values_faster() is (fixed == "numpy")  # once per process


def test_the_timed_choice_is_a_bool_and_kept(choice: pytest.MonkeyPatch) -> None:
    choice.delenv("UQCORE_VALUE_SORT", raising=False)
    first = _backend.numpy_sorts_values_faster()
    assert isinstance(first, bool) and [first] == _backend._NUMPY_VALUE_SORT


def test_a_report_is_the_same_with_either_sort(choice: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    n = 4000
    mu, sd = rng.normal(size=n), rng.uniform(0.5, 1.5, n)
    y = mu + sd * rng.normal(size=n)
    docs = []
    for numpy_first in (False, True):
        choice.setattr(_backend, "_NUMPY_VALUE_SORT", [numpy_first])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = uqcore.evaluate(P.Gaussian(mu, sd), y)
        docs.append(json.dumps(report.to_dict()["values"], sort_keys=True))
    assert docs[0] == docs[1]
