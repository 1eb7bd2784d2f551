"""The bootstrap's rank block paths (Spearman's ρ, AUSE, AURG) through the compiled rank sums
(:func:`uqcore._jit.rank_sums`: one pass along each order) and through the numpy passes they
replace, against each other and against the metric on each explicit resample."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from uqcore import _compiled, metric
from uqcore import predictions as P
from uqcore.batch import Batch
from uqcore.stability import bootstrap
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import ranks
from uqcore.stability.weights import Resampler, counts_to_indices

NAMES = ["spearman", "ause", "aurg"]
#: Also the binned metrics, which read the weights and cumulative weights along the
#: uncertainty that the kernel's pass writes.
WITH_BINNED = [*NAMES, "ence", "uce"]
PARAMS: list[dict[str, dict[str, Any]] | None] = [
    None,
    {"ause": {"rule": "trapezoid"}, "aurg": {"rule": "trapezoid", "normalize": False}},
    {"ause": {"normalize": False}},
]


def _data(n: int, seed: int) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, n)
    return P.Gaussian(mu, sd), mu + sd * rng.normal(size=n)


class _Spy:
    """The compiled kernels, counting the calls of ``rank_sums``."""

    def __init__(self, jit: Any) -> None:
        self.jit = jit
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jit, name)

    def rank_sums(self, *args: Any) -> Any:
        self.calls += 1
        return self.jit.rank_sums(*args)


def _values(pred: Any, y: np.ndarray, w: Any, counts: np.ndarray, params: Any) -> Any:
    chosen, _ = select_metrics([pred], WITH_BINNED, params)
    engine = Engine(Batch(pred, y, w), chosen)
    assert sorted(engine._fast) == sorted(WITH_BINNED)
    return engine.values([Resample(row) for row in counts])


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("made_before", [False, True])
def test_compiled_rank_sums_equal_the_numpy_passes_and_the_metric(
    params: Any, weighted: bool, made_before: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``made_before``: the cumulative weights along the uncertainty exist before the kernel
    asks for them (made by another block path)."""
    jit = _compiled.kernels()
    assert jit is not None  # numba is a dependency
    n = 400
    pred, y = _data(n, 3)
    w = np.random.default_rng(4).integers(1, 4, size=n).astype(float) if weighted else None
    counts = Resampler(n).block(5, range(6), out=np.empty((6, n), dtype=np.uint8))
    assert counts.dtype == np.uint8  # as bootstrap() draws them
    spy = _Spy(jit)
    monkeypatch.setattr(ranks, "kernels", lambda: spy)
    if made_before:
        fused = ranks._compiled_sums

        def after_cum(keys: Any, ctx: Any) -> Any:
            ctx.cum("u", keys.order_u)
            return fused(keys, ctx)

        monkeypatch.setattr(ranks, "_compiled_sums", after_cum)
    got = _values(pred, y, w, counts, params)
    assert spy.calls > 0  # the compiled sums ran
    monkeypatch.undo()
    monkeypatch.setattr(_compiled, "_KERNELS", [None])
    ref = _values(pred, y, w, counts, params)
    for name in WITH_BINNED:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-15, err_msg=name)
    for name in NAMES:
        opts = (params or {}).get(name, {})
        for i, row in enumerate(counts):
            idx = counts_to_indices(row.astype(np.int64) if w is None else row * w)
            expect = metric(name, pred.take(idx), y[idx], **opts)
            assert got[name][i] == pytest.approx(expect, rel=1e-10, abs=1e-13), (name, i)


def test_bootstrap_values_do_not_depend_on_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """bootstrap() end to end (its uint8 count blocks, its threads): the same resample values
    with and without the compiled sums, to rounding."""
    pred, y = _data(3000, 8)
    spy = _Spy(_compiled.kernels())
    monkeypatch.setattr(ranks, "kernels", lambda: spy)
    on = bootstrap(pred, y, NAMES, n_resamples=40, seed=2, keep_values=True)
    assert spy.calls > 0
    monkeypatch.setattr(_compiled, "_KERNELS", [None])
    monkeypatch.setattr(ranks, "kernels", _compiled.kernels)
    off = bootstrap(pred, y, NAMES, n_resamples=40, seed=2, keep_values=True)
    for name in NAMES:
        np.testing.assert_allclose(on[name]["values"], off[name]["values"], rtol=1e-12)


