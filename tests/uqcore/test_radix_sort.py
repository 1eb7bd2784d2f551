"""The radix sort of float64 values (:func:`uqcore._jit.radix_sort`, through
:func:`uqcore._backend.radix_argsort` and :func:`~uqcore._backend.radix_sort`), against
numpy's sorts: the order is numpy's stable argsort exactly (ties, −0.0 and +0.0 among them,
in index order; NaN last) and the sorted values are numpy's sorted values; where it does not apply,
the callers' numpy sorts run, and the metrics agree on both paths."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import uqcore
from uqcore import _backend, _compiled, _jit
from uqcore import predictions as P
from uqcore.batch import Batch

FLOAT64_SPECIALS = np.array(
    [
        np.nan,
        -np.nan,
        np.inf,
        -np.inf,
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        1.0,
        -1.0,
        np.nextafter(1.0, 2.0),
        np.nextafter(1.0, 0.0),
    ]
)


@pytest.fixture
def everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The radix sort from one value on (its size threshold is a speed choice)."""
    assert _compiled.kernels() is not None
    monkeypatch.setattr(_backend, "RADIX_SORT_MIN", 1)


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    out = [
        np.array([2.5]),
        np.array([1.0, 1.0]),
        np.array([3.0, -1.0, 2.0]),
        np.full(300, 7.25),  # every digit shared: no pass at all
        np.full(300, -7.25),
        rng.normal(size=1000),
        np.abs(rng.normal(size=4097)),
        rng.uniform(0.5, 2.0, 5000),  # the exponent's top byte shared: a digit skipped
        np.round(rng.normal(size=3000), 1),  # many ties
        rng.integers(-3, 4, 2000).astype(np.float64),
        rng.normal(size=70_000) * 10.0 ** rng.integers(-300, 300, 70_000),  # every exponent
        rng.uniform(size=2000) * 1e-310,  # subnormals
        rng.choice(FLOAT64_SPECIALS, size=3000),
        FLOAT64_SPECIALS,
    ]
    z = rng.normal(size=1000)
    z[rng.random(1000) < 0.2] = np.nan
    out.append(z)
    # either side of the switch from 11-bit to byte digits (WIDE_DIGITS_MAX_ROWS rows)
    wide = _jit.WIDE_DIGITS_MAX_ROWS
    big = rng.normal(size=wide + 1) * 10.0 ** rng.integers(-300, 300, wide + 1)
    special = rng.random(wide + 1) < 0.01
    big[special] = rng.choice(FLOAT64_SPECIALS, size=int(special.sum()))
    out.append(big)
    out.append(np.round(rng.uniform(0.5, 2.0, wide), 3))  # ties, a top digit shared
    return out


def _check_sorted(x: np.ndarray, order: np.ndarray, values: np.ndarray) -> None:
    n = x.shape[0]
    assert values.dtype == np.float64 and values.shape == (n,)
    assert order.dtype == np.int64 and order.shape == (n,)
    # exactly numpy's stable argsort: ties (−0.0 and +0.0 among them) in index order, NaN last
    assert np.array_equal(order, np.argsort(x, kind="stable"))
    # numpy's sorted values, bit for bit but for −0.0 (written as +0.0) and NaN payloads
    expected = np.sort(x)
    expected[expected == 0.0] = 0.0
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(values), nan)
    assert np.array_equal(values[~nan].view(np.uint64), expected[~nan].view(np.uint64))


