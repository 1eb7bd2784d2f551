"""Quality of prediction intervals beyond marginal coverage: the coverage–width criterion,
coverage by width stratum, the dependence of coverage on width, and a test of coverage.

Every metric scores the intervals that :func:`uqcore.regression._intervals.interval_at` gives:
an ``Interval`` prediction's own bounds (at its own ``level`` when it has one), or the central
interval at the ``level`` option of every kind with quantiles. The intervals are closed: y_i is
covered when l_i ≤ y_i ≤ u_i. The computations run on the host (numpy); rows of zero weight
are dropped first, so that a zero weight is the same as no row.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np

from uqcore._backend import argsort_host, sort_host, to_numpy
from uqcore._binomial import binomtest_pvalue
from uqcore._compiled import frozen_float64, kernels
from uqcore.batch import Batch
from uqcore.options import Coverage, Range
from uqcore.registry import IntegerWeights, register, undefined
from uqcore.regression._intervals import interval_at, nominal_level, unspanned_why

__all__ = ["coverage_pvalue", "cwc", "hsic_width_coverage", "size_stratified_coverage"]

_KHOSRAVI = (
    "Khosravi, Nahavandi, Creighton & Atiya 2011, Comprehensive review of neural network-based "
    "prediction intervals and new advances (IEEE TNN), eq. 38-40"
)
_SSCV = (
    "Angelopoulos, Bates, Malik & Jordan 2021, Uncertainty sets for image classifiers using "
    "conformal prediction (ICLR), §4 (size-stratified coverage); MAPIE regression_ssc"
)
_FELDMAN = (
    "Feldman, Bates & Romano 2021, Improving conditional coverage via orthogonal quantile "
    "regression (NeurIPS), §4; Gretton et al. 2005 (HSIC); MAPIE hsic"
)

FloatArray = np.ndarray[Any, Any]

#: Strata of ``size_stratified_coverage``: equal-weight quantile strata of the widths, or
#: MAPIE's equal-count split of the rows sorted by width.
WidthStrata = Literal["quantile", "mapie"]
#: ``hsic_width_coverage``'s statistic: the V-statistic HSIC, or MAPIE's √(tr/(n − 1)²).
HsicStatistic = Literal["hsic", "mapie"]
#: ``hsic_width_coverage`` with ``kernel_size="std"``: widths whose weighted standard deviation
#: is at most this many float64 epsilons of the largest |bound| count as equal (rounding
#: noise: u − l of bounds made as centre ± h differs from 2h by up to an ulp of the centre).
WIDTH_NOISE_EPS = 8.0

#: ``hsic_width_coverage``'s width kernel size: "std" (2·var of the widths) or s > 0.
KernelSize = Literal["std"] | Annotated[float, Range(0, lo_open=True)]


class _Rows:
    """Host copies of the widths, coverage indicators, targets and positive weights of a
    batch's scored rows (the bounds themselves are not kept: they are not needed after)."""

    def __init__(self, batch: Batch, level: Any) -> None:
        got = interval_at(batch, level)
        self.c = nominal_level(batch.prediction, level)
        self.why = None if got is not None else unspanned_why(batch.prediction, self.c)
        if got is None:
            return
        # no copies where they are float64 already (they are only read: the widths below are
        # a new array, as the bounds may be the prediction's own)
        lo_h = to_numpy(got[0]).astype(np.float64, copy=False)
        hi_h = to_numpy(got[1]).astype(np.float64, copy=False)
        del got
        y = to_numpy(batch.y).astype(np.float64, copy=False)
        w = None if batch.weights is None else to_numpy(batch.weights).astype(np.float64)
        if w is not None:
            keep = w > 0
            lo_h, hi_h, y, w = lo_h[keep], hi_h[keep], y[keep], w[keep]
        self.y = y
        self.w: FloatArray | None = w
        self.total = float(y.shape[0]) if w is None else float(np.sum(w))
        self.covered = (y >= lo_h) & (y <= hi_h)
        #: the largest |bound|: the scale of the rounding noise of widths
        self.magnitude = (
            max(abs(float(f(b))) for f in (np.min, np.max) for b in (lo_h, hi_h))
            if y.shape[0]
            else 0.0
        )
        self.width = hi_h - lo_h

    @classmethod
    def of(cls, batch: Batch, level: Any) -> _Rows:
        """The rows at ``level``, kept on the batch (for its weights): the interval metrics of
        one evaluation at the same level share them while the batch keeps what its metrics
        cached (a batch that ``reusing_batches`` keeps; otherwise ``evaluate`` drops them
        after each metric, which has a group of its own in :data:`uqcore.report.RUN_FIRST`).
        Its arrays are only read."""
        return batch.weighted(f"intervals:rows:{level!r}", lambda: cls(batch, level))

    def weights(self) -> FloatArray:
        """The weights, ones when the batch has none."""
        return np.ones(self.y.shape[0]) if self.w is None else self.w

    def mean(self, v: FloatArray) -> float:
        if self.w is None:
            return float(np.mean(v))
        return float(np.sum(self.w * v) / self.total)


