"""Figures of comparisons and leaderboards: the paired differences of a comparison (a forest
plot) and a benchmark's leaderboard with its bootstrap and rank intervals.

Both are drawn from the service's JSON documents (the ``result`` of
``GET /v1/comparisons/{id}`` and the answer of ``GET /v1/benchmarks/{id}/leaderboard``), or
from an object with such a document as ``.raw``; the numbers drawn are the document's, as they
are (no recomputation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uqcore._validation import UQValidationError
from uqcore.plots._base import COLORS, Display
from uqcore.plots._registry import PlotSpec, register_plot

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["ForestDisplay", "LeaderboardDisplay", "forest", "leaderboard"]

#: Where the better side of a difference A − B lies, by the metric's direction.
_BETTER = {"lower": "A better \u2190", "higher": "\u2192 A better"}


def _document(source: Any, key: str, what: str) -> Mapping[str, Any]:
    """The JSON document in ``source`` (itself, its ``.raw``, or its ``result`` member for a
    whole comparison detail) that has ``key``."""
    raw = getattr(source, "raw", None)
    if isinstance(raw, Mapping):
        source = raw
    if isinstance(source, Mapping):
        if key in source:
            return source
        inner = source.get("result")
        if isinstance(inner, Mapping) and key in inner:
            return inner
    raise UQValidationError(
        f"{what}: expected a document with {key!r}, found {type(source).__name__}"
    )


def _at(values: Sequence[float | None], idx: Sequence[int]) -> list[float]:
    """``values[i]`` for ``i`` in ``idx`` (chosen where they are not None)."""
    return [float(values[i] or 0.0) for i in idx]


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass
class ForestDisplay(Display):
    """Paired differences A − B with their intervals, one row per pair and metric.

    Attributes
    ----------
    labels : list of str
        Each row's "metric: A − B" (the submissions' model names where the document has them).
    metrics, directions : list of str
        Each row's metric (or ``metric[estimator]``) and its direction.
    diff, low, high : list of float or None
        The difference and its interval (None: undefined on this input).
    p_value_adjusted : list of float or None
    level : float or None
        The intervals' confidence level.
    """

    name = "forest"
    title = "Paired differences (A \u2212 B)"

    labels: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    directions: list[str] = field(default_factory=list)
    diff: list[float | None] = field(default_factory=list)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    p_value_adjusted: list[float | None] = field(default_factory=list)
    level: float | None = None

    @property
    def figsize(self) -> tuple[float, float]:  # type: ignore[override]
        return (7.0, max(2.5, 0.45 * len(self.labels) + 1.5))

    def _draw(self, axes: list[Axes]) -> None:
        ax = axes[0]
        n = len(self.labels)
        ys = list(range(n))[::-1]  # first row on top
        ax.axvline(0.0, color=COLORS["ideal"], linewidth=1.0, gid="zero")
        drawn = [i for i in range(n) if self.diff[i] is not None]
        spans = [i for i in drawn if self.low[i] is not None and self.high[i] is not None]
        separated = [i for i in spans if (self.low[i] or 0.0) > 0.0 or (self.high[i] or 0.0) < 0.0]
        colors = [COLORS["model"] if i in separated else COLORS["random"] for i in spans]
        ax.hlines(
            [ys[i] for i in spans],
            _at(self.low, spans),
            _at(self.high, spans),
            colors=colors,
            linewidth=2.0,
            gid="intervals",
        )
        ax.plot(
            _at(self.diff, drawn),
            [ys[i] for i in drawn],
            "o",
            color=COLORS["model"],
            gid="differences",
        )
        for i in range(n):
            if self.diff[i] is None:
                ax.annotate("undefined", (0.0, ys[i]), ha="center", va="center", fontsize=8)
        ax.set_yticks(ys, self.labels)
        ax.set_ylim(-0.7, n - 0.3)
        level = f" ({self.level:.0%} intervals)" if self.level is not None else ""
        ax.set_xlabel(f"difference A \u2212 B{level}")
        ax.set_title(self.title)
        # The better side, when every row agrees on it (else it is in each row's label).
        sides = {self.directions[i] for i in range(n)}
        if len(sides) == 1 and (side := next(iter(sides))) in _BETTER:
            ax.annotate(
                _BETTER[side],
                xy=(0.0 if side == "lower" else 1.0, -0.12),
                xycoords="axes fraction",
                ha="left" if side == "lower" else "right",
                fontsize=9,
                color=COLORS["model"],
                gid="better",
            )


def _forest_data(doc: Mapping[str, Any]) -> ForestDisplay:
    subs = doc.get("submissions") or {}

    def label(sub_id: str) -> str:
        info = subs.get(sub_id) or {}
        return str(info.get("model_name") or sub_id)

    out = ForestDisplay(level=_num(doc.get("level")))
    for pair in doc.get("pairs") or []:
        for metric, entry in (pair.get("metrics") or {}).items():
            direction = str(entry.get("direction") or "")
            mark = {"lower": " (\u2193)", "higher": " (\u2191)"}.get(direction, "")
            out.labels.append(f"{metric}{mark}: {label(pair['a'])} \u2212 {label(pair['b'])}")
            out.metrics.append(str(metric))
            out.directions.append(direction)
            out.diff.append(_num(entry.get("diff")))
            out.low.append(_num(entry.get("low")))
            out.high.append(_num(entry.get("high")))
            out.p_value_adjusted.append(_num(entry.get("p_value_adjusted")))
    return out


def forest(
    source: Any,
    y: Any = None,
    /,
    *,
    ax: Axes | None = None,
    metrics: Sequence[str] | None = None,
    **options: Any,
) -> ForestDisplay:
    """Forest plot of a comparison: each pair's difference A − B per metric with its
    bootstrap interval, the zero line (no difference), and the better side of the metric's
    direction (↓: lower is better, so A is better left of 0).

    Parameters
    ----------
    source : mapping
        A comparison's result document (``GET /v1/comparisons/{id}``'s ``result``, or the
        whole answer), or an object with it as ``.raw``.
    metrics : sequence of str, optional
        Only these metrics' rows.

    Returns
    -------
    ForestDisplay
        Drawn; intervals excluding 0 in the model colour, the others grey.
    """
    del y, options
    display = _forest_data(_document(source, "pairs", "forest"))
    if metrics is not None:
        keep = [i for i, m in enumerate(display.metrics) if m in set(metrics)]
        for name in ("labels", "metrics", "directions", "diff", "low", "high", "p_value_adjusted"):
            values = getattr(display, name)
            setattr(display, name, [values[i] for i in keep])
    display.plot(ax)
    return display


@dataclass
class LeaderboardDisplay(Display):
    """A leaderboard: each entry's value with its bootstrap interval (left) and its rank
    interval (right), best first.

    Attributes
    ----------
    labels : list of str
        Each row's "team — model".
    value, low, high : list of float or None
        The value shown on the board and its bootstrap interval.
    rank, rank_low, rank_high : list of int or None
        The rank and the rank interval (None until the rank job ran).
    not_separable : list of bool
        Not separable from the leader (the rank interval reaches rank 1; the leader itself is
        not marked).
    is_baseline : list of bool
    metric, direction : str
    """

    name = "leaderboard"
    title = "Leaderboard"
    n_axes = 2

    labels: list[str] = field(default_factory=list)
    value: list[float | None] = field(default_factory=list)
    low: list[float | None] = field(default_factory=list)
    high: list[float | None] = field(default_factory=list)
    rank: list[float | None] = field(default_factory=list)
    rank_low: list[float | None] = field(default_factory=list)
    rank_high: list[float | None] = field(default_factory=list)
    not_separable: list[bool] = field(default_factory=list)
    is_baseline: list[bool] = field(default_factory=list)
    metric: str = ""
    direction: str = ""

    @property
    def figsize(self) -> tuple[float, float]:  # type: ignore[override]
        return (4.5, max(2.5, 0.4 * len(self.labels) + 1.5))

    def _draw(self, axes: list[Axes]) -> None:
        ax, rax = axes
        n = len(self.labels)
        ys = list(range(n))[::-1]
        colors = [
            COLORS["second"] if b else COLORS["gap"] if ns else COLORS["model"]
            for b, ns in zip(self.is_baseline, self.not_separable, strict=True)
        ]
        spans = [i for i in range(n) if self.low[i] is not None and self.high[i] is not None]
        ax.hlines(
            [ys[i] for i in spans],
            _at(self.low, spans),
            _at(self.high, spans),
            colors=[colors[i] for i in spans],
            linewidth=2.0,
            gid="intervals",
        )
        shown = [i for i in range(n) if self.value[i] is not None]
        ax.scatter(
            _at(self.value, shown),
            [ys[i] for i in shown],
            c=[colors[i] for i in shown],
            zorder=3,
            gid="values",
        )
        labels = [
            f"{lab} (baseline)" if b else f"{lab} \u2248 leader" if ns else lab
            for lab, b, ns in zip(self.labels, self.is_baseline, self.not_separable, strict=True)
        ]
        ax.set_yticks(ys, labels)
        for tick, b in zip(ax.get_yticklabels(), self.is_baseline, strict=True):
            if b:
                tick.set_fontweight("bold")
        arrow = {"lower": " (\u2193 better)", "higher": " (\u2191 better)"}.get(self.direction, "")
        ax.set_xlabel(f"{self.metric}{arrow}")
        ax.set_title(self.title)
        for i in range(n):
            if self.is_baseline[i]:
                ax.axhspan(
                    ys[i] - 0.45, ys[i] + 0.45, color=COLORS["second"], alpha=0.12, gid="baseline"
                )
        ranked = [
            i for i in range(n) if self.rank_low[i] is not None and self.rank_high[i] is not None
        ]
        rax.hlines(
            [ys[i] for i in ranked],
            _at(self.rank_low, ranked),
            _at(self.rank_high, ranked),
            colors=[colors[i] for i in ranked],
            linewidth=2.0,
            gid="rank_intervals",
        )
        has_rank = [i for i in range(n) if self.rank[i] is not None]
        rax.scatter(
            _at(self.rank, has_rank),
            [ys[i] for i in has_rank],
            c=[colors[i] for i in has_rank],
            marker="D",
            zorder=3,
            gid="ranks",
        )
        for i in range(n):
            lo, hi = self.rank_low[i], self.rank_high[i]
            text = "rank: computing" if lo is None else f"{lo}" if lo == hi else f"{lo}\u2013{hi}"
            rax.annotate(
                text, (1.02, ys[i]), xycoords=("axes fraction", "data"), va="center", fontsize=8
            )
        rax.set_yticks(ys, [""] * n)
        ax.set_ylim(-0.7, n - 0.3)
        rax.set_ylim(-0.7, n - 0.3)
        from matplotlib.ticker import MaxNLocator

        rax.xaxis.set_major_locator(MaxNLocator(integer=True))
        rax.invert_xaxis()
        rax.set_xlabel("rank interval (1 = best)")
        rax.set_title("Rank")


def _leaderboard_data(doc: Mapping[str, Any]) -> LeaderboardDisplay:
    out = LeaderboardDisplay(
        metric=str(doc.get("metric") or ""), direction=str(doc.get("direction") or "")
    )
    rows = list(doc.get("entries") or [])
    base = doc.get("baseline")
    # the baseline row (no submission id: it shows nothing of its submission) is drawn
    # unless it ranks among the entries (marked is_baseline there)
    if isinstance(base, Mapping) and not any(r.get("is_baseline") for r in rows):
        rows.append(base)
        rows.sort(key=lambda r: (r.get("rank") is None, r.get("rank") or 0))
    for r in rows:
        team = r.get("team_name") or r.get("team_id") or ""
        model = r.get("model_name") or r.get("submission_id") or ""
        out.labels.append(f"{team} \u2014 {model}" if team else str(model))
        out.value.append(_num(r.get("value")))
        out.low.append(_num(r.get("low")))
        out.high.append(_num(r.get("high")))
        out.rank.append(None if r.get("rank") is None else int(r["rank"]))
        out.rank_low.append(None if r.get("rank_low") is None else int(r["rank_low"]))
        out.rank_high.append(None if r.get("rank_high") is None else int(r["rank_high"]))
        out.not_separable.append(r.get("separable_from_leader") is False and r.get("rank") != 1)
        out.is_baseline.append(bool(r.get("is_baseline")) or r is base)
    return out


def leaderboard(
    source: Any, y: Any = None, /, *, ax: Sequence[Axes] | None = None, **options: Any
) -> LeaderboardDisplay:
    """A leaderboard: value ± bootstrap interval per team, best on top, and the rank
    intervals in a second panel (with their text); entries not separable from the leader are
    marked ("≈ leader", in the gap colour) and the baseline row is highlighted.

    Parameters
    ----------
    source : mapping
        A leaderboard document (``GET /v1/benchmarks/{id}/leaderboard``), or an object with
        it as ``.raw``.
    ax : two axes, optional
        The values' and the ranks' axes.

    Returns
    -------
    LeaderboardDisplay
        Drawn.
    """
    del y, options
    display = _leaderboard_data(_document(source, "entries", "leaderboard"))
    display.plot(ax)
    return display


register_plot(
    PlotSpec(
        name="forest",
        function=forest,
        scope="comparison",
        task=None,
        title="Paired differences with their intervals (forest plot)",
    )
)
register_plot(
    PlotSpec(
        name="leaderboard",
        function=leaderboard,
        scope="leaderboard",
        task=None,
        title="Leaderboard: values with bootstrap and rank intervals",
    )
)
