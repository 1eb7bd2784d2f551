"""The aggregates of a benchmark suite: mean rank, win rate and geometric-mean skill per team,
and their resampled distributions (shared by the API, which answers point values, and the
worker, which computes the intervals).

Notation: tasks t = 1..T (a benchmark and one of its metrics); teams i. On task t team i has
the value v_{i,t} (its entry on the task's board: the benchmark's rule, best or latest) and the
badness b_{i,t} (lower is better: v, −v or |v − target| by the metric's direction,
:meth:`uqcore.registry.MetricSpec.badness`).

Missing results (a team without an entry on a task), by the suite's ``missing`` rule:

- ``exclude``: a team lacking any task is left out of the ranking (listed with the tasks it
  lacks); the others are ranked among themselves;
- ``impute_baseline``: the baseline's value on t fills the gap (b and loss as if the team had
  submitted it); a team lacking a task on which the baseline has no value either is excluded.

After either rule every ranked team has every task, so K teams are compared on T tasks:

- rank_{i,t} = the average rank of b_{i,t} among the K teams on t (1 = best; tied teams
  share the mean of the ranks they span, as pandas' ``rank()`` in fev's ``avg_rank``);
  mean_rank_i = (1/T) Σ_t rank_{i,t};
- win_rate_i = Σ_t Σ_{j≠i} ( [b_{i,t} < b_{j,t}] + ½ [b_{i,t} = b_{j,t}] ) / Σ_t (K_t − 1):
  the fraction of (other team, task) pairs that i wins, ties counting one half. Per task the
  inner sum equals K_t − rank_{i,t} (average ranks), which is how it is computed; with every
  team on every task it is (K − mean_rank_i)/(K − 1);
- gm_skill_i = 1 − exp( (1/T) Σ_t log( loss_{i,t} / loss_{base,t} ) ) with
  loss = |v − v*| (v*: the metric's best value in the registry, e.g. 0 for an error, 1 for an
  AUROC, the target of a "target" metric): 1 − the geometric mean of the loss ratios, so 0
  is the baseline's level and 1 a perfect score. Undefined (null, with the reason) where a
  task's metric has no finite best value, the baseline has no value on a task, or the
  baseline's loss on a task is 0.

Distributions over resamples, two views (the *unit* of the interval):

- ``rows`` ("rows within tasks"): each task's rows are resampled (an independent bootstrap
  per task, with seed ``seed + t``, every team's metric recomputed on the same resamples of
  the task: paired), and the aggregates recomputed from the resampled values;
- ``tasks`` ("tasks within the suite"): the T tasks are drawn with replacement (seed
  ``seed``), with each team's point values on them.

Intervals are percentile intervals at ``level``; the rank interval of a team is that of its
rank by mean rank (1 + the teams with a strictly lower mean rank) over the resamples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from uqcore import UQValidationError, registry

__all__ = [
    "SUITE_TASK_NAME",
    "UNITS",
    "Aggregates",
    "TaskData",
    "aggregate",
    "best_value",
    "percentile",
    "rank_by_mean",
    "task_draws",
]

Missing = Literal["exclude", "impute_baseline"]
View = Literal["rows", "tasks"]

#: The Celery task computing a suite's intervals: ``uqeval.suite_intervals(suite_id)``.
SUITE_TASK_NAME = "uqeval.suite_intervals"

#: What is resampled, in each view's words.
UNITS: dict[str, str] = {"rows": "rows within tasks", "tasks": "tasks within the suite"}


def best_value(metric: str, task: str, params: Mapping[str, Any] | None) -> float | None:
    """v* of a metric: the registry's best value (the target under ``params`` for a "target"
    metric); None when it has none or it is not finite."""
    spec = registry.get(metric, task)
    try:
        best = spec.target(params) if spec.direction == "target" else spec.best
    except UQValidationError:
        return None
    if best is None or not math.isfinite(best):
        return None
    return float(best)


@dataclass
class TaskData:
    """One task's entries: team -> (value, badness); the baseline's (value, badness) or None;
    v* (None: undefined)."""

    benchmark_id: str
    metric: str
    entries: dict[str, tuple[float, float]]
    baseline: tuple[float, float] | None
    best: float | None


@dataclass
class Aggregates:
    """The suite's point aggregates: ranked teams (best first) and excluded ones."""

    teams: list[str]
    #: team -> the tasks (indices) it has its own entry on
    own: dict[str, list[int]]
    mean_rank: np.ndarray[Any, Any]
    win_rate: np.ndarray[Any, Any]
    gm_skill: np.ndarray[Any, Any]
    gm_skill_reason: str | None
    rank: list[int]
    #: team -> indices of the tasks it lacks (excluded teams)
    excluded: dict[str, list[int]] = field(default_factory=dict)
    #: (T, K) badness / loss matrices of the ranked teams (imputed where missing)
    badness: np.ndarray[Any, Any] | None = None
    loss: np.ndarray[Any, Any] | None = None


def _loss(value: float, best: float | None) -> float:
    return math.nan if best is None else abs(value - best)


def membership(
    tasks: Sequence[TaskData], missing: Missing
) -> tuple[list[str], dict[str, list[int]], dict[str, list[int]]]:
    """(ranked teams in a stable order, each team's own tasks, excluded team -> lacked tasks)."""
    every = sorted({team for t in tasks for team in t.entries})
    own = {team: [k for k, t in enumerate(tasks) if team in t.entries] for team in every}
    ranked: list[str] = []
    excluded: dict[str, list[int]] = {}
    for team in every:
        lacks = [k for k, t in enumerate(tasks) if team not in t.entries]
        fillable = missing == "impute_baseline" and all(
            tasks[k].baseline is not None for k in lacks
        )
        if lacks and not fillable:
            excluded[team] = lacks
        else:
            ranked.append(team)
    return ranked, own, excluded


