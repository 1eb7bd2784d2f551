"""Block paths of the rank metrics: Spearman's ρ, AUSE and AURG, from cumulative weights
along the uncertainty and |e| orders.

- ``spearman``: with C_k the cumulative weight along a key's order, the doubled weighted
  midrank of row k is C_k + C_{k−1} (exact for counts), centred a_k = C_k + C_{k−1} − W.
  ρ = Σ w a b / √(Σ w a² · Σ w b²), and without ties Σ_k w_k a_k² = (W³ − Σ w_k³)/3 for both
  keys (the midranks of a tie block of w copies are the integral of (x − W/2)² over its stretch
  minus w³/12), so only the cross term needs the |e| ranks gathered into the uncertainty order
  (and Σ w b = 0 lets the uncertainty ranks stay uncentred).
- ``ause``/``aurg`` (``error="mae"``, ``grid="exact"``, integer weights): along the ascending
  key a row of weight m, remaining weight R and remaining error S (both including the row) adds
  m·e + (S − R·e)(H_R − H_{R−m}) to the area (the implementation's digamma form; H the harmonic
  numbers). Summing by parts, Σ S(H_R − H_{R−m}) = Σ_k m_k e_k (H_W − H_{R_k−m_k}), so
  area = Σ m e + Σ m e (H_W − H_{R−m}) − Σ R e (H_R − H_{R−m}): one gather from the harmonic
  table and two dot products, no floating cumulative sum. Along the |e| order itself (the
  oracle) this is (1 + H_W) Σ m e − Σ_k R_k H_{R_k} (e_k − e_{k+1}), whose terms but the last
  share one sign: one gather from a table of k·H_k and one dot product with fixed steps.
  ``rule="trapezoid"`` removes half a step 1/W of the curves' last point, where one unit of
  weight remains: the error of the first row of positive weight along each key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from uqcore._compiled import kernels
from uqcore._scaling import in_safe_range
from uqcore.stability.blocks.context import (
    BlockContext,
    BlockEvaluator,
    FloatArray,
    IntArray,
    Keys,
    int_type,
)

__all__ = ["sparsification", "spearman"]

#: Below this total weight W the cross term of Spearman's ρ is summed exactly in int64: each
#: term m·du·de_u is at most m·(2W)², their sum at most 4W³ < 2⁶³.
_EXACT_TOP = 1.3e6


def _perm(keys: Keys) -> IntArray:
    """Each row's position in the |e| order (the inverse permutation, O(N)), in u order."""

    def positions() -> IntArray:
        order_e = keys.order_e()
        inverse = np.empty(order_e.shape[0], dtype=np.intp)
        inverse[order_e] = np.arange(order_e.shape[0], dtype=np.intp)
        return inverse[keys.order_u()]

    return keys.get("perm_e_to_u", positions)  # type: ignore[no-any-return]


def _narrow(keys: Keys, name: str, index: Callable[[], IntArray]) -> IntArray:
    """An index array as int32 when N fits (kept in the keys): the rank kernel's passes read
    half the bytes."""

    def narrowed() -> IntArray:
        full = index()
        return full.astype(np.int32) if keys.n < 2**31 else full

    return keys.get(f"{name}:narrow", narrowed)  # type: ignore[no-any-return]


def _e_u(keys: Keys) -> FloatArray:
    """|e| along the ascending uncertainty."""
    return keys.get("e_by_u", lambda: keys.e()[keys.order_u()])  # type: ignore[no-any-return]


def _e_steps(keys: Keys) -> FloatArray:
    """e_(k) − e_(k+1) along ascending |e| (e_(N+1) = 0)."""
    return keys.get(  # type: ignore[no-any-return]
        "e_steps", lambda: keys.e_by_e() - np.append(keys.e_by_e()[1:], 0.0)
    )