# -- coverage-width criterion ---------------------------------------------------------------
@register(
    "cwc",
    family="intervals",
    needs={"interval"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_KHOSRAVI,
    structured=True,
)
def cwc(
    batch: Batch,
    *,
    level: Coverage = 0.9,
    eta: Annotated[float, Range(0, 700)] = 50.0,
) -> dict[str, Any] | None:
    """Coverage–width criterion of prediction intervals (Khosravi et al. 2011).

    CWC = PINAW · (1 + γ · exp(−η (PICP − μ))), γ = 1{PICP < μ}, with
    PICP = Σ w_i 1{l_i ≤ y_i ≤ u_i} / Σ w_i (coverage), PINAW = Σ w_i (u_i − l_i) / (Σ w_i · R)
    (mean width normalised by the range R = max y − min y of the rows of positive weight) and
    μ the nominal coverage c (an ``Interval``'s own level, else ``level``; default 0.9). ``eta``
    (0 ≤ η ≤ 700, so that the penalty e^{η(μ − PICP)} ≤ e^{700} stays finite) is the penalty of
    under-coverage; Khosravi et al. used η = 50, the default. Lower
    is better; 0 only for zero-width intervals that cover. Undefined when R = 0.

    Returns ``{"value", "picp", "pinaw", "level", "eta"}``. MAPIE's ``coverage_width_based``
    is another criterion of the same name, (1 − PINAW) · exp(−η (PICP − μ)²), higher is
    better: it is (1 − ``pinaw``) · exp(−η (``picp`` − μ)²) of these details.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Interval([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], level=0.5)
    >>> cwc(pred, np.array([0.0, 0.5, 2.0, 4.0]))["value"]
    0.25
    """
    rows = _Rows.of(batch, level)
    if rows.why is not None:
        undefined("cwc", rows.why)
        return None
    r = float(np.max(rows.y)) - float(np.min(rows.y))
    if not r > 0:
        undefined("cwc", "the targets are constant (their range R is 0)")
        return None
    picp = rows.mean(rows.covered.astype(np.float64))
    pinaw = rows.mean(rows.width / r)
    mu = rows.c
    value = pinaw * (1.0 + math.exp(-eta * (picp - mu))) if picp < mu else pinaw
    return {"value": value, "picp": picp, "pinaw": pinaw, "level": mu, "eta": float(eta)}


# -- size-stratified coverage ---------------------------------------------------------------
def _quantile_strata(ws: FloatArray, ws_w: FloatArray, bins: int) -> FloatArray:
    """Stratum (0..bins−1) of each row in width order (``ws`` sorted, ``ws_w`` its weights):
    k = ⌈bins · F(width)⌉ − 1 with F the weighted distribution function of the widths, so
    tied widths share a stratum; non-decreasing along the sorted rows."""
    cum = np.cumsum(ws_w)
    n = ws.shape[0]
    # F at each row's width is the cumulative weight at the last row of its tie
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ws[1:], ws[:-1], out=new[1:])
    tie = np.cumsum(new) - 1
    last = np.append(np.flatnonzero(new[1:]), n - 1)
    f = cum[last[tie]] / cum[-1]
    out: FloatArray = np.clip(np.ceil(bins * f - 1e-9).astype(np.int64) - 1, 0, bins - 1)
    return out


def _mapie_strata(n: int, bins: int) -> FloatArray:
    """MAPIE's ``regression_ssc`` in width order: the sorted rows split into ``bins`` parts of
    equal count (``numpy.array_split``)."""
    out = np.empty(n, dtype=np.int64)
    for k, part in enumerate(np.array_split(np.arange(n), bins)):
        out[part] = k
    return out


