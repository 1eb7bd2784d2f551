"""Figures of the regression diagnostics: calibration, PIT, sparsification, group calibration,
metrics per group and uncertainty against error (and, from :mod:`uqcore.plots.stability`, the
stability curves, which apply to both tasks).

Each function takes a prediction with its targets (the curve is then computed here), the curve
object, its JSON, a :class:`uqcore.Report` computed with ``curves=True``, a result document of
the service or an object with ``.raw`` (``uqeval``'s ``Result``), and returns its Display,
drawn. matplotlib is imported by the drawing code only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.plots._base import COLORS, Display, find_curve
from uqcore.plots._registry import PlotSpec, register_plot
from uqcore.plots.stability import StabilityDisplay, is_prediction, stability

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from uqcore.regression.calibration import CalibrationCurve
    from uqcore.regression.curves import (
        GroupCalibrationCurve,
        IntervalWidthCurve,
        PitHistogram,
        StratifiedMetrics,
    )
    from uqcore.regression.ranking import SparsificationCurve

__all__ = [
    "CalibrationDisplay",
    "GroupCalibrationDisplay",
    "IntervalWidthDisplay",
    "PitDisplay",
    "SparsificationDisplay",
    "StabilityDisplay",
    "StratifiedDisplay",
    "calibration",
    "group_calibration",
    "interval_width",
    "pit",
    "sparsification",
    "stability",
    "stratified",
]


def _array(values: Any) -> np.ndarray[Any, Any]:
    """A curve's field as float64 numpy (``None`` as NaN; any array namespace)."""
    from uqcore._backend import to_numpy

    if isinstance(values, (list, tuple)):
        return np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return np.asarray(to_numpy(values), dtype=np.float64)


def _curve(
    plot: str,
    source: Any,
    y: Any,
    key: str,
    compute: Callable[[], Any],
    *,
    sample_weight: Any = None,
    groups: Any = None,
) -> Any:
    """The curve ``key``: computed by ``compute`` from a prediction (with its targets ``y``),
    else found in ``source`` (:func:`~uqcore.plots.find_curve`)."""
    from uqcore.curves import CURVES

    if not is_prediction(source):
        if y is not None:
            raise UQValidationError(
                f"{plot}: y is given, but the source is a {type(source).__name__}, not a "
                "prediction; pass y only with a prediction"
            )
        return find_curve(source, key)
    available = frozenset({"groups"} if groups is not None else ())
    reason = CURVES[key].why_not(source, available, sample_weight)
    if reason is not None:
        raise UQValidationError(f"{plot}: {reason}")
    if y is None:
        raise UQValidationError(f"{plot}: a prediction needs its targets y")
    return compute()


