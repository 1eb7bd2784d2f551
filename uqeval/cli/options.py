"""Options that several commands share (``submit`` and ``evaluate`` read a prediction file the
same way and ask for the same analyses): declared once, so their flags and help stay alike."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

#: The help panel of the column flags.
COLUMNS_PANEL = "Columns (Parquet, CSV)"

JSON = Annotated[bool, typer.Option("--json", help="Print the server's document as JSON.")]

Kind = Annotated[
    str | None, typer.Option(help="Prediction kind (default: inferred from the field names).")
]
Targets = Annotated[
    Path | None,
    typer.Option(help="The targets (y, or labels for classification): .npy, .npz, .csv."),
]
Metrics = Annotated[
    str | None, typer.Option(help="Comma-separated metric names (default: all that apply).")
]
Bootstrap = Annotated[
    int, typer.Option(min=0, help="Bootstrap resamples B for confidence intervals (0: none).")
]
Stability = Annotated[
    bool, typer.Option("--stability", help="Run the test-set-size stability study.")
]
Repeats = Annotated[
    int | None, typer.Option(min=1, help="Subsamples per size of the stability study.")
]
Curves = Annotated[
    bool, typer.Option("--curves", help="Compute the curves (calibration, sparsification).")
]
Seed = Annotated[int | None, typer.Option(min=0, help="Seed of every random draw.")]
Estimators = Annotated[
    str | None, typer.Option(help='Classification: comma-separated estimators, or "all".')
]

Col = Annotated[
    list[str] | None,
    typer.Option(
        "--col",
        help="FIELD=COLUMN: take a field from a column (repeatable).",
        rich_help_panel=COLUMNS_PANEL,
    ),
]
Columns = Annotated[
    str | None,
    typer.Option(
        help="The fields of the columns in order, e.g. mean,std,y ('-' skips one).",
        rich_help_panel=COLUMNS_PANEL,
    ),
]
Prefix = Annotated[
    list[str] | None,
    typer.Option(
        "--prefix",
        help="FIELD=PREFIX: a matrix field from columns PREFIX0, "
        "PREFIX1, ... (repeatable; default FIELD_0, FIELD_1, ...).",
        rich_help_panel=COLUMNS_PANEL,
    ),
]
ProbPrefix = Annotated[
    str | None,
    typer.Option(
        help="Class probabilities from the columns PREFIX0, PREFIX1, ... (= --prefix probs=PREFIX).",
        rich_help_panel=COLUMNS_PANEL,
    ),
]
YCol = Annotated[
    str | None,
    typer.Option(help="The column of the regression targets.", rich_help_panel=COLUMNS_PANEL),
]
LabelsCol = Annotated[
    str | None,
    typer.Option(help="The column of the class labels.", rich_help_panel=COLUMNS_PANEL),
]
Levels = Annotated[
    str | None,
    typer.Option(
        help="Quantiles: the levels of the value columns, e.g. 0.1,0.5,0.9.",
        rich_help_panel=COLUMNS_PANEL,
    ),
]