@pytest.mark.usefixtures("everywhere")
@pytest.mark.parametrize("index", range(len(_arrays())))
@pytest.mark.parametrize("layout", ["contiguous", "reversed", "strided"])
def test_radix_argsort_sorts_like_numpy(index: int, layout: str) -> None:
    x = _arrays()[index]
    if layout == "reversed":
        x = x[::-1]
    elif layout == "strided":
        x = np.repeat(x, 2)[::2]
        assert x.shape[0] == 1 or not x.flags.c_contiguous
    got = _backend.radix_argsort(np, x)
    assert got is not None
    order, values = got
    _check_sorted(x, order, values)
    only = _backend.radix_sort(np, x)
    assert only is not None
    assert np.array_equal(only.view(np.uint64), values.view(np.uint64))
    # the same order written as int32 (the rank order Spearman's ρ keeps)
    narrow = _backend.radix_argsort(np, x, index=np.int32)
    assert narrow is not None
    assert narrow[0].dtype == np.int32
    assert np.array_equal(narrow[0], order)
    assert np.array_equal(narrow[1].view(np.uint64), values.view(np.uint64))


@pytest.mark.usefixtures("everywhere")
def test_radix_argsort_keeps_tied_rows_in_index_order() -> None:
    rng = np.random.default_rng(5)
    x = rng.integers(0, 5, 10_000).astype(np.float64)
    got = _backend.radix_argsort(np, x)
    assert got is not None
    order, _ = got
    for v in range(5):
        rows = order[x[order] == v]
        assert np.array_equal(rows, np.flatnonzero(x == v))


def test_the_kernel_refuses_temporaries_shorter_than_the_input() -> None:
    """The caller's temporaries (numpy's, on huge pages) must hold N entries each: a shorter
    one is refused before any pass writes (no write past its end)."""
    jit = _compiled.kernels()
    if jit is None:
        pytest.skip("numba is not available here")
    x = np.random.default_rng(1).normal(size=1000)
    bits, out = x.view(np.uint64), np.empty(1000, dtype=np.uint64)
    order = np.empty(1000, dtype=np.int64)
    keys, idx = np.empty(1000, dtype=np.uint64), np.empty(1000, dtype=np.int32)
    jit.radix_sort(bits, out, order, keys, idx, idx.copy())
    assert np.array_equal(order, np.argsort(x, kind="stable"))
    for short in ((keys[:999], idx, idx), (keys, idx[:999], idx), (keys, idx, idx[:999])):
        with pytest.raises(ValueError, match="fewer than N"):
            jit.radix_sort(bits, out, order, *short)
    # values only: the index temporaries are not needed
    jit.radix_sort(bits, out, order[:0], keys, idx[:0], idx[:0])
    assert np.array_equal(out.view(np.float64), np.sort(x))
    with pytest.raises(ValueError, match="fewer than N"):
        jit.radix_sort(bits, out, order[:0], keys[:999], idx[:0], idx[:0])


def test_radix_argsort_writes_int64_or_int32_orders_only() -> None:
    x = np.random.default_rng(2).normal(size=1000)
    with pytest.raises(ValueError, match="index must be"):
        _backend.radix_argsort(np, x, index=np.int16)  # type: ignore[arg-type]


def test_radix_sort_applies_only_where_it_can(monkeypatch: pytest.MonkeyPatch) -> None:
    n = _backend.RADIX_SORT_MIN
    x = np.random.default_rng(0).normal(size=n)
    assert _backend.radix_argsort(np, x) is not None
    assert _backend.radix_argsort(np, x[:-1]) is None  # below the threshold
    assert _backend.radix_argsort(np, x.astype(np.float32)) is None
    assert _backend.radix_argsort(np, x.reshape(2, -1)) is None
    assert _backend.radix_argsort(torch, torch.from_numpy(x)) is None
    assert _backend.radix_sort(np, x.astype(np.float32)) is None
    monkeypatch.setattr(_backend, "RADIX_SORT_MAX", n - 1)
    assert _backend.radix_argsort(np, x) is None  # above the memory bound
    assert _backend.radix_sort(np, x) is None
    monkeypatch.setattr(_backend, "RADIX_SORT_MAX", n)
    monkeypatch.setattr(_compiled, "_KERNELS", [None])  # no numba
    assert _backend.radix_argsort(np, x) is None
    assert _backend.radix_sort(np, x) is None


