"""The compiled random groups of adversarial group calibration against numpy's own sampler:
the same histograms from the same generator (which ends in the same state), the same errors
to the last bit, numpy's order of summation, and numpy's log-factorial values."""

from __future__ import annotations

import decimal
import math
from typing import Any

import numpy as np
import pytest

from uqcore import metric
from uqcore import predictions as P
from uqcore._compiled import kernels
from uqcore.regression import group_calibration as gc

jit = kernels()
needs_jit = pytest.mark.skipif(jit is None, reason="numba is not installed")


def _numpy(
    seed: int, cats: np.ndarray[Any, Any], g: int, count: int, expected: Any, root: bool
) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    hist = rng.multivariate_hypergeometric(cats, g, size=count)
    diff = np.cumsum(hist[:, :-1], axis=1) / g - expected[None, :]
    err = np.sqrt(np.mean(diff * diff, axis=1)) if root else np.mean(np.abs(diff), axis=1)
    return err, rng.bit_generator.state


def _ours(
    seed: int, cats: np.ndarray[Any, Any], g: int, count: int, expected: Any, root: bool
) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    err = gc.hypergeometric_group_errors(rng, cats, [g], count, expected, root)
    assert err.shape == (1, count)
    return err[0], rng.bit_generator.state


def _cases(n: int, seed: int) -> list[tuple[int, np.ndarray[Any, Any], int, int, Any, bool]]:
    rs = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ncol = int(rs.integers(2, 320))  # > 129 levels: numpy splits the sum in halves
        high = int(rs.choice([2, 4, 30, 300, 3000, 100_000]))  # ≥ 126 rows: Stirling's series
        cats = rs.integers(0, high, size=ncol)
        if rs.uniform() < 0.2:
            cats[rs.uniform(size=ncol) < 0.5] = 0  # empty categories
        total = int(cats.sum())
        if total == 0:
            continue
        # small samples (drawn one by one), within 10 of all rows, the middle, and all rows
        g = int(rs.choice([rs.integers(1, 12), total - int(rs.integers(0, 12))]))
        g = min(max(g, 1), total) if rs.uniform() < 0.5 else int(rs.integers(1, total + 1))
        expected = np.sort(rs.uniform(size=ncol - 1))
        seed, count = int(rs.integers(0, 2**63)), int(rs.integers(1, 25))
        out.append((seed, cats, g, count, expected, bool(rs.integers(0, 2))))
    return out


@needs_jit
@pytest.mark.parametrize("block", range(4))
def test_equal_to_numpys_sampler_and_errors(block: int) -> None:
    for seed, cats, g, count, expected, root in _cases(150, block):
        want, state = _numpy(seed, cats, g, count, expected, root)
        got, after = _ours(seed, cats, g, count, expected, root)
        assert np.array_equal(got, want), (cats.tolist(), g, root)
        assert after == state  # the same draws, no more and no fewer


@needs_jit
@pytest.mark.parametrize("kept", [126, 200, 1 << 17])
def test_the_kept_table_size_changes_no_draw(monkeypatch: pytest.MonkeyPatch, kept: int) -> None:
    """Past the kept log(k!) the kernel evaluates numpy's series itself: whatever the table's
    length, the same histograms and errors as numpy's sampler."""
    monkeypatch.setattr(gc, "MAX_LOG_FACTORIALS", kept)
    monkeypatch.setattr(gc, "_LOG_FACTORIALS", [])
    for seed, cats, g, count, expected, root in _cases(40, 11):
        want, state = _numpy(seed, cats, g, count, expected, root)
        got, after = _ours(seed, cats, g, count, expected, root)
        assert np.array_equal(got, want), (kept, cats.tolist(), g, root)
        assert after == state
    assert gc.log_factorials(10**9).shape[0] == max(kept, 126)


