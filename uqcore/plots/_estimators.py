"""The estimator × metric heatmap of a classification result: how each uncertainty estimator
does on each metric that takes one (the ``by_estimator`` table of a result or a Report)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from uqcore._validation import UQValidationError
from uqcore.plots._base import Display, _rc, require_matplotlib

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["EstimatorsDisplay", "estimators"]


@dataclass(eq=False)
class EstimatorsDisplay(Display):
    """Heatmap of uncertainty estimators (rows) × metrics (columns), every value written in
    its cell (mucsanyi2024 compares estimators across tasks this way, §3–§4).

    A cell's colour is its metric's values rescaled over the estimators and turned by the
    metric's direction, so that the best estimator of every column has the same (bright)
    colour and the worst the same dark one: score = (v − min) / (max − min) for a metric where
    higher is better, 1 − that where lower is; 0.5 when all are equal. Undefined values are
    grey. The column labels carry the direction (↑ higher is better, ↓ lower).

    Attributes
    ----------
    metrics, estimators : tuple of str
    values : tuple of tuple of float or None
        ``values[i][j]``: estimator i on metric j.
    directions : tuple of str
        ``"higher"``, ``"lower"``, or ``""`` for a metric not in the registry (not coloured).
    """

    metrics: tuple[str, ...]
    estimators: tuple[str, ...]
    values: tuple[tuple[float | None, ...], ...]
    directions: tuple[str, ...]
    name: ClassVar[str] = "estimators"
    title: ClassVar[str] = "Estimators × metrics"

    def scores(self) -> list[list[float]]:
        """The colour scores in [0, 1] (1 = best of its column; NaN = not coloured)."""
        out = [[math.nan] * len(self.metrics) for _ in self.estimators]
        for j, direction in enumerate(self.directions):
            col = [row[j] for row in self.values]
            finite = [v for v in col if v is not None and math.isfinite(v)]
            if not direction or not finite:
                continue
            lo, hi = min(finite), max(finite)
            for i, v in enumerate(col):
                if v is None or not math.isfinite(v):
                    continue
                s = 0.5 if hi == lo else (v - lo) / (hi - lo)
                out[i][j] = s if direction == "higher" else 1.0 - s
        return out

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> EstimatorsDisplay:
        """Draw on ``ax`` or on a new figure sized to the table; return self."""
        require_matplotlib()
        import matplotlib

        with matplotlib.rc_context(_rc()):
            if ax is None:
                from matplotlib.figure import Figure

                size = (2.6 + 0.95 * len(self.metrics), 1.6 + 0.42 * len(self.estimators))
                fig = Figure(figsize=size, layout="constrained")
                axes = [fig.subplots()]
            else:
                axes = list(ax) if isinstance(ax, Sequence) else [ax]
                if len(axes) != 1:
                    raise ValueError(f"EstimatorsDisplay draws on 1 axes, {len(axes)} given")
                fig = axes[0].figure  # type: ignore[assignment]
            self._draw(axes)
        self.figure_, self.ax_, self.axes_ = fig, axes[0], axes
        return self

    def _draw(self, axes: list[Axes]) -> None:
        import numpy as np
        from matplotlib import colormaps

        ax = axes[0]
        scores = np.ma.masked_invalid(np.asarray(self.scores(), dtype=float))
        cmap = colormaps["viridis"].with_extremes(bad="#DDDDDD")
        image = ax.imshow(scores, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        for i, row in enumerate(self.values):
            for j, v in enumerate(row):
                s = scores[i, j]
                dark = s is not np.ma.masked and float(s) < 0.55
                ax.text(j, i, "—" if v is None else f"{v:.3g}", ha="center", va="center",
                        fontsize=8, color="white" if dark else "black")  # fmt: skip
        arrow = {"higher": " ↑", "lower": " ↓", "": ""}
        ax.set_xticks(range(len(self.metrics)))
        ax.set_xticklabels(
            [m + arrow.get(d, "") for m, d in zip(self.metrics, self.directions, strict=True)],
            rotation=35,
            ha="right",
            rotation_mode="anchor",
        )
        ax.set_yticks(range(len(self.estimators)))
        ax.set_yticklabels(list(self.estimators))
        ax.grid(False)
        ax.set_title("Estimators × metrics (colour per metric: best bright, worst dark)")
        bar = ax.figure.colorbar(image, ax=ax, ticks=[0.0, 1.0], fraction=0.05, pad=0.02)
        bar.ax.set_yticklabels(["worst", "best"])


def _scalar(metric: str, est: str, value: Any) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("value")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UQValidationError(
            f"by_estimator[{metric!r}][{est!r}] must be a number or null, found {value!r}",
            argument="source",
        )
    return float(value)


def _table(source: Any) -> Mapping[str, Any]:
    held = getattr(source, "by_estimator", None)  # a Report
    if isinstance(held, Mapping):
        table: Any = held
    else:
        raw = getattr(source, "raw", None)
        if isinstance(raw, Mapping):
            source = raw
        if not isinstance(source, Mapping):
            raise UQValidationError(
                f"estimators: cannot find a by_estimator table in a {type(source).__name__}: pass "
                "a Report computed with estimators=, a result document, or a prediction with "
                "its labels",
                argument="source",
            )
        if "by_estimator" in source:
            table = source["by_estimator"]
        elif "values" in source or "curves" in source:
            table = None
        else:
            table = source  # the table itself: metric -> estimator -> value
    if not isinstance(table, Mapping) or not table:
        raise UQValidationError(
            "estimators: the result holds no by_estimator table (evaluate(..., "
            "estimators='all'), or submit with analyses.estimators)",
            argument="source",
        )
    for metric, row in table.items():
        if not isinstance(row, Mapping):
            raise UQValidationError(
                f"by_estimator[{metric!r}] must map estimator names to values, found "
                f"{type(row).__name__}",
                argument="source",
            )
    return table


def _direction(metric: str) -> str:
    from uqcore import registry

    try:
        return str(registry.get(metric, "classification").direction)
    except UQValidationError:
        return ""


def estimators(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    metrics: Sequence[str] | None = None,
    **options: Any,
) -> EstimatorsDisplay:
    """Heatmap of uncertainty estimators × metrics (see :class:`EstimatorsDisplay`).

    ``source``: a result document (its ``by_estimator`` field), a :class:`uqcore.Report`
    computed with ``estimators=``, the table itself (metric -> estimator -> value), an
    object with ``.raw``, or a classification prediction with its labels (then
    ``uqcore.evaluate(prediction, y, metrics or "all", estimators="all", ood=ood,
    sample_weight=sample_weight)`` computes the table). ``metrics`` keeps those columns, in
    that order. ``estimator`` is not used (every estimator is a row).
    """
    if options:
        raise TypeError(f"estimators() got unexpected option(s): {', '.join(sorted(options))}")
    if getattr(source, "task", None) == "classification" and hasattr(source, "capabilities"):
        if y is None:
            raise UQValidationError(
                "estimators: a prediction needs its labels, estimators(prediction, y)",
                argument="y",
            )
        from uqcore.report import evaluate

        report = evaluate(
            source,
            y,
            list(metrics) if metrics is not None else "all",
            estimators="all",
            ood=ood,
            sample_weight=sample_weight,
        )
        table = _table(report)
    else:
        if y is not None:
            raise UQValidationError(
                f"estimators: y applies to a prediction only, found a {type(source).__name__}",
                argument="y",
            )
        table = _table(source)
    names = list(table) if metrics is None else list(metrics)
    missing = [m for m in names if m not in table]
    if missing:
        raise UQValidationError(
            f"estimators: no row for metric(s) {', '.join(missing)} (it has: {', '.join(table)})",
            argument="metrics",
        )
    rows: dict[str, None] = {}
    for m in names:
        rows.update(dict.fromkeys(str(e) for e in table[m]))
    values = tuple(
        tuple(
            _scalar(m, e, table[m][e]) if e in table[m] else None  # estimator absent: undefined
            for m in names
        )
        for e in rows
    )
    display = EstimatorsDisplay(
        tuple(names), tuple(rows), values, tuple(_direction(m) for m in names)
    )
    display.plot(ax)
    return display
