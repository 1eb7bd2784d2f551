"""Isotonic recalibration and the CORP score decomposition (miscalibration, discrimination,
uncertainty) shared by the regression and classification metrics.

CORP (Dimitriadis, Gneiting & Jordan 2021, PNAS 118(8) e2016191118; for general functionals
Gneiting & Resin 2023, Electron. J. Statist. 17:3226): the outcomes y are recalibrated on the
forecasts x by isotonic regression, x̂ = argmin over non-decreasing functions f of
Σ w_i S(f(x_i), y_i), tied forecasts sharing one value (f is a function of x); then, with S̄
the weighted mean score and r the climatological forecast (the functional of the marginal
distribution of y),

    MCB = S̄(x) − S̄(x̂),   DSC = S̄(r) − S̄(x̂),   UNC = S̄(r),   S̄(x) = MCB − DSC + UNC.

Functionals and their consistent scores:

* ``"mean"``: the squared error (the Brier score for binary outcomes). The fit is
  :func:`scipy.optimize.isotonic_regression` (PAV; its weights must be positive, so
  zero-weight rows are dropped first and tied forecasts are merged into one point whose weight
  is the sum of theirs and whose outcome is their weighted mean).
* ``"quantile"`` at level α: the pinball loss ρ_α(y − x) = (1{y < x} − α)(x − y). The
  isotonic fit minimises the pinball loss; its block values are weighted α-quantiles, which
  are not unique. We give the smallest minimiser (every block takes its lower α-quantile, the
  inverted-CDF value: the smallest y_j with Σ_{y_i ≤ y_j} w_i ≥ α Σ w_i); every minimiser has
  the same loss, so MCB, DSC and UNC do not depend on the choice, only the diagram's steps do
  (model-diagnostics draws the midpoint of the lower and the upper solution; the smallest
  minimiser is the pool-adjacent-violators solution with the lower quantile taken in every
  block, Jordan, Mühlemann & Ziegel 2022, Ann. Inst. Stat. Math. 74:489). Two exact fits:

  - compiled (:mod:`uqcore._jit`, numba; the default): dynamic programming over the groups
    of tied forecasts with the slope trick (Rote 2019), the value function's breakpoints in
    one max-heap: O(N log N), no sort of y. The climatological quantile is one selection.
  - numpy (without numba, or ``UQCORE_JIT=0``): the partitioning algorithm for separable
    convex isotonic regression on a chain (Hochbaum & Queyranne 2003; Stout 2013 "Isotonic
    regression via partitioning"), which bisects the sorted distinct outcomes and, at each
    threshold, solves the two-valued problem for every segment at once with a prefix sum. A
    row whose outcome lies outside its segment's remaining thresholds costs the same in all
    of them, so runs of such rows are merged into one element (their sum and their best cut)
    and a segment with no other row ends at once: the work per level is proportional to the
    rows still undecided (O(N log N) in the worst case). It needs an argsort of y (the ranks).

  Both are tested against a brute-force dynamic programme and against each other. Two cuts
  whose costs differ by less than the rounding of their float64 sums (at levels that are
  not short binary fractions, e.g. 0.3) count as tied, and which of them is taken depends
  on the order of summation, so the two fits (or another exact implementation) can take
  different steps there while the loss, hence MCB, DSC and UNC, agrees to rounding (with
  integer weights at a level such as 0.25 or 0.875 every sum is exact and the steps are the
  smallest minimiser's). Cost beyond the fit: an argsort of x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._backend import argsort_host
from uqcore._compiled import kernels
from uqcore._stats import chunks

__all__ = ["Corp", "Functional", "corp", "corp_events", "isotonic_fit", "pinball"]

NDArray = np.ndarray[Any, Any]
Functional = Literal["mean", "quantile"]


@dataclass(frozen=True)
class Corp:
    """One CORP decomposition: the mean scores and the recalibration's steps."""

    score: float  # S̄(x)
    mcb: float
    dsc: float
    unc: float
    x: NDArray  # the distinct forecasts (of positive weight), ascending
    fitted: NDArray  # x̂ at each of them (non-decreasing)
    weight: NDArray  # the total weight of each distinct forecast
    reference: float  # the climatological forecast r

    def scaled(self, e: int, power: int) -> Corp:
        """The decomposition of data multiplied by 2^e (scores scale by 2^(e·power))."""

        def s(v: float) -> float:
            try:
                return math.ldexp(v, e * power)
            except OverflowError:  # the caller reports the value as beyond float64's range
                return math.copysign(math.inf, v)

        return Corp(
            s(self.score),
            s(self.mcb),
            s(self.dsc),
            s(self.unc),
            self.x * math.ldexp(1.0, e) if e else self.x,
            self.fitted * math.ldexp(1.0, e) if e else self.fitted,
            self.weight,
            math.ldexp(self.reference, e),
        )


