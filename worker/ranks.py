"""Rank intervals and separability flags of a leaderboard, computed by a worker.

For the board of (benchmark, metric[estimator], rule), with the benchmark's seed, B, level and
resampling unit, its targets (:func:`benchmark_targets`: ``y``, or for classification the
labels with the OOD flags and soft labels it holds) and the metric's parameters (the board's
estimator, for a ``"metric[estimator]"`` board):

- :func:`uqcore.stability.rank_distribution` over every ranked submission gives each one's rank
  interval (``rank_low``..``rank_high``, marginal at the benchmark's level) and ``p_best``; an
  entry is *not separable from the leader* when its rank interval reaches rank 1;
- :func:`uqcore.stability.compare` of each entry with the baseline gives the paired bootstrap
  interval of the difference; the entry is *not separable from the baseline* when it contains
  0 (``p_value_vs_baseline`` is that comparison's two-sided p-value, uncorrected: the flags
  are per entry, see the multiple-comparison note stored with them).

The document is stored with the board version it describes, so the API can tell whether it
is current.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from service.kinds import (
    CLASSIFICATION_KINDS,
    CLASSIFICATION_TARGETS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    build_prediction,
)
from service.leaderboard import parse_board
from service.rest_text import rest_document
from service.splits import Part, is_private_board, public_board
from service.store import BenchmarkRecord, Store, StoreUnavailable
from uqcore.report import json_safe
from uqcore.stability import compare, rank_distribution
from uqcore.stability.compare import MULTIPLE_COMPARISON_NOTE

__all__ = ["benchmark_targets", "board_params", "compute_ranks", "resampling"]

log = logging.getLogger(__name__)

#: What the API reports as the method of the flags.
METHOD = (
    "rank intervals: uqcore.stability.rank_distribution (paired bootstrap of every ranked "
    "submission); separable from the baseline: the uqcore.stability.compare interval of the "
    "difference excludes 0"
)


def resampling(bench: BenchmarkRecord, targets: dict[str, Any]) -> dict[str, Any]:
    """The bootstrap options of the benchmark, as keyword arguments of uqcore.stability."""
    b = bench.bootstrap
    unit = b.get("unit", "row")
    return {
        "n_resamples": int(b.get("n_resamples") or 0) or 1000,
        "seed": bench.seed,
        "level": float(b.get("level", 0.95)),
        "unit": unit,
        "groups": targets.get("groups") if unit == "cluster" else None,
    }


def benchmark_targets(
    bench: BenchmarkRecord, targets: dict[str, Any]
) -> tuple[np.ndarray[Any, Any], dict[str, Any]]:
    """The targets of the benchmark's uqcore calls: (``y``, or the labels for a
    classification benchmark; the extra keyword arguments, ``ood`` and ``soft_labels`` where
    the benchmark holds them), from its stored arrays ``targets``.

    ``uqcore.stability.bootstrap(pred, y, ..., **extra)``, ``compare`` and
    ``rank_distribution`` then see exactly the targets the submissions were evaluated on.
    """
    if bench.task == "classification":
        extra = {k: np.asarray(targets[k]) for k in CLASSIFICATION_TARGETS if k in targets}
        return np.asarray(targets["labels"]), extra
    return np.asarray(targets["y"]), {}


def board_params(bench: BenchmarkRecord, board: str) -> tuple[str, dict[str, Any]]:
    """(metric, its parameters) of a board: the benchmark's parameters of the metric, with
    the board's estimator for a ``"metric[estimator]"`` board."""
    metric, estimator = parse_board(board)
    params = dict(bench.params.get(metric, {}))
    if estimator is not None:
        params["estimator"] = estimator
    return metric, params


def _prediction(store: Store, sub_id: str, part: Part = "public") -> Any | None:
    """The prediction of ``sub_id`` on the rows of ``part`` of its benchmark (the one loader,
    :meth:`service.store.Store.load_part`); None when it or its arrays are gone."""
    record = store.get_submission(sub_id)
    arrays = None if record is None else store.load_part(record, part)
    if record is None or arrays is None:
        return None
    kind = record.kind
    # An ensemble holds one of its two fields; a classification prediction its estimates too.
    fields = {
        f: a
        for f, a in arrays.items()
        if f in KIND_FIELDS[kind]
        or (kind in CLASSIFICATION_KINDS and f.startswith(ESTIMATE_PREFIX))
    }
    return build_prediction(kind, fields)


