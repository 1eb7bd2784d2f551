"""Skill scores of regression predictions against climatology: 1 − S/S_ref, D²-style.

The reference ("climatology") is the unconditional distribution of the evaluated set's own
targets: the weighted empirical distribution F̂ of y, with F̂(t) = Σ_{y_i ≤ t} w_i / Σ w_i,
the same forecast for every row. Each skill score is

    skill = 1 − S(prediction) / S(climatology)

with S the registered score (``crps``, ``check_score``, ``interval_score``; for ``nll_skill``
the perplexity exp(NLL), see there), averaged over rows with the frequency weights. Skill 1
is a perfect forecast, 0 is no better than climatology, negative is worse; undefined
(``None`` with a warning) where S(climatology) = 0, e.g. constant targets.

How the reference is computed: with the targets sorted once, y_(1) ≤ ... ≤ y_(N), the gaps
g_j = y_(j+1) − y_(j) and the cumulative weights F_j = F̂(y_(j)) (G_j = 1 − F_j summed from
the other end, so that it is accurate near 1), every reference score is a sum of positive
terms Σ_j g_j h(F_j) with no cancellation:

* the pinball loss of the best constant at level τ (an empirical τ-quantile of y, any
  minimiser — the inverse-CDF quantile is one) is Σ_j g_j min((1 − τ)F_j, τG_j);
* the CRPS of F̂ is ∫ F̂(1 − F̂) = Σ_j g_j F_j G_j = ½ E|Y − Y'| (Y, Y' drawn from F̂);
* a grid of levels with weights c_k is Σ_j g_j Σ_k c_k min((1 − τ_k)F_j, τ_k G_j), piecewise
  linear in F_j: one ``searchsorted`` of F_j into the sorted levels and prefix sums, O(N log Q).

The sorted targets (or their order, weighted) do not depend on the weights: they are cached
on the batch, so the stability engine's resamples (``Batch.with_weights``) sort nothing.
The skill scores are not weighted means of fixed per-row terms (the reference moves with
the resample's own distribution of y), so they declare no ``mean_terms``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from uqcore._backend import argsort_host, clip, sort_host, to_numpy
from uqcore._stats import CHUNK_ROWS, chunks
from uqcore.batch import Batch
from uqcore.options import Coverage, CoverageLevels, OpenLevels
from uqcore.registry import UndefinedMetricWarning, get, register, undefined
from uqcore.regression import scoring
from uqcore.regression._intervals import interval_at
from uqcore.regression.scoring import Bandwidth, Estimator

__all__ = [
    "check_score_skill",
    "climatology_check_score",
    "climatology_crps",
    "crps_skill",
    "interval_score_skill",
    "nll_skill",
]

_DEF = "Gneiting & Raftery 2007 (JASA) §7 (skill scores against climatology)"
_D2 = "scikit-learn's D² scores (d2_pinball_score, d2_absolute_error_score)"
#: Why a skill score is undefined when the reference scores 0.
CONSTANT = "the targets are constant (the climatological reference scores 0)"
_SKILL = {
    "family": "skill",
    "direction": "higher",
    "scaling": "invariant",
    "bounds": (None, 1.0),
    "best": 1.0,
}

Host = np.ndarray[Any, Any]


# -- the climatological reference --------------------------------------------------------
def _climate(batch: Batch) -> Iterator[tuple[Host, Host, Host]]:
    """(gaps g_j, F_j, G_j) of the weighted empirical distribution of y, on the host, chunk by
    chunk of j (the last chunk first): :func:`_climate_chunks`, kept on the batch (for its
    weights) where they are one chunk, which the skill scores of one evaluation then share."""
    if batch.n - 1 > CHUNK_ROWS:
        return _climate_chunks(batch)
    return iter(batch.weighted("skill:climate", lambda: list(_climate_chunks(batch))))


def _climate_chunks(batch: Batch) -> Iterator[tuple[Host, Host, Host]]:
    """(gaps g_j, F_j, G_j) of the weighted empirical distribution of y, on the host, chunk by
    chunk of j (the last chunk first).

    The sort order is weight-free and cached; the weights are normalised by their sum
    (rescaled first where extreme), so every product stays within the data's magnitude. F
    and G are the running sums of the weights from either end, continued from chunk to chunk
    element by element: the values a cumulative sum of all N gives, bit for bit."""
    y = batch.shared("skill:y_host", lambda: np.asarray(to_numpy(batch.y), dtype=np.float64))
    w, total = batch.mean_weights
    n = batch.n
    if w is None:  # unweighted: the sorted values suffice, no argsort
        ys = batch.shared("skill:y_sorted", lambda: sort_host(y))
        unit = 1.0 / n

        def p(a: int, b: int) -> Host:
            return np.full(b - a, unit)

    else:
        order = batch.shared("skill:y_order", lambda: argsort_host(y))
        ys = batch.shared("skill:y_by_order", lambda: y[order])
        wh = np.asarray(to_numpy(w), dtype=np.float64)

        def p(a: int, b: int) -> Host:
            out: Host = wh[order[a:b]] / total
            return out

    # the gaps j = 0..N−2 in chunks (:func:`~uqcore._stats.chunks`: no N-long temporary but
    # the sorted targets, which the batch caches)
    rows = list(chunks(np, n - 1))
    below = []  # F just below each chunk: the forward running sum, kept at the chunk starts
    carry = 0.0
    for sl in rows:
        below.append(carry)
        x = p(sl.start, sl.stop)
        x[0] += carry
        carry = float(np.cumsum(x)[-1])
    above = 0.0  # G above each chunk: the running sum from the top
    for sl, start_f in zip(reversed(rows), reversed(below), strict=True):
        a, b = sl.start, sl.stop
        x = p(a, b)
        x[0] += start_f
        f = np.cumsum(x)
        r = p(a + 1, b + 1)[::-1].copy()
        r[0] += above
        c = np.cumsum(r)
        above = float(c[-1])
        yield ys[a + 1 : b + 1] - ys[a:b], f, c[::-1]


def climatology_crps(batch: Batch) -> float:
    """CRPS of the weighted empirical distribution of y as the forecast of every row:
    ½ Σ_{i,k} p_i p_k |y_i − y_k| = Σ_j g_j F_j (1 − F_j) with p_i = w_i / Σ w (module doc)."""
    return math.fsum(float(np.sum(gaps * (f * g))) for gaps, f, g in _climate(batch))


def _min_pinball(batch: Batch, taus: Host, coefs: Host) -> float:
    """Σ_k c_k · min_q Σ_i p_i ρ_{τ_k}(y_i − q) = Σ_j g_j Σ_k c_k min((1 − τ_k)F_j, τ_k G_j)."""
    order = np.argsort(taus)
    t, c = taus[order], coefs[order]
    # A(F) = Σ_{τ_k < F} c_k τ_k and B(F) = Σ_{τ_k ≥ F} c_k (1 − τ_k)
    a = np.concatenate([[0.0], np.cumsum(c * t)])
    b = np.concatenate([np.cumsum((c * (1.0 - t))[::-1])[::-1], [0.0]])
    parts = []
    for gaps, f, g in _climate(batch):
        k = np.searchsorted(t, f, side="left")
        parts.append(float(np.sum(gaps * (g * a[k] + f * b[k]))))
    return math.fsum(parts)


def climatology_check_score(batch: Batch, levels: Any, scaled: bool = True) -> float:
    """Mean check score of the empirical quantiles of y at ``levels`` (each the best constant
    forecast at its level): (1/Q) Σ_k min_q Σ_i p_i ρ_{τ_k}(y_i − q) (Σ over k with
    ``scaled=False``)."""
    taus = np.asarray(levels, dtype=np.float64)
    factor = 1.0 / taus.shape[0] if scaled else 1.0
    return _min_pinball(batch, taus, np.full(taus.shape[0], factor))


def _climatology_interval_score(batch: Batch, alphas: Host, factor: float) -> float:
    """Σ_k factor · IS_{α_k} of the central empirical intervals of y, using
    IS_α(l, u; y) = (2/α)[ρ_{α/2}(y − l) + ρ_{1−α/2}(y − u)]: each bound the best constant."""
    coef = factor * 2.0 / alphas
    taus = np.concatenate([alphas / 2.0, 1.0 - alphas / 2.0])
    return _min_pinball(batch, taus, np.concatenate([coef, coef]))


# -- the prediction's score ----------------------------------------------------------------
def model_score(batch: Any, name: str, skill: str, task: str, **options: Any) -> float | None:
    """The registered score ``name`` of the batch's prediction (its implementation, which
    computes block by block without holding per-row terms); where it is undefined, warn for
    ``skill`` with the score's reason and return ``None``."""
    held = batch.remembered_score(name, options)
    if held is None:
        spec = get(name, task)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # all of them, for evaluate's report of the score
            warnings.simplefilter("ignore", ResourceWarning)  # a finalizer's, no metric's
            got = spec.impl(batch, **options)
        raised = [(w.category, str(w.message)) for w in caught]
        # evaluate reports the score itself from this (same value, same warnings)
        batch.remember_score(name, options, got, raised)
    else:
        got, raised = held
    if got is None:
        why = next(
            (
                message
                for category, message in raised
                if issubclass(category, UndefinedMetricWarning)
            ),
            f"{name} is undefined",
        )
        undefined(skill, f"the prediction's score is undefined ({why})")
        return None
    return float(got["value"] if isinstance(got, dict) else got)


