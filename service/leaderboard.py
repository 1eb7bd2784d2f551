"""Leaderboard names, entries and sort keys, shared by the worker (which writes boards) and the API.

A benchmark has one *board* per metric and, for classification, one per (metric, estimator):

- the board of metric ``m`` under its own estimator (its ``estimator`` parameter: the
  benchmark's ``params``, else the registry default ``one_minus_max_prob_bma``) is named
  ``"m"``;
- the board of ``m`` under another estimator ``e`` (one of the benchmark's ``estimators``) is
  named ``"m[e]"`` — the name :mod:`uqcore.stability` gives that entry.

Metrics are looked up in the benchmark's task (``registry.get(name, task)``): ``ece`` and
``nll`` exist for regression and for classification with different meanings.

A metric's *badness* is lower-is-better whatever its direction: the value for "lower",
−value for "higher", and |value − best| for "target" metrics (the best value under the
submission's parameters); the rule is the registry's :meth:`uqcore.registry.MetricSpec.badness`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from uqcore import UQValidationError, registry
from uqcore.classification.aggregators import AGGREGATORS, DEFAULT_ESTIMATOR
from uqcore.registry import MetricSpec

__all__ = [
    "CANONICAL_ESTIMATORS",
    "DEFAULT_ESTIMATOR",
    "ESTIMATOR_PARAMS",
    "badness",
    "board_name",
    "boards_of",
    "own_estimator",
    "parse_board",
    "result_entries",
    "takes_estimator",
]

#: The built-in uncertainty aggregators of uqcore (canonical estimator names).
CANONICAL_ESTIMATORS: tuple[str, ...] = tuple(AGGREGATORS)

#: Parameters whose value names an estimator (``disentanglement_rank_corr`` takes two).
ESTIMATOR_PARAMS = ("estimator", "aleatoric", "epistemic")

_BOARD = re.compile(r"^(?P<metric>[^\[\]]+)(?:\[(?P<estimator>[^\[\]]+)\])?$")


def takes_estimator(spec: MetricSpec) -> bool:
    """True for a classification metric evaluated for one uncertainty estimator (it has boards
    per estimator). A regression metric's ``estimator`` option (e.g. the CRPS estimator of
    samples) is a computation choice, not an uncertainty estimator."""
    return spec.task == "classification" and "estimator" in spec.defaults


def own_estimator(spec: MetricSpec, params: Mapping[str, Any] | None) -> str | None:
    """The estimator of the metric's own board: its ``estimator`` parameter, else the
    registry default; None for a metric without an estimator.

    >>> own_estimator(registry.get("auroc_ood", "classification"), None)
    'one_minus_max_prob_bma'
    """
    if not takes_estimator(spec):
        return None
    return str((params or {}).get("estimator", spec.defaults["estimator"]))


def board_name(metric: str, estimator: str | None = None, own: str | None = None) -> str:
    """The board of ``metric`` under ``estimator``: ``metric`` itself for its own estimator
    (``own``) or none, else ``"metric[estimator]"``.

    >>> board_name("auroc_ood", "entropy_bma", "one_minus_max_prob_bma")
    'auroc_ood[entropy_bma]'
    >>> board_name("auroc_ood", "one_minus_max_prob_bma", "one_minus_max_prob_bma")
    'auroc_ood'
    """
    if estimator is None or estimator == own:
        return metric
    return f"{metric}[{estimator}]"


def parse_board(board: str) -> tuple[str, str | None]:
    """(metric, estimator) of a board name; the estimator is None for a metric's own board.

    >>> parse_board("auroc_ood[entropy_bma]"), parse_board("mae")
    (('auroc_ood', 'entropy_bma'), ('mae', None))
    """
    m = _BOARD.match(board)
    if m is None:
        raise ValueError(f"not a leaderboard name: {board!r}")
    return m.group("metric"), m.group("estimator")


def boards_of(metrics: Iterable[str], estimators: Iterable[str] | None, task: str) -> list[str]:
    """Every board a submission evaluating ``metrics`` with ``estimators`` can be on: each
    metric's own board and ``"metric[e]"`` for each estimator of the metrics that take one
    (a superset: the metric's own estimator has no ``[e]`` board)."""
    names = list(metrics)
    ests = list(estimators or [])
    out = list(names)
    for name in names:
        try:
            spec = registry.get(name, task)
        except UQValidationError:  # an unknown name has only its own board
            continue
        if takes_estimator(spec):
            out += [f"{name}[{e}]" for e in ests]
    return out


def badness(
    metric: str,
    value: float,
    params: Mapping[str, Any] | None = None,
    *,
    task: str | None = None,
) -> float:
    """The sort key of ``value`` for ``metric`` of ``task`` (lower is better): the
    :meth:`~uqcore.registry.MetricSpec.badness` of the metric's spec.

    >>> badness("mae", 0.5), badness("r2", 0.5)
    (0.5, -0.5)
    >>> badness("auroc_ood", 0.75, task="classification")
    -0.75
    """
    return registry.get(metric, task).badness(float(value), params)


def _scalar(value: Any) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _shown(value: float, interval: Mapping[str, Any] | None) -> dict[str, Any]:
    i = interval or {}
    return {"value": value, "low": i.get("low"), "high": i.get("high"), "std": i.get("std")}


def result_entries(result: Mapping[str, Any], task: str) -> dict[str, tuple[float, dict[str, Any]]]:
    """The board entries of a result document: board name -> (badness, shown entry).

    Each metric with a finite value is on its own board; with a ``by_estimator`` table
    (classification submissions on a benchmark that names estimators), each other estimator's
    finite value is on the board ``"metric[estimator]"`` with its interval from
    ``by_estimator_intervals``. Undefined (null) values rank nowhere.
    """
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    table = result.get("by_estimator") or {}
    intervals = result.get("by_estimator_intervals") or {}
    for name, m in (result.get("metrics") or {}).items():
        params = dict(m.get("params") or {})
        value = _scalar(m.get("value"))
        if value is not None:
            out[name] = (badness(name, value, params, task=task), _shown(value, m.get("interval")))
        own = params.get("estimator")
        for est, raw in (table.get(name) or {}).items():
            v = _scalar(raw)
            if est == own or v is None:
                continue
            p = {**params, "estimator": est}
            cell = (intervals.get(name) or {}).get(est)
            out[board_name(name, est, own)] = (badness(name, v, p, task=task), _shown(v, cell))
    return out