# -- calibration -------------------------------------------------------------------------------
def completed(curve: CalibrationCurve) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(expected, observed) completed with (0, 0) and (1, 1) where the levels stop short of 0
    or 1: the polyline whose area to the diagonal is
    :func:`~uqcore.regression.calibration.miscalibration_area`."""
    x, obs = _array(curve.expected), _array(curve.observed)
    if x[0] > 0:
        x, obs = np.concatenate([[0.0], x]), np.concatenate([[0.0], obs])
    if x[-1] < 1:
        x, obs = np.concatenate([x, [1.0]]), np.concatenate([obs, [1.0]])
    return x, obs


def gap_polygons(x: np.ndarray[Any, Any], obs: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
    """The regions between the polyline (x, obs) and the diagonal, one polygon per run of one
    sign, split exactly where the polyline crosses the diagonal: their areas sum to ∫|obs − x|
    (the miscalibration area), where one polygon spanning a crossing would cancel."""
    d = obs - x
    xs, ds = [float(x[0])], [float(d[0])]
    for i in range(x.shape[0] - 1):
        if d[i] * d[i + 1] < 0:
            t = d[i] / (d[i] - d[i + 1])
            xs.append(float(x[i] + t * (x[i + 1] - x[i])))
            ds.append(0.0)
        xs.append(float(x[i + 1]))
        ds.append(float(d[i + 1]))
    xa, da = np.asarray(xs), np.asarray(ds)
    polygons: list[np.ndarray[Any, Any]] = []
    start = 0
    for k in range(1, xa.shape[0]):
        if da[k] != 0 and k < xa.shape[0] - 1:
            continue
        run = slice(start, k + 1)
        if np.any(da[run] != 0):
            upper = np.column_stack([xa[run], xa[run] + da[run]])
            lower = np.column_stack([xa[run], xa[run]])[::-1]
            polygons.append(np.concatenate([upper, lower]))
        start = k
    return polygons


@dataclass
class CalibrationDisplay(Display):
    """Calibration curves, observed against expected proportion, one panel per curve, with
    the miscalibration area shaded (Kuleshov et al. 2018; chung2021 Uncertainty Toolbox's
    ``plot_calibration``).

    Attributes
    ----------
    curves : tuple of CalibrationCurve
        Interval and/or quantile proportions (one panel each).
    """

    curves: tuple[CalibrationCurve, ...]

    name = "calibration"
    title = "Calibration"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_axes", len(self.curves))

    @property
    def miscalibration_areas(self) -> list[float]:
        """Per panel, the area between the curve and the diagonal (the shaded area)."""
        from uqcore.regression.calibration import areas_between

        out = []
        for c in self.curves:
            x, obs = completed(c)
            out.append(float(areas_between(x, (obs - x)[None, :])[0]))
        return out

    def _draw(self, axes: list[Axes]) -> None:
        from matplotlib.collections import PolyCollection

        for ax, c, area in zip(axes, self.curves, self.miscalibration_areas, strict=True):
            x, obs = completed(c)
            ax.plot([0, 1], [0, 1], ls="--", color=COLORS["ideal"], lw=1, label="Ideal")
            shade = PolyCollection(
                gap_polygons(x, obs),
                facecolors=COLORS["gap"],
                edgecolors="none",
                alpha=0.25,
                label=f"Miscalibration area = {area:.3f}",
            )
            ax.add_collection(shade)
            ax.plot(x, obs, color=COLORS["model"], label="Model")
            interval = c.prop_type == "interval"
            ax.set_xlabel("Expected proportion in interval" if interval else "Quantile level p")
            ax.set_ylabel(
                "Observed proportion in interval" if interval else "Observed share of y ≤ q(p)"
            )
            ax.set_title("Interval calibration" if interval else "Quantile calibration")
            ax.set_xlim(-0.01, 1.01)
            ax.set_ylim(-0.01, 1.01)
            ax.set_aspect("equal")
            ax.legend(loc="upper left")


def calibration(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    prop_type: str = "both",
    levels: Any = None,
    compat: Any = None,
) -> CalibrationDisplay:
    """Calibration curves with the miscalibration area shaded.

    Draws, per panel, the observed proportion against the expected one (interval: the share
    of y in the central intervals; quantile: the share of y ≤ q(p)), the diagonal of perfect
    calibration and, shaded, the region between them, whose area is
    :func:`~uqcore.regression.calibration.miscalibration_area` (the curve completed with
    (0, 0) and (1, 1) where its levels stop short, as that metric does for ``Quantiles``).
    Kuleshov et al. 2018; chung2021 (Uncertainty Toolbox's ``plot_calibration``).

    Parameters
    ----------
    source : prediction, CalibrationCurve, its JSON, Report, result document or ``.raw``
        Curves ``calibration_curve`` (interval) and ``quantile_calibration_curve``.
    y : array_like, optional
        The targets, with a prediction.
    ax : Axes or sequence of Axes, optional
        One per panel.
    prop_type : {"both", "interval", "quantile"}
        The panels; ``"both"`` draws those the source holds.
    levels, compat
        With a prediction: as for :func:`~uqcore.regression.calibration.calibration_curve`
        (default levels 0, 0.01, ..., 0.99, 1 for a CDF).

    Returns
    -------
    CalibrationDisplay
    """
    from uqcore.regression.calibration import CalibrationCurve, calibration_curve
    from uqcore.regression.curves import FULL_LEVELS

    kinds = {"both": ("interval", "quantile"), "interval": ("interval",), "quantile": ("quantile",)}
    if prop_type not in kinds:
        raise UQValidationError(
            f"prop_type must be 'both', 'interval' or 'quantile', found {prop_type!r}"
        )
    if isinstance(source, Mapping) and "prop_type" in source:  # one curve's JSON
        from uqcore.curves import curve_from_json

        source = curve_from_json("calibration_curve", source)
    if isinstance(source, CalibrationCurve):
        return CalibrationDisplay((source,)).plot(ax)
    chosen: list[CalibrationCurve] = []
    missing: list[str] = []
    for kind in kinds[prop_type]:
        key = "calibration_curve" if kind == "interval" else "quantile_calibration_curve"

        def compute(kind: Any = kind) -> CalibrationCurve:
            lv = levels
            if lv is None and compat is None and "cdf" in source.capabilities:
                lv = FULL_LEVELS
            return calibration_curve(
                source, y, prop_type=kind, levels=lv, sample_weight=sample_weight, compat=compat
            )

        try:
            chosen.append(
                _curve("calibration", source, y, key, compute, sample_weight=sample_weight)
            )
        except UQValidationError as exc:
            if prop_type != "both" or is_prediction(source):
                raise
            missing.append(str(exc))
    if not chosen:
        raise UQValidationError("; ".join(missing))
    return CalibrationDisplay(tuple(chosen)).plot(ax)


# -- PIT histogram -----------------------------------------------------------------------------
@dataclass
class PitDisplay(Display):
    """The PIT histogram with the band of a uniform PIT (Dawid 1984; Gneiting et al. 2007).

    Attributes
    ----------
    curve : PitHistogram
    """

    curve: PitHistogram

    name = "pit"
    title = "PIT histogram"

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        c = self.curve
        edges = _array(c.edges)
        left, width = edges[:-1], np.diff(edges)

        def stairs(v: Any) -> np.ndarray[Any, Any]:
            a = _array(v)
            return np.concatenate([a, a[-1:]])

        ax.fill_between(
            edges,
            stairs(c.band_low),
            stairs(c.band_high),
            step="post",
            color=COLORS["band"],
            alpha=0.45,
            lw=0,
            zorder=3,
            label=f"{c.level:.0%} band of a uniform PIT",
        )
        ax.bar(
            left,
            _array(c.counts),
            width=width,
            align="edge",
            color=COLORS["model"],
            alpha=0.8,
            edgecolor="white",
            zorder=2,
            label="PIT values",
        )
        ax.step(
            edges,
            stairs(c.expected),
            where="post",
            color=COLORS["ideal"],
            ls="--",
            lw=1,
            zorder=4,
            label="Uniform",
        )
        ax.set_xlim(0, 1)
        ax.set_xlabel("PIT value F(y)")
        ax.set_ylabel("Count" if c.n_eff == c.total else "Weight")
        ax.set_title(f"PIT histogram (KS = {c.ks_statistic:.3f}, p = {c.p_value:.3g})")
        ax.legend(loc="upper right")


def pit(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    n_bins: int = 10,
    level: float = 0.95,
) -> PitDisplay:
    """The PIT histogram of u_i = F_i(y_i) with the band of a uniform PIT.

    Draws the count of PIT values in each of ``n_bins`` equal bins, the count expected under
    a uniform PIT and, shaded, the central ``level`` range (default 95%) of a bin's count under
    a uniform PIT: the binomial quantiles of Binomial(N, 1/B) (with weights: of
    Binomial(round(n_eff), 1/B) scaled to the total weight), per bin. A U shape means
    over-confidence, a hump under-confidence, a slope bias. Dawid 1984; Gneiting et al. 2007;
    :func:`~uqcore.regression.curves.pit_histogram`.

    Parameters
    ----------
    source : prediction with a CDF, PitHistogram, its JSON, Report, result document or ``.raw``
        Curve ``pit_histogram``.
    n_bins, level
        With a prediction: the bins and the band's level.

    Returns
    -------
    PitDisplay
    """
    from uqcore.regression.curves import pit_histogram

    curve = _curve(
        "pit",
        source,
        y,
        "pit_histogram",
        lambda: pit_histogram(source, y, n_bins=n_bins, level=level, sample_weight=sample_weight),
        sample_weight=sample_weight,
    )
    return PitDisplay(curve).plot(ax)


# -- sparsification ----------------------------------------------------------------------------
@dataclass
class SparsificationDisplay(Display):
    """Sparsification curves: model, oracle and random (xiong2024 Fig. 5; Ilg et al. 2018).

    Attributes
    ----------
    curve : SparsificationCurve
    """

    curve: SparsificationCurve

    name = "sparsification"
    title = "Sparsification"

    @property
    def ause(self) -> float | None:
        """The left Riemann sum of (model − oracle) / full-set error over the curve's points
        (:func:`~uqcore.regression.ranking.ause` on the same grid); ``None`` for a zero error."""
        x = _array(self.curve.fractions)
        gap = _array(self.curve.model) - _array(self.curve.oracle)
        full = float(_array(self.curve.random)[0])
        h = float(x[1] - x[0]) if x.shape[0] > 1 else 1.0
        return float(np.sum(gap) * h / full) if full > 0 else None

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        c = self.curve
        x = _array(c.fractions)
        model, oracle = _array(c.model), _array(c.oracle)
        ause = self.ause
        ax.fill_between(
            x,
            oracle,
            model,
            color=COLORS["gap"],
            alpha=0.2,
            lw=0,
            label="Model − oracle" + ("" if ause is None else f" (AUSE = {ause:.3f})"),
        )
        ax.plot(x, _array(c.random), color=COLORS["random"], ls="--", label="Random")
        ax.plot(x, oracle, color=COLORS["oracle"], label="Oracle (largest errors first)")
        ax.plot(x, model, color=COLORS["model"], label="Model (most uncertain first)")
        ax.set_xlim(0, 1)
        ax.set_xlabel("Fraction of the data removed")
        ax.set_ylabel(f"{str(c.error).upper()} of the remaining data")
        ax.set_title("Sparsification")
        ax.legend(loc="lower left")


def sparsification(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    error: str = "mae",
    grid: Any = 100,
) -> SparsificationDisplay:
    """Sparsification curves with the oracle and random removal.

    Draws the error (MAE or RMSE) of the data left after removing a fraction α of it: the
    most uncertain first (model), the largest errors first (oracle, the best any uncertainty
    could do) and at random (the full-set error, in expectation); the shaded area between
    model and oracle, divided by the full-set error, is AUSE on that grid (shown in the
    legend). xiong2024 eq. 1-4 and Fig. 5; Ilg et al. 2018.

    Parameters
    ----------
    source : prediction, SparsificationCurve, its JSON, Report, result document or ``.raw``
        Curve ``sparsification_curve``.
    error, grid
        With a prediction: as for :func:`~uqcore.regression.ranking.sparsification_curve`.

    Returns
    -------
    SparsificationDisplay
    """
    from uqcore.regression.ranking import sparsification_curve

    curve = _curve(
        "sparsification",
        source,
        y,
        "sparsification_curve",
        lambda: sparsification_curve(
            source,
            y,
            error=error,  # type: ignore[arg-type]
            grid=grid,
            sample_weight=sample_weight,
        ),
        sample_weight=sample_weight,
    )
    return SparsificationDisplay(curve).plot(ax)


# -- adversarial group calibration -------------------------------------------------------------
@dataclass
class GroupCalibrationDisplay(Display):
    """Adversarial group calibration with a ±1 standard error band (chung2021 Fig. 1).

    Attributes
    ----------
    curve : GroupCalibrationCurve
    """

    curve: GroupCalibrationCurve

    name = "group_calibration"
    title = "Adversarial group calibration"

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        c = self.curve
        x, mean, se = _array(c.group_sizes), _array(c.score_mean), _array(c.score_stderr)
        if np.any(np.isfinite(se)):
            ax.fill_between(
                x, mean - se, mean + se, color=COLORS["model"], alpha=0.2, lw=0, label="± 1 s.e."
            )
        ax.plot(x, mean, color=COLORS["model"], marker="o", ms=4, label="Worst group (mean)")
        error = "ECE" if c.cali_type == "mean_abs" else "RMSCE"
        ax.set_xlim(0, 1)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("Group size (fraction of the data)")
        ax.set_ylabel(f"Worst-group {error} ({c.prop_type})")
        ax.set_title(f"Adversarial group calibration (mean = {c.value:.3f})")
        ax.legend(loc="upper right")


def group_calibration(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    seed: int = 0,
    **options: Any,
) -> GroupCalibrationDisplay:
    """Adversarial group calibration: the worst calibration error of random groups by size.

    Draws, against the group size (a fraction of the data), the mean over trials of the
    worst group's calibration error (ECE, or RMSCE with ``cali_type="root_mean_sq"``), with a
    band of ± 1 standard error over the trials. A model calibrated on average but not on
    subsets rises at small groups. Zhao et al. 2020; chung2021 Fig. 1 and appendix A.3.

    Parameters
    ----------
    source : prediction, GroupCalibrationCurve, its JSON, Report, result document or ``.raw``
        Curve ``group_calibration``.
    seed, **options
        With a prediction: as for
        :func:`~uqcore.regression.group_calibration.adversarial_group_calibration`.

    Returns
    -------
    GroupCalibrationDisplay
    """
    from uqcore.regression.curves import group_calibration_curve

    curve = _curve(
        "group_calibration",
        source,
        y,
        "group_calibration",
        lambda: group_calibration_curve(
            source, y, sample_weight=sample_weight, seed=seed, **options
        ),
        sample_weight=sample_weight,
    )
    return GroupCalibrationDisplay(curve).plot(ax)


# -- metrics per group -------------------------------------------------------------------------
@dataclass
class StratifiedDisplay(Display):
    """Metrics per group, one panel per metric (moukari2019 Fig. 4-5).

    Attributes
    ----------
    curve : StratifiedMetrics
    """

    curve: StratifiedMetrics

    name = "stratified"
    title = "Metrics per group"

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_axes", len(self.curve.metrics))

    def _draw(self, axes: list[Axes]) -> None:
        c = self.curve
        pos = np.arange(len(c.groups))
        labels = [f"{g}\n(n={n})" for g, n in zip(c.groups, c.counts, strict=True)]
        for ax, metric, values in zip(axes, c.metrics, c.values, strict=True):
            v = _array(values)
            ax.bar(pos, np.where(np.isfinite(v), v, 0.0), color=COLORS["model"], alpha=0.8)
            for p in pos[~np.isfinite(v)]:
                ax.text(p, 0, "n/a", ha="center", va="bottom", color=COLORS["gap"], fontsize=8)
            ax.set_xticks(pos, labels)
            ax.set_xlabel("Group")
            ax.set_ylabel(metric)
            ax.set_title(f"{metric} per group")


def stratified(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | Sequence[Axes] | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    metrics: Sequence[str] | None = None,
) -> StratifiedDisplay:
    """Metrics per group of samples, one panel per metric.

    Draws a bar per group (its id and row count below it; "n/a" where the metric is
    undefined on the group). With a prediction, ``groups`` (an integer id per row) is needed
    and ``metrics`` defaults to those of MAE, n-MeRCI and the interval ECE that apply: the
    error, whether the uncertainty follows it, and calibration, per stratum — moukari2019
    Fig. 4 (MAE) and Fig. 5 (n-MeRCI) per depth interval;
    :func:`~uqcore.regression.curves.stratified_metrics`.

    Parameters
    ----------
    source : prediction, StratifiedMetrics, its JSON, Report, result document or ``.raw``
        Curve ``stratified``.
    groups : array_like of int, shape (N,)
        Needed with a prediction.
    metrics : list of str, optional
        With a prediction: any registered metrics that apply.
    ax : sequence of Axes, optional
        One per metric.

    Returns
    -------
    StratifiedDisplay
    """
    from uqcore.regression.curves import stratified_metrics

    curve = _curve(
        "stratified",
        source,
        y,
        "stratified",
        lambda: stratified_metrics(source, y, groups, metrics=metrics, sample_weight=sample_weight),
        sample_weight=sample_weight,
        groups=groups,
    )
    return StratifiedDisplay(curve).plot(ax)


# -- uncertainty against error -----------------------------------------------------------------
@dataclass
class IntervalWidthDisplay(Display):
    """Predicted uncertainty against absolute error with the n-MeRCI scale (moukari2019).

    Attributes
    ----------
    curve : IntervalWidthCurve
    """

    curve: IntervalWidthCurve

    name = "interval_width"
    title = "Uncertainty against error"

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        c = self.curve
        u, e = _array(c.uncertainty), _array(c.abs_error)
        shown = f"{len(c.rows)} of {c.n} rows" if len(c.rows) < c.n else f"{c.n} rows"
        ax.scatter(u, e, s=8, alpha=0.5, color=COLORS["model"], lw=0, label=shown)
        top = float(np.max(u)) if u.shape[0] else 1.0
        xs = np.array([0.0, top])
        ax.plot(xs, xs, color=COLORS["oracle"], ls="--", lw=1, label="|e| = u")
        if c.scale is not None:
            ax.plot(
                xs,
                c.scale * xs,
                color=COLORS["gap"],
                label=f"λ·u, λ = {c.scale:.3g} (holds {c.alpha:.0%} of the errors)",
            )
        ax.axhline(
            c.q_error,
            color=COLORS["random"],
            ls=":",
            lw=1,
            label=f"Q{c.alpha:.0%}(|e|): a constant uncertainty",
        )
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        label = "Predicted std" if c.uncertainty_label == "std" else "Predicted uncertainty"
        ax.set_xlabel(f"{label} u")
        ax.set_ylabel("Absolute error |y − ŷ|")
        score = "undefined" if c.nmerci is None else f"{c.nmerci:.3f}"
        ax.set_title(f"Uncertainty against error (n-MeRCI = {score})")
        ax.legend(loc="upper left")


def interval_width(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    alpha: float = 0.95,
    max_points: int = 2000,
    seed: int = 0,
) -> IntervalWidthDisplay:
    """Predicted uncertainty against absolute error: the n-MeRCI view.

    Draws the points (u_i, |y_i − ŷ_i|) (thinned to ``max_points`` seeded random rows), the
    line |e| = λ^α·u whose intervals ±λ^α·u_i hold a fraction α of the errors (MeRCI =
    λ^α·mean(u)), the oracle |e| = u and Q_α(|e|), the scale a constant uncertainty needs;
    n-MeRCI in the title (0 for the oracle, 1 for a constant uncertainty). moukari2019 §III,
    eq. 1-2; :func:`~uqcore.regression.curves.interval_width_curve`.

    Parameters
    ----------
    source : prediction, IntervalWidthCurve, its JSON, Report, result document or ``.raw``
        Curve ``interval_width``.
    alpha, max_points, seed
        With a prediction: the coverage α and the thinning.

    Returns
    -------
    IntervalWidthDisplay
    """
    from uqcore.regression.curves import interval_width_curve

    curve = _curve(
        "interval_width",
        source,
        y,
        "interval_width",
        lambda: interval_width_curve(
            source,
            y,
            alpha=alpha,
            max_points=max_points,
            seed=seed,
            sample_weight=sample_weight,
        ),
        sample_weight=sample_weight,
    )
    return IntervalWidthDisplay(curve).plot(ax)


# -- registration ------------------------------------------------------------------------------
_PLOTS: Mapping[str, tuple[Callable[..., Display], tuple[str, ...], str]] = {
    "calibration": (
        calibration,
        ("calibration_curve", "quantile_calibration_curve"),
        "Calibration curves (interval and quantile) with the miscalibration area",
    ),
    "pit": (pit, ("pit_histogram",), "PIT histogram with the band of a uniform PIT"),
    "sparsification": (
        sparsification,
        ("sparsification_curve",),
        "Sparsification curves: model, oracle and random",
    ),
    "group_calibration": (
        group_calibration,
        ("group_calibration",),
        "Adversarial group calibration against the group size",
    ),
    "stratified": (stratified, ("stratified",), "Metrics per group"),
    "interval_width": (
        interval_width,
        ("interval_width",),
        "Predicted uncertainty against absolute error (n-MeRCI)",
    ),
}
for _name, (_function, _curves, _title) in _PLOTS.items():
    register_plot(PlotSpec(_name, _function, "submission", "regression", _curves, None, _title))
