"""The CORP block path of the mean (:func:`uqcore._jit.corp_mean_sums`, a block of resamples
in passes along the forecasts' order) against the implementation, :func:`uqcore._isotonic.corp`
on each resample's weights: ties in the forecasts, rows of zero weight anywhere (first, last,
inside a tie), real weights, outcomes in order (nothing pooled) and reversed (everything
pooled), one forecast for all rows, and magnitudes that need the exact rescaling."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore._isotonic import corp
from uqcore.batch import Batch
from uqcore.stability._engine import Engine, Resample, select_metrics
from uqcore.stability.blocks import isotonic
from uqcore.stability.weights import Resampler

jit = isotonic.kernels()
pytestmark = pytest.mark.skipif(jit is None, reason="numba is not installed")

NAMES = ["corp_mcb", "corp_dsc", "corp_unc"]


def _reference(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float, float]:
    d = corp(x, y, w)
    return d.score, d.mcb, d.dsc, d.unc


def _kernel(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, float, float]:
    order = np.argsort(x, kind="stable")
    n = x.shape[0]
    out = np.empty((1, 4))
    jit.corp_mean_sums(
        np.ascontiguousarray(x[order]),
        np.ascontiguousarray(y[order]),
        np.ascontiguousarray(w[order][None, :]),
        out,
        np.empty(n),
        np.empty(n),
        np.empty(n, dtype=np.int64),
    )
    total, s_x, s_hat, s_ref = out[0]
    return s_x / total, (s_x - s_hat) / total, (s_ref - s_hat) / total, s_ref / total


def _cases() -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(12)
    n = 200
    x = np.round(rng.normal(size=n), 1)  # many ties
    y = x + rng.normal(size=n)
    counts = rng.multinomial(n, np.full(n, 1 / n)).astype(np.float64)
    first_last = counts.copy()
    order = np.argsort(x, kind="stable")
    first_last[order[:5]] = 0.0
    first_last[order[-5:]] = 0.0
    tie = x == x[order[n // 2]]
    in_tie = counts.copy()
    in_tie[np.flatnonzero(tie)[:1]] = 0.0
    xs = np.sort(rng.normal(size=n))
    return [
        ("counts with ties", x, y, counts),
        ("zero weights first and last", x, y, first_last),
        ("a zero weight inside a tie", x, y, in_tie),
        ("real weights", x, y, rng.uniform(0.1, 3.0, size=n)),
        ("outcomes in order", xs, xs * 2.0 + 1.0, counts),
        ("outcomes reversed", xs, -xs, counts),
        ("one forecast", np.full(n, 0.5), y, counts),
    ]


@pytest.mark.parametrize("case", range(7))
def test_the_kernels_sums_give_the_implementations_decomposition(case: int) -> None:
    name, x, y, w = _cases()[case]
    got, want = _kernel(x, y, w), _reference(x, y, w)
    scale = max(abs(v) for v in want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * scale, err_msg=name)


@pytest.mark.parametrize("scale", [1.0, 1e-160, 1e100, 1e170])
@pytest.mark.parametrize("weights", ["counts", "real"])
def test_the_block_path_equals_the_per_resample_path(
    scale: float, weights: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the engine, at magnitudes that the implementation rescales by an exact power of
    two (1e-160, 1e100: their squares leave float64's range otherwise), and at 1e170, whose
    scores exceed it (undefined on both paths); with the numpy fit too (no kernels)."""
    rng = np.random.default_rng(5)
    n = 250
    mu = np.round(rng.normal(size=n), 1) * scale
    pred = P.Gaussian(mu, np.full(n, scale))
    y = mu + rng.normal(size=n) * scale
    base = None if weights == "counts" else rng.uniform(0.5, 2.0, size=n)
    counts = Resampler(n).block(3, range(5))
    chosen, _ = select_metrics([pred], NAMES, None)
    fast = Engine(Batch(pred, y, base), chosen)
    assert set(NAMES) <= set(fast._fast)
    got = fast.values([Resample(r) for r in counts])
    ref = Engine(Batch(pred, y, base), chosen, use_blocks=False).values(
        [Resample(r) for r in counts]
    )
    with monkeypatch.context() as m:
        m.setattr(isotonic, "kernels", lambda: None)
        plain = Engine(Batch(pred, y, base), chosen).values([Resample(r) for r in counts])
    for name in NAMES:
        if scale > 1e150:
            assert np.all(np.isnan(got[name])) and np.all(np.isnan(ref[name])), name
            continue
        assert np.all(np.isfinite(got[name])), name
        tol: dict[str, Any] = {"rtol": 1e-12, "atol": 1e-14 * scale * scale}
        np.testing.assert_allclose(got[name], ref[name], err_msg=name, **tol)
        np.testing.assert_allclose(plain[name], ref[name], err_msg=name, **tol)


def test_a_resample_without_weight_is_undefined() -> None:
    """All weights zero: no decomposition (NaN), as the implementation reports none."""
    n = 6
    out = np.empty((2, 4))
    w = np.zeros((2, n), dtype=np.uint8)
    w[1] = 1
    xs, ys = np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64)[::-1].copy()
    jit.corp_mean_sums(xs, ys, w, out, np.empty(n), np.empty(n), np.empty(n, dtype=np.int64))
    assert out[0, 0] == 0.0
    # one row each: the fit pools everything into the mean (outcomes reversed)
    np.testing.assert_allclose(out[1, 2], out[1, 3], rtol=1e-15)