def isotonic_regression(y: NDArray, *, weights: NDArray | None = None) -> Any:
    """:func:`scipy.optimize.isotonic_regression` (its result: ``.x`` the fit), imported at the
    first call: importing uqcore does not load scipy.optimize."""
    from scipy.optimize import isotonic_regression as fit

    return fit(y, weights=weights)


def pinball(y: NDArray, x: NDArray, level: float) -> NDArray:
    """ρ_α(y − x) = (1{y < x} − α)(x − y), per row."""
    out: NDArray = ((y < x).astype(np.float64) - level) * (x - y)
    return out


def _last_argmax(cand: NDArray, off: NDArray, size: NDArray) -> tuple[NDArray, NDArray]:
    """(the largest value of ``cand`` in each segment [off, off + size), its last index)."""
    best = np.maximum.reduceat(cand, off)
    idx = np.arange(cand.shape[0])
    last = np.maximum.reduceat(np.where(cand == np.repeat(best, size), idx, -1), off)
    return best, last


@dataclass
class _Elements:
    """The elements of the segments, in order: an active row (``act``: its rank ``rk``,
    weight ``ew``) or a run of fixed rows (the sum ``s`` of their prefix costs, the best
    prefix ``b`` among their cuts, −inf when none, its cut ``p``); ``ok``: the best cut is at
    the element's end (for a row: its group ends there)."""

    act: NDArray
    rk: NDArray
    ew: NDArray
    s: NDArray
    b: NDArray
    p: NDArray
    ok: NDArray

    def take(self, i: NDArray) -> _Elements:
        return _Elements(*(a[i] for a in vars(self).values()))


def _coalesce(e: _Elements, off: NDArray) -> tuple[_Elements, NDArray]:
    """Merge each segment's consecutive fixed elements into one (segments start at ``off``)."""
    fixed = ~e.act
    first = np.zeros(fixed.shape[0], dtype=bool)
    first[off] = True
    keep = e.act.copy()
    keep[0] |= fixed[0]
    keep[1:] |= fixed[1:] & ~(fixed[:-1] & ~first[1:])
    if keep.all():
        return e, off
    starts = np.flatnonzero(keep)
    size = np.diff(np.append(starts, fixed.shape[0]))
    pref = np.cumsum(e.s) - e.s
    best, last = _last_argmax(pref + e.b, starts, size)
    ka = e.act[starts]
    out = e.take(starts)
    run = ~ka
    out.s[run] = np.add.reduceat(e.s, starts)[run]
    out.b[run] = (best - pref[starts])[run]
    out.p[run] = e.p[last][run]
    out.ok[run] = (e.ok[last] & (last == starts + size - 1))[run]
    return out, (np.cumsum(keep) - 1)[off]