def ratio_skill(skill: str, score: float | None, reference: float) -> float | None:
    """1 − score/reference, ``None`` (with the warning) where the reference is 0."""
    if score is None:
        return None
    if not reference > 0.0:
        undefined(skill, CONSTANT)
        return None
    return 1.0 - score / reference


# -- the metrics ---------------------------------------------------------------------------
@register(
    "crps_skill",
    needs={"quantiles"},
    reference=_DEF + "; Hersbach 2000 (CRPSS); " + _D2,
    **_SKILL,  # type: ignore[arg-type]
)
def crps_skill(batch: Batch, *, estimator: Estimator = "nrg") -> float | None:
    """CRPS skill score against climatology: 1 − CRPS(prediction) / CRPS(F̂_y).

    F̂_y is the weighted empirical distribution of the evaluated set's targets, the same
    forecast for every row; its mean CRPS has the closed form
    CRPS(F̂_y) = ½ Σ_{i,k} p_i p_k |y_i − y_k| = ∫ F̂_y(1 − F̂_y), p_i = w_i / Σ w, computed
    from y sorted once (O(N log N)). CRPS(prediction) is the ``crps`` metric (``estimator``
    as there, for ``Samples``). Best value 1, 0 = climatology, unbounded below; undefined when
    the targets are constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([0.0, 1.0, 2.0, 3.0])  # CRPS(F̂_y) = ½·mean|y_i − y_k| = 0.625
    >>> round(crps_skill(P.Gaussian(y, np.full(4, 0.1)), y), 6)  # 1 − 0.02337/0.625
    0.962609
    """
    score = model_score(batch, "crps", "crps_skill", "regression", estimator=estimator)
    return ratio_skill("crps_skill", score, climatology_crps(batch))