def matrices(
    tasks: Sequence[TaskData], teams: Sequence[str]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(badness, loss, baseline loss) of ranked ``teams``: (T, K), (T, K), (T,); a missing
    entry takes the baseline's (the teams given are those the missing rule keeps)."""
    bad = np.empty((len(tasks), len(teams)))
    loss = np.empty((len(tasks), len(teams)))
    base = np.full(len(tasks), np.nan)
    for k, t in enumerate(tasks):
        if t.baseline is not None:
            base[k] = _loss(t.baseline[0], t.best)
        for j, team in enumerate(teams):
            got = t.entries.get(team, t.baseline)
            assert got is not None  # excluded by membership()
            bad[k, j] = got[1]
            loss[k, j] = _loss(got[0], t.best)
    return bad, loss, base


def skill_reason(tasks: Sequence[TaskData], base_loss: np.ndarray[Any, Any]) -> str | None:
    """Why gm_skill is undefined for the suite, or None."""
    for k, t in enumerate(tasks):
        where = f"task {k + 1} ({t.benchmark_id}, {t.metric})"
        if t.best is None:
            return f"{where}: the metric has no finite best value to measure a loss from"
        if t.baseline is None:
            return f"{where}: the baseline has no value"
        if not base_loss[k] > 0:
            return f"{where}: the baseline's loss |value − best| is 0"
    return None


def resampled(
    bad: np.ndarray[Any, Any],
    loss: np.ndarray[Any, Any],
    base_loss: np.ndarray[Any, Any],
    weights: np.ndarray[Any, Any] | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(mean_rank, win_rate, gm_skill), each (R, K), from badness and losses (R, T, K) and the
    baseline's losses (R, T); ``weights`` (R, T): how many times each task is drawn (the
    tasks view; default 1). A NaN badness (a metric undefined on a resample) is a missing
    entry of that resample: the team is ranked on its other tasks."""
    from scipy.stats import rankdata  # at first use: the API's start does not load scipy.stats

    present = ~np.isnan(bad)
    k_t = present.sum(axis=-1, keepdims=True)
    ranks = rankdata(np.where(present, bad, np.inf), method="average", axis=-1)
    w = np.ones(bad.shape[:2]) if weights is None else np.asarray(weights, dtype=float)
    wm = w[..., None] * present
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_rank = (wm * ranks).sum(axis=1) / wm.sum(axis=1)
        wins = (wm * (k_t - ranks)).sum(axis=1)
        pairs = (wm * (k_t - 1)).sum(axis=1)
        win_rate = np.where(pairs > 0, wins / np.where(pairs > 0, pairs, 1), np.nan)
        log_ratio = np.log(loss) - np.log(base_loss)[..., None]
        gm = 1.0 - np.exp((wm * np.where(present, log_ratio, 0.0)).sum(axis=1) / wm.sum(axis=1))
    return mean_rank, win_rate, gm


def rank_by_mean(mean_rank: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """1 + the number of teams with a strictly lower mean rank, along the last axis."""
    from scipy.stats import rankdata

    ranks: np.ndarray[Any, Any] = rankdata(mean_rank, method="min", axis=-1).astype(int)
    return ranks


def aggregate(tasks: Sequence[TaskData], missing: Missing) -> Aggregates:
    """The point aggregates of a suite (see the module's definitions)."""
    teams, own, excluded = membership(tasks, missing)
    bad, loss, base = matrices(tasks, teams)
    reason = skill_reason(tasks, base)
    if teams:
        mean_rank, win_rate, gm = (a[0] for a in resampled(bad[None], loss[None], base[None]))
    else:
        mean_rank = win_rate = gm = np.empty(0)
    if reason is not None:
        gm = np.full(len(teams), np.nan)
    order = sorted(range(len(teams)), key=lambda j: (mean_rank[j], -win_rate[j], teams[j]))
    ranks = rank_by_mean(mean_rank) if teams else np.empty(0, dtype=int)
    return Aggregates(
        teams=[teams[j] for j in order],
        own={teams[j]: own[teams[j]] for j in order},
        mean_rank=mean_rank[order],
        win_rate=win_rate[order],
        gm_skill=gm[order],
        gm_skill_reason=reason,
        rank=[int(ranks[j]) for j in order],
        excluded=excluded,
        badness=bad[:, order],
        loss=loss[:, order],
    )


def task_draws(n_tasks: int, n_resamples: int, seed: int) -> np.ndarray[Any, Any]:
    """(R, T) counts of each task in R draws of T tasks with replacement (the tasks view)."""
    rng = np.random.default_rng([seed, n_tasks])
    idx = rng.integers(0, n_tasks, size=(n_resamples, n_tasks))
    counts = np.zeros((n_resamples, n_tasks))
    np.add.at(counts, (np.arange(n_resamples)[:, None], idx), 1.0)
    return counts


def percentile(values: np.ndarray[Any, Any], level: float) -> tuple[float | None, float | None]:
    """The (1 − level)/2 and (1 + level)/2 quantiles of the finite ``values`` (None, None
    when none is finite)."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return None, None
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(v, [a, 1.0 - a])
    return float(lo), float(hi)


def rank_interval(ranks: np.ndarray[Any, Any], level: float) -> tuple[int, int]:
    """The rank interval of integer ranks over resamples (inverted-CDF quantiles, so both
    ends are ranks that occurred)."""
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(ranks, [a, 1.0 - a], method="inverted_cdf")
    return int(lo), int(hi)
