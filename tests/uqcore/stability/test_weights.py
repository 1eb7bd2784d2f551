"""Resamples as weights: counts, strata, clusters, subsamples; reproducibility."""

from __future__ import annotations

import numpy as np
import pytest

from uqcore._validation import UQValidationError
from uqcore.stability import weights as W


def test_multinomial_counts_are_a_resample_of_n_rows() -> None:
    c = W.multinomial_counts(50, np.random.default_rng(0))
    assert c.sum() == 50 and c.min() >= 0 and c.shape == (50,)
    idx = np.random.default_rng(0).integers(0, 50, size=50, dtype=np.int32)
    np.testing.assert_array_equal(c, np.bincount(idx, minlength=50))


def test_chunked_multinomial_counts_have_the_multinomial_distribution() -> None:
    """Above CHUNK rows: sum N, mean 1, variance 1 − 1/N, covariance −1/N, every row reachable."""
    n = 3 * W.CHUNK + 17
    draws = np.stack([W.multinomial_counts(n, np.random.default_rng(s)) for s in range(40)])
    assert np.all(draws.sum(axis=1) == n)
    assert abs(draws.mean() - 1) < 1e-12
    assert abs(draws.var() - 1) < 0.01
    # chunk totals vary like Binomial(N, chunk/N), not fixed
    totals = draws[:, : W.CHUNK].sum(axis=1)
    p = W.CHUNK / n
    assert 0.5 < np.var(totals, ddof=1) / (n * p * (1 - p)) < 1.6
    assert np.all(draws.max(axis=0)[[0, W.CHUNK - 1, W.CHUNK, n - 1]] >= 0)
    assert np.count_nonzero(draws.sum(axis=0)) > 0.99 * n


def test_block_equals_per_resample_counts_and_is_independent_of_blocking() -> None:
    for kw in (
        {},
        {"scheme": "poisson"},
        {"unit": "stratified", "groups": np.arange(40) % 3},
        {"unit": "cluster", "groups": np.arange(40) // 4},
    ):
        r = W.Resampler(40, **kw)
        block = r.block(9, [3, 4, 5, 6])
        for j, i in enumerate([3, 4, 5, 6]):
            np.testing.assert_array_equal(block[j], r.counts(9, i))
        np.testing.assert_array_equal(r.block(9, [5])[0], block[2])
        assert not np.array_equal(r.block(10, [3])[0], block[0])
        out = np.full((6, 40), -1.0)  # a reused buffer gives the same counts
        got = r.block(9, [3, 4, 5, 6], out=out)
        np.testing.assert_array_equal(got, block)
        assert np.shares_memory(got, out) and got.shape == (4, 40)


def test_multinomial_counts_into_a_buffer_are_the_same_draws() -> None:
    for n in (50, 2 * W.CHUNK + 5):
        ref = W.multinomial_counts(n, np.random.default_rng(3))
        row = np.full(n, -1.0)
        W.multinomial_counts(n, np.random.default_rng(3), out=row)
        np.testing.assert_array_equal(row, ref)


def test_poisson_counts_have_mean_one() -> None:
    c = W.poisson_counts(20000, np.random.default_rng(1))
    assert abs(c.mean() - 1) < 0.03 and abs(c.var() - 1) < 0.05


def test_stratified_counts_keep_group_sizes() -> None:
    groups = np.array(["a", "b", "a", "c", "b", "a", "c", "c", "c"])
    codes, g = W.group_codes(groups, 9)
    assert g == 3
    for s in range(20):
        c = W.stratified_counts(codes, np.random.default_rng(s))
        np.testing.assert_array_equal(np.bincount(codes, weights=c), np.bincount(codes))
    # every member of a group can be drawn
    hits = sum(W.stratified_counts(codes, np.random.default_rng(s)) > 0 for s in range(200))
    assert np.all(hits > 0)


def test_cluster_counts_are_constant_within_groups() -> None:
    codes = np.repeat(np.arange(7), [1, 2, 3, 1, 5, 2, 2])
    for s in range(20):
        c = W.cluster_counts(codes, 7, np.random.default_rng(s))
        per_group = [np.unique(c[codes == k]) for k in range(7)]
        assert all(len(u) == 1 for u in per_group)
        assert sum(int(u[0]) for u in per_group) == 7  # G groups drawn


def test_subsamples() -> None:
    rng = np.random.default_rng(2)
    idx = W.subsample_indices(100, 30, rng)
    assert len(np.unique(idx)) == 30 and np.all(np.diff(idx) > 0)
    m = W.subsample_mask(100, 30, np.random.default_rng(2))
    np.testing.assert_array_equal(np.flatnonzero(m), idx)
    with pytest.raises(UQValidationError, match="subsample size"):
        W.subsample_indices(10, 11, rng)


def test_counts_to_indices_inverts_bincount() -> None:
    c = np.array([0, 2, 1, 0, 3])
    idx = W.counts_to_indices(c)
    np.testing.assert_array_equal(idx, [1, 1, 2, 4, 4, 4])
    np.testing.assert_array_equal(np.bincount(idx, minlength=5), c)
    with pytest.raises(UQValidationError, match="counts"):
        W.counts_to_indices([0.5, 1.0])


def test_validation() -> None:
    with pytest.raises(UQValidationError, match="scheme"):
        W.Resampler(5, scheme="jackknife")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="unit"):
        W.Resampler(5, unit="image")  # type: ignore[arg-type]
    with pytest.raises(UQValidationError, match="length 5"):
        W.Resampler(5, unit="cluster", groups=[1, 2])
    with pytest.raises(UQValidationError, match="seed"):
        W.resample_rng(-3)