def _isotonic_quantile(
    gid: NDArray, rank: NDArray, values: NDArray, w: NDArray, m: int, level: float
) -> NDArray:
    """The smallest isotonic α-quantile fit of y = values[rank] (rows sorted by x, group
    ``gid`` per row, m groups): one value per group (partitioning, see the module docstring).

    The rows of a segment are its elements; a row whose rank is outside the segment's
    thresholds [lo, hi) adds the same cost to every cut of all the segment's sub-problems,
    so consecutive such rows become one element (their sum, their best cut). A segment with
    no row inside its thresholds has one cut for all of them and ends there; most rows leave
    within a few levels, and the work per level is proportional to the elements left."""
    n, k = rank.shape[0], values.shape[0]
    out_g: list[NDArray] = []
    out_v: list[NDArray] = []
    if k > 1:
        ok = np.empty(n, dtype=bool)  # a cut may follow a row only where its group ends
        np.not_equal(gid[1:], gid[:-1], out=ok[:-1])
        ok[-1:] = True
        act = rank < k - 1
        s = np.where(act, 0.0, -level * w)
        e = _Elements(act, rank, w, s, np.where(ok & ~act, s, -np.inf), gid + 1, ok)
        e, off = _coalesce(e, np.array([0]))
        size = np.diff(np.append(off, e.act.shape[0]))
        g0, g1, lo, hi = np.array([0]), np.array([m]), np.array([0]), np.array([k - 1])
    else:
        out_g.append(np.array([0]))
        out_v.append(np.array([0]))
        off = np.zeros(0, dtype=np.intp)
    while off.shape[0]:
        mid = (lo + hi) // 2
        # a segment with no active row has one cut for all its thresholds: its children end
        idle = np.add.reduceat(e.act, off) == 0
        lo_l, hi_l = lo, np.where(idle, lo, mid)
        lo_r, hi_r = np.where(idle, hi, mid + 1), hi
        cost = np.where(e.rk <= np.repeat(mid, size), (1.0 - level) * e.ew, -level * e.ew)
        sv = np.where(e.act, cost, e.s)
        bv = np.where(e.act, np.where(e.ok, cost, -np.inf), e.b)
        pref = np.cumsum(sv) - sv
        best, last = _last_argmax(pref + bv, off, size)
        # groups [cut, g1) go up; the largest cut of least cost gives the smallest fit
        at_start = pref[off] > best
        cut = np.where(at_start, g0, e.p[last])
        split = ~at_start & ~e.act[last] & ~e.ok[last]
        # a run cut inside: its left part ends at its best cut, its right part starts there
        # (no cut inside it can win again: they cost more than the segment's start)
        counts = np.ones(e.act.shape[0], dtype=np.intp)
        counts[last[split]] = 2
        at = np.cumsum(counts) - counts
        e.s = sv
        e.b = bv
        if split.any():
            e = e.take(np.repeat(np.arange(counts.shape[0]), counts))
        left_i, right_i = at[last[split]], at[last[split]] + 1
        e.act[left_i] = e.act[right_i] = False
        e.s[right_i] = e.s[left_i] - e.b[left_i]
        e.b[right_i] = -np.inf
        e.ok[right_i] = False
        e.s[left_i] = e.b[left_i]
        e.ok[left_i] = True
        end = at[off + size - 1] + counts[off + size - 1]
        mid_off = np.where(at_start, at[off], at[last] + 1)
        c_size = np.stack([mid_off - at[off], end - mid_off], axis=1).ravel()
        c_g0 = np.stack([g0, cut], axis=1).ravel()
        c_g1 = np.stack([cut, g1], axis=1).ravel()
        c_lo = np.stack([lo_l, lo_r], axis=1).ravel()
        c_hi = np.stack([hi_l, hi_r], axis=1).ravel()
        done = c_lo == c_hi
        rec = done & (c_g1 > c_g0)
        out_g.append(c_g0[rec])
        out_v.append(c_lo[rec])
        go = ~done & (c_size > 0)
        if not go.any():
            break
        keep = np.repeat(go, c_size)
        if not keep.all():
            e = e.take(keep)
        size, g0, g1, lo, hi = c_size[go], c_g0[go], c_g1[go], c_lo[go], c_hi[go]
        off = np.cumsum(size) - size
        # rows outside their segment's thresholds [lo, hi) become fixed
        lo_e, hi_e = np.repeat(lo, size), np.repeat(hi, size)
        below, above = e.rk < lo_e, e.rk >= hi_e
        leave = e.act & (below | above)
        if leave.any():
            fixed_cost = np.where(below, (1.0 - level) * e.ew, -level * e.ew)
            e.s = np.where(leave, fixed_cost, e.s)
            e.b = np.where(leave, np.where(e.ok, fixed_cost, -np.inf), e.b)
            e.act = e.act & ~leave
            e, off = _coalesce(e, off)
            size = np.diff(np.append(off, e.act.shape[0]))
    gs, vs = np.concatenate(out_g), np.concatenate(out_v)
    order = np.argsort(gs)
    result = np.repeat(vs[order], np.diff(np.append(gs[order], m)))
    fitted: NDArray = values[result]
    return fitted


def _new_values(xs: NDArray) -> NDArray:
    """Whether each row starts a new value of the sorted ``xs``."""
    new = np.empty(xs.shape[0], dtype=bool)
    new[:1] = True
    np.not_equal(xs[1:], xs[:-1], out=new[1:])
    return new


def _group_starts(xs: NDArray) -> tuple[NDArray, NDArray]:
    """(whether each row starts a new value of the sorted ``xs``, the rows that do)."""
    new = _new_values(xs)
    return new, np.flatnonzero(new)