@register(
    "check_score_skill",
    needs={"quantiles"},
    reference=_D2 + " (D² pinball); Koenker & Machado 1999 (R¹ of quantile regression)",
    **_SKILL,  # type: ignore[arg-type]
)
def check_score_skill(
    batch: Batch, *, levels: OpenLevels | None = None, scaled: bool = True
) -> float | None:
    """Check (pinball) score skill against climatology: 1 − CS(prediction) / CS(F̂_y⁻¹).

    CS is the ``check_score`` metric on the same ``levels`` (default: its grid, or a
    ``Quantiles`` prediction's own levels) and ``scaled``; the reference forecasts at level τ
    the empirical τ-quantile of y (weighted: the smallest y_(k) with F̂_y(y_(k)) ≥ τ; any
    minimiser of the mean pinball loss gives the same reference score, computed as
    Σ_j g_j min((1 − τ)F_j, τ(1 − F_j)) over the sorted targets' gaps g_j).

    With one level τ this is scikit-learn's ``d2_pinball_score(y, q_τ, alpha=τ)`` with
    ``sample_weight`` (whose weighted reference is the same inverse-CDF quantile), and
    ``d2_absolute_error_score`` at τ = ½. Unweighted, scikit-learn takes
    ``numpy.percentile``'s linear interpolation, which is not a minimiser of the pinball loss
    for every τ (it is for τ = ½): it then scores the reference higher, and its D² is higher.
    Best 1; undefined when the targets are constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([0.0, 1.0, 2.0, 3.0])  # pinball loss at ½: 0.5 for y's median, 0.25 here
    >>> check_score_skill(P.Quantiles([0.5], y[:, None] + 0.5), y)
    0.5
    """
    lv, _own = scoring._check_grid(batch, levels)
    score = model_score(
        batch, "check_score", "check_score_skill", "regression", levels=levels, scaled=scaled
    )
    if score is None:
        return None
    ref = climatology_check_score(batch, lv, scoring._check_bool(scaled, "scaled"))
    return ratio_skill("check_score_skill", score, ref)


