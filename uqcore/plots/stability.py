"""The stability figure: metrics against the test-set size (xiong2024 Fig. 4), for either task.

Drawn from the document of :func:`uqcore.stability.convergence` (a
:class:`~uqcore.stability.StabilityResult` or its ``to_dict()``; in a service result, its
``stability`` field), or computed from a prediction and its targets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.plots._base import COLORS, Display, _rc, require_matplotlib
from uqcore.plots._registry import PlotSpec, register_plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["PREFERRED_METRICS", "StabilityDisplay", "is_prediction", "stability"]

#: The metrics drawn by default, those of them the document holds (at most
#: :data:`MAX_DEFAULT`): xiong2024 Fig. 4's four for regression, then classification's
#: calibration, scoring and selective-prediction headliners.
PREFERRED_METRICS: tuple[str, ...] = (
    "calibration_error",
    "ause",
    "nll",
    "spearman",
    "ece",
    "brier",
    "auroc_correctness",
)
MAX_DEFAULT = 4


def is_prediction(source: Any) -> bool:
    """Whether ``source`` is a uqcore prediction (of either task)."""
    from uqcore.predictions import ClassificationPrediction, RegressionPrediction

    return isinstance(source, (RegressionPrediction, ClassificationPrediction))


def _nan(values: Sequence[Any]) -> np.ndarray[Any, Any]:
    return np.asarray([math.nan if v is None else float(v) for v in values], dtype=np.float64)


@dataclass
class StabilityDisplay(Display):
    """Convergence path and bias of the mean against the test-set size, a row per metric
    (xiong2024 §IV-C, Fig. 4).

    Attributes
    ----------
    sizes : tuple of int
        The subset sizes (rows, or groups for group resampling).
    metrics : tuple of str
        The metrics drawn, one row of two panels each.
    entries : dict
        Per metric, its entry of the convergence document (``value``, ``path``, ``mean``,
        ``spread_low``, ``spread_high``, ``min_reliable_size``).
    repeats : int
        Subsets per size.
    coverage, tolerance : float
    tolerance_type : str
    unit : str
        ``"row"`` or ``"group"``.
    """

    sizes: tuple[int, ...]
    metrics: tuple[str, ...]
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    repeats: int = 0
    coverage: float = 0.9
    tolerance: float = 0.1
    tolerance_type: str = "relative"
    unit: str = "row"

    name = "stability"
    title = "Stability against the test-set size"
    figsize = (5.0, 3.2)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_axes", 2 * len(self.metrics))

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> Self:
        """Draw on ``2 × len(metrics)`` axes (row by row: path, bias) or on a new figure."""
        if ax is None:  # a grid, a row per metric, made as the base class makes its figures
            require_matplotlib()
            import matplotlib
            from matplotlib.figure import Figure

            with matplotlib.rc_context(_rc()):
                w, h = self.figsize
                rows = len(self.metrics)
                fig = Figure(figsize=(2 * w, h * rows), layout="constrained")
                ax = list(fig.subplots(rows, 2, squeeze=False).ravel())
        super().plot(ax)
        return self

    def _draw(self, axes: list[Axes]) -> None:
        sizes = np.asarray(self.sizes, dtype=np.float64)
        what = "groups" if self.unit == "group" else "rows"
        for k, metric in enumerate(self.metrics):
            e = self.entries[metric]
            left, right = axes[2 * k], axes[2 * k + 1]
            full = e.get("value")
            reliable = e.get("min_reliable_size")
            left.plot(
                sizes,
                _nan(e["path"]),
                color=COLORS["model"],
                marker="o",
                ms=3,
                label="Nested subsets",
            )
            if full is not None:
                left.axhline(full, color=COLORS["ideal"], ls="--", lw=1, label="Full set")
            right.axhline(0.0, color=COLORS["ideal"], ls="--", lw=1)
            if full is not None:
                low, high = _nan(e["spread_low"]) - full, _nan(e["spread_high"]) - full
                right.fill_between(
                    sizes,
                    low,
                    high,
                    color=COLORS["band"],
                    alpha=0.6,
                    lw=0,
                    label=f"Central {self.coverage:.0%} of {self.repeats} subsets",
                )
                right.plot(
                    sizes,
                    _nan(e["mean"]) - full,
                    color=COLORS["model"],
                    marker="o",
                    ms=3,
                    label="Mean − full-set value",
                )
                tol = self.tolerance * (abs(full) if self.tolerance_type == "relative" else 1.0)
                if tol > 0:
                    for sign in (-1, 1):
                        right.axhline(
                            sign * tol,
                            color=COLORS["gap"],
                            ls=":",
                            lw=1,
                            label="Tolerance" if sign > 0 else None,
                        )
            if reliable is not None:
                for a in (left, right):
                    a.axvline(
                        reliable,
                        color=COLORS["oracle"],
                        ls="-.",
                        lw=1,
                        label=f"Reliable from {reliable}" if a is left else None,
                    )
            for a in (left, right):
                a.set_xscale("log", base=2)
                a.set_xlabel(f"Test-set size ({what})")
            left.set_ylabel(metric)
            right.set_ylabel(f"Bias of the mean of {metric}")
            left.set_title(f"{metric}: convergence path")
            right.set_title(f"{metric}: bias of the mean")
            left.legend(loc="best")
            right.legend(loc="best")


def _document(source: Any) -> Mapping[str, Any]:
    """The convergence document that ``source`` holds."""
    from uqcore.stability import StabilityResult

    raw = getattr(source, "raw", None)
    if isinstance(raw, Mapping):
        source = raw
    if isinstance(source, StabilityResult):
        return source.to_dict()
    if isinstance(source, Mapping):
        if "results" in source and "sizes" in source:
            return source
        if "stability" in source:
            inner = source["stability"]
            if not isinstance(inner, Mapping):
                raise UQValidationError(
                    "the result holds no stability study (submit with analyses.stability enabled)"
                )
            return _document(inner)
    raise UQValidationError(
        f"cannot find a stability study in a {type(source).__name__}: pass the result of "
        "uqcore.stability.convergence (or its to_dict()), a result document with "
        "'stability', or a prediction with its targets"
    )


def _default_metrics(results: Mapping[str, Any]) -> list[str]:
    chosen = [m for m in PREFERRED_METRICS if m in results]
    if not chosen:
        chosen = [m for m, e in results.items() if isinstance(e, Mapping) and "path" in e]
    return chosen[:MAX_DEFAULT]


def _compute(source: Any, y: Any, metrics: Sequence[str] | None, **kw: Any) -> Mapping[str, Any]:
    from uqcore import registry
    from uqcore.stability import convergence

    if y is None:
        raise UQValidationError("stability: a prediction needs its targets y")
    if metrics is None:
        task = str(getattr(source, "task", "regression"))
        metrics = [
            m
            for m in PREFERRED_METRICS
            if m in registry.names(task) and registry.get(m, task).why_not(source) is None
        ][:MAX_DEFAULT]
    return convergence(source, y, list(metrics), **kw).to_dict()


def stability(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    metrics: Sequence[str] | None = None,
    repeats: int = 100,
    seed: int = 0,
) -> StabilityDisplay:
    """Stability curves: each metric against the test-set size (xiong2024 §IV-C, Fig. 4).

    For each metric, a row of two panels over the sizes 2³, 2⁴, ..., N (log scale):

    * **convergence path** (Fig. 4a): the metric on nested random subsets (the first m rows
      of one random order), with the full-set value dashed;
    * **bias of the mean** (Fig. 4b): the mean over ``repeats`` independent subsets per size
      minus the full-set value, with, shaded, the central ``coverage`` range (default 90%) of
      the subset values, and the tolerance (dotted) within which that range must stay from
      the minimum reliable size on (marked where there is one).

    Parameters
    ----------
    source : StabilityResult, its to_dict(), a result document, ``.raw``, or a prediction
        The document of :func:`uqcore.stability.convergence` (a service result's
        ``stability`` field); with a prediction (and ``y``) it is computed here with
        ``repeats``, ``seed``, ``sample_weight``, ``groups`` and ``ood``.
    metrics : list of str, optional
        The metrics drawn (default: those of xiong2024 Fig. 4 — calibration error, AUSE,
        NLL, Spearman — that the document holds, else its first four; for classification,
        ECE, NLL, Brier and AUROC of correctness).
    ax : sequence of Axes, optional
        Two per metric: path, bias.

    Returns
    -------
    StabilityDisplay
    """
    if is_prediction(source):
        extra: dict[str, Any] = {} if ood is None else {"ood": ood}
        doc = _compute(
            source,
            y,
            metrics,
            repeats=repeats,
            seed=seed,
            sample_weight=sample_weight,
            groups=groups,
            **extra,
        )
    else:
        if y is not None:
            raise UQValidationError("stability: y is given, but the source is not a prediction")
        doc = _document(source)
    results = doc.get("results") or {}
    names = _default_metrics(results) if metrics is None else list(metrics)
    unknown = [m for m in names if m not in results]
    if unknown:
        raise UQValidationError(
            f"stability: the study holds no {', '.join(map(repr, unknown))}; it has: "
            f"{', '.join(results) or 'none'}"
        )
    if not names:
        raise UQValidationError("stability: the study holds no metric to draw")
    reliability = doc.get("reliability") or {}
    resampling = doc.get("resampling") or {}
    keys = ("value", "path", "mean", "spread_low", "spread_high", "min_reliable_size")
    return StabilityDisplay(
        sizes=tuple(int(s) for s in doc["sizes"]),
        metrics=tuple(names),
        entries={m: {k: results[m].get(k) for k in keys} for m in names},
        repeats=int(doc.get("repeats", 0)),
        coverage=float(reliability.get("coverage", 0.9)),
        tolerance=float(reliability.get("tolerance", 0.1)),
        tolerance_type=str(reliability.get("tolerance_type", "relative")),
        unit=str(resampling.get("unit", "row")),
    ).plot(ax)


register_plot(
    PlotSpec(
        "stability",
        stability,
        "submission",
        None,
        (),
        "stability",
        "Convergence path and bias of the mean against the test-set size",
    )
)
