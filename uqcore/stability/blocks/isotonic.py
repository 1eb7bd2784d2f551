"""Block path of the CORP decomposition: one isotonic fit per resample, shared by the three
components, along the forecasts' sort that the batch computed once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from uqcore.regression import decomposition
from uqcore.stability.blocks.context import BlockContext, BlockEvaluator, FloatArray, Keys

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