def _compiled_sums(keys: Keys, ctx: BlockContext) -> tuple[Any, ...] | None:
    """(cross, s1, s2, s3, cubes) of :func:`uqcore._jit.rank_sums` for the block (two passes
    along each order instead of a dozen numpy passes), or ``None`` where the kernel does not
    apply: no numba, weights that are not byte counts, or totals beyond the exact integer
    cross term."""
    if not ctx.integer or ctx.top >= _EXACT_TOP:
        return None

    def compute() -> tuple[Any, ...] | None:
        jit = kernels()
        if jit is None:
            return None
        m_u = ctx.by("u", keys.order_u)  # shared with the binned block paths (ENCE, UCE)
        r_u = ctx.cum("u", keys.order_u)
        w = ctx.small()
        order_e = _narrow(keys, "order_e", keys.order_e)
        perm = _narrow(keys, "perm_e_to_u", lambda: _perm(keys))
        if not (
            m_u.dtype == np.uint8
            and w.dtype == np.uint8
            and r_u.dtype == np.int32
            and order_e.dtype.kind == "i"
            and perm.dtype.kind == "i"
            and all(a.flags.c_contiguous for a in (m_u, r_u, w, order_e, perm))
        ):
            return None
        ce = ctx.scratch("cum:e", np.int32)  # ctx.cum("e")'s buffer: int32 as r_u here
        out: tuple[Any, ...] = jit.rank_sums(
            m_u,
            r_u,
            w,
            order_e,
            perm,
            _e_u(keys),
            _e_steps(keys),
            ctx.harmonic(ctx.top),
            ctx.harmonic_times(ctx.top),
            ce,
        )
        # the kernel's cumulative weights along |e| are ctx.cum("e"), the same integers: the
        # weighted quantiles of |e| (MdAE, n-MeRCI), which run after the rank metrics
        # (table.FIRST), search them instead of summing windows of the counts again
        ctx.get("cum:e", lambda: ce)
        return out

    return ctx.get("ranks:compiled", compute)  # type: ignore[no-any-return]