def compute_ranks(
    store: Store, bench_id: str, metric: str, rule: str, limit: int = 100
) -> dict[str, Any] | None:
    """Compute and store the rank document of one board (``metric``: the board's name, a
    metric or ``"metric[estimator]"``); None when the benchmark is gone.

    Only the first ``limit`` teams of the board enter the rank distribution (every
    prediction is held in memory at once); the others get no rank interval, and a warning
    says so.

    A computation that fails (e.g. the metric is undefined on every resample) stores a
    document without entries and with the reason, for this board version: it is not retried
    until the board changes.
    """
    bench = store.get_benchmark(bench_id)
    part: Part = "private" if is_private_board(metric) else "public"
    targets = store.load_benchmark_arrays(bench_id, part)
    if bench is None or targets is None or (part == "private" and bench.status != "closed"):
        store.release_ranks(bench_id, metric, rule)
        return None
    version = store.leaderboard_version(bench_id)
    try:
        return _compute(store, bench, targets, metric, rule, version, limit, part)
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.exception("rank job of %s/%s/%s failed", bench_id, metric, rule)
        doc = {
            "version": version,
            "metric": metric,
            "rule": rule,
            "entries": {},
            "warnings": [f"rank intervals unavailable: {type(exc).__name__}: {exc}"],
        }
        store.put_ranks(bench_id, metric, rule, doc)
        return doc


def _compute(
    store: Store,
    bench: BenchmarkRecord,
    targets: dict[str, Any],
    metric: str,
    rule: str,
    version: int,
    limit: int,
    part: Part = "public",
) -> dict[str, Any]:
    bench_id = bench.id
    # The submission set: the public board's, or on the private rows the best final of
    # each team (the private board, ``"private:<board>"``).
    if part == "private":
        board = [(row["team"], row["submission"]) for row in store.private_board(bench, metric)]
    else:
        board = store.leaderboard_board(bench_id, metric, rule)
    notes: list[str] = []
    if len(board) > limit:
        notes.append(
            f"rank intervals are computed for the first {limit} of {len(board)} teams "
            "(leaderboard_rank_limit)"
        )
        board = board[:limit]
    opts = resampling(bench, targets)
    name, params = board_params(bench, public_board(metric))
    y, extra = benchmark_targets(bench, targets)
    preds: dict[str, Any] = {}
    for _, sub_id in board:
        pred = _prediction(store, sub_id, part)
        if pred is None:
            notes.append(f"{sub_id}: arrays no longer stored; left out of the rank intervals")
            continue
        preds[sub_id] = pred
    entries: dict[str, dict[str, Any]] = {}
    if len(preds) >= 2:
        rd = rank_distribution(preds, y, metric=name, params=params, **opts, **extra)
        notes.extend(rd.warnings)
        for sub_id in preds:
            e = rd[sub_id]
            entries[sub_id] = {k: e[k] for k in ("rank_low", "rank_high", "rank_mean", "p_best")}
    elif len(preds) == 1:
        entries[next(iter(preds))] = {
            "rank_low": 1,
            "rank_high": 1,
            "rank_mean": 1.0,
            "p_best": 1.0,
        }
    for e in entries.values():
        e["separable_from_leader"] = None if e["rank_low"] is None else e["rank_low"] > 1
    baseline_pred = _prediction(store, bench.baseline, part) if bench.baseline else None
    if bench.baseline and baseline_pred is None:
        notes.append("the baseline's arrays are not stored; no baseline flags")
    estimator = params.get("estimator") if bench.task == "classification" else None
    if (
        baseline_pred is not None
        and estimator is not None
        and estimator not in baseline_pred.estimator_names()
    ):
        notes.append(f"the baseline does not provide estimator {estimator!r}; no baseline flags")
        baseline_pred = None
    if baseline_pred is not None:
        for sub_id, pred in preds.items():
            if sub_id == bench.baseline:
                continue
            c = compare(pred, baseline_pred, y, [name], params={name: params}, **opts, **extra)
            r = c[name]
            low, high = r.get("low"), r.get("high")
            entry = entries.setdefault(sub_id, {})
            entry["separable_from_baseline"] = (
                None if low is None or high is None else not (low <= 0.0 <= high)
            )
            entry["p_value_vs_baseline"] = r.get("p_value")
    doc = {
        "version": version,
        "metric": metric,
        "rule": rule,
        "n_resamples": opts["n_resamples"],
        "seed": opts["seed"],
        "level": opts["level"],
        "unit": opts["unit"],
        "method": METHOD,
        "multiple_comparison_note": MULTIPLE_COMPARISON_NOTE,
        "entries": entries,
        "warnings": notes,
    }
    safe = rest_document(
        json_safe(doc, "ranks", notes), task=bench.task, origin="leaderboard", metrics=[name]
    )
    store.put_ranks(bench_id, metric, rule, safe)
    return dict(safe)
