"""The intervals of a suite's leaderboard, computed by a worker (both views at once).

- ``rows`` view (unit: rows within tasks): on each task t, every ranked team's submission —
  and the baseline's — is evaluated on the same B resamples of the task's rows
  (:func:`uqcore.stability.bootstrap_values` with the suite's B and the seed ``seed + t``,
  and the benchmark's resampling unit: rows, or its clusters), so the teams are paired within
  a task and the tasks are independent; a team's imputed entry takes the baseline's resampled
  value. The aggregates of :mod:`service.suites` are recomputed on each resample.
- ``tasks`` view (unit: tasks within the suite): B draws of T tasks with replacement (seed
  ``seed``), with the point values.

Each aggregate gets the percentile interval at the suite's level, and each team the interval
of its rank by mean rank. The document names the inputs it describes (the digest of the suite
record and its members' records and boards' versions), so that the API can tell whether it is
current.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from service.store import Store, StoreUnavailable, SuiteSnapshot
from service.suite_data import SuiteInputs, load_inputs, task_part
from service.suites import (
    Aggregates,
    aggregate,
    percentile,
    rank_by_mean,
    rank_interval,
    resampled,
    task_draws,
)
from uqcore import registry
from uqcore.report import json_safe
from uqcore.stability import bootstrap_values
from worker.ranks import _prediction, benchmark_targets, resampling

__all__ = ["compute_suite_intervals"]

log = logging.getLogger(__name__)

#: At most this many warnings are kept in the document (every answer carries them).
MAX_WARNINGS = 20


def compute_suite_intervals(store: Store, suite_id: str) -> dict[str, Any] | None:
    """Compute and store the interval document of a suite; None when the suite is gone.

    A computation that fails stores a document without intervals and with the reason, for
    these inputs: it is not retried until the suite or a member board changes. A blob store
    that is down raises StoreUnavailable first (the task is retried): the rows view reads the
    predictions from it.
    """
    store.ping_blobs()
    snapshot = store.suite_snapshot(suite_id)
    if snapshot is None:
        store.release_suite_intervals(suite_id)
        return None
    if snapshot.intervals is not None and snapshot.intervals.get("inputs") == snapshot.inputs:
        # already current (a re-delivered task): release the claim it was queued under
        store.release_suite_intervals(suite_id)
        return snapshot.intervals
    try:
        doc = _compute(store, snapshot)
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.exception("interval job of suite %s failed", suite_id)
        doc = {
            "inputs": snapshot.inputs,
            "views": {},
            "warnings": [f"suite intervals unavailable: {type(exc).__name__}: {exc}"],
        }
    notes = doc.setdefault("warnings", [])
    safe = json_safe(doc, "suite", notes)
    if len(safe["warnings"]) > MAX_WARNINGS:
        more = len(safe["warnings"]) - MAX_WARNINGS
        safe["warnings"] = [*safe["warnings"][:MAX_WARNINGS], f"... and {more} more"]
    store.put_suite_intervals(suite_id, safe)
    return dict(safe)


def _summary(
    agg: Aggregates,
    mean_rank: np.ndarray[Any, Any],
    win_rate: np.ndarray[Any, Any],
    gm: np.ndarray[Any, Any],
    level: float,
) -> dict[str, Any]:
    """Per team: the intervals of its aggregates and of its rank, from (R, K) arrays."""
    ranks = rank_by_mean(np.where(np.isnan(mean_rank), np.inf, mean_rank))
    out: dict[str, Any] = {}
    for j, team in enumerate(agg.teams):
        skill = [None, None] if agg.gm_skill_reason else list(percentile(gm[:, j], level))
        out[team] = {
            "mean_rank": list(percentile(mean_rank[:, j], level)),
            "win_rate": list(percentile(win_rate[:, j], level)),
            "gm_skill": skill,
            "rank": list(rank_interval(ranks[:, j], level)),
        }
    return out


def _compute(store: Store, snapshot: SuiteSnapshot) -> dict[str, Any]:
    suite = snapshot.suite
    inputs = load_inputs(store, snapshot)
    agg = aggregate(inputs.tasks, suite.missing)  # type: ignore[arg-type]
    b_count, level = suite.n_resamples, suite.level
    notes = list(inputs.warnings)
    views: dict[str, Any] = {}
    if agg.teams:
        assert agg.badness is not None and agg.loss is not None
        t_count, k_count = agg.badness.shape
        base = np.array(
            [np.nan if t.baseline is None else _loss(t.baseline[0], t.best) for t in inputs.tasks]
        )
        counts = task_draws(t_count, b_count, suite.seed)
        shape = (b_count, t_count, k_count)
        tv = resampled(
            np.broadcast_to(agg.badness, shape),
            np.broadcast_to(agg.loss, shape),
            np.broadcast_to(base, (b_count, t_count)),
            counts,
        )
        views["tasks"] = {"teams": _summary(agg, *tv, level)}
        bad, loss, base_loss = _rows_resamples(store, snapshot, inputs, agg, notes)
        rv = resampled(bad, loss, base_loss)
        views["rows"] = {"teams": _summary(agg, *rv, level)}
    return {
        "inputs": snapshot.inputs,
        "n_resamples": b_count,
        "seed": suite.seed,
        "level": level,
        "views": views,
        "warnings": notes,
    }


def _loss(value: Any, best: float | None) -> Any:
    return np.nan if best is None else np.abs(np.asarray(value, dtype=float) - best)


def _rows_resamples(
    store: Store,
    snapshot: SuiteSnapshot,
    inputs: SuiteInputs,
    agg: Aggregates,
    notes: list[str],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(badness, loss, baseline loss) on each resample of each task's rows: (B, T, K),
    (B, T, K), (B, T)."""
    suite = snapshot.suite
    b_count, t_count, k_count = suite.n_resamples, len(inputs.tasks), len(agg.teams)
    bad = np.full((b_count, t_count, k_count), np.nan)
    loss = np.full((b_count, t_count, k_count), np.nan)
    base_loss = np.full((b_count, t_count), np.nan)
    for k, task in enumerate(inputs.tasks):
        bench = snapshot.benches.get(task.benchmark_id)
        # the rows the task's values come from (public, or the private rows of a closed
        # benchmark for selection "final")
        part = "public" if bench is None else task_part(suite.selection, bench)
        targets = store.load_benchmark_arrays(task.benchmark_id, part) if bench else None
        if bench is None or targets is None:
            notes.append(f"task {k + 1} ({task.benchmark_id}): targets not found")
            continue
        opts = resampling(bench, targets)
        y, extra = benchmark_targets(bench, targets)
        spec = registry.get(task.metric, bench.task)
        params = dict(bench.params.get(task.metric) or {})
        cache: dict[str, np.ndarray[Any, Any] | None] = {}
        call = {
            "y": y,
            "metric": task.metric,
            "n_resamples": b_count,
            "seed": suite.seed + k,
            "unit": opts["unit"],
            "groups": opts["groups"],
            "params": {task.metric: params},
            "extra": extra,
            "part": part,
        }
        base_values = _values(store, inputs.baseline_subs[k], call, cache)
        if base_values is not None:
            base_loss[:, k] = _loss(base_values, task.best)
        lost = 0
        for j, team in enumerate(agg.teams):
            own = inputs.subs[k].get(team)
            v = _values(store, own, call, cache) if own is not None else base_values
            if v is None:
                lost += 1
                continue
            bad[:, k, j] = spec.badness(v, params)
            loss[:, k, j] = _loss(v, task.best)
        if lost:
            notes.append(
                f"task {k + 1} ({task.benchmark_id}): {lost} team(s) without stored arrays "
                "(nor a baseline's to impute): left out of its rows resamples"
            )
        if inputs.baseline_subs[k] is not None and base_values is None:
            notes.append(f"task {k + 1} ({task.benchmark_id}): the baseline's arrays are gone")
    return bad, loss, base_loss


def _values(
    store: Store,
    sub_id: str | None,
    call: dict[str, Any],
    cache: dict[str, np.ndarray[Any, Any] | None],
) -> np.ndarray[Any, Any] | None:
    """The metric's values on the task's B resamples for one submission (cached per task;
    None when it has no stored arrays)."""
    if sub_id is None:
        return None
    if sub_id not in cache:
        pred = _prediction(store, sub_id, call["part"])
        if pred is None:
            cache[sub_id] = None
        else:
            b = call["n_resamples"]
            got = bootstrap_values(
                pred,
                call["y"],
                [call["metric"]],
                start=0,
                stop=b,
                n_resamples=b,
                seed=call["seed"],
                unit=call["unit"],
                groups=call["groups"],
                params=call["params"],
                **call["extra"],
            )
            cache[sub_id] = np.asarray(got[call["metric"]], dtype=float)
    return cache[sub_id]