@register(
    "interval_score_skill",
    needs={"interval"},
    reference=_DEF + "; Gneiting & Raftery 2007 eq. 43 (interval score)",
    **_SKILL,  # type: ignore[arg-type]
)
def interval_score_skill(
    batch: Batch,
    *,
    levels: CoverageLevels | None = None,
    level: Coverage = 0.9,
    scaled: bool = True,
) -> float | None:
    """Interval score skill against climatology: 1 − IS(prediction) / IS(central intervals of y).

    IS_α(l, u; y) = (u − l) + (2/α)(l − y)₊ + (2/α)(y − u)₊ at coverage c = 1 − α. The
    reference forecasts for every row the central empirical interval of y,
    [F̂_y⁻¹(α/2), F̂_y⁻¹(1 − α/2)] (inverse-CDF quantiles of the weighted targets; since
    IS_α = (2/α)[ρ_{α/2}(y − l) + ρ_{1−α/2}(y − u)] each bound is the best constant, and its
    score is computed as for ``check_score_skill``). For an ``Interval`` prediction: at its own
    ``level`` when set, else at the ``level`` option (default 0.9); for the distributional
    kinds: the ``interval_score`` metric over ``levels`` (its default grid 0.01, ..., 0.99 or a
    ``Quantiles`` prediction's symmetric pairs; ``level`` is then not used) with ``scaled``.
    Best 1; undefined when the targets are constant.

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([0.0, 1.0, 2.0, 3.0])  # 50% reference [0, 2]: IS = 2 + 4·(1/4) = 3
    >>> interval_score_skill(P.Interval(y - 0.5, y + 0.5, level=0.5), y)
    0.6666666666666667
    """
    scaled = scoring._check_bool(scaled, "scaled")
    if batch.prediction.kind == "interval":
        # An Interval's bounds are always defined: interval_at returns them with c.
        lo, hi, c = interval_at(batch, level)  # type: ignore[misc]
        alpha = 1.0 - c
        xp = batch.xp
        y = batch.y
        pen = clip(xp, lo - y, min=0.0) + clip(xp, y - hi, min=0.0)
        own = batch.mean((hi - lo) + (2.0 / alpha) * pen)
        ref = _climatology_interval_score(batch, np.asarray([alpha]), 1.0)
        return ratio_skill("interval_score_skill", own, ref)
    grid = scoring._interval_grid(batch, levels)
    score = model_score(
        batch, "interval_score", "interval_score_skill", "regression", levels=levels, scaled=scaled
    )
    if score is None or grid is None:
        return None
    alphas = grid[2]
    factor = 1.0 / alphas.shape[0] if scaled else 1.0
    return ratio_skill(
        "interval_score_skill", score, _climatology_interval_score(batch, alphas, factor)
    )