@needs_jit
def test_sizes_in_turn_from_one_generator() -> None:
    """Several sizes in one call: numpy's sampler called for each size in turn."""
    rs = np.random.default_rng(1)
    for _ in range(30):
        cats = rs.integers(0, 200, size=int(rs.integers(2, 150)))
        total = int(cats.sum())
        if total < 2:
            continue
        sizes = [int(v) for v in rs.integers(1, total + 1, size=int(rs.integers(1, 12)))]
        expected = np.sort(rs.uniform(size=cats.shape[0] - 1))
        root = bool(rs.integers(0, 2))
        a, b = np.random.default_rng(5), np.random.default_rng(5)
        want = np.stack(
            [
                gc.group_errors(a.multivariate_hypergeometric(cats, g, size=9), g, expected, root)
                for g in sizes
            ]
        )
        got = gc.hypergeometric_group_errors(b, cats, sizes, 9, expected, root)
        assert np.array_equal(got, want)
        assert a.bit_generator.state == b.bit_generator.state


def _reference_scores(
    cats: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], **o: Any
) -> dict[str, Any]:
    """The scores as written before the kernel: numpy's samplers, one size at a time, 1-D
    means and standard deviations."""
    n_rows = int(cats.sum())
    rng = np.random.default_rng(o["seed"])
    ratios = np.linspace(0.0, 1.0, o["n_bins"])
    sizes, means, stds, stderrs = [], [], [], []
    for r in ratios:
        g = max(round(n_rows * float(r)), 2)
        if not o["draw_with_replacement"]:
            g = min(g, n_rows)
        k = o["trials"] * o["draws"]
        if o["draw_with_replacement"]:
            hist = rng.multinomial(g, cats / n_rows, size=k)
        else:
            hist = rng.multivariate_hypergeometric(cats, g, size=k)
        diff = np.cumsum(hist[:, :-1], axis=1) / g - expected[None, :]
        if o["cali_type"] == "mean_abs":
            err = np.mean(np.abs(diff), axis=1)
        else:
            err = np.sqrt(np.mean(diff * diff, axis=1))
        worst = err.reshape(o["trials"], o["draws"]).max(axis=1)
        sizes.append(g)
        means.append(float(np.mean(worst)))
        if o["trials"] > 1:
            sd = float(np.std(worst, ddof=1))
            stds.append(sd)
            stderrs.append(sd / math.sqrt(o["trials"]))
        else:
            stds.append(None)
            stderrs.append(None)
    return {
        "value": float(np.mean(means)),
        "group_sizes": [float(r) for r in ratios],
        "group_rows": sizes,
        "score_mean": means,
        "score_std": stds,
        "score_stderr": stderrs,
        "cali_type": o["cali_type"],
        "prop_type": o["prop_type"],
    }


@pytest.mark.parametrize("jit_on", [True, False])
@pytest.mark.parametrize(
    ("trials", "draws", "n_bins"), [(10, 10, 10), (1, 7, 4), (13, 3, 2), (2, 1, 25)]
)
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("cali_type", ["mean_abs", "root_mean_sq"])
def test_scores_equal_the_per_size_numpy_procedure(
    monkeypatch: pytest.MonkeyPatch,
    jit_on: bool,
    trials: int,
    draws: int,
    n_bins: int,
    replace: bool,
    cali_type: str,
) -> None:
    if not jit_on:
        monkeypatch.setattr(gc, "kernels", lambda: None)
    rs = np.random.default_rng(trials * 100 + draws)
    for m in (1, 9, 99, 200):
        cats = rs.integers(0, 40, size=m + 1)
        cats[0] += 3
        expected = np.sort(rs.uniform(size=m))
        opts = {
            "cali_type": cali_type,
            "prop_type": "interval",
            "n_bins": n_bins,
            "trials": trials,
            "draws": draws,
            "draw_with_replacement": replace,
            "seed": int(rs.integers(0, 1000)),
        }
        gc._RECENT.clear()
        assert gc.group_scores(cats, expected, **opts) == _reference_scores(cats, expected, **opts)


@needs_jit
def test_edges_equal_numpys() -> None:
    e1, e3 = np.array([0.5]), np.array([0.2, 0.5, 0.8])
    edges = [
        (np.array([5, 0]), 5, e1),  # every row of one category
        (np.array([0, 7]), 3, e1),
        (np.array([1, 1]), 1, e1),
        (np.array([3, 4, 0, 9]), 16, e3),  # all rows: the complement of nothing
        (np.array([3, 4, 0, 9]), 15, e3),
        (np.array([10**6, 10**6, 10**6, 1]), 10, e3),  # Stirling's series past the table
        (np.array([10**8, 3, 5, 10**8]), 10**8, e3),  # past the kept table (2^20 values)
        (np.array([0, 0, 20, 0]), 10, e3),
    ]
    for cats, g, expected in edges:
        for root in (False, True):
            for seed in range(5):
                want, state = _numpy(seed, cats, g, 7, expected, root)
                got, after = _ours(seed, cats, g, 7, expected, root)
                assert np.array_equal(got, want), (cats.tolist(), g)
                assert after == state


