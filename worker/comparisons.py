"""Comparisons of submissions on one benchmark, computed by a worker (``uqeval.compare``).

For every pair (A, B) of the requested submissions, :func:`uqcore.stability.compare` gives
the paired bootstrap difference A − B with its interval, P(A better) and the two-sided p-value
of "no difference"; with the benchmark's targets, groups, resampling unit and parameters, and
the request's B, seed, level and method — so the numbers equal a direct call with the same
seed. With k submissions there are k(k−1)/2 pairs per metric, so the p-values are also
reported adjusted by Holm's step-down method within each metric (controls the family-wise
error rate over that metric's pairs). :func:`uqcore.stability.rank_distribution` gives each
metric's rank distribution over the k submissions. All of it comes from one
:func:`uqcore.stability.compare_all` call, which draws each resample once and evaluates each
submission once on it (k evaluations per resample rather than k(k−1) + k per metric), with
results equal to those per-pair and per-metric calls. On a classification benchmark the
labels, and the OOD flags and soft labels it holds, are the targets; with the request's
``estimators`` each metric that takes an estimator is also compared under each of them, as
the entry ``"metric[estimator]"``.

While it runs, the comparison's ``progress`` (0..100) follows the resamples (``compare_all``
reports after each block); the result names each submission's model and team
(``submissions``), and its notes are in the words of the API
(:func:`service.rest_text.rest_document`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from service.rest_text import rest_document, rest_text
from service.store import TERMINAL, Store
from uqcore import UQValidationError
from uqcore.report import json_safe
from uqcore.stability import compare_all
from uqcore.stability.gate import holm
from worker.gates import compute_gate
from worker.ranks import _prediction, benchmark_targets, resampling

__all__ = ["CORRECTION", "holm", "run_comparison"]

log = logging.getLogger(__name__)

CORRECTION = (
    "Holm step-down adjustment of the p-values within each metric, over its k(k−1)/2 pairs "
    "(family-wise error rate at the nominal level); intervals and P(better) are per pair, "
    "unadjusted"
)


def _submissions(store: Store, sub_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Each compared submission's model name and team (id and name: two round trips)."""
    records = store.get_submissions(sub_ids)
    teams = [(r.team if r.team is not None else r.owner) if r else None for r in records]
    names = store.team_names(teams)
    return {
        sub_id: {
            "model_name": r.model_name if r else None,
            "team_id": team,
            "team_name": names.get(team) if team else None,
        }
        for sub_id, r, team in zip(sub_ids, records, teams, strict=True)
    }


def _compute(
    store: Store, request: dict[str, Any], progress: Callable[[float], None] | None = None
) -> dict[str, Any]:
    if request.get("kind") == "gate":  # a quality gate runs as a comparison (worker.gates)
        return compute_gate(store, request, progress)
    bench = store.get_benchmark(request["benchmark_id"])
    targets = store.load_benchmark_arrays(request["benchmark_id"])
    if bench is None or targets is None:
        raise UQValidationError(f"benchmark {request['benchmark_id']!r} was deleted")
    subs: list[str] = list(request["submission_ids"])
    preds: dict[str, Any] = {}
    for sub_id in subs:
        pred = _prediction(store, sub_id)
        if pred is None:
            raise UQValidationError(f"submission {sub_id!r} or its arrays are no longer stored")
        preds[sub_id] = pred
    metrics: list[str] = list(request["metrics"])
    opts = resampling(bench, targets)
    opts.update(n_resamples=request["n_resamples"], seed=request["seed"], level=request["level"])
    params = {m: dict(bench.params.get(m, {})) for m in metrics}
    y, extra = benchmark_targets(bench, targets)
    if request.get("estimators"):
        extra["estimators"] = list(request["estimators"])
    # Every pair and every rank distribution from one set of resamples: each submission is
    # evaluated once per resample (equal to compare()/rank_distribution() per pair/metric).
    done = compare_all(
        preds,
        y,
        metrics,
        method=request["method"],
        params=params,
        progress=progress,
        **opts,
        **extra,
    )
    pairs: list[dict[str, Any]] = []
    warnings: list[str] = []
    for (a, b), c in done.pairs.items():
        pairs.append({"a": a, "b": b, "metrics": {m: dict(c[m]) for m in c}})
        warnings.extend(f"{a} vs {b}: {w}" for w in c.warnings)
    for m in done.ranks:
        entries = [p["metrics"].get(m) for p in pairs]
        adjusted = holm([e.get("p_value") if e else None for e in entries])
        for e, adj in zip(entries, adjusted, strict=True):
            if e is not None:
                e["p_value_adjusted"] = adj
    ranks = {}
    for m, rd in done.ranks.items():  # each metric and, with estimators, "metric[estimator]"
        ranks[m] = dict(rd.entries)
        warnings.extend(f"ranks {m}: {w}" for w in rd.warnings)
    doc = {
        "submissions": _submissions(store, subs),
        "pairs": pairs,
        "ranks": ranks,
        "correction": CORRECTION,
        "test": "shifted paired bootstrap, two-sided (uqcore.stability.compare)",
        "n_resamples": opts["n_resamples"],
        "seed": opts["seed"],
        "level": opts["level"],
        "method": request["method"],
        "unit": opts["unit"],
        "warnings": warnings,
    }
    safe = json_safe(doc, "comparison", warnings)
    return dict(rest_document(safe, task=bench.task, origin="comparison", metrics=metrics))


def run_comparison(
    store: Store, cmp_id: str, progress: Callable[[float], None] | None = None
) -> str:
    """Compute comparison ``cmp_id`` and store its result; returns its final status.
    ``progress`` (optional) gets the percent done (0..100) as the resamples are drawn."""
    record = store.get_comparison(cmp_id)
    if record is None:
        return "missing"
    if record["status"] in TERMINAL:
        return str(record["status"])  # a re-delivered task
    store.set_comparison_status(cmp_id, "running")
    fraction = None if progress is None else (lambda f: progress(99.0 * f))
    try:
        result = _compute(store, record["request"], fraction)
    except UQValidationError as exc:
        bench = store.get_benchmark(record["request"]["benchmark_id"])
        task = bench.task if bench is not None else "regression"
        message = rest_text(
            str(exc), task=task, origin="comparison", metrics=record["request"]["metrics"]
        )
        store.set_comparison_status(cmp_id, "failed", error=f"invalid comparison: {message}")
        return "failed"
    except Exception as exc:
        log.exception("comparison %s crashed", cmp_id)
        store.set_comparison_status(
            cmp_id,
            "failed",
            error=f"internal error while comparing ({type(exc).__name__}); please report it "
            "with the comparison id",
        )
        return "failed"
    store.set_comparison_status(cmp_id, "succeeded", result=result)
    return "succeeded"