@pytest.mark.usefixtures("everywhere")
def test_batch_order_caches_the_sorted_values_of_its_key() -> None:
    rng = np.random.default_rng(2)
    n = 500
    s = np.round(rng.uniform(0.5, 2.0, n), 2)
    batch = Batch(P.Gaussian(mean=np.zeros(n), std=s), rng.normal(size=n))
    order = batch.order("uncertainty", lambda: batch.uncertainty)
    assert batch.has_shared("stats:sorted:uncertainty")
    cached = batch.shared("stats:sorted:uncertainty", lambda: pytest.fail("not cached"))
    assert np.array_equal(cached, s[order])
    assert np.array_equal(cached, np.sort(s))
    desc = batch.order("uncertainty", lambda: batch.uncertainty, descending=True)
    assert np.array_equal(desc, order[::-1])


def _tied_gaussian(n: int, seed: int) -> tuple[P.Gaussian, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = np.round(rng.normal(size=n), 1)
    s = np.round(rng.uniform(0.5, 2.0, n), 1)
    y = np.round(mu + s * rng.normal(size=n), 1)
    return P.Gaussian(mean=mu, std=s), y, rng.integers(1, 4, n).astype(np.float64)


ORDERED = [
    "spearman",
    "ause",
    "aurg",
    "ence",
    "uce",
    "mdae",
    "merci",
    "nmerci",
    "pit",
    "ece",
    "rmsce",
    "calibration_error",
    "miscalibration_area",
    "corp_mcb",
    "size_stratified_coverage",
]


@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_agree_on_the_radix_and_numpy_sorts(
    monkeypatch: pytest.MonkeyPatch, weighted: bool
) -> None:
    """Every metric that sorts gives the same values whichever sort ordered the rows (ties
    included): with the radix sort, and with numpy's sorts (the compiled kernels off)."""
    pred, y, w = _tied_gaussian(3000, 8)
    weights = w if weighted else None
    assert _compiled.kernels() is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        radix = uqcore.evaluate(pred, y, metrics=ORDERED, sample_weight=weights)
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
        plain = uqcore.evaluate(pred, y, metrics=ORDERED, sample_weight=weights)
    for name in ORDERED:
        _assert_close(radix[name], plain[name], name)


def _assert_close(a: object, b: object, where: str, rtol: float = 1e-12) -> None:
    """Equal structure; numbers within ``rtol`` relative (0: equal), NaN where NaN."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            _assert_close(a[k], b[k], f"{where}.{k}", rtol)
    elif isinstance(a, (list, tuple, np.ndarray)):
        assert isinstance(b, (list, tuple, np.ndarray)) and len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            _assert_close(u, v, f"{where}[{i}]", rtol)
    elif isinstance(a, (float, np.floating)):
        assert isinstance(b, (float, np.floating)), where
        atol = 1e-15 if rtol else 0.0
        np.testing.assert_allclose(float(a), float(b), rtol=rtol, atol=atol, err_msg=where)
    else:
        assert a == b, where


def test_classification_metrics_are_identical_on_both_sorts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The classification metrics sort by stable argsorts, which the radix sort reproduces
    exactly: every value is the same on both paths, bit for bit (probabilities rounded so that
    confidences tie)."""
    rng = np.random.default_rng(4)
    n, c = 2000, 4
    p = np.round(rng.dirichlet(np.ones(c), size=n), 2)
    p /= p.sum(axis=1, keepdims=True)
    labels = rng.integers(0, c, n)
    w = rng.integers(1, 3, n).astype(np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        radix = uqcore.evaluate(P.Probs(p), labels, sample_weight=w)
        monkeypatch.setattr(_compiled, "_KERNELS", [None])
        plain = uqcore.evaluate(P.Probs(p), labels, sample_weight=w)
    assert radix.keys() == plain.keys() and len(radix) > 10
    for name in radix:
        _assert_close(radix[name], plain[name], name, rtol=0.0)