def test_quantiles_of_the_errors_search_the_kernels_cumulative_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Beside the rank metrics (which run first in a block), the weighted quantiles of |e|
    (MdAE's median, n-MeRCI's Q_α) search the cumulative counts along |e| that the kernel wrote
    for the block, where alone they sum windows of the counts: the same searches, so the same
    values, and the metric on each explicit resample."""
    from uqcore.stability.blocks import quantiles

    n = 400
    pred, y = _data(n, 5)
    counts = Resampler(n).block(5, range(6), out=np.empty((6, n), dtype=np.uint8))
    quants = ["mdae", "nmerci"]
    searched: list[tuple[str, bool]] = []
    real = quantiles.weighted_quantiles

    def spy(ctx: Any, name: str, *args: Any) -> Any:
        searched.append((name, ctx.cached_cum(name) is not None))
        return real(ctx, name, *args)

    monkeypatch.setattr(quantiles, "weighted_quantiles", spy)

    def values(names: list[str]) -> Any:
        chosen, _ = select_metrics([pred], names, None)
        engine = Engine(Batch(pred, y), chosen)
        assert set(quants) <= set(engine._fast)
        return engine.values([Resample(row) for row in counts])

    beside = values([*quants, *NAMES])
    assert searched and all(had for name, had in searched if name == "e")
    searched.clear()
    alone = values(quants)
    assert searched and not any(had for name, had in searched if name == "e")
    for name in quants:
        np.testing.assert_array_equal(beside[name], alone[name], err_msg=name)
        for i, row in enumerate(counts):
            idx = counts_to_indices(row.astype(np.int64))
            expect = metric(name, pred.take(idx), y[idx])
            assert beside[name][i] == pytest.approx(expect, rel=1e-12, abs=1e-14), (name, i)


@pytest.mark.parametrize("index", [np.int32, np.intp])
def test_rank_sums_against_the_formulas(index: Any) -> None:
    """The kernel's five sums, written out from their definitions in numpy (int64 and plain
    float sums), on byte counts with zeros, for int32 and intp orders; and C^e written."""
    jit = _compiled.kernels()
    assert jit is not None
    rng = np.random.default_rng(11)
    b, n = 3, 1000  # > 256 rows: the two-level float sums take several blocks
    e = np.abs(rng.normal(size=n))
    u = e + rng.uniform(0.0, 1.0, n)
    order_e = np.argsort(e, kind="stable")
    order_u = np.argsort(u, kind="stable")
    where_e = np.empty(n, dtype=np.intp)
    where_e[order_e] = np.arange(n)
    perm = where_e[order_u]
    w = rng.poisson(1.0, size=(b, n)).astype(np.uint8)
    w[0, :5] = 7
    m_u = np.ascontiguousarray(w[:, order_u])
    r_u = np.cumsum(m_u, axis=1, dtype=np.int32)
    e_u = e[order_u]
    e_sorted = e[order_e]
    step_e = e_sorted - np.append(e_sorted[1:], 0.0)
    top = int(w.sum(axis=1).max())
    h = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, top + 2))])
    g = np.arange(h.shape[0]) * h
    ce = np.full((b, n), -1, dtype=np.int32)
    cross, s1, s2, s3, cubes = jit.rank_sums(
        m_u, r_u, w, order_e.astype(index), perm.astype(index), e_u, step_e, h, g, ce
    )
    for row in range(b):
        m = m_u[row].astype(np.int64)
        r = r_u[row].astype(np.int64)
        c_e = np.cumsum(w[row, order_e].astype(np.int64))
        np.testing.assert_array_equal(ce[row], c_e)
        assert cross[row] == int(np.sum(m * (2 * r - m) * (2 * c_e[perm] - m)))
        assert cubes[row] == int(np.sum(w[row].astype(np.int64) ** 3))
        assert s1[row] == pytest.approx(np.sum(m * e_u * h[r - m]), rel=1e-13)
        assert s2[row] == pytest.approx(np.sum(r * e_u * (h[r] - h[r - m])), rel=1e-13)
        assert s3[row] == pytest.approx(np.sum(g[c_e] * step_e), rel=1e-13)