def isotonic_fit(
    xs: NDArray,
    ys: NDArray,
    ws: NDArray,
    *,
    functional: Functional = "mean",
    level: float = 0.5,
    ranks: tuple[NDArray, NDArray] | None = None,
) -> tuple[NDArray, NDArray, NDArray, NDArray | None]:
    """(distinct x ascending, x̂ at each, their weights, group index per row, None when no x
    is tied) of the isotonic
    fit of y on x; rows sorted by x, weights > 0. ``ranks``: (the distinct y ascending, the
    index of each row's y among them), which the quantile fit needs (computed if not given).
    The quantile fit here is the numpy one; :func:`corp` runs the compiled one when it can."""
    new, starts = _group_starts(xs)
    gid = np.cumsum(new) - 1
    ties = starts.shape[0] < xs.shape[0]
    gw = np.add.reduceat(ws, starts) if ties else ws
    if functional == "mean":
        means = np.add.reduceat(ws * ys, starts) / gw if ties else ys
        fitted = isotonic_regression(means, weights=gw).x
    else:
        values, rank = ranks if ranks is not None else np.unique(ys, return_inverse=True)
        fitted = _isotonic_quantile(gid, rank, values, ws, starts.shape[0], level)
    return xs[starts], fitted, gw, (gid if ties else None)


def _unit_fit(xs: NDArray, ys: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray | None]:
    """:func:`isotonic_fit` of the mean under unit weights, without an array of ones."""
    new = _new_values(xs)
    if bool(np.all(new)):  # no tied forecasts: one group per row (no N-array of its starts)
        del new
        jit = kernels() if ys.shape[0] < (1 << 31) and ys.flags.c_contiguous else None
        fitted = isotonic_regression(ys).x if jit is None else jit.pav_unit(ys)
        # every weight 1: a read-only view of one value, not an N-array of ones
        return xs, fitted, np.broadcast_to(np.float64(1.0), fitted.shape), None
    starts = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    gw = np.diff(np.append(starts, xs.shape[0])).astype(np.float64)
    fitted = isotonic_regression(np.add.reduceat(ys, starts) / gw, weights=gw).x
    return xs[starts], fitted, gw, gid


def _squared_deviation(ys: NDArray, f: NDArray | float, ws: NDArray | None) -> float:
    """Σ w_i (y_i − f_i)² (f an array like ys, or one value), chunk by chunk: no N-long
    temporary."""
    total = 0.0
    for sl in chunks(np, ys.shape[0]):
        d = ys[sl] - (f if isinstance(f, float) else f[sl])
        total += float(np.dot(d, d)) if ws is None else float(np.dot(ws[sl], d * d))
    return total


