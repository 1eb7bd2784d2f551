"""What the pages show, computed from the API's documents: the leaderboard table with its
interval bars and marks, the rows of a submission's metrics, and a comparison's forest plot.

Nothing here reads Redis or renders HTML: the routes (:mod:`service.ui.routes`) read the
documents, these functions shape them, and the templates draw them (escaped).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.leaderboard import badness, parse_board
from service.ui import glossary

#: Width of an interval bar (SVG user units = CSS px), and its margin.
BAR_W = 110.0
BAR_PAD = 6.0


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a table cell: 4 significant digits, '—' for a missing one."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return "—"
    if not math.isfinite(x):
        return "—"
    return f"{x:.{digits}g}"


def plot_src(url: str, fmt_name: str = "svg") -> str:
    """The image address of a ``plots`` item (its URL asks for PNG; pages prefer SVG)."""
    if "format=" in url:
        return url
    return url + ("&" if "?" in url else "?") + f"format={fmt_name}"


@dataclass(frozen=True)
class Bar:
    """An interval bar: x positions of the interval's ends and of the value."""

    low: float
    high: float
    value: float
    width: float = BAR_W


@dataclass
class Cell:
    """A metric's value in a row: text, interval, sort key (lower = better), bar."""

    value: float | None
    low: float | None = None
    high: float | None = None
    sort: float | None = None
    bar: Bar | None = None

    @property
    def text(self) -> str:
        return fmt(self.value)

    @property
    def interval(self) -> str:
        if self.low is None or self.high is None:
            return ""
        return f"[{fmt(self.low)}, {fmt(self.high)}]"


@dataclass(frozen=True)
class Column:
    """A metric column of the board."""

    board: str
    metric: str
    arrow: str
    hover: str
    anchor: str
    selected: bool


@dataclass
class Row:
    """One row of the board: the API's entry and a cell per metric column."""

    entry: dict[str, Any]
    cells: list[Cell]
    ranked: bool
    marks: list[str] = field(default_factory=list)

    @property
    def is_baseline(self) -> bool:
        return bool(self.entry.get("is_baseline"))

    @property
    def team(self) -> str:
        return str(self.entry.get("team_name") or self.entry.get("team_id") or "")

    @property
    def rank_interval(self) -> str:
        low, high = self.entry.get("rank_low"), self.entry.get("rank_high")
        if low is None or high is None:
            return "—"
        return str(low) if low == high else f"{low}–{high}"

    @property
    def separable(self) -> str:
        return separability(self.entry)

    @property
    def p_best(self) -> str:
        p = self.entry.get("p_best")
        return "—" if p is None else f"{p:.2f}"

    @property
    def skill(self) -> str:
        """The entry's skill against the baseline (1 − score/score_baseline), or a dash."""
        s = self.entry.get("skill_vs_baseline")
        return "—" if s is None else fmt(s)

    def sort_value(self, key: str, columns: Sequence[Column]) -> float | None:
        """The row's sort key for ``key`` (rank, p_best or a column's board), lower first."""
        if key == "rank":
            return float(self.entry["rank"]) if self.ranked else None
        if key == "p_best":
            p = self.entry.get("p_best")
            return None if p is None else -float(p)
        for col, cell in zip(columns, self.cells, strict=True):
            if col.board == key:
                return cell.sort
        return None


def _bars(cells: list[Cell], span: tuple[float, float] | None = None) -> None:
    """Scale the bars of one column to the column's range of values and intervals (and
    ``span``, when given)."""
    points = [
        x for c in cells for x in (c.value, c.low, c.high) if x is not None and math.isfinite(x)
    ]
    if not points:
        return
    if span is not None:
        points.extend(span)
    lo, hi = min(points), max(points)
    if hi == lo:
        lo, hi = lo - 1.0, hi + 1.0

    def x(v: float) -> float:
        return round(BAR_PAD + (v - lo) / (hi - lo) * (BAR_W - 2 * BAR_PAD), 2)

    for c in cells:
        if c.value is None:
            continue
        low = c.low if c.low is not None else c.value
        high = c.high if c.high is not None else c.value
        c.bar = Bar(x(low), x(high), x(c.value))


