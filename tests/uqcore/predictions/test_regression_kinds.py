"""Regression prediction kinds: validation messages and the quantities they give.

Each distribution's CDF, log-density and quantiles are checked against scipy.stats (an
independent implementation), and every bad input against the exact error message.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from scipy import stats

from tests.factories import to_backend
from uqcore import UQValidationError
from uqcore import predictions as P

RNG = np.random.default_rng(20261122)
N = 50
MU = RNG.normal(size=N) * 10.0
SD = RNG.uniform(0.01, 5.0, size=N)
Y = MU + SD * RNG.standard_t(3, size=N)
LEVELS = np.array([0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99])


def _close(a: Any, b: Any, rtol: float = 1e-10, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(
        np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=rtol, atol=atol
    )


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: P.Gaussian([0.0, 1.0], [1.0, -0.3]), "std must be > 0; std[1] = -0.3"),
        (lambda: P.Gaussian([0.0, 1.0], [1.0, 0.0]), "std must be > 0; std[1] = 0"),
        (lambda: P.Gaussian([0.0, np.nan], [1.0, 1.0]), "mean must be finite; mean[1] = nan"),
        (lambda: P.Gaussian([0.0, 1.0], [np.inf, 1.0]), "std must be finite; std[0] = inf"),
        (
            lambda: P.Gaussian([0.0, 1.0], [1.0]),
            "std must have the same shape as mean (2,), found (1,)",
        ),
        (lambda: P.Gaussian([], []), "mean must not be empty (N = 0)"),
        (lambda: P.Gaussian([[0.0]], [[1.0]]), "mean must be 1-D, found shape (1, 1)"),
        (lambda: P.Gaussian(["a"], [1.0]), "mean must hold real numbers"),
        (lambda: P.Laplace([0.0], [-1.0]), "scale must be > 0; scale[0] = -1"),
        (lambda: P.StudentT([0.0, 0.0], [1.0, 1.0], [3.0, -1.0]), "df must be > 0; df[1] = -1"),
        (lambda: P.StudentT([0.0], [1.0], 0.0), "df must be > 0; df[0] = 0"),
        (
            lambda: P.Mixture([[0.5, 0.5], [0.7, 0.4]], [[0, 1], [0, 1]], [[1, 1], [1, 1]]),
            "weights rows must sum to 1 (tolerance 1e-06); sum(weights[1]) = 1.1",
        ),
        (
            lambda: P.Mixture([[1.2, -0.2]], [[0, 1]], [[1, 1]]),
            "weights must be >= 0; weights[0, 1] = -0.2",
        ),
        (lambda: P.Mixture([[1.0, 0.0]], [[0, 1]], [[1, 0]]), "stds must be > 0; stds[0, 1] = 0"),
        (lambda: P.Samples(np.zeros((3, 0))), "draws must have at least one draw per row"),
        (lambda: P.Samples(np.zeros(3)), "draws must be 2-D, found shape (3,)"),
        (
            lambda: P.Quantiles([0.1, 0.5, 0.5], np.zeros((2, 3))),
            "levels must be strictly increasing; levels[2] = 0.5 <= levels[1] = 0.5",
        ),
        (
            lambda: P.Quantiles([0.0, 0.5], np.zeros((2, 2))),
            "levels must lie in the open interval (0, 1); levels[0] = 0",
        ),
        (
            lambda: P.Quantiles([0.1, 0.9], [[0.0, 1.0], [2.0, 1.0]]),
            "values must be non-decreasing along each row; values[1, 1] = 1 < values[1, 0] = 2",
        ),
        (
            lambda: P.Quantiles([0.1, 0.9], np.zeros((2, 3))),
            "values must have one column per level (2), found 3",
        ),
        (
            lambda: P.PointUncertainty([0.0, 1.0], [1.0, -2.0]),
            "uncertainty must be >= 0; uncertainty[1] = -2",
        ),
    ],
)
def test_invalid_input_names_argument_rule_and_first_bad_entry(build: Any, message: str) -> None:
    with pytest.raises(UQValidationError, match=re.escape(message)):
        build()


def test_validation_error_is_a_value_error() -> None:
    assert issubclass(UQValidationError, ValueError)


def test_mixture_weights_within_tolerance_are_renormalised() -> None:
    m = P.Mixture([[0.5, 0.5 + 5e-7]], [[0.0, 1.0]], [[1.0, 1.0]])
    assert float(np.sum(m.weights)) == pytest.approx(1.0, abs=1e-15)


# -- closed forms against scipy.stats ---------------------------------------------------------


def test_gaussian_matches_scipy() -> None:
    g = P.Gaussian(MU, SD)
    ref = stats.norm(MU, SD)
    _close(g.cdf(Y), ref.cdf(Y))
    _close(g.logpdf(Y), ref.logpdf(Y))
    _close(g.ppf(LEVELS), ref.ppf(LEVELS[None, :].repeat(N, 0).T).T)
    _close(g.std(), SD)
    _close(g.uncertainty(), SD)


def test_laplace_matches_scipy() -> None:
    lap = P.Laplace(MU, SD)
    ref = stats.laplace(MU, SD)
    _close(lap.cdf(Y), ref.cdf(Y))
    _close(lap.logpdf(Y), ref.logpdf(Y))
    _close(lap.ppf(LEVELS), ref.ppf(LEVELS[:, None]).T)
    _close(lap.std(), ref.std())


def test_student_t_matches_scipy() -> None:
    df = RNG.uniform(0.5, 30.0, size=N)
    t = P.StudentT(MU, SD, df)
    ref = stats.t(df, MU, SD)
    _close(t.cdf(Y), ref.cdf(Y))
    _close(t.logpdf(Y), ref.logpdf(Y))
    _close(t.ppf(LEVELS), ref.ppf(LEVELS[:, None]).T, rtol=1e-9)
    assert "std" not in t.capabilities  # some df <= 2
    t3 = P.StudentT(MU, SD, 3.5)
    _close(t3.std(), stats.t(3.5, MU, SD).std())
    assert {"std", "uncertainty"} <= t3.capabilities


def test_mixture_matches_component_sums_and_inverts_its_cdf() -> None:
    k = 4
    w = RNG.dirichlet(np.ones(k), size=N)
    means = MU[:, None] + RNG.normal(scale=3.0, size=(N, k))
    stds = RNG.uniform(0.1, 2.0, size=(N, k))
    m = P.Mixture(w, means, stds)
    cdf = np.array(
        [
            sum(w[i, j] * stats.norm.cdf(Y[i], means[i, j], stds[i, j]) for j in range(k))
            for i in range(N)
        ]
    )
    pdf = np.array(
        [
            sum(w[i, j] * stats.norm.pdf(Y[i], means[i, j], stds[i, j]) for j in range(k))
            for i in range(N)
        ]
    )
    _close(m.cdf(Y), cdf)
    _close(m.logpdf(Y), np.log(pdf))
    q = m.ppf(LEVELS)
    back = np.array(
        [
            [
                sum(w[i, j] * stats.norm.cdf(q[i, c], means[i, j], stds[i, j]) for j in range(k))
                for c in range(len(LEVELS))
            ]
            for i in range(N)
        ]
    )
    _close(back, np.broadcast_to(LEVELS, back.shape), rtol=0, atol=1e-10)
    mean = np.sum(w * means, axis=1)
    var = np.sum(w * (stds**2 + means**2), axis=1) - mean**2
    _close(m.mean(), mean)
    _close(m.std(), np.sqrt(var))
    mm = m.moment_matched()
    assert isinstance(mm, P.Gaussian)
    _close(mm.mean_, mean)
    _close(mm.std_, np.sqrt(var))


def test_mixture_logpdf_is_stable_far_in_the_tail() -> None:
    m = P.Mixture([[0.5, 0.5]], [[0.0, 1.0]], [[1.0, 1.0]])
    val = float(m.logpdf(np.array([60.0]))[0])
    ref = np.logaddexp(
        np.log(0.5) + stats.norm.logpdf(60.0, 0, 1), np.log(0.5) + stats.norm.logpdf(60.0, 1, 1)
    )
    assert val == pytest.approx(ref, rel=1e-12)


def test_samples_empirical_distribution() -> None:
    draws = RNG.normal(size=(N, 33))
    draws[:, 5] = draws[:, 4]  # ties within rows
    s = P.Samples(draws)
    _close(s.cdf(Y / 10), np.mean(draws <= (Y / 10)[:, None], axis=1))
    _close(s.ppf(LEVELS), np.quantile(draws, LEVELS, axis=1).T)
    _close(s.mean(), draws.mean(axis=1))
    _close(s.std(), draws.std(axis=1))


def test_samples_kde_logpdf_matches_gaussian_kde_with_same_bandwidth() -> None:
    draws = RNG.normal(size=(5, 40))
    s = P.Samples(draws)
    h = np.asarray(s.bandwidth("scott"))
    yy = RNG.normal(size=5)
    ref = [np.log(np.mean(stats.norm.pdf(yy[i], draws[i], h[i]))) for i in range(5)]
    _close(s.logpdf(yy, bandwidth="scott"), ref)
    sd = draws.std(axis=1, ddof=1)
    iqr = np.subtract(*np.percentile(draws, [75, 25], axis=1)) / 1.34
    _close(s.bandwidth("silverman"), 0.9 * np.minimum(sd, iqr) * 40 ** (-0.2))
    with pytest.raises(UQValidationError, match="all draws of row 0 are equal"):
        P.Samples(np.ones((2, 4))).logpdf(np.zeros(2))


def test_quantiles_interpolate_between_levels_and_refuse_extrapolation() -> None:
    lv = np.array([0.1, 0.5, 0.9])
    vals = np.array([[0.0, 1.0, 3.0], [-1.0, -1.0, 5.0]])
    q = P.Quantiles(lv, vals)
    _close(q.ppf([0.3, 0.5, 0.7]), [[0.5, 1.0, 2.0], [-1.0, -1.0, 2.0]])
    _close(q.point(), [1.0, -1.0])
    width = stats.norm.ppf(0.9) - stats.norm.ppf(0.1)
    _close(q.uncertainty(), [3.0 / width, 6.0 / width])
    with pytest.raises(
        UQValidationError,
        match=re.escape("levels must lie within the predicted levels [0.1, 0.9]; levels[0] = 0.05"),
    ):
        q.ppf([0.05])
    assert "cdf" not in q.capabilities
    assert "point" not in P.Quantiles([0.6, 0.9], vals[:, :2]).capabilities


def test_take_selects_rows_of_every_field() -> None:
    t = P.StudentT(MU, SD, RNG.uniform(3, 5, N))
    sub = t.take([3, 1, 1])
    _close(sub.loc, MU[[3, 1, 1]])
    _close(sub.df, t.df[[3, 1, 1]])
    q = P.Quantiles(LEVELS, np.sort(RNG.normal(size=(N, len(LEVELS))), axis=1))
    _close(q.take([2]).values, q.values[[2]])
    _close(q.take([2]).levels, LEVELS)


def test_kinds_run_on_other_backends(xp: Any) -> None:
    g = P.Gaussian(MU, SD)
    gb, yb = to_backend(g, Y, xp)
    _close(np.asarray(gb.cdf(yb)), g.cdf(Y))
    _close(np.asarray(gb.ppf(LEVELS)), g.ppf(LEVELS))
    t = P.StudentT(MU, SD, 4.0)
    tb, yb = to_backend(t, Y, xp)
    _close(np.asarray(tb.cdf(yb)), t.cdf(Y))
    _close(np.asarray(tb.logpdf(yb)), t.logpdf(Y))


def test_integer_and_list_inputs_become_float64() -> None:
    g = P.Gaussian([1, 2, 3], [1, 1, 1])
    assert g.mean_.dtype == np.float64
    assert P.KINDS["gaussian"] is P.Gaussian
    assert set(P.KINDS) == {
        "gaussian",
        "laplace",
        "student_t",
        "mixture",
        "samples",
        "quantiles",
        "point_uncertainty",
        "interval",
    }
