"""Rich tables of the service's documents: results, submissions, leaderboards, comparisons,
benchmarks, teams, keys and the metric catalogue.

Every function takes the JSON document as the server sends it (the ``raw`` of the client's
typed results, or the local result of ``uqeval evaluate``), so that a field the server adds
later never breaks a table, and the table and ``--json`` always show the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

DASH = "—"
ARROWS = {"lower": "lower ↓", "higher": "higher ↑"}


def num(value: Any, digits: int = 6) -> str:
    """A number for a table: ``digits`` significant digits, ``—`` for none."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return DASH
        return f"{value:.{digits}g}"
    return str(value)


def interval(low: Any, high: Any, level: Any = None) -> str:
    """``[low, high]`` (with the level when known), ``—`` when there is none."""
    if low is None and high is None:
        return DASH
    text = f"[{num(low, 4)}, {num(high, 4)}]"
    if isinstance(level, (int, float)) and not isinstance(level, bool):
        text = f"{level:.0%} {text}"
    return text


def flag(value: Any) -> str:
    return DASH if value is None else ("yes" if value else "no")


def _table(title: str | None, columns: Sequence[tuple[str, str]]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=justify == "right")  # type: ignore[arg-type]
    return table


def result(doc: Mapping[str, Any], title: str | None = None) -> RenderableType:
    """A result document: metric, value, interval, direction; then the metric × estimator
    table (classification), what did not apply and why, and the warnings."""
    parts: list[RenderableType] = []
    if title:
        parts.append(Text(title, style="bold"))
    table = _table(
        None, [("metric", "left"), ("value", "right"), ("interval", "right"), ("direction", "left")]
    )
    for name, entry in (doc.get("metrics") or {}).items():
        ci = entry.get("interval") or {}
        table.add_row(
            name,
            num(entry.get("value")),
            interval(ci.get("low"), ci.get("high"), ci.get("level")),
            ARROWS.get(str(entry.get("direction")), entry.get("direction") or DASH),
        )
    parts.append(table)
    by_est = doc.get("by_estimator") or {}
    if by_est:
        estimators = list(doc.get("estimators") or sorted({e for r in by_est.values() for e in r}))
        est_table = _table(
            "by estimator", [("metric", "left")] + [(e, "right") for e in estimators]
        )
        for name, row in by_est.items():
            est_table.add_row(name, *(num(row.get(e)) for e in estimators))
        parts.append(est_table)
    stability = doc.get("stability")
    if stability:
        parts.append(Text("Stability study: in the result document (--json).", style="dim"))
    curves = doc.get("curves") or {}
    if curves:
        parts.append(Text(f"Curves: {', '.join(curves)} (in --json).", style="dim"))
    not_applicable = doc.get("not_applicable") or {}
    if not_applicable:
        parts.append(Text(f"Not applicable ({len(not_applicable)}):", style="bold"))
        for name, why in not_applicable.items():
            parts.append(Text(f"  {name}: {why}"))
    warnings = doc.get("warnings") or []
    if warnings:
        parts.append(Text(f"Warnings ({len(warnings)}):", style="bold yellow"))
        for w in warnings:
            parts.append(Text(f"  {w}"))
    return Group(*parts)


def fields(rows: Iterable[tuple[str, Any]], title: str | None = None) -> Table:
    """A two-column table of named values."""
    table = Table(
        title=title, box=box.SIMPLE, show_header=False, title_justify="left", pad_edge=False
    )
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(name, value if isinstance(value, str) else num(value))
    return table


def submission(doc: Mapping[str, Any]) -> Table:
    """A submission's status: id, status, progress, timings, error."""
    rows: list[tuple[str, Any]] = [
        ("id", doc.get("id")),
        ("status", doc.get("status")),
        ("progress", f"{num(doc.get('progress'), 4)} %"),
        ("model", doc.get("model_name")),
        ("kind", doc.get("kind")),
        ("n", doc.get("n")),
        ("benchmark", doc.get("benchmark_id") or DASH),
        ("visibility", doc.get("visibility")),
        ("queue", doc.get("queue")),
    ]
    if doc.get("queue_position") is not None:
        rows.append(("queue position", doc.get("queue_position")))
    rows += [
        ("created", doc.get("created_at")),
        ("started", doc.get("started_at") or DASH),
        ("finished", doc.get("finished_at") or DASH),
    ]
    if doc.get("attempts") is not None:
        rows.append(("attempts", doc.get("attempts")))
    if doc.get("error"):
        rows.append(("error", str(doc["error"])))
    return fields(rows)


def submissions(doc: Mapping[str, Any]) -> Table:
    """A page of submissions."""
    items = doc.get("items") or []
    total = doc.get("total", len(items))
    title = f"{len(items)} of {total} submission{'s' if total != 1 else ''}"
    table = _table(
        title,
        [
            ("id", "left"),
            ("status", "left"),
            ("progress", "right"),
            ("model", "left"),
            ("kind", "left"),
            ("n", "right"),
            ("benchmark", "left"),
            ("created", "left"),
        ],
    )
    for s in items:
        table.add_row(
            s.get("id"),
            s.get("status"),
            f"{num(s.get('progress'), 4)} %",
            s.get("model_name"),
            s.get("kind"),
            num(s.get("n")),
            s.get("benchmark_id") or DASH,
            s.get("created_at"),
        )
    return table