def _cell(
    task: str, board: str, shown: Mapping[str, Any] | None, params: Mapping[str, Any]
) -> Cell:
    if not shown or not isinstance(shown.get("value"), int | float):
        return Cell(None)
    value = float(shown["value"])
    metric, estimator = parse_board(board)
    p = dict(params.get(metric) or {})
    if estimator is not None:
        p["estimator"] = estimator
    return Cell(
        value,
        shown.get("low"),
        shown.get("high"),
        sort=badness(metric, value, p, task=task),
    )


def board_table(
    board: Mapping[str, Any],
    selected: str,
    task: str,
    boards: Sequence[str],
    params: Mapping[str, Any],
    shown: Callable[[str, str | None], Mapping[str, Any] | None],
    sort: str | None = None,
) -> tuple[list[Column], list[Row]]:
    """The columns and rows of a leaderboard page.

    ``board`` is the API's leaderboard document of the ``selected`` board; ``boards`` the
    boards shown as columns (the selected one among them); ``shown(board, submission_id)`` the entry
    (value, interval) of a row's submission on another board (submission_id None: the
    baseline row's, which carries no id). Rows come in the API's order
    (the baseline row last when it does not rank), or sorted by ``sort`` (rank, p_best or a
    board) best first, missing values last.
    """
    columns = []
    for b in boards:
        entry = glossary.lookup(task, b)
        columns.append(
            Column(
                board=b,
                metric=b,
                arrow=entry.arrow if entry else "",
                hover=entry.hover if entry else b,
                anchor=entry.anchor if entry else "",
                selected=b == selected,
            )
        )
    entries = list(board.get("entries") or [])
    base = board.get("baseline")
    all_entries = [(e, True) for e in entries]
    if base is not None and not any(e.get("is_baseline") for e in entries):
        all_entries.append((base, False))
    rows = []
    for e, ranked in all_entries:
        cells = []
        for b in boards:
            if b == selected:
                cells.append(_cell(task, b, e, params))
            else:
                # the baseline row carries no submission id: None asks for the baseline's
                cells.append(_cell(task, b, shown(b, e.get("submission_id")), params))
        rows.append(Row(entry=e, cells=cells, ranked=ranked, marks=_marks(e)))
    for i in range(len(columns)):
        _bars([r.cells[i] for r in rows])
    if sort is not None and sort != "rank":
        keyed = [(r.sort_value(sort, columns), i, r) for i, r in enumerate(rows)]
        keyed.sort(key=lambda t: (t[0] is None, t[0] if t[0] is not None else 0.0, t[1]))
        rows = [r for _, _, r in keyed]
    return columns, rows


def separability(e: Mapping[str, Any]) -> str:
    """'separable' when every computed flag that concerns the row says so (from the leader,
    unless it leads; from the baseline, unless it is the baseline), else ''."""
    flags = []
    if e.get("rank") != 1:
        flags.append(e.get("separable_from_leader"))
    if not e.get("is_baseline"):
        flags.append(e.get("separable_from_baseline"))
    known = [f for f in flags if f is not None]
    return "separable" if known and all(known) else ""


def _marks(e: Mapping[str, Any]) -> list[str]:
    """The separability marks of an entry (None flags: not computed yet, no mark)."""
    marks = []
    if e.get("separable_from_leader") is False and e.get("rank") != 1:
        marks.append("not separable from the leader")
    if e.get("separable_from_baseline") is False and not e.get("is_baseline"):
        marks.append("not separable from the baseline")
    return marks


# --- a submission's result -----------------------------------------------------------------


@dataclass(frozen=True)
class MetricRow:
    """One metric of a result document."""

    name: str
    value: str
    interval: str
    arrow: str
    hover: str
    anchor: str
    params: str
    bar: Bar | None


