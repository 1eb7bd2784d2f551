"""Quality gates of a candidate submission against a reference, computed by a worker.

A gate is stored and run as a comparison whose request has ``kind: "gate"`` (the same
claim, heartbeat, re-queue and task, ``uqeval.compare``); :func:`compute_gate` is its
computation: :func:`uqcore.stability.gate.quality_gate` on the benchmark's targets, groups,
resampling unit and the request's B and seed — the same resamples a comparison of the two
submissions draws — then shaped for ``GET /v1/gates/{id}``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from service.rest_text import rest_document
from service.store import Store
from uqcore import UQValidationError
from uqcore.report import json_safe
from uqcore.stability.gate import quality_gate
from worker.ranks import _prediction, benchmark_targets, resampling

__all__ = ["P_VALUE_GRID", "compute_gate"]

#: Non-admin gates show p-values rounded up to this grid. The exact p-value, as a function of
#: an allowance of the requester's choosing, is the count of bootstrap degradations below it:
#: repeated gates could read all B of them (sums of per-row errors with known weights) from
#: the hidden targets. Rounded up, a p-value tells at most 1/P_VALUE_GRID of them, and
#: p <= α keeps its answer whenever α is a multiple of the grid.
P_VALUE_GRID = 0.01


def _coarse(p: float | None) -> float | None:
    if p is None:
        return None
    return min(1.0, round(math.ceil(round(p / P_VALUE_GRID, 9)) * P_VALUE_GRID, 10))


def compute_gate(
    store: Store, request: dict[str, Any], progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    """The result of the gate ``request`` (``passed``, ``reason``, ``checks``, ``evidence``)."""
    bench = store.get_benchmark(request["benchmark_id"])
    targets = store.load_benchmark_arrays(request["benchmark_id"])
    if bench is None or targets is None:
        raise UQValidationError(f"benchmark {request['benchmark_id']!r} was deleted")
    preds = []
    for sub_id in (request["candidate"], request["reference"]):
        pred = _prediction(store, sub_id)
        if pred is None:
            raise UQValidationError(f"submission {sub_id!r} or its arrays are no longer stored")
        preds.append(pred)
    opts = resampling(bench, targets)
    opts.update(n_resamples=request["n_resamples"], seed=request["seed"])
    opts.pop("level", None)
    y, extra = benchmark_targets(bench, targets)
    checks = request["checks"]
    metrics = list(dict.fromkeys(c["metric"] for c in checks))
    done = quality_gate(
        preds[0],
        preds[1],
        y,
        [{"name": c["entry"], "allowed": c["allowed"], "mode": c["mode"]} for c in checks],
        confidence=request["confidence"],
        correction=request["correction"],
        params={m: dict(bench.params.get(m, {})) for m in metrics},
        estimators=request.get("estimators") or None,
        progress=progress,
        **opts,
        **extra,
    )
    coarse = not request.get("exact_p_values", False)
    out_checks = []
    for c, e in zip(checks, done["checks"], strict=True):
        shown = {k: v for k, v in e.items() if k != "name"}
        if coarse:
            shown["p_value"] = _coarse(e["p_value"])
            shown["p_value_adjusted"] = _coarse(e["p_value_adjusted"])
        out_checks.append({"metric": c["metric"], "estimator": c.get("estimator"), **shown})
    doc = {
        "passed": done["passed"],
        "reason": done["reason"],
        "checks": out_checks,
        "evidence": {
            "n_resamples": done["n_resamples"],
            "seed": done["seed"],
            "level": done["confidence"],
            "method": "percentile (paired bootstrap of the degradation, one-sided)",
            "unit": opts["unit"],
            "correction": done["correction"],
            "test": "H0: degradation <= allowance; p = (1 + #{D* <= allowance}) / (B + 1); a "
            "check fails iff its (adjusted) p <= 1 − level, i.e. with one check iff the "
            "lower bound low = D*_(j), j = floor((1 − level)(B + 1)), exceeds the allowance",
            "p_values": f"rounded up to a multiple of {P_VALUE_GRID}" if coarse else "exact",
            "n": done["n"],
        },
        "warnings": done["warnings"],
    }
    safe = json_safe(doc, "gate", doc["warnings"])
    return dict(rest_document(safe, task=bench.task, origin="comparison", metrics=metrics))