def spearman(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """Spearman's ρ of the uncertainty and |e| (no ties in either)."""
    if keys.ties("u", keys.u) or keys.ties("e", keys.e):
        return None
    perm = _perm(keys)

    def run(ctx: BlockContext) -> FloatArray | None:
        if not in_safe_range(float(np.max(ctx.total)), float(np.min(ctx.total))):
            return None  # W³ would leave float64's range: per resample (scale-free) instead
        top = 2.0 * ctx.top
        fused = _compiled_sums(keys, ctx)
        # Σ w³ from the kernel's pass when it ran (the same exact integers), else a pass of
        # its own
        cubes = ctx.power_sum(3) if fused is None else fused[4].astype(np.float64)
        saa = (ctx.total**3 - cubes) / 3.0
        ok = (ctx.positive_rows >= 2) & (saa > 0)
        if fused is not None:
            total = np.rint(ctx.total).astype(np.int64)
            sab = (fused[0] - total**3).astype(np.float64)
            r = np.where(ok, sab / np.where(ok, saa, 1.0), np.nan)
            return np.clip(r, -1.0, 1.0)

        def doubled(key: str, order: Callable[[], IntArray]) -> Any:
            """2C_k − w_k = C_k + C_{k−1} along the key's order (exact for integer weights)."""
            c = ctx.cum(key, order)
            dtype = c.dtype if c.dtype.kind == "f" else int_type(top)
            out = ctx.scratch(f"spearman:{key}", dtype)
            np.add(c[:, 1:], c[:, :-1], out=out[:, 1:])
            out[:, 0] = c[:, 0]
            return out

        du = doubled("u", keys.order_u)
        m = ctx.by("u", keys.order_u)
        if du.dtype.kind != "f" and ctx.top < _EXACT_TOP:
            # in integers: Σ w a b = Σ m du de_u − W Σ m du, and Σ m du = Σ (C_k² − C_{k−1}²)
            # = W²; de_u = 2 C^e − m, the |e| order's cumulative weights gathered into the
            # uncertainty order (one gather, no doubled copy along |e|)
            ce = ctx.cum("e", keys.order_e)
            de_u = np.take(ce, perm, axis=1, out=ctx.scratch("spearman:e_u", ce.dtype), mode="clip")
            de_u += de_u
            de_u -= m
            cross = np.einsum("ij,ij,ij->i", m, du, de_u, dtype=np.int64)
            total = np.rint(ctx.total).astype(np.int64)
            sab = (cross - total**3).astype(np.float64)
        else:
            de = doubled("e", keys.order_e)
            de_u = np.take(de, perm, axis=1, out=ctx.scratch("spearman:e_u", de.dtype), mode="clip")
            b = np.subtract(de_u, ctx.total[:, None], out=ctx.scratch("spearman:b", np.float64))
            # Σ w a b with a = du − W centred; Σ w b = W² − W² = 0, so du need not be centred
            sab = np.einsum("ij,ij,ij->i", m, du, b)
        # Σ w a² = Σ w b² = (W³ − Σ w³)/3 without ties (see the module docstring)
        r = np.where(ok, sab / np.where(ok, saa, 1.0), np.nan)
        return np.clip(r, -1.0, 1.0)

    return run


def sparsification(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """AUSE (``name="ause"``) or AURG (``"aurg"``) with ``error="mae"``, ``grid="exact"``
    and either ``rule`` (no ties in the uncertainty; integer weights, else per resample)."""
    if params.get("error") != "mae" or params.get("grid") != "exact":
        return None
    rule = params.get("rule", "left")
    if rule not in ("left", "trapezoid") or keys.ties("u", keys.u):
        return None
    normalize = bool(params.get("normalize", True))
    e_u = _e_u(keys)
    col_e = keys.column("e", keys.e)
    step_e = _e_steps(keys)

    def area(ctx: BlockContext, key: str, order: Callable[[], IntArray], e: FloatArray) -> Any:
        """W times the area under the sparsification curve along ``key``'s order, in the
        digamma form: every sum over positive terms (by parts along an order that does not
        sort e loses digits: measured 1e-10 relative on AUSE at N = 10⁶)."""

        def compute() -> FloatArray:
            fused = _compiled_sums(keys, ctx) if key == "u" else None
            if fused is not None:
                err = ctx.sums(col_e)
                h_total = np.take(ctx.harmonic(ctx.top), np.rint(ctx.total).astype(np.int64))
                fast: FloatArray = err + (h_total * err - fused[1]) - fused[2]
                return fast
            m = ctx.by(key, order)  # integer weights along the key
            r = ctx.cum(key, order)  # remaining weight R (including the row), exact
            h = ctx.harmonic(ctx.top)
            hh = ctx.scratch(f"area:h:{key}", np.float64, extra=1)
            hh[:, 0] = 0.0
            np.take(h, r, out=hh[:, 1:], mode="clip")
            h_prev, h_cur = hh[:, :-1], hh[:, 1:]  # H_{R−m} (the row before) and H_R
            err = ctx.sums(col_e)  # Σ m e
            h_total = np.take(h, np.rint(ctx.total).astype(np.int64))
            # Σ S·ΔH by parts: Σ m e (H_W − H_{R−m})
            s_dh = h_total * err - np.einsum("ij,j,ij->i", m, e, h_prev)
            dh = np.subtract(h_cur, h_prev, out=ctx.scratch(f"area:dh:{key}", np.float64))
            out: FloatArray = err + s_dh - np.einsum("ij,j,ij->i", r, e, dh)
            return out

        return ctx.get(f"area:{key}", compute)

    def sorted_area(ctx: BlockContext) -> FloatArray:
        """The area along the |e| order itself (the oracle): with g_k = R_k·H_{R_k},
        X − Y = H_W Σme − Σ_k e_k (g_k − g_{k−1}) = H_W Σme − Σ_k g_k (e_k − e_{k+1})
        (e_{N+1} = 0); along ascending e every term but the last has one sign, so one gather
        from the table of k·H_k and one dot product suffice."""
        err = ctx.sums(col_e)
        h_total = np.take(ctx.harmonic(ctx.top), np.rint(ctx.total).astype(np.int64))
        fused = _compiled_sums(keys, ctx)
        if fused is not None:
            fast: FloatArray = (1.0 + h_total) * err - fused[3]
            return fast
        r = ctx.cum("e", keys.order_e)
        g = np.take(
            ctx.harmonic_times(ctx.top), r, out=ctx.scratch("area:g", np.float64), mode="clip"
        )
        out: FloatArray = (1.0 + h_total) * err - np.einsum("ij,j->i", g, step_e)
        return out

    def run(ctx: BlockContext) -> FloatArray | None:
        if not ctx.integer:
            return None
        total = ctx.total
        model = area(ctx, "u", keys.order_u, e_u) / total
        full = ctx.sums(col_e) / total
        trapezoid = rule == "trapezoid"
        if trapezoid:  # the last point: the first row of positive weight along u
            model_last = e_u[np.argmax(ctx.cum("u", keys.order_u) > 0, axis=1)]
        if name == "ause":
            oracle = sorted_area(ctx) / total
            value = model - oracle
            if trapezoid:  # cum("e") is sorted_area's; its first positive row is the oracle's
                oracle_last = keys.e_by_e()[np.argmax(ctx.cum("e", keys.order_e) > 0, axis=1)]
                value -= (model_last - oracle_last) / (2.0 * total)
            value = np.maximum(value, 0.0)
        else:
            value = full - model
            if trapezoid:
                value -= (full - model_last) / (2.0 * total)
        if not normalize:
            return np.asarray(value, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(full > 0, value / np.where(full > 0, full, 1.0), np.nan)

    return run
