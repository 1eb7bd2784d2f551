"""Block path of the CORP decomposition: one isotonic fit per resample, shared by the three
components, along the forecasts' sort that the batch computed once.

For the mean (the default functional) with the compiled kernels, the forecasts and outcomes
are put in the forecasts' order once, and each block gathers its weights along that order
once: :func:`uqcore._jit.corp_mean_sums` then fits and sums every resample in three passes
along it (no per-resample gather of x, y and w, no zero-weight filter, no scipy call: at
N = 10^6 about 130 ms per resample before). The quantile functional fits each resample
through the implementation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore._backend import to_numpy
from uqcore._compiled import kernels
from uqcore._scaling import exponent, max_abs, rescaled
from uqcore.regression import decomposition
from uqcore.stability.blocks.context import (
    WEIGHT_TYPES,
    BlockContext,
    BlockEvaluator,
    FloatArray,
    Keys,
)

__all__ = ["corp"]

_PART = {"corp_mcb": "mcb", "corp_dsc": "dsc", "corp_unc": "unc"}


def corp(keys: Keys, name: str, params: Mapping[str, Any]) -> BlockEvaluator | None:
    """MCB, DSC and UNC of every resample of the block from one fit each (the forecasts' order
    is weight-free and cached on the batch, so no resample sorts)."""
    functional, level = params.get("functional"), params.get("level")
    if functional not in ("mean", "quantile") or not isinstance(level, float):
        return None
    batch = keys.batch
    if isinstance(decomposition._forecast(batch, functional, level), str):
        return None
    part = _PART[name]
    if functional == "mean" and kernels() is not None:
        return _compiled_mean(keys, part, level)

    def fits(ctx: BlockContext) -> dict[str, FloatArray]:
        out = {p: np.full(ctx.rows, np.nan) for p in _PART.values()}
        for b in range(ctx.rows):
            d = decomposition.corp_of(batch.with_weights(ctx.w[b]), functional, level)
            if not isinstance(d, str):
                out["mcb"][b], out["dsc"][b], out["unc"][b] = d.mcb, d.dsc, d.unc
        return out

    def run(ctx: BlockContext) -> FloatArray:
        got: dict[str, FloatArray] = ctx.get(f"corp:{functional}:{level!r}", lambda: fits(ctx))
        return got[part]

    return run


def _compiled_mean(keys: Keys, part: str, level: float) -> BlockEvaluator:
    """The block path of the mean's decomposition through :func:`uqcore._jit.corp_mean_sums`
    (its sums scaled back and combined as :func:`uqcore._isotonic.corp` combines them)."""
    batch = keys.batch
    tag = f"corp:mean:{level!r}"

    def prepare() -> tuple[Any, Any, Any, int]:
        got = decomposition._forecast(batch, "mean", level)
        assert not isinstance(got, str)
        x, order = got
        y = np.asarray(to_numpy(batch.y), dtype=np.float64)
        # the same exact powers of two as the implementation (squares stay in range)
        e = exponent(max_abs(np, x), max_abs(np, y))
        xs = np.ascontiguousarray(rescaled(x, e)[order], dtype=np.float64)
        ys = np.ascontiguousarray(rescaled(y, e)[order], dtype=np.float64)
        return xs, ys, order, e

    def fits(ctx: BlockContext) -> dict[str, FloatArray]:
        xs, ys, order, e = keys.get(f"{tag}:sorted", prepare)
        w = ctx.by(f"{tag}:x", lambda: order)
        if w.dtype not in WEIGHT_TYPES or not w.flags.c_contiguous:
            w = np.ascontiguousarray(w, dtype=np.float64)
        n = xs.shape[0]
        sums = np.empty((ctx.rows, 4))
        kernels().corp_mean_sums(
            xs,
            ys,
            w,
            sums,
            keys.scratch(f"{tag}:block_w", (n,), np.float64),
            keys.scratch(f"{tag}:block_s", (n,), np.float64),
            keys.scratch(f"{tag}:block_end", (n,), np.int64),
        )
        total, s_x, s_hat, s_ref = (sums[:, k] for k in range(4))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s_x, s_hat, s_ref = s_x / total, s_hat / total, s_ref / total
            values = {"score": s_x, "mcb": s_x - s_hat, "dsc": s_ref - s_hat, "unc": s_ref}
            if e:
                values = {k: np.ldexp(v, 2 * e) for k, v in values.items()}
        # undefined where the resample has no weight, or where a score exceeds float64's range
        ok = total > 0
        for v in values.values():
            ok &= np.isfinite(v)
        return {p: np.where(ok, values[p], np.nan) for p in _PART.values()}

    def run(ctx: BlockContext) -> FloatArray:
        got: dict[str, FloatArray] = ctx.get(tag, lambda: fits(ctx))
        return got[part]

    return run
