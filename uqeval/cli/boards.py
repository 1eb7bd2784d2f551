"""``uqeval leaderboard`` and ``uqeval compare``: a benchmark's ranking and paired comparisons."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from uqeval.cli import render
from uqeval.cli.common import bad_input, note, out, print_json, state
from uqeval.cli.files import split_list
from uqeval.cli.options import JSON
from uqeval.cli.progress import job_progress

PANEL = "Benchmarks"


def leaderboard(
    ctx: typer.Context,
    bench: Annotated[str, typer.Argument(metavar="BENCH", help="The benchmark.")],
    metric: Annotated[
        str | None, typer.Option(help="Rank by this metric (default: the primary one).")
    ] = None,
    estimator: Annotated[
        str | None, typer.Option(help="Classification: the metric under this estimator.")
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="At most this many entries.")] = None,
    offset: Annotated[int | None, typer.Option(min=0, help="Skip this many entries.")] = None,
    csv: Annotated[bool, typer.Option("--csv", help="Print the leaderboard as CSV.")] = False,
    json_: JSON = False,
) -> None:
    """A benchmark's leaderboard: rank, team, model, value with its interval, rank interval,
    and whether each entry is separable from the leader and the baseline."""
    if csv and json_:
        bad_input("--csv and --json: choose one")
    client = state(ctx).client()
    if csv:
        text = client.leaderboard_csv(bench, metric=metric, estimator=estimator)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    board = client.leaderboard(
        bench, metric=metric, estimator=estimator, limit=limit, offset=offset
    )
    if json_:
        print_json(board.raw)
    else:
        out().print(render.leaderboard(board.raw))


def compare(
    ctx: typer.Context,
    ids: Annotated[
        list[str], typer.Argument(metavar="ID ID [...]", help="Two or more submissions.")
    ],
    benchmark: Annotated[
        str | None,
        typer.Option(help="The benchmark (default: that of the first submission)."),
    ] = None,
    metrics: Annotated[
        str | None, typer.Option(help="Comma-separated metrics (default: the primary one).")
    ] = None,
    estimators: Annotated[
        str | None, typer.Option(help="Classification: comma-separated estimators.")
    ] = None,
    n_resamples: Annotated[
        int | None,
        typer.Option(min=10, help="Bootstrap resamples B (admins; default: the benchmark's)."),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, help="Seed (default: the benchmark's).")
    ] = None,
    level: Annotated[
        float | None,
        typer.Option(min=0.0, max=1.0, help="Confidence level (admins; default: the benchmark's)."),
    ] = None,
    method: Annotated[
        str | None,
        typer.Option(help="Interval method, percentile or bca (admins; default: the benchmark's)."),
    ] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the comparison and print its table.")
    ] = False,
    json_: JSON = False,
) -> None:
    """Compare submissions on their benchmark (paired bootstrap): A − B per metric with its
    interval, P(A better) and p-values (Holm-adjusted)."""
    if len(ids) < 2:
        bad_input("compare needs two or more submission ids", field="submission_ids")
    client = state(ctx).client()
    cmp = client.compare(
        ids,
        benchmark=benchmark,
        metrics=split_list(metrics),
        estimators=split_list(estimators),
        n_resamples=n_resamples,
        seed=seed,
        level=level,
        method=method,
    )
    if wait:
        with job_progress(True) as update:
            cmp = client.wait_comparison(cmp.id, progress=update)
    if json_:
        print_json(cmp.raw)
    elif wait:
        out().print(render.comparison(cmp.raw))
    else:
        note(f"Comparison {cmp.id} ({cmp.status}); add --wait to follow it")
        out().print(cmp.id, markup=False)


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel=PANEL)(leaderboard)
    app.command(rich_help_panel=PANEL)(compare)
