"""Student-t quantiles when every row has the same degrees of freedom: t_df(p) is computed once
per level, and the quantiles and interval bounds are those of each row's own evaluation to the
last bit (and scipy's ``t.ppf`` to rounding); different df keep the per-row evaluation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy import special, stats

from uqcore import predictions as P

LEVELS = [1e-9, 0.025, 0.05, 0.3, 0.5, 0.77, 0.95, 0.999999]


def _per_row(pred: P.StudentT, levels: list[float]) -> np.ndarray[Any, Any]:
    """loc + scale·t_df(p), one ``stdtrit`` per row and level (the definition)."""
    lv = np.asarray(levels, dtype=np.float64)
    n = pred.n
    q = special.stdtrit(pred.df[:, None], np.broadcast_to(lv[None, :], (n, lv.shape[0])))
    return pred.loc[:, None] + pred.scale[:, None] * q  # type: ignore[no-any-return]


@pytest.mark.parametrize("df", [0.7, 1.0, 2.5, 4.0, 30.0, 1e6])
@pytest.mark.parametrize("given", ["scalar", "array"])
def test_shared_df_quantiles_equal_each_rows_own(df: float, given: str) -> None:
    rng = np.random.default_rng(int(df * 10) % 97)
    n = 700
    loc = rng.normal(size=n) * 100.0
    scale = rng.uniform(0.01, 5.0, size=n)
    pred = P.StudentT(loc, scale, df if given == "scalar" else np.full(n, df))
    lv = np.asarray(LEVELS)
    assert pred._standard_ppf(lv) is not None  # the shared path is taken
    got = pred.ppf(LEVELS)
    want = _per_row(pred, LEVELS)
    np.testing.assert_array_equal(got, want)
    peer = stats.t.ppf(lv[None, :], df, loc=loc[:, None], scale=scale[:, None])
    np.testing.assert_allclose(got, peer, rtol=1e-12, atol=1e-12 * np.max(np.abs(loc)))
    for level in (0.5, 0.9, 0.95):
        lo, hi = pred.interval(level)
        cols = pred.ppf([0.5 - level / 2.0, 0.5 + level / 2.0])
        np.testing.assert_array_equal(lo, cols[:, 0])
        np.testing.assert_array_equal(hi, cols[:, 1])
        np.testing.assert_array_equal(
            np.stack([lo, hi], axis=1), _per_row(pred, [0.5 - level / 2.0, 0.5 + level / 2.0])
        )


def test_rows_with_different_df_keep_their_own_quantiles() -> None:
    rng = np.random.default_rng(3)
    n = 400
    df = np.full(n, 5.0)
    df[123] = 5.000000000000001  # one row differs in the last bit
    pred = P.StudentT(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n), df)
    assert pred._standard_ppf(np.asarray(LEVELS)) is None
    np.testing.assert_array_equal(pred.ppf(LEVELS), _per_row(pred, LEVELS))
    lo, hi = pred.interval(0.9)
    np.testing.assert_array_equal(
        np.stack([lo, hi], axis=1), _per_row(pred, [0.5 - 0.9 / 2.0, 0.5 + 0.9 / 2.0])
    )


def test_metrics_of_a_shared_df_are_those_of_the_per_row_quantiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every interval and quantile metric of a Student-t batch with one df: the same values
    with the shared quantiles as with each row's own."""
    from uqcore.report import evaluate

    rng = np.random.default_rng(9)
    n = 2000
    loc = rng.normal(size=n)
    scale = rng.uniform(0.5, 1.5, size=n)
    y = loc + scale * rng.standard_t(4.0, size=n)
    pred = P.StudentT(loc, scale, 4.0)
    fast = evaluate(pred, y, "all")
    monkeypatch.setattr(P.StudentT, "_standard_ppf", lambda self, lv: None)
    slow = evaluate(pred, y, "all")
    assert len(fast) > 30

    def values(report: Any) -> str:  # NaN written as NaN on both sides; timings left out
        doc = {k: v for k, v in report.to_dict().items() if k != "timings_s"}
        return json.dumps(doc, sort_keys=True)

    assert values(fast) == values(slow)


@pytest.mark.parametrize("df", [0.7, 2.5, 30.0, 1e6, 1e12, 1e200])
@pytest.mark.parametrize("given", ["scalar", "array"])
def test_shared_df_log_density_equals_each_rows_own(df: float, given: str) -> None:
    """The terms of df alone computed once: the per-row formula's values to the last bit, and
    scipy's ``t.logpdf`` to rounding; one differing df takes the per-row terms."""
    rng = np.random.default_rng(int(df * 7) % 89)
    n = 900
    loc = rng.normal(size=n) * 10.0
    scale = rng.uniform(0.01, 5.0, size=n)
    y = loc + scale * rng.standard_t(max(df, 1.0), size=n)
    pred = P.StudentT(loc, scale, df if given == "scalar" else np.full(n, df))
    assert pred._shared_df() is not None
    nu = np.full(n, df)
    z = (y - loc) / scale
    # the density's form in scipy's order (its Γ ratio as Pochhammer's symbol), per row
    const = np.log(special.poch(0.5 * nu, 0.5)) - 0.5 * (np.log(nu) + np.log(np.pi))
    per_row = const - (nu + 1.0) / 2.0 * np.log1p(z * z / nu) - np.log(scale)
    got = pred.logpdf(y)
    np.testing.assert_array_equal(got, per_row)
    np.testing.assert_allclose(
        got, stats.t.logpdf(y, df, loc=loc, scale=scale), rtol=1e-12, atol=1e-12
    )
    mixed = np.full(n, df)
    mixed[5] = df * 2.0
    other = P.StudentT(loc, scale, mixed)
    assert other._shared_df() is None
    np.testing.assert_allclose(
        other.logpdf(y), stats.t.logpdf(y, mixed, loc=loc, scale=scale), rtol=1e-12, atol=1e-12
    )


@pytest.mark.parametrize("df", [1.5, 4.0, 1e6])
def test_shared_df_crps_and_nll_equal_each_rows_own(df: float) -> None:
    """CRPS and NLL of a batch with one df: the terms of df alone computed once give each
    row's own values to the last bit (the rows of a second batch, whose df are taken per row),
    over several of the scoring's row blocks."""
    from uqcore import metric
    from uqcore.regression import scoring

    class PerRow(P.StudentT):
        def _shared_df(self) -> Any:
            return None

    rng = np.random.default_rng(5)
    n = 3 * scoring._CHUNK_ELEMENTS + 17  # several blocks of rows
    loc = rng.normal(size=n)
    scale = rng.uniform(0.5, 2.0, size=n)
    y = loc + scale * rng.standard_t(4.0, size=n)
    shared, per_row = P.StudentT(loc, scale, df), PerRow(loc, scale, df)
    crps_rows = scoring._crps_student_t
    np.testing.assert_array_equal(crps_rows(shared, y), crps_rows(per_row, y))
    np.testing.assert_array_equal(shared.logpdf(y), per_row.logpdf(y))
    for name in ("crps", "nll"):
        assert metric(name, shared, y) == metric(name, per_row, y)
