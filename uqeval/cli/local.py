"""``uqeval evaluate`` and ``uqeval metrics``: uqcore on this machine, no server.

``evaluate`` computes the result document exactly as a worker does (the worker's own
:func:`worker.evaluation.compute`, on numpy), so its table and ``--json`` are those of
``uqeval results`` for the same input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from uqeval.cli import options as O
from uqeval.cli import render
from uqeval.cli.common import bad_input, out, print_json
from uqeval.cli.files import split_list
from uqeval.cli.submissions import read_input

JSON = Annotated[bool, typer.Option("--json", help="Print the result document as JSON.")]
PANEL = "On this machine (no server)"


def analyses_of(
    metrics: str | None,
    bootstrap: int,
    stability: bool,
    repeats: int | None,
    seed: int | None,
    estimators: str | None,
    curves: bool,
) -> Any:
    """The :class:`service.analyses.Analyses` of the flags (as ``submit`` would send them)."""
    from pydantic import ValidationError

    from service.analyses import Analyses

    doc: dict[str, Any] = {"metrics": split_list(metrics) or "all"}
    if bootstrap:
        doc["bootstrap"] = {"n_resamples": bootstrap}
    if stability or repeats is not None:
        doc["stability"] = {"enabled": True, **({"repeats": repeats} if repeats else {})}
    if seed is not None:
        doc["seed"] = seed
    if estimators is not None:
        doc["estimators"] = "all" if estimators.strip() == "all" else split_list(estimators)
    if curves:
        doc["curves"] = True
    try:
        return Analyses.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        bad_input(f"{first['msg']} (analyses.{where})", field=f"analyses.{where}")


def evaluate(
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE", help="The prediction: .npz, .parquet or .csv (as for submit)."
        ),
    ],
    targets: O.Targets = None,
    kind: O.Kind = None,
    metrics: O.Metrics = None,
    bootstrap: O.Bootstrap = 0,
    stability: O.Stability = False,
    repeats: O.Repeats = None,
    curves: O.Curves = False,
    seed: O.Seed = None,
    estimators: O.Estimators = None,
    json_: JSON = False,
    col: O.Col = None,
    columns: O.Columns = None,
    prefix: O.Prefix = None,
    prob_prefix: O.ProbPrefix = None,
    y_col: O.YCol = None,
    labels_col: O.LabelsCol = None,
    levels: O.Levels = None,
) -> None:
    """Evaluate a prediction file with uqcore on this machine: the table (or --json document)
    of `uqeval results`, computed as the service computes it."""
    import uqcore
    from service.kinds import target_field
    from worker.backend import Backend
    from worker.evaluation import compute

    kind, arrays = read_input(
        file,
        kind=kind,
        targets=targets,
        col=col,
        columns=columns,
        prefix=prefix,
        prob_prefix=prob_prefix,
        y_col=y_col,
        labels_col=labels_col,
        levels=levels,
    )
    if target_field(kind) not in arrays:
        bad_input(
            f"{file.name} holds no {target_field(kind)}: give --targets FILE", field="targets"
        )
    analyses = analyses_of(metrics, bootstrap, stability, repeats, seed, estimators, curves)
    try:
        doc = compute(
            kind,
            arrays,
            analyses,
            backend=Backend("numpy", "cpu", False),
            checkpoint=lambda _: None,
        )
    except uqcore.UQValidationError as exc:
        index = exc.index if isinstance(exc.index, int) else None
        bad_input(str(exc), field=exc.argument, index=index)
    if not curves:
        doc["curves"] = {}
    if json_:
        print_json(doc)
        return
    n = (doc.get("provenance") or {}).get("n")
    out().print(render.result(doc, title=f"{file.name} · {kind} · n = {n} (local)"))


def metrics(
    task: Annotated[
        str | None, typer.Option(help="Only this task's metrics: regression or classification.")
    ] = None,
    json_: JSON = False,
) -> None:
    """The metric catalogue (from uqcore, no server): name, task, direction, bounds, summary."""
    from uqcore import registry

    tasks = ("regression", "classification")
    if task is not None and task not in tasks:
        bad_input(f"--task must be regression or classification; found {task!r}", field="task")
    docs = [s.describe() for t in (tasks if task is None else (task,)) for s in registry.specs(t)]
    if json_:
        print_json({"metrics": docs})
    else:
        out().print(render.metrics(docs))


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel=PANEL)(evaluate)
    app.command(rich_help_panel=PANEL)(metrics)