def climatology_nll(batch: Batch) -> float:
    """Mean NLL of the Gaussian N(ȳ, s²) fitted to y by weighted maximum likelihood
    (ȳ = Σ p_i y_i, s² = Σ p_i (y_i − ȳ)², p_i = w_i / Σ w): ½ log(2π s²) + ½; −inf when
    s = 0. Computed on y divided by max|y| so that no square leaves float64's range."""
    y = batch.shared("skill:y_host", lambda: np.asarray(to_numpy(batch.y), dtype=np.float64))
    w, total = batch.mean_weights
    wh = None if w is None else np.asarray(to_numpy(w), dtype=np.float64)
    lo, hi = float(np.min(y)), float(np.max(y))
    m = max(abs(lo), abs(hi))
    if wh is not None:  # constancy over the rows of positive weight
        live = wh > 0
        lo = float(np.min(y, where=live, initial=np.inf))
        hi = float(np.max(y, where=live, initial=-np.inf))
    if m == 0.0 or lo == hi:
        # constant targets, decided exactly: the variance below may round to a tiny s² > 0
        return -math.inf
    n = batch.n

    def weighted_sum(f: Any) -> float:
        """Σ_i p_i f(u_i) over u = y/m, chunk by chunk (no N-long temporary)."""
        parts = []
        for sl in chunks(np, n):
            u = y[sl] / m
            p = 1.0 / n if wh is None else wh[sl] / total
            parts.append(float(np.sum(p * f(u))))
        return math.fsum(parts)

    mean = weighted_sum(lambda u: u)
    var = weighted_sum(lambda u: (u - mean) * (u - mean))
    if var <= 0.0:
        return -math.inf
    return 0.5 * math.log(2.0 * math.pi) + math.log(m) + 0.5 * math.log(var) + 0.5


@register(
    "nll_skill",
    needs={"logpdf"},
    reference=_DEF + "; Good 1952 (logarithmic score); Jordan et al. 2019 (scoringRules)",
    row_options=("bandwidth",),
    **_SKILL,  # type: ignore[arg-type]
)
def nll_skill(batch: Batch, *, bandwidth: Bandwidth = "silverman") -> float | None:
    """Log-score skill against climatology: 1 − exp(NLL(prediction) − NLL(N(ȳ, s²))).

    The empirical distribution of y has no density, so the reference is the Gaussian
    N(ȳ, s²) fitted to the targets by weighted maximum likelihood: ȳ = Σ w_i y_i / Σ w,
    s² = Σ w_i (y_i − ȳ)² / Σ w (divisor Σ w, not Σ w − 1), whose mean NLL is
    ½ log(2π s²) + ½. NLL(prediction) is the ``nll`` metric (``bandwidth`` as there, for
    ``Samples``). The log score can be negative, so the ratio is taken of the perplexities
    S = exp(NLL) > 0 (best 0): skill = 1 − S/S_ref = 1 − exp(NLL − NLL_ref), i.e. one minus
    the ratio of the geometric-mean likelihoods per row, L_ref/L. It does not change with the
    units of y (both NLLs shift by log c); the log-likelihood gain in nats is
    NLL_ref − NLL = −log(1 − skill). Best 1, 0 = the fitted Gaussian; undefined when the
    targets are constant (s = 0).

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([-1.0, 1.0])  # the reference N(0, 1) itself: skill 0
    >>> round(nll_skill(P.Gaussian(np.zeros(2), np.ones(2)), y), 12)
    0.0
    """
    ref = climatology_nll(batch)
    if ref == -math.inf:
        undefined("nll_skill", CONSTANT)
        return None
    score = model_score(batch, "nll", "nll_skill", "regression", bandwidth=bandwidth)
    if score is None:
        return None
    return 0.0 - math.expm1(score - ref)