def leaderboard(doc: Mapping[str, Any]) -> RenderableType:
    """A leaderboard: rank, team, model, value, interval, rank interval, separability."""
    metric = doc.get("metric")
    if doc.get("estimator"):
        metric = f"{metric}[{doc['estimator']}]"
    direction = ARROWS.get(str(doc.get("direction")), doc.get("direction"))
    title = f"{doc.get('benchmark_id')} · {metric} ({direction}) · {doc.get('total', 0)} teams"
    table = _table(
        title,
        [
            ("rank", "right"),
            ("team", "left"),
            ("model", "left"),
            ("value", "right"),
            ("interval", "right"),
            ("rank interval", "right"),
            ("P(best)", "right"),
            ("sep. leader", "left"),
            ("sep. baseline", "left"),
            ("submission", "left"),
        ],
    )
    for e in doc.get("entries") or []:
        rank_low, rank_high = e.get("rank_low"), e.get("rank_high")
        ranks = DASH if rank_low is None else f"[{rank_low}, {rank_high}]"
        team = e.get("team_name") or e.get("team_id") or DASH
        model = e.get("model_name") or DASH
        if e.get("is_baseline"):
            model += " (baseline)"
        table.add_row(
            num(e.get("rank")),
            team,
            model,
            num(e.get("value")),
            interval(e.get("low"), e.get("high")),
            ranks,
            num(e.get("p_best"), 3),
            flag(e.get("separable_from_leader")),
            flag(e.get("separable_from_baseline")),
            e.get("submission_id") or DASH,
        )
    parts: list[RenderableType] = [table]
    ranks_state = doc.get("ranks") or {}
    if ranks_state.get("status") and ranks_state.get("status") != "current":
        parts.append(Text(f"Rank intervals: {ranks_state['status']}.", style="dim"))
    if ranks_state.get("multiple_comparison_note"):
        parts.append(Text(str(ranks_state["multiple_comparison_note"]), style="dim"))
    return Group(*parts)


def comparison(doc: Mapping[str, Any]) -> RenderableType:
    """A comparison: A − B per metric with its interval, P(A better), p-values."""
    res = doc.get("result") or {}
    table = _table(
        f"comparison {doc.get('id')} ({doc.get('status')})",
        [
            ("A", "left"),
            ("B", "left"),
            ("metric", "left"),
            ("A − B", "right"),
            ("interval", "right"),
            ("P(A better)", "right"),
            ("p", "right"),
            ("p adj.", "right"),
        ],
    )
    level = res.get("level")
    subs = res.get("submissions") or {}

    def label(sub_id: Any) -> str:
        # the model (and team) the server names, else the id
        info = subs.get(sub_id) if isinstance(subs, Mapping) else None
        if not info or not info.get("model_name"):
            return str(sub_id)
        team = info.get("team_name")
        return f"{info['model_name']} ({team})" if team else str(info["model_name"])

    for pair in res.get("pairs") or []:
        for name, m in (pair.get("metrics") or {}).items():
            table.add_row(
                label(pair.get("a")),
                label(pair.get("b")),
                name,
                num(m.get("diff")),
                interval(m.get("low"), m.get("high"), level),
                num(m.get("p_better"), 3),
                num(m.get("p_value"), 3),
                num(m.get("p_value_adjusted"), 3),
            )
    parts: list[RenderableType] = [table]
    if res.get("correction"):
        parts.append(Text(str(res["correction"]), style="dim"))
    if doc.get("error"):
        parts.append(Text(f"error: {doc['error']}", style="red"))
    return Group(*parts)


def benchmarks(docs: Sequence[Mapping[str, Any]]) -> Table:
    table = _table(
        f"{len(docs)} benchmark{'s' if len(docs) != 1 else ''}",
        [
            ("id", "left"),
            ("name", "left"),
            ("task", "left"),
            ("n", "right"),
            ("primary metric", "left"),
            ("metrics", "left"),
            ("rule", "left"),
        ],
    )
    for b in docs:
        table.add_row(
            b.get("id"),
            b.get("name"),
            b.get("task"),
            num(b.get("n")),
            b.get("primary_metric"),
            ", ".join(b.get("metrics") or []),
            b.get("rule"),
        )
    return table


def benchmark(doc: Mapping[str, Any]) -> Table:
    rows: list[tuple[str, Any]] = []
    for name, value in doc.items():
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or DASH
        elif isinstance(value, Mapping):
            value = ", ".join(f"{k}={num(v)}" for k, v in value.items()) or DASH
        elif value is None:
            value = DASH
        rows.append((name, value if isinstance(value, str) else num(value)))
    return fields(rows)


def teams(docs: Sequence[Mapping[str, Any]]) -> Table:
    table = _table(None, [("team id", "left"), ("name", "left"), ("created", "left")])
    for t in docs:
        table.add_row(t.get("team_id") or t.get("id"), t.get("name"), t.get("created_at"))
    return table


def keys(docs: Sequence[Mapping[str, Any]]) -> Table:
    table = _table(
        None,
        [
            ("key id", "left"),
            ("name", "left"),
            ("role", "left"),
            ("team", "left"),
            ("created", "left"),
            ("revoked", "left"),
        ],
    )
    for k in docs:
        table.add_row(
            k.get("key_id") or k.get("id"),
            k.get("name"),
            k.get("role"),
            k.get("team_id") or DASH,
            k.get("created_at"),
            flag(k.get("revoked")),
        )
    return table


def metrics(docs: Sequence[Mapping[str, Any]]) -> Table:
    table = _table(
        f"{len(docs)} metrics",
        [
            ("name", "left"),
            ("task", "left"),
            ("direction", "left"),
            ("bounds", "left"),
            ("summary", "left"),
        ],
    )
    for m in docs:
        bounds = m.get("bounds") or [None, None]
        table.add_row(
            m.get("name"),
            m.get("task"),
            ARROWS.get(str(m.get("direction")), m.get("direction") or DASH),
            f"[{num(bounds[0])}, {num(bounds[1])}]",
            m.get("summary") or "",
        )
    return table


def show(console: Console, renderable: RenderableType) -> None:
    console.print(renderable)