def sorted_stratum_coverages(
    covered: FloatArray, sizes: FloatArray, w: FloatArray, codes: FloatArray, n_strata: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per non-empty stratum: (coverage, total weight, smallest size, largest size), for rows
    sorted by size whose strata ``codes`` do not decrease."""
    cov, weight, lo, hi = [], [], [], []
    tw = np.bincount(codes, weights=w, minlength=n_strata)
    hit = np.bincount(codes, weights=w * covered, minlength=n_strata)
    first = np.searchsorted(codes, np.arange(n_strata), side="left")
    stop = np.searchsorted(codes, np.arange(n_strata), side="right")
    for k in range(n_strata):
        if tw[k] > 0:
            cov.append(float(hit[k] / tw[k]))
            weight.append(float(tw[k]))
            lo.append(float(sizes[first[k]]))
            hi.append(float(sizes[stop[k] - 1]))
    return cov, weight, lo, hi


def _unweighted_quantile_strata(
    width: FloatArray, covered: FloatArray, bins: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """:func:`sorted_stratum_coverages` of the quantile strata of unit weights from one sort of
    the widths and no per-row temporaries: stratum k holds the widths u with
    count(widths ≤ u) ≤ (k + 1 + 1e-9)·N/bins above those of stratum k − 1 (the rule of
    :func:`_quantile_strata` with F(u) = count/N), and a row's stratum is the first whose
    largest width is >= its own."""
    ws = sort_host(width)
    n = ws.shape[0]
    tops: list[float] = []
    for k in range(bins):
        j = min(n, math.floor((k + 1 + 1e-9) * n / bins)) - 1  # last row F allows
        if j < 0:
            continue
        v = ws[j]
        if j + 1 < n and ws[j + 1] == v:  # v's ties reach beyond: the stratum ends below v
            i = int(np.searchsorted(ws, v, side="left")) - 1
            if i < 0:
                continue
            v = ws[i]
        if not tops or v > tops[-1]:
            tops.append(float(v))
    top = np.asarray(tops)
    row_codes = np.searchsorted(top, width, side="left")
    m = top.shape[0]
    tw = np.bincount(row_codes, minlength=m).astype(np.float64)
    hit = np.bincount(row_codes, weights=covered, minlength=m)
    first = np.searchsorted(ws, top[:-1], side="right")
    lows = [float(ws[0]), *(float(ws[i]) for i in first)]
    return [float(v) for v in hit / tw], [float(v) for v in tw], lows, tops


def _unweighted_mapie_strata(
    width: FloatArray, covered: FloatArray, bins: int
) -> tuple[list[float], list[float], list[float], list[float]]:
    """:func:`sorted_stratum_coverages` of MAPIE's equal-count strata of unit weights from one
    sort of the widths (no argsort): the rows before the cut at sorted position s with width
    v = sorted[s] are those of width below v, and, of the rows of width v, the first s − L(v)
    in row order (the stable sort's tie order; L(v) the rows below v)."""
    n = width.shape[0]
    ws = sort_host(width)
    m = min(bins, n)  # non-empty parts of numpy.array_split
    sizes = np.full(m, n // bins, dtype=np.int64)
    sizes[: n % bins] += 1
    stops = np.cumsum(sizes)
    starts = stops - sizes
    cuts = starts[1:]
    v = ws[cuts]
    right = np.searchsorted(v, width, side="right")  # cuts k with v_k <= width_i
    # covered rows strictly below v_k: those with right_i <= k
    below = np.cumsum(np.bincount(right, weights=covered, minlength=m))[: m - 1]
    left = np.searchsorted(v, width, side="left")
    tie = np.flatnonzero(left != right)  # rows equal to some v_k, in row order
    if tie.shape[0]:
        tv = width[tie]
        o = argsort_host(tv, stable=True)
        tv = tv[o]
        prefix = np.concatenate(([0.0], np.cumsum(covered[tie[o]])))
        g0 = np.searchsorted(tv, v, side="left")
        before = cuts - np.searchsorted(ws, v, side="left")
        below += prefix[g0 + before] - prefix[g0]
    hits = np.diff(np.concatenate(([0.0], below, [float(np.sum(covered))])))
    tw = sizes.astype(np.float64)
    return (
        [float(h / t) for h, t in zip(hits, tw, strict=True)],
        [float(t) for t in tw],
        [float(ws[i]) for i in starts],
        [float(ws[i - 1]) for i in stops],
    )


@register(
    "size_stratified_coverage",
    family="intervals",
    needs={"interval"},
    direction="target",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=0.9,
    reference=_SSCV,
    structured=True,
)
def size_stratified_coverage(
    batch: Batch,
    *,
    level: Coverage = 0.9,
    bins: Annotated[int, Range(1, 1000)] = 3,
    strata: WidthStrata = "quantile",
) -> dict[str, Any] | None:
    """Coverage of prediction intervals in each width stratum; the value is the worst stratum.

    SSC = min_k Σ_{i∈k} w_i 1{l_i ≤ y_i ≤ u_i} / Σ_{i∈k} w_i over the strata k of the widths
    u_i − l_i (Angelopoulos et al. 2021 stratify by size to expose coverage that holds on
    average only; MAPIE's ``regression_ssc_score`` is the minimum). Its target is the nominal
    coverage c (an ``Interval``'s own level, else ``level``, default 0.9). ``strata``:
    ``"quantile"`` (default) gives ``bins`` strata of equal weight, stratum
    k = ⌈bins · F(u_i − l_i)⌉ with F the weighted distribution function of the widths, so tied
    widths share a stratum (strata may then be fewer or unequal); ``"mapie"`` is MAPIE's
    ``regression_ssc``: the rows sorted by width (stable sort) cut into ``bins`` parts of equal
    count, ignoring weights and splitting tied widths by row order. Returns
    ``{"value", "coverage": [per stratum], "share", "width_range", "violation", "level",
    "strata"}`` for the non-empty strata: ``share`` is each stratum's share of the total
    weight, ``width_range`` its smallest and largest width divided by the mean width (unitless,
    0 when every width is 0), ``violation`` Angelopoulos et al.'s SSCV, max_k |coverage_k − c|.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Interval([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 3.0, 3.0])
    >>> size_stratified_coverage(pred, np.array([0.5, 2.0, 0.5, 2.0]), bins=2)["coverage"]
    [0.5, 1.0]
    """
    rows = _Rows.of(batch, level)
    if rows.why is not None:
        undefined("size_stratified_coverage", rows.why)
        return None
    width = rows.width
    covered = rows.covered.astype(np.float64)
    if strata == "quantile" and batch.weights is None:
        cov, weight, lo, hi = _unweighted_quantile_strata(width, covered, bins)
    elif batch.weights is None:
        cov, weight, lo, hi = _unweighted_mapie_strata(width, covered, bins)
    else:
        order = argsort_host(width, stable=True)
        ws, ws_w = width[order], rows.weights()[order]
        if strata == "mapie":
            codes = _mapie_strata(ws.shape[0], bins)
        else:
            codes = _quantile_strata(ws, ws_w, bins)
        cov, weight, lo, hi = sorted_stratum_coverages(covered[order], ws, ws_w, codes, bins)
    mean_width = rows.mean(width)
    scale = 1.0 / mean_width if mean_width > 0 else 0.0
    return {
        "value": min(cov),
        "coverage": cov,
        "share": [v / rows.total for v in weight],
        "width_range": [[a * scale, b * scale] for a, b in zip(lo, hi, strict=True)],
        "violation": max(abs(v - rows.c) for v in cov),
        "level": rows.c,
        "strata": strata,
    }


# -- dependence of coverage on width (HSIC) --------------------------------------------------
#: Rows × columns of one tile of the kernel sum (2^20 values, 8 MiB per temporary).
_TILE = 1024
#: (d²/s) beyond which exp(−d²/s) is 0.0 in float64: such pairs add exactly nothing.
_UNDERFLOW = 746.0
_TOO_MANY = (
    "U = {u} distinct widths are over max_distinct = {m} (the HSIC's kernel sum over them; "
    "raise max_distinct, or subsample)"
)


def _kernel_sum(u: FloatArray, scale: float, a: FloatArray) -> float:
    """Σ_k Σ_l a_k a_l exp(−((u_k − u_l)/scale)²) for sorted distinct u.

    Above ``_BOXED_MIN`` values, when the values span at most ``4·U`` boxes of half a
    ``scale``: :func:`_kernel_sum_boxed`, O(U). Otherwise the direct sum in tiles, whose
    tiles of the upper triangle with the closest pair beyond underflow are skipped (they add
    0.0): O(U²) when the values lie within a few ``scale`` of each other (then few boxes:
    the boxed sum applies), about O(U·tile) when they are far apart. A distance whose
    quotient by ``scale`` overflows gives exp(−inf) = 0, as it should."""
    n = u.shape[0]
    if n > _BOXED_MIN and float(u[-1] - u[0]) / scale <= _BOX * 4.0 * n:
        return _kernel_sum_boxed(u, scale, a)
    reach = math.sqrt(_UNDERFLOW)
    total = 0.0
    with np.errstate(over="ignore"):
        for i0 in range(0, n, _TILE):
            i1 = min(n, i0 + _TILE)
            ui, ai = u[i0:i1], a[i0:i1]
            for j0 in range(i0, n, _TILE):
                j1 = min(n, j0 + _TILE)
                if j0 > i0 and float(u[j0] - u[i1 - 1]) / scale > reach:
                    break  # every later tile is farther still
                d = (ui[:, None] - u[None, j0:j1]) / scale
                s = float(ai @ np.exp(-(d * d)) @ a[j0:j1])
                total += s if j0 == i0 else 2.0 * s
    return total


#: The boxed kernel sum: from this many values, boxes of this width (in units of the scale),
#: this many Taylor terms, and source boxes this many boxes away on each side.
_BOXED_MIN = 1024
_BOX = 0.5
_TERMS = 32
_REACH = 15


def _kernel_sum_boxed(u: FloatArray, scale: float, a: FloatArray) -> float:
    """The sum of :func:`_kernel_sum` by the fast Gauss transform in one dimension (Greengard
    & Strain 1991): O(U) for U sorted values.

    With t = u/scale, values are put in boxes of width ½ with centres c_B (|t_l − c_B| ≤ ¼).
    For a target t_k and a box B, with s = t_k − c_B and τ_l = t_l − c_B,
    exp(−(s − τ_l)²) = e^{−s²} e^{−τ_l²} Σ_n (2s)ⁿ τ_lⁿ / n!, so Σ_{l∈B} a_l exp(−(t_k − t_l)²)
    = e^{−s²} Σ_{n<p} (2ⁿ/n!) sⁿ M_n(B) with the box moments M_n(B) = Σ_{l∈B} a_l e^{−τ_l²} τ_lⁿ,
    truncated after p = 32 terms, over the boxes within 15 boxes of the target's own.

    Error: a pair in boxes farther apart is at least 7 scales apart (kernel ≤ e^{−49}); the
    truncation of e^{2sτ} with |τ| ≤ ¼, |s| ≤ 7.75 is below x³²/32!·eˣ e^{−s²} ≤ 1e-30 per unit
    |a_k a_l|. So the sum differs from the direct one by about the rounding of the direct sum
    (about 1e-16 of Σ|a_k||a_l|; checked against it at 1e-12 relative)."""
    t = (u - u[0]) / scale
    box = np.floor(t / _BOX).astype(np.int64)
    count = int(box[-1]) + 1
    tau = t - (box + 0.5) * _BOX
    # box moments, scaled by 2ⁿ/n!, with _REACH empty boxes of padding on each side
    moments = np.zeros((count + 2 * _REACH, _TERMS))
    term = a * np.exp(-tau * tau)
    factor = 1.0
    for k in range(_TERMS):
        moments[_REACH : _REACH + count, k] = factor * np.bincount(
            box, weights=term, minlength=count
        )
        term *= tau
        factor *= 2.0 / (k + 1)
    del tau, term
    total = 0.0
    for c0 in range(0, t.shape[0], _BOXED_CHUNK):  # bounded memory: chunks of targets
        tc, bc, ac = (
            t[c0 : c0 + _BOXED_CHUNK],
            box[c0 : c0 + _BOXED_CHUNK],
            a[c0 : c0 + _BOXED_CHUNK],
        )
        acc = np.zeros(tc.shape[0])
        for offset in range(-_REACH, _REACH + 1):
            src = bc + offset
            s = tc - (src + 0.5) * _BOX
            rows = moments[src + _REACH]
            poly = rows[:, _TERMS - 1].copy()
            for k in range(_TERMS - 2, -1, -1):  # Horner in s
                poly *= s
                poly += rows[:, k]
            acc += np.exp(-s * s) * poly
        total += float(ac @ acc)
    return total


#: Targets per chunk of the boxed sum (its arrays are chunk × terms floats).
_BOXED_CHUNK = 32_768


#: The box-to-box kernel sum: boxes of this width (in units of the scale), this many
#: moments per box (terms m + n < _PAIR_TERMS of the expansion), box pairs up to this many
#: boxes apart; it runs from this many rows, and while the boxes spanned are at most this
#: fraction of the rows (beyond, the pairs of boxes would cost more than the moments).
_PAIR_BOX = 0.125
_PAIR_TERMS = 15
_PAIR_REACH = 51
_PAIR_MIN_ROWS = 1024
_PAIR_BOXES_PER_ROW = 1.0 / 16.0


def _pair_tables() -> FloatArray:
    """G_r[m, n] = (−1)^m h_{m+n}(r·h)/(m! n!) for m + n < p, r = 0.._PAIR_REACH, with
    h_j(d) = H_j(d) e^{−d²} (physicists' Hermite functions) by the stable recurrence
    h_{j+1} = 2d h_j − 2j h_{j−1}."""
    p, box = _PAIR_TERMS, _PAIR_BOX
    out = np.zeros((_PAIR_REACH + 1, p, p))
    fact = [float(math.factorial(k)) for k in range(p)]
    for r in range(_PAIR_REACH + 1):
        d = r * box
        h = [math.exp(-d * d), 2.0 * d * math.exp(-d * d)]
        for j in range(1, p - 1):
            h.append(2.0 * d * h[j] - 2.0 * j * h[j - 1])
        for m in range(p):
            for n in range(p - m):
                out[r, m, n] = (-1.0) ** m * h[m + n] / (fact[m] * fact[n])
    return out


_PAIRS = _pair_tables()


def pair_box_count(span: float) -> int:
    """Boxes of the box-to-box sum over values t spanning ``span`` (in units of the scale)."""
    return math.floor(span / _PAIR_BOX) + 1 if math.isfinite(span) else 2**62


def pair_boxes_fit(n: int, span: float) -> bool:
    """Whether the box-to-box sum applies to n rows spanning ``span`` scales: from
    ``_PAIR_MIN_ROWS`` rows, with at most n/16 boxes (the pairs of boxes then cost less than
    the moments)."""
    return n >= _PAIR_MIN_ROWS and pair_box_count(span) <= max(n * _PAIR_BOXES_PER_ROW, 64)


def box_moments(t: FloatArray, a: FloatArray) -> FloatArray:
    """P[B, m] = Σ_{l∈B} a_l (t_l − c_B)^m, m < p, of the boxes B of width h from min t (an
    (boxes × p) array): p weighted bincounts over the rows, O(N·p)."""
    t0 = float(np.min(t))
    jit = kernels()
    if jit is not None:  # the same sums in one compiled pass
        tt, aa = frozen_float64(t), frozen_float64(a)
        moments: FloatArray = jit.box_moments(tt, aa, t0, _PAIR_BOX, _PAIR_TERMS)
        return moments
    s = t - t0
    s *= 1.0 / _PAIR_BOX
    box = s.astype(np.int64)  # s >= 0: truncation is the floor
    count = int(box.max()) + 1 if box.shape[0] else 1
    s -= box
    s -= 0.5
    s *= _PAIR_BOX  # σ = t − c_B, |σ| <= h/2
    out = np.empty((count, _PAIR_TERMS))
    term = a.copy()
    for m in range(_PAIR_TERMS):
        out[:, m] = np.bincount(box, weights=term, minlength=count)
        if m + 1 < _PAIR_TERMS:
            term *= s
    return out


def pair_sum(moments: FloatArray) -> float:
    """Σ_A Σ_B P_A^T G_{A−B} P_B over the box pairs within reach (:func:`_kernel_sum_pairs`)."""
    count = moments.shape[0]
    total = float(np.vdot(moments @ _PAIRS[0], moments))
    for r in range(1, min(_PAIR_REACH, count - 1) + 1):
        total += 2.0 * float(np.vdot(moments[r:] @ _PAIRS[r], moments[:-r]))
    return total


def _kernel_sum_pairs(t: FloatArray, a: FloatArray) -> float:
    """Σ_k Σ_l a_k a_l exp(−(t_k − t_l)²) over the rows (ties need not be merged), by a
    box-to-box expansion: O(N·p) for the box moments plus (boxes × reach × p²).

    The t are put in boxes of width h = 1/8 with centres c_B on a grid, and with
    σ = t_k − c_A, τ = t_l − c_B, d = c_A − c_B = r·h,
    exp(−(d + σ − τ)²) = Σ_j (−1)^j H_j(d) e^{−d²} (σ − τ)^j / j! (Taylor in x = σ − τ about
    d; H_j the physicists' Hermite polynomials), and (σ − τ)^j expanded binomially gives
    Σ_{m+n<p} (−1)^m h_{m+n}(d)/(m! n!) · σ^m τ^n, so the sum is
    Σ_{A,B} P_A^T G_{A−B} P_B with the box moments P_{B,m} = Σ_{l∈B} a_l τ_l^m.

    Error bound, per unit |a_k a_l| of a pair: the Lagrange remainder after p = 15 terms with
    |x| < h is at most sup|f^{(p)}| h^p/p! ≤ 1.0865·(√2·h)^p/√(p!) ≤ 5e-18 (Cramér's
    inequality |H_j(y)| e^{−y²/2} ≤ 1.0865·2^{j/2}√(j!), f(y) = e^{−y²}); pairs of boxes
    more than 51 boxes apart are at least 51·h = 6.375 scales apart, kernel ≤ e^{−40.6}
    ≤ 3e-18, and are left out. So the sum is within 1e-17·Σ|a_k||a_l| of the exact one,
    below the rounding of the direct sum (about 1e-16 of Σ|a_k||a_l|)."""
    return pair_sum(box_moments(t, a))


@register(
    "hsic_width_coverage",
    family="intervals",
    needs={"interval"},
    direction="lower",
    scaling="invariant",
    bounds=(0.0, None),
    best=0.0,
    reference=_FELDMAN,
    structured=True,
)
def hsic_width_coverage(
    batch: Batch,
    *,
    level: Coverage = 0.9,
    kernel_size: KernelSize = "std",
    indicator_kernel_size: Annotated[float, Range(0, lo_open=True)] = 1.0,
    statistic: HsicStatistic = "hsic",
    max_distinct: Annotated[int, Range(1)] = 50_000,
) -> dict[str, Any] | None:
    """HSIC between the interval width and the coverage indicator: 0 when independent.

    With widths v_i = u_i − l_i, indicators b_i = 1{l_i ≤ y_i ≤ u_i} and Gaussian kernels
    K_ij = exp(−(v_i − v_j)²/s), L_ij = exp(−(b_i − b_j)²/t) (MAPIE's parametrisation: s, t
    are ``kernel_size`` and ``indicator_kernel_size``), the V-statistic (Gretton et al. 2005)
    with frequency weights, W = Σ w_i, is HSIC = (1/W²) Σ_ij w_i w_j K_ij L̃_ij, L̃ the
    weighted double centring of L. As b is binary, L̃_ij = 2(1 − e^{−1/t}) c_i c_j with
    c_i = b_i − b̄ (b̄ the weighted coverage), so HSIC = 2(1 − e^{−1/t}) Σ_ij a_i a_j K_ij / W²
    with a_i = w_i c_i, summed over the distinct widths. Feldman et al. 2021 use it to
    measure (and penalise) coverage that depends on the width. Lower is better, 0 at
    independence (and for constant widths).

    ``kernel_size="std"`` (default) is s = 2σ², σ the weighted standard deviation of the
    widths (a unitless criterion; widths with σ at most 8 float64 epsilons of the largest
    |bound| count as constant: their differences are rounding noise, e.g. of centre ± h); a number is s in the units of y² (then the value changes
    with the units). ``statistic="mapie"`` gives MAPIE's ``hsic``: √(tr(K H L H)/(W − 1)²),
    its estimator with the unbiased-looking (n − 1)² and a square root (W > 1). Cost: from
    1,024 rows, while the widths span at most N/16 boxes of an eighth of a kernel scale, a
    box-to-box expansion over the rows (no sort, ties need not be merged): 15 box moments
    (O(N·15) bincounts) combined over box pairs up to 51 boxes apart through Hermite
    functions, whose proven error is below 1e-17 of Σ|a_k||a_l|, under the rounding of the
    direct sum (about one sort of N values at N = 10⁶). Otherwise (fewer rows, or widths
    spread over very many kernel scales) over the U distinct widths: the direct sum for
    U ≤ 1024, else the fast Gauss transform in one dimension (Greengard & Strain 1991; boxes
    of half a kernel scale, 32 Taylor terms), O(U) with about 1000 flops per width; there,
    above ``max_distinct`` distinct widths the value is undefined (subsample, or raise it).
    Returns ``{"value", "coverage", "kernel_size", "distinct_widths", "level", "statistic"}``
    (``kernel_size`` as given: "std" or s; ``distinct_widths`` is U where the widths were
    merged, 1 for constant widths, and None on the box-to-box path, which does not count them).

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Interval([0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 3.0, 3.0])
    >>> r = hsic_width_coverage(pred, np.array([0.5, 0.5, 5.0, 5.0]), kernel_size=1.0)
    >>> bool(abs(r["value"] - (1 - np.exp(-1)) * (1 - np.exp(-4)) / 4) < 1e-15)
    True
    """
    name = "hsic_width_coverage"
    rows = _Rows.of(batch, level)
    if rows.why is not None:
        undefined(name, rows.why)
        return None
    width = rows.width
    total = rows.total
    b = rows.covered.astype(np.float64)
    cbar = rows.mean(b)
    # weights relative to the largest: the products a_k a_l stay in range at any weight scale
    b -= cbar
    if batch.weights is None:
        total_rel = total
    else:
        w_rel = rows.weights() / float(np.max(rows.weights()))
        total_rel = float(np.sum(w_rel))
        b *= w_rel
        del w_rel
    lo_w, hi_w = float(np.min(width)), float(np.max(width))
    top = max(abs(lo_w), abs(hi_w))
    distinct: int | None = None
    if lo_w == hi_w:
        kernel, distinct = 0.0, 1  # constant widths: K = 1, Σ a = 0
    else:
        if kernel_size == "std":
            v = width / top  # the spread, computed in range at any scale
            sd = math.sqrt(rows.mean((v - rows.mean(v)) ** 2))
            del v
            # A spread of rounding noise (bounds made as centre ± half-width) is no spread:
            # the kernel scaled to it would read the noise as widths that differ.
            noise = WIDTH_NOISE_EPS * float(np.finfo(np.float64).eps) * rows.magnitude / top
            unit, scale = top, math.sqrt(2.0) * sd
        else:
            sd, noise = 1.0, 0.0
            unit, scale = 1.0, math.sqrt(float(kernel_size))
        if sd <= noise:
            kernel = 0.0
        elif pair_boxes_fit(width.shape[0], (hi_w - lo_w) / unit / scale):
            t = width / unit
            t /= scale
            kernel = _kernel_sum_pairs(t, b)
        else:
            u, inv = np.unique(width, return_inverse=True)
            distinct = int(u.shape[0])
            if distinct > max_distinct:
                undefined(name, _TOO_MANY.format(u=distinct, m=max_distinct))
                return None
            a = np.bincount(inv.ravel(), weights=b, minlength=distinct)
            kernel = _kernel_sum(u / unit, scale, a)
    del b
    tr = max(2.0 * (1.0 - math.exp(-1.0 / indicator_kernel_size)) * kernel, 0.0)
    if statistic == "mapie":
        if not total > 1:
            undefined(name, "MAPIE's statistic divides by (n − 1)²: the total weight is <= 1")
            return None
        value = math.sqrt(tr) / total_rel * total / (total - 1.0)
    else:
        value = tr / total_rel / total_rel
    return {
        "value": value,
        "coverage": cbar,
        "kernel_size": kernel_size,
        "distinct_widths": distinct,
        "level": rows.c,
        "statistic": statistic,
    }


# -- binomial test of coverage ----------------------------------------------------------------
#: Largest total weight that is an exact count in float64 (2^53).
_EXACT_COUNTS = float(2**53)


@register(
    "coverage_pvalue",
    family="intervals",
    needs={"interval"},
    direction="higher",
    scaling="invariant",
    bounds=(0.0, 1.0),
    best=1.0,
    reference="Clopper & Pearson 1934; exact binomial test (scipy.stats.binomtest)",
    structured=True,
    integer_weights=IntegerWeights("the binomial test counts rows, a row of weight k being k"),
    exempt={"scale_weights": "the binomial test's n is the total weight Σ w_i (a count)"},
)
def coverage_pvalue(batch: Batch, *, level: Coverage = 0.9) -> dict[str, Any] | None:
    """Two-sided exact binomial test of the covered count against the nominal coverage.

    With k = Σ w_i 1{l_i ≤ y_i ≤ u_i} covered out of n = Σ w_i (integer frequency weights), the
    p-value of H0: P(covered) = c is scipy's ``binomtest(k, n, c).pvalue`` (two-sided: the
    sum of the probabilities of counts no more likely than k; the same value from one call of
    ``binom.pmf``, :func:`uqcore._binomial.binomtest_pvalue`). c is the nominal coverage (an
    ``Interval``'s own level, else ``level``, default 0.9). A small p-value says the intervals
    do not cover at their nominal level; it tests marginal coverage only and treats rows as
    independent (split-conformal coverage is Beta-distributed given the calibration set).
    Undefined when n exceeds 2^53 (no longer an exact count in float64). Returns
    ``{"value": p-value, "covered", "n", "coverage", "level"}``.

    >>> import numpy as np; from uqcore import predictions as P
    >>> pred = P.Interval(np.zeros(10), np.ones(10), level=0.5)
    >>> round(coverage_pvalue(pred, np.r_[np.full(9, 0.5), 2.0])["value"], 6)
    0.021484
    """
    rows = _Rows.of(batch, level)
    if rows.why is not None:
        undefined("coverage_pvalue", rows.why)
        return None
    if rows.total > _EXACT_COUNTS:
        undefined("coverage_pvalue", f"the total weight {rows.total:.6g} is no exact count")
        return None
    k = round(
        float(np.count_nonzero(rows.covered))
        if rows.w is None
        else float(np.sum(rows.w, where=rows.covered))
    )
    n = round(rows.total)
    p = binomtest_pvalue(k, n, rows.c)
    return {
        "value": min(max(p, 0.0), 1.0),
        "covered": k,
        "n": n,
        "coverage": k / n,
        "level": rows.c,
    }