@needs_jit
@pytest.mark.parametrize("n", [*range(0, 40), 127, 128, 129, 135, 255, 256, 257, 300, 1000, 4099])
def test_pairwise_sum_is_numpys_order(n: int) -> None:
    """numpy's float sum of a contiguous row, bit for bit (magnitudes far apart, so that the
    order shows)."""
    rs = np.random.default_rng(n)
    for _ in range(20):
        a = rs.uniform(size=n) * 10.0 ** rs.integers(-12, 12, size=n)
        assert jit._pairwise_sum(a, n) == np.add.reduce(a)
        rows = np.stack([a, a[::-1]])  # a row of a C-contiguous array, as the errors reduce
        assert jit._pairwise_sum(a, n) == np.sum(rows, axis=1)[0]


def test_log_factorials_are_numpys_values() -> None:
    """Below 126, the correctly rounded log(k!) (numpy's table holds those: the sampler tests
    above draw through it); above, numpy's Stirling series with the C library's log, computed
    in Python here, equal to the compiled fill."""
    table = gc.log_factorials(3000)
    assert table.shape[0] >= 3000 and not table.flags.writeable
    with decimal.localcontext() as ctx:
        ctx.prec = 80
        for k in range(2, 126):
            exact = decimal.Decimal(math.factorial(k)).ln()
            assert table[k] == float(exact)
            # rounded correctly: no double is closer to the exact value
            below, above = math.nextafter(table[k], 0.0), math.nextafter(table[k], math.inf)
            err = abs(decimal.Decimal(table[k]) - exact)
            assert err <= abs(decimal.Decimal(below) - exact)
            assert err <= abs(decimal.Decimal(above) - exact)
    assert table[0] == table[1] == 0.0
    series = gc.stirling_log_factorials(126, 3000)
    assert np.array_equal(series, table[126:3000])
    # the series is log(k!) within a few units in the last place
    ks = np.array([126, 1000, 2999])
    assert np.allclose(series[ks - 126], [math.lgamma(k + 1.0) for k in ks], rtol=1e-14)


def test_log_factorials_grow_and_stay_equal() -> None:
    small = gc.log_factorials(200)
    big = gc.log_factorials(5000)
    assert np.array_equal(big[: small.shape[0]], small)
    assert gc.log_factorials(10**12).shape[0] == gc.MAX_LOG_FACTORIALS


@pytest.mark.parametrize("cali_type", ["mean_abs", "root_mean_sq"])
@pytest.mark.parametrize("replace", [False, True])
def test_metric_equal_with_and_without_the_kernels(
    monkeypatch: pytest.MonkeyPatch, cali_type: str, replace: bool
) -> None:
    """The metric's value and curve: the same with the compiled groups and with numpy's."""
    rng = np.random.default_rng(3)
    n = 2_000
    mu, sd = rng.normal(size=n), rng.uniform(0.3, 1.5, size=n)
    pred, y = P.Gaussian(mu, sd), mu + 1.2 * sd * rng.normal(size=n)
    opts = {"cali_type": cali_type, "draw_with_replacement": replace, "seed": 11}
    gc._RECENT.clear()
    compiled = metric("adversarial_group_calibration", pred, y, **opts)
    gc._RECENT.clear()
    monkeypatch.setattr(gc, "kernels", lambda: None)
    plain = metric("adversarial_group_calibration", pred, y, **opts)
    gc._RECENT.clear()
    assert compiled == plain


@needs_jit
def test_expected_proportions_must_match_the_categories() -> None:
    with pytest.raises(ValueError, match="expected proportions"):
        gc.hypergeometric_group_errors(
            np.random.default_rng(0), np.array([3, 4, 5]), [2], 4, np.array([0.5]), False
        )
