"""Classification figures: reliability diagram, accuracy– and risk–coverage, ROC and
precision–recall curves of OOD detection and of correctness prediction, and the estimator ×
metric heatmap.

Each function takes a prediction with its labels (the curve is computed), the curve object,
its JSON, a :class:`uqcore.Report` computed with ``curves=True``, a service result document,
or an object with ``.raw`` (the ``uqeval`` client's ``Result``), and returns its Display,
already drawn. The curves are those of :mod:`uqcore.classification.curves` (definitions and
conventions there); matplotlib is imported only when drawing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from uqcore._validation import UQValidationError
from uqcore.classification.calibration import ReliabilityDiagram, reliability_diagram
from uqcore.classification.curves import (
    PrecisionRecallCurve,
    RiskCoverageCurve,
    RocCurve,
)
from uqcore.classification.curves import pr_correctness as _pr_correctness
from uqcore.classification.curves import pr_ood as _pr_ood
from uqcore.classification.curves import risk_coverage_curve as _risk_coverage_curve
from uqcore.classification.curves import roc_correctness as _roc_correctness
from uqcore.classification.curves import roc_ood as _roc_ood
from uqcore.plots._base import COLORS, Display, _rc, require_matplotlib
from uqcore.plots._registry import PlotSpec, register_plot
from uqcore.plots._sources import (
    CurveDisplay,
    is_prediction,
    new_figure,
    no_options,
    num,
    source_curve,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "AccuracyCoverageDisplay",
    "EstimatorsDisplay",
    "PrecisionRecallDisplay",
    "ReliabilityDisplay",
    "RiskCoverageDisplay",
    "RocDisplay",
    "accuracy_coverage",
    "estimators",
    "pr_correctness",
    "pr_ood",
    "reliability",
    "risk_coverage",
    "roc_correctness",
    "roc_ood",
]

_WHAT = {"ood": ("OOD", "ID"), "error": ("errors", "correct")}


# ---------------------------------------------------------------- reliability diagram


@dataclass(eq=False)
class ReliabilityDisplay(CurveDisplay):
    """Reliability diagram: accuracy against confidence per bin, the gap to the diagonal, and
    the rows per bin (Guo et al. 2017, Fig. 1; mucsanyi2024 §3.4).

    Upper panel: a bar per non-empty bin spanning its bounds, as high as the bin's (weighted)
    accuracy, a hatched bar from the accuracy to the bin's mean confidence (the gap to the
    diagonal of perfect calibration), and the diagonal; the title gives the ECE of these bins,
    Σ_b (W_b / W) |acc_b − conf_b|. Lower panel: the rows per bin, labelled. Drawn on one
    axes, the counts label the accuracy bars instead.
    """

    curve: ReliabilityDiagram
    name: ClassVar[str] = "reliability"
    title: ClassVar[str] = "Reliability diagram"
    n_axes: ClassVar[int] = 2

    def plot(self, ax: Axes | Sequence[Axes] | None = None) -> ReliabilityDisplay:
        """Draw on ``ax`` (one axes, or two: diagram and counts) or on a new figure."""
        require_matplotlib()
        import matplotlib

        def grid(fig: Figure) -> list[Axes]:
            kw = {"height_ratios": [3, 1]}
            return list(fig.subplots(2, 1, sharex=True, gridspec_kw=kw))

        with matplotlib.rc_context(_rc()):
            fig, axes = new_figure(ax, 2, (5.0, 5.6), grid)
            self._draw(axes)
        self.figure_, self.ax_, self.axes_ = fig, axes[0], axes
        return self

    def ece(self) -> float:
        """Σ_b (W_b / W) |acc_b − conf_b| over the bins."""
        d = self.curve
        total = sum(d.weight)
        return sum(
            w * abs(a - c)
            for w, a, c in zip(d.weight, d.accuracy, d.confidence, strict=True)
            if a is not None and c is not None
        ) / (total or 1.0)

    def _draw(self, axes: list[Axes]) -> None:
        d = self.curve
        rows = [
            (lo, hi, a, c, n)
            for lo, hi, a, c, n in zip(
                d.lower, d.upper, d.accuracy, d.confidence, d.count, strict=True
            )
            if a is not None and c is not None and lo is not None and hi is not None
        ]
        left = [r[0] for r in rows]
        width = [max(r[1] - r[0], 0.01) for r in rows]  # an equal-mass bin may be one value
        acc = [r[2] for r in rows]
        conf = [r[3] for r in rows]
        counts = [r[4] for r in rows]
        main = axes[0]
        bars = main.bar(
            left, acc, width=width, align="edge", color=COLORS["model"], edgecolor="white",
            linewidth=0.6, label="accuracy",
        )  # fmt: skip
        main.bar(
            left, [c - a for a, c in zip(acc, conf, strict=True)], bottom=acc, width=width,
            align="edge", facecolor=COLORS["gap"], alpha=0.3, edgecolor=COLORS["gap"],
            hatch="//", linewidth=0.6, label="gap to the diagonal",
        )  # fmt: skip
        main.plot([0, 1], [0, 1], "--", color=COLORS["ideal"], linewidth=1.0, label="perfect")
        main.set_xlim(0.0, 1.0)
        main.set_ylim(0.0, 1.02)
        main.set_ylabel("accuracy")
        main.set_title(f"Reliability diagram (ECE = {self.ece():.3f}, {len(d.count)} bins)")
        main.legend(loc="upper left")
        xlabel = "confidence (top-label probability)"
        if len(axes) == 1:
            main.bar_label(bars, labels=[f"{n}" for n in counts], fontsize=7, padding=1)
            main.set_xlabel(xlabel)
            return
        hist = axes[1]
        cbars = hist.bar(
            left, counts, width=width, align="edge", color=COLORS["band"], edgecolor="white",
            linewidth=0.6, label="rows",
        )  # fmt: skip
        hist.bar_label(cbars, labels=[f"{n}" for n in counts], fontsize=7, padding=1)
        hist.set_ylim(0, max(counts, default=1) * 1.3)
        hist.set_xlabel(xlabel)
        hist.set_ylabel("rows")


def reliability(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    n_bins: int = 15,
    binning: Literal["width", "mass"] = "width",
    **options: Any,
) -> ReliabilityDisplay:
    """Reliability diagram with the bin counts (see :class:`ReliabilityDisplay`).

    From a prediction, the bins are ``n_bins`` (default 15) of ``binning`` (default equal
    width), as :func:`uqcore.classification.reliability_diagram`; otherwise the held
    ``reliability_diagram`` curve is drawn. ``ood``, ``groups`` and ``estimator`` are not
    used (the confidence is the top-label probability).
    """
    no_options("reliability", options)
    diagram = source_curve(
        "reliability",
        "reliability_diagram",
        source,
        y,
        None,
        lambda: reliability_diagram(
            source, y, n_bins=n_bins, binning=binning, sample_weight=sample_weight
        ),
    )
    display = ReliabilityDisplay(diagram)
    display.plot(ax)
    return display


# ---------------------------------------------------------------- selective prediction


@dataclass(eq=False)
class RiskCoverageDisplay(CurveDisplay):
    """Risk–coverage curve with the oracle and the random ranking (Geifman et al. 2019).

    x: coverage, the share of the weight kept when the most uncertain rows are rejected
    first; y: the selective risk (errors among the kept), or with ``risk="generalized"`` the
    accepted errors over all rows (Traub et al. 2024). The oracle ranks every correct row
    before every error: selective risk max(0, 1 − (1 − r)/c), generalized max(0, c − (1 − r)),
    r the error rate; a random ranking keeps risk r (generalized r·c). The legend gives the
    AURC (or AUGRC) of each.
    """

    curve: RiskCoverageCurve
    risk: Literal["selective", "generalized"] = "selective"
    name: ClassVar[str] = "risk_coverage"
    title: ClassVar[str] = "Risk–coverage curve"

    def _series(self) -> tuple[list[float], list[float], str]:
        c = self.curve
        if self.risk == "generalized":
            return [0.0, *c.coverage], [0.0, *c.generalized_risk], "generalized risk"
        return list(c.coverage), list(c.risk), "selective risk"

    def _reference(self, cov: float) -> tuple[float, float]:
        """(oracle, random) at coverage ``cov``."""
        r = self.curve.error_rate
        if self.risk == "generalized":
            return max(0.0, cov - (1.0 - r)), r * cov
        return (max(0.0, 1.0 - (1.0 - r) / cov) if cov > 0 else 0.0), r

    def _labels(self) -> tuple[str, str, str]:
        c = self.curve
        r = c.error_rate
        if self.risk == "generalized":
            return (
                f"AUGRC = {c.augrc:.3f}",
                f"oracle (AUGRC = {r * r / 2:.3f})",
                f"random (AUGRC = {r / 2:.3f})",
            )
        conv = "" if c.convention == "mean" else f", {c.convention}"
        return (
            f"AURC = {num(c.aurc)}{conv}",
            f"oracle (AURC = {num(c.oracle_aurc)})",
            f"random (risk = {r:.3f})",
        )

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        x, yv, ylabel = self._series()
        model, oracle, random = self._labels()
        kink = 1.0 - self.curve.error_rate
        grid = sorted({i / 200 for i in range(201)} | {kink})
        ref = [self._reference(g) for g in grid]
        ax.plot(grid, [o for o, _ in ref], color=COLORS["oracle"], linewidth=1.2, label=oracle)
        ax.plot(grid, [q for _, q in ref], "--", color=COLORS["random"], linewidth=1.2,
                label=random)  # fmt: skip
        ax.plot(x, yv, color=COLORS["model"], label=model)
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(bottom=0.0)
        ax.set_xlabel("coverage (most uncertain rejected first)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{type(self).title} ({self.curve.estimator})")
        ax.legend(loc="best", title=self.curve.estimator)


@dataclass(eq=False)
class AccuracyCoverageDisplay(RiskCoverageDisplay):
    """Accuracy–coverage curve (mucsanyi2024 §3.4, AUAC; Galil et al. 2023): selective
    accuracy 1 − risk against coverage, the oracle min(1, (1 − r)/c) and the random ranking
    1 − r; the legend gives the AUAC = 1 − AURC of each."""

    name: ClassVar[str] = "accuracy_coverage"
    title: ClassVar[str] = "Accuracy–coverage curve"

    def _series(self) -> tuple[list[float], list[float], str]:
        c = self.curve
        return list(c.coverage), list(c.accuracy), "selective accuracy"

    def _reference(self, cov: float) -> tuple[float, float]:
        r = self.curve.error_rate
        return (min(1.0, (1.0 - r) / cov) if cov > 0 else 1.0), 1.0 - r

    def _labels(self) -> tuple[str, str, str]:
        c = self.curve

        def one(v: float | None) -> float | None:
            return None if v is None else 1.0 - v

        return (
            f"AUAC = {num(one(c.aurc))}",
            f"oracle (AUAC = {num(one(c.oracle_aurc))})",
            f"random (accuracy = {1.0 - c.error_rate:.3f})",
        )

    def _draw(self, axes: list[Axes]) -> None:
        super()._draw(axes)
        axes[0].set_ylim(top=1.02)
        axes[0].legend(loc="lower left", title=self.curve.estimator)


def _risk_curve(
    plot: str, source: Any, y: Any, sample_weight: Any, estimator: str | None, options: Any
) -> RiskCoverageCurve:
    kw = {k: options.pop(k) for k in ("convention", "max_points") if k in options}
    if estimator is not None:
        kw["estimator"] = estimator
    return source_curve(  # type: ignore[no-any-return]
        plot,
        "risk_coverage_curve",
        source,
        y,
        estimator,
        lambda: _risk_coverage_curve(source, y, sample_weight=sample_weight, **kw),
    )


def risk_coverage(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    risk: Literal["selective", "generalized"] = "selective",
    **options: Any,
) -> RiskCoverageDisplay:
    """Risk–coverage curve with the oracle and random references, AURC in the legend (see
    :class:`RiskCoverageDisplay`).

    From a prediction the curve is :func:`uqcore.classification.curves.risk_coverage_curve`
    with ``estimator`` (default the metrics' default) and the options ``convention`` and
    ``max_points``. ``risk="generalized"`` draws the generalized risk (AUGRC).
    """
    if risk not in ("selective", "generalized"):
        raise UQValidationError(f"risk must be 'selective' or 'generalized', found {risk!r}")
    curve = _risk_curve("risk_coverage", source, y, sample_weight, estimator, options)
    no_options("risk_coverage", options)
    display = RiskCoverageDisplay(curve, risk)
    display.plot(ax)
    return display


def accuracy_coverage(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    **options: Any,
) -> AccuracyCoverageDisplay:
    """Accuracy–coverage curve with the oracle and random references, AUAC in the legend
    (see :class:`AccuracyCoverageDisplay`); arguments as :func:`risk_coverage`."""
    curve = _risk_curve("accuracy_coverage", source, y, sample_weight, estimator, options)
    no_options("accuracy_coverage", options)
    display = AccuracyCoverageDisplay(curve)
    display.plot(ax)
    return display


# ---------------------------------------------------------------- ROC and precision-recall


@dataclass(eq=False)
class RocDisplay(CurveDisplay):
    """ROC curve of an uncertainty estimate as a detector (OOD rows or wrong predictions
    positive, flagged when u ≥ t; Hendrycks & Gimpel 2017), its AUROC in the legend, and the
    chance diagonal (AUROC 0.5)."""

    curve: RocCurve
    name: ClassVar[str] = "roc"
    title: ClassVar[str] = "ROC curve"

    def _draw(self, axes: list[Axes]) -> None:
        ax, c = axes[0], self.curve
        pos, neg = _WHAT.get(c.positive, (c.positive, "others"))
        ax.plot([0, 1], [0, 1], "--", color=COLORS["random"], linewidth=1.2,
                label="chance (0.500)")  # fmt: skip
        ax.plot(c.fpr, c.tpr, color=COLORS["model"], label=f"AUROC = {num(c.auroc)}")
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.0)
        ax.set_aspect("equal")
        ax.set_xlabel(f"false-positive rate ({neg} flagged)")
        ax.set_ylabel(f"true-positive rate ({pos} found)")
        task = "OOD detection" if c.positive == "ood" else "correctness prediction"
        ax.set_title(f"ROC, {task}")
        ax.legend(loc="lower right", title=c.estimator)


@dataclass(eq=False)
class PrecisionRecallDisplay(CurveDisplay):
    """Precision–recall curve of an uncertainty estimate as a detector (OOD rows or wrong
    predictions positive), drawn as steps as scikit-learn's ``PrecisionRecallDisplay``, the
    average precision in the legend, and the chance level (precision = the positives' share).
    """

    curve: PrecisionRecallCurve
    name: ClassVar[str] = "pr"
    title: ClassVar[str] = "Precision–recall curve"

    def _draw(self, axes: list[Axes]) -> None:
        ax, c = axes[0], self.curve
        pos, _ = _WHAT.get(c.positive, (c.positive, "others"))
        ax.axhline(c.prevalence, linestyle="--", color=COLORS["random"], linewidth=1.2,
                   label=f"chance ({c.prevalence:.3f})")  # fmt: skip
        ax.plot(c.recall, c.precision, drawstyle="steps-post", color=COLORS["model"],
                label=f"AP = {num(c.average_precision)}")  # fmt: skip
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(0.0, 1.02)
        ax.set_xlabel(f"recall ({pos} found)")
        ax.set_ylabel(f"precision ({pos} among flagged)")
        task = "OOD detection" if c.positive == "ood" else "correctness prediction"
        ax.set_title(f"Precision–recall, {task}")
        ax.legend(loc="best", title=c.estimator)


def _detector(
    plot: str,
    source: Any,
    y: Any,
    ood: Any,
    sample_weight: Any,
    estimator: str | None,
    options: dict[str, Any],
    compute: Callable[..., Any],
) -> Any:
    kw: dict[str, Any] = {k: options.pop(k) for k in ("max_points",) if k in options}
    no_options(plot, options)
    if estimator is not None:
        kw["estimator"] = estimator
    if plot.endswith("_ood"):
        if is_prediction(source) and ood is None:
            raise UQValidationError(
                f"{plot} needs OOD flags: {plot}(prediction, y, ood=flags)", argument="ood"
            )
        kw["ood"] = ood
    curve = source_curve(
        plot,
        plot,
        source,
        y,
        estimator,
        lambda: compute(source, y, sample_weight=sample_weight, **kw),
    )
    want = "ood" if plot.endswith("_ood") else "error"
    if curve.positive != want:
        raise UQValidationError(
            f"{plot}: the curve given has {curve.positive!r} positive, this plot draws "
            f"{want!r} positive",
            argument="source",
        )
    return curve


_DETECTOR_DOC = """{what}

    From a prediction and its labels (``ood=`` flags for the OOD plots) the curve is
    :func:`uqcore.classification.curves.{plot}` with ``estimator`` (default the metrics'
    default) and the option ``max_points``; otherwise the held ``{plot}`` curve is drawn.
    """


def roc_ood(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    **options: Any,
) -> RocDisplay:
    curve = _detector("roc_ood", source, y, ood, sample_weight, estimator, options, _roc_ood)
    display = RocDisplay(curve)
    display.plot(ax)
    return display


def pr_ood(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    **options: Any,
) -> PrecisionRecallDisplay:
    curve = _detector("pr_ood", source, y, ood, sample_weight, estimator, options, _pr_ood)
    display = PrecisionRecallDisplay(curve)
    display.plot(ax)
    return display


def roc_correctness(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    **options: Any,
) -> RocDisplay:
    curve = _detector(
        "roc_correctness", source, y, None, sample_weight, estimator, options, _roc_correctness
    )
    display = RocDisplay(curve)
    display.plot(ax)
    return display


def pr_correctness(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    ood: Any = None,
    groups: Any = None,
    estimator: str | None = None,
    **options: Any,
) -> PrecisionRecallDisplay:
    curve = _detector(
        "pr_correctness", source, y, None, sample_weight, estimator, options, _pr_correctness
    )
    display = PrecisionRecallDisplay(curve)
    display.plot(ax)
    return display


roc_ood.__doc__ = _DETECTOR_DOC.format(
    plot="roc_ood", what="ROC curve of OOD detection (OOD positive), AUROC in the legend."
)
pr_ood.__doc__ = _DETECTOR_DOC.format(
    plot="pr_ood", what="Precision–recall curve of OOD detection (OOD positive), AP in the legend."
)
roc_correctness.__doc__ = _DETECTOR_DOC.format(
    plot="roc_correctness",
    what="ROC curve of correctness prediction (wrong predictions positive, as the metric "
    "``auroc_correctness``), AUROC in the legend.",
)
pr_correctness.__doc__ = _DETECTOR_DOC.format(
    plot="pr_correctness",
    what="Precision–recall curve of finding wrong predictions (errors positive, as the "
    "metric ``aupr_error``), AP in the legend.",
)


from uqcore.plots._estimators import EstimatorsDisplay, estimators  # noqa: E402

_SPECS: list[tuple[str, Callable[..., Display], tuple[str, ...]]] = [
    ("reliability", reliability, ("reliability_diagram",)),
    ("accuracy_coverage", accuracy_coverage, ("risk_coverage_curve",)),
    ("risk_coverage", risk_coverage, ("risk_coverage_curve",)),
    ("roc_ood", roc_ood, ("roc_ood",)),
    ("pr_ood", pr_ood, ("pr_ood",)),
    ("roc_correctness", roc_correctness, ("roc_correctness",)),
    ("pr_correctness", pr_correctness, ("pr_correctness",)),
]
_TITLES = {
    "reliability": "Reliability diagram: accuracy against confidence, with the rows per bin",
    "accuracy_coverage": "Accuracy–coverage curve with the oracle and random rankings",
    "risk_coverage": "Risk–coverage curve with the oracle and random rankings",
    "roc_ood": "ROC curve of OOD detection",
    "pr_ood": "Precision–recall curve of OOD detection",
    "roc_correctness": "ROC curve of correctness prediction (errors positive)",
    "pr_correctness": "Precision–recall curve of finding wrong predictions",
}
for _name, _fn, _curves in _SPECS:
    register_plot(
        PlotSpec(_name, _fn, "submission", "classification", _curves, title=_TITLES[_name])
    )
register_plot(
    PlotSpec(
        "estimators",
        estimators,
        "submission",
        "classification",
        (),
        result_field="by_estimator",
        title="Uncertainty estimators × metrics, coloured by how good each value is",
    )
)
del _name, _fn, _curves