def corp(
    x: NDArray,
    y: NDArray,
    w: NDArray | None,
    *,
    functional: Functional = "mean",
    level: float = 0.5,
    order: NDArray | None = None,
) -> Corp:
    """The CORP decomposition of the forecasts ``x`` for the outcomes ``y`` (weights ``w``,
    ``None`` for unit weights): see the module docstring. ``order``: an argsort of ``x`` (any
    order of ties), given when it is cached (resamples of one batch share it)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if order is None:
        order = argsort_host(x)
    if w is not None:
        w = np.asarray(w, dtype=np.float64)
        if not bool(np.all(w > 0)):
            order = order[w[order] > 0]  # still sorted: rows of zero weight count nowhere
    xs, ys = x[order], y[order]
    ws = None if w is None else w[order]
    total = float(ys.shape[0]) if ws is None else float(np.sum(ws))

    def wsum(v: NDArray) -> float:
        return float(np.sum(v)) if ws is None else float(np.dot(ws, v))

    ranks = None
    if functional == "mean":
        ref = wsum(ys) / total
    elif ws is None:  # the ⌈α N⌉-th smallest outcome: one selection
        k = min(max(math.ceil(level * ys.shape[0]), 1), ys.shape[0]) - 1
        ref = float(np.partition(ys, k)[k])
    elif (jit := kernels()) is not None:
        ref = float(jit.lower_quantile(ys, ws, level))
    else:
        values, rank = np.unique(ys, return_inverse=True)
        ranks = (values, rank)
        cw = np.cumsum(np.bincount(rank, weights=ws, minlength=values.shape[0]))
        j = int(np.searchsorted(cw, level * cw[-1], side="left"))
        ref = float(values[min(j, values.shape[0] - 1)])
    if functional == "quantile" and (jit := kernels()) is not None:
        wk = np.ones_like(ys) if ws is None else ws
        _, starts = _group_starts(xs)
        fitted = jit.quantile_isotonic(ys, wk, starts, level)
        sums = jit.pinball_sums(ys, wk, xs, starts, fitted, ref, level)
        s_x, s_hat, s_ref = (v / total for v in sums)
        gw = wk if starts.shape[0] == xs.shape[0] else np.add.reduceat(wk, starts)
        return Corp(s_x, s_x - s_hat, s_ref - s_hat, s_ref, xs[starts], fitted, gw, ref)
    ux, fitted, gw, gid = (
        isotonic_fit(
            xs,
            ys,
            np.ones_like(ys) if ws is None else ws,
            functional=functional,
            level=level,
            ranks=ranks,
        )
        if ws is not None or functional != "mean"
        else _unit_fit(xs, ys)
    )
    # no ties: one group per row, x̂ is the fit itself (no gather)
    xhat = fitted if gid is None else fitted[gid]

    def score(f: NDArray | float) -> float:
        if functional == "mean":
            return _squared_deviation(ys, f, ws) / total
        return wsum(pinball(ys, np.broadcast_to(f, ys.shape), level)) / total

    s_x, s_hat, s_ref = score(xs), score(xhat), score(ref)
    return Corp(s_x, s_x - s_hat, s_ref - s_hat, s_ref, ux, fitted, gw, ref)


def corp_events(x: NDArray, o: NDArray, w: NDArray | None, *, order: NDArray | None = None) -> Corp:
    """The CORP decomposition of the Brier score of probabilities ``x`` (>= 0) for the events
    ``o`` (booleans), weights ``w`` (``None`` for unit weights): :func:`corp` with
    ``functional="mean"``, using that the outcomes are 0/1.

    Tied forecasts merge into one point with their total weight and the weight of their events,
    and the scores come from those sums: B̄(x̂) = Σ_g (W1_g (1 − x̂_g)² + W0_g x̂_g²) / W,
    B̄(ō) = ō(1 − ō). Unweighted, the sort is one ``numpy.sort`` of N 64-bit keys: the bits of
    a non-negative float64 order as it does, so (bits << 1) | o sorts by x and carries o along
    (no argsort, no gather). Weighted, ``order`` is an argsort of x (any order of ties; cached
    by the caller, since resamples share it). Cost: that sort, a few O(N) passes and one PAV
    of the distinct forecasts."""
    x = np.asarray(x, dtype=np.float64)
    o = np.asarray(o, dtype=bool)
    if w is None and order is None and x.shape[0] and bool(np.min(x) >= 0.0):
        key = (x + 0.0).view(np.uint64)  # + 0.0 turns −0.0 into +0.0
        key = key << np.uint64(1)
        key |= o
        key.sort()
        ones = (key & np.uint64(1)).astype(bool)
        key >>= np.uint64(1)
        xs: NDArray = key.view(np.float64)
        ws: NDArray | None = None
    else:
        if order is None:
            order = argsort_host(x)
        if w is not None:
            w = np.asarray(w, dtype=np.float64)
            if not bool(np.all(w > 0)):
                order = order[w[order] > 0]  # rows of zero weight count nowhere
        xs, ones = x[order], o[order]
        ws = None if w is None else w[order]
    n = xs.shape[0]
    _, starts = _group_starts(xs)
    if ws is None:
        gw = np.diff(np.append(starts, n)).astype(np.float64)
        g1 = np.add.reduceat(ones, starts, dtype=np.float64) if n else np.zeros(0)
    else:
        gw = np.add.reduceat(ws, starts) if n else np.zeros(0)
        g1 = np.add.reduceat(np.where(ones, ws, 0.0), starts) if n else np.zeros(0)
    fitted = isotonic_regression(g1 / gw, weights=gw).x if n else np.zeros(0)
    total = float(np.sum(gw))
    d = x - o
    s_x = (float(np.dot(d, d)) if w is None else float(np.dot(w, d * d))) / total
    s_hat = float(np.dot(g1, (1.0 - fitted) ** 2) + np.dot(gw - g1, fitted * fitted)) / total
    rate = float(np.sum(g1)) / total
    s_ref = rate * (1.0 - rate)
    return Corp(s_x, s_x - s_hat, s_ref - s_hat, s_ref, xs[starts], fitted, gw, rate)