def metric_rows(result: Mapping[str, Any], task: str) -> list[MetricRow]:
    """Every metric of a result with its interval, in the document's order."""
    rows = []
    for name, m in (result.get("metrics") or {}).items():
        entry = glossary.lookup(task, name)
        value = m.get("value")
        interval = m.get("interval") or {}
        low, high = interval.get("low"), interval.get("high")
        bar = None
        if isinstance(value, int | float) and low is not None and high is not None:
            # one value: the bar spans the metric's bounds where finite, else reaches 0, so
            # the interval's width reads against the value's scale
            b_low, b_high = (m.get("bounds") or [None, None])[:2]
            span = (
                b_low if b_low is not None else min(0.0, low),
                b_high if b_high is not None else max(0.0, high),
            )
            cells = [Cell(float(value), low, high)]
            _bars(cells, span)
            bar = cells[0].bar
        level = interval.get("level")
        text = ""
        if low is not None and high is not None:
            text = f"[{fmt(low)}, {fmt(high)}]"
            if level is not None:
                text += f" ({level:.0%}, {interval.get('method') or 'bootstrap'})"
        params = m.get("params") or {}
        rows.append(
            MetricRow(
                name=name,
                value=fmt(value),
                interval=text,
                arrow=entry.arrow if entry else "",
                hover=entry.hover if entry else name,
                anchor=entry.anchor if entry else "",
                params=", ".join(f"{k}={v}" for k, v in sorted(params.items())),
                bar=bar,
            )
        )
    return rows


# --- a comparison's forest plot ------------------------------------------------------------


@dataclass(frozen=True)
class ForestRow:
    label: str
    diff: str
    interval: str
    y: float
    x_low: float
    x_high: float
    x_diff: float


@dataclass(frozen=True)
class Forest:
    """One metric's panel of the forest plot of paired differences (A − B)."""

    metric: str
    arrow: str
    hover: str
    rows: list[ForestRow]
    x_zero: float
    left: str
    right: str
    width: float
    height: float
    plot_x: float
    plot_w: float


FOREST_LABEL_W = 380.0
FOREST_PLOT_W = 400.0
FOREST_TOP = 34.0
FOREST_ROW_H = 26.0


def forests(
    result: Mapping[str, Any], metrics: Sequence[str], task: str, names: Mapping[str, str]
) -> list[Forest]:
    """A forest panel per metric: each pair's difference A − B with its interval, and 0."""
    pairs = list(result.get("pairs") or [])
    out = []
    for metric in metrics:
        items = []
        for p in pairs:
            c = (p.get("metrics") or {}).get(metric)
            if not c or c.get("diff") is None:
                continue
            items.append((p, c))
        if not items:
            continue
        points = [0.0] + [
            float(x)
            for _, c in items
            for x in (c.get("diff"), c.get("low"), c.get("high"))
            if isinstance(x, int | float)
        ]
        lo, hi = min(points), max(points)
        if hi == lo:
            lo, hi = lo - 1.0, hi + 1.0
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad

        def x(v: float, lo: float = lo, hi: float = hi) -> float:
            return round(FOREST_LABEL_W + (v - lo) / (hi - lo) * FOREST_PLOT_W, 2)

        rows = []
        for i, (p, c) in enumerate(items):
            d = float(c["diff"])
            low = float(c["low"]) if c.get("low") is not None else d
            high = float(c["high"]) if c.get("high") is not None else d
            label = f"{names.get(p['a'], p['a'])} − {names.get(p['b'], p['b'])}"
            rows.append(
                ForestRow(
                    label=label if len(label) <= 60 else label[:59] + "…",
                    diff=fmt(d),
                    interval=f"[{fmt(c.get('low'))}, {fmt(c.get('high'))}]",
                    y=FOREST_TOP + i * FOREST_ROW_H,
                    x_low=x(low),
                    x_high=x(high),
                    x_diff=x(d),
                )
            )
        entry = glossary.lookup(task, metric)
        out.append(
            Forest(
                metric=metric,
                arrow=entry.arrow if entry else "",
                hover=entry.hover if entry else metric,
                rows=rows,
                x_zero=x(0.0),
                left=fmt(lo),
                right=fmt(hi),
                width=FOREST_LABEL_W + FOREST_PLOT_W + 20,
                height=FOREST_TOP + len(rows) * FOREST_ROW_H + 10,
                plot_x=FOREST_LABEL_W,
                plot_w=FOREST_PLOT_W,
            )
        )
    return out
