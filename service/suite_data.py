"""The per-task entries of a suite read from its member benchmarks' boards (shared by the
suite leaderboard route and the suite interval job).

Selection "board": a team's entry on task t is its entry on the board of the task's metric
(the metric's own estimator) under the benchmark's rule (best or latest). Selection "final":
its best final submission (its marked finals, else its default ones:
:meth:`service.store.Store.finals`) by the value on the task's rows — the private rows once
a benchmark with a split is closed (the values of its private board), else the public rows
(:func:`task_part`). The baseline of a task is the suite's ``baseline_team``'s entry there,
or (no baseline team) the benchmark's baseline submission: its entry, or for a baseline that
is not among the entries (private, or not a final) its result's value on the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.leaderboard import badness, result_entries
from service.splits import Part
from service.store import BenchmarkRecord, Store, SuiteSnapshot
from service.suites import TaskData, best_value

__all__ = ["SuiteInputs", "load_inputs", "task_part"]


@dataclass
class SuiteInputs:
    """The suite's tasks with their entries, the submission behind each entry and each
    task's baseline submission, and what could not be read."""

    tasks: list[TaskData]
    #: per task: team -> submission id
    subs: list[dict[str, str]]
    #: per task: the baseline's submission id (None: no baseline value on the task)
    baseline_subs: list[str | None]
    warnings: list[str]


def task_part(selection: str, bench: BenchmarkRecord) -> Part:
    """The rows a task's values come from: the private rows for selection "final" on a
    closed benchmark with a split (its private board's values), else the public rows."""
    if selection == "final" and bench.is_split and bench.status == "closed":
        return "private"
    return "public"


def load_inputs(store: Store, snapshot: SuiteSnapshot) -> SuiteInputs:
    """The entries of every task of ``snapshot``'s suite (two round trips for the boards, and
    one per task whose baseline is a benchmark baseline submission)."""
    suite = snapshot.suite
    warnings: list[str] = []
    live = [
        (t, snapshot.benches.get(t["benchmark_id"]))
        for t in suite.tasks
        if snapshot.benches.get(t["benchmark_id"]) is not None
    ]
    if suite.selection == "final":
        boards = [
            [
                (row["team"], row["submission"], row["badness"], row["entry"])
                for row in store.finals_board(b, t["metric"], task_part(suite.selection, b))
            ]
            for t, b in live
            if b is not None
        ]
    else:
        boards = store.suite_boards(
            [(t["benchmark_id"], t["metric"], b.rule) for t, b in live if b is not None]
        )
    found = dict(zip([t["benchmark_id"] for t, _ in live], boards, strict=True))
    tasks: list[TaskData] = []
    subs: list[dict[str, str]] = []
    baseline_subs: list[str | None] = []
    for t in suite.tasks:
        bench_id, metric = t["benchmark_id"], t["metric"]
        bench = snapshot.benches.get(bench_id)
        if bench is None:
            warnings.append(f"benchmark {bench_id!r} no longer exists: its task has no entries")
            tasks.append(TaskData(bench_id, metric, {}, None, None))
            subs.append({})
            baseline_subs.append(None)
            continue
        rows = found[bench_id]
        entries = {team: (float(e["value"]), bad) for team, _, bad, e in rows}
        team_subs = {team: sub for team, sub, _, _ in rows}
        params = dict(bench.params.get(metric) or {})
        base: tuple[float, float] | None = None
        base_sub: str | None = None
        if suite.baseline_team is not None:
            base = entries.get(suite.baseline_team)
            base_sub = team_subs.get(suite.baseline_team)
        elif bench.baseline is not None:
            base_sub = bench.baseline
            on_board = next((e for _, sub, _, e in rows if sub == base_sub), None)
            shown: Any = on_board
            if shown is None:
                record = store.get_submission(base_sub)
                if record is not None and record.status == "succeeded":
                    doc = (
                        store.get_private_result(base_sub)
                        if task_part(suite.selection, bench) == "private"
                        else store.get_result(base_sub)
                    )
                    got = result_entries(doc or {}, bench.task).get(metric)
                    shown = None if got is None else got[1]
            if shown is not None and shown.get("value") is not None:
                v = float(shown["value"])
                base = (v, float(badness(metric, v, params, task=bench.task)))
            else:
                base_sub = None
        tasks.append(
            TaskData(bench_id, metric, entries, base, best_value(metric, bench.task, params))
        )
        subs.append(team_subs)
        baseline_subs.append(base_sub)
    return SuiteInputs(tasks, subs, baseline_subs, warnings)
