"""The shaping of the pages' data (no server): leaderboard rows and bars, marks, the forest
plot's geometry, plot addresses, and the glossary's coverage of the registry."""

from __future__ import annotations

from typing import Any

from service.ui import glossary, views
from uqcore import registry


def entry(sub: str, rank: int, value: float, low: float, high: float, **kw: Any) -> dict[str, Any]:
    return {
        "submission_id": sub,
        "rank": rank,
        "team_id": f"t-{sub}",
        "team_name": None,
        "model_name": sub,
        "value": value,
        "low": low,
        "high": high,
        "rank_low": kw.pop("rank_low", rank),
        "rank_high": kw.pop("rank_high", rank),
        "p_best": kw.pop("p_best", None),
        "separable_from_leader": kw.pop("leader", None),
        "separable_from_baseline": kw.pop("baseline", None),
        "is_baseline": kw.pop("is_baseline", False),
    }


def test_board_rows_bars_marks_and_server_sort() -> None:
    doc = {
        "metric": "mae",
        "entries": [
            entry("a", 1, 1.0, 0.5, 1.5, p_best=0.7, leader=False, baseline=True),
            entry("b", 2, 2.0, 1.0, 3.0, p_best=0.3, leader=False, baseline=False),
        ],
        # a private baseline: shown, not ranked
        "baseline": entry("z", 3, 4.0, 3.5, 5.0, is_baseline=True),
    }
    other = {("r2", "a"): {"value": 0.2}, ("r2", "b"): {"value": 0.9, "low": 0.8, "high": 1.0}}
    columns, rows = views.board_table(
        doc, "mae", "regression", ["mae", "r2"], {}, lambda b, s: other.get((b, s))
    )
    assert [c.board for c in columns] == ["mae", "r2"]
    assert [c.arrow for c in columns] == ["↓", "↑"]
    assert columns[0].selected and not columns[1].selected
    assert [r.entry["submission_id"] for r in rows] == ["a", "b", "z"]
    assert [r.ranked for r in rows] == [True, True, False]
    # the bars of a column share one scale: 0.5 (lowest end) at the left pad, 5.0 at the right
    bars = [r.cells[0].bar for r in rows]
    assert bars[0] is not None and bars[2] is not None and bars[1] is not None
    assert bars[0].low == views.BAR_PAD
    assert bars[2].high == views.BAR_W - views.BAR_PAD
    assert bars[1].low < bars[1].value < bars[1].high
    assert rows[2].cells[1].value is None and rows[2].cells[1].bar is None
    # marks: "a" leads (no leader mark); "b" is not separable from either
    assert rows[0].marks == [] and rows[0].separable == "separable"
    assert rows[1].marks == ["not separable from the leader", "not separable from the baseline"]
    assert rows[1].rank_interval == "2" and rows[1].p_best == "0.30"
    # server-side sort: r2 is higher-is-better, so b (0.9) first, the row without r2 last
    _, by_r2 = views.board_table(
        doc, "mae", "regression", ["mae", "r2"], {}, lambda b, s: other.get((b, s)), sort="r2"
    )
    assert [r.entry["submission_id"] for r in by_r2] == ["b", "a", "z"]
    _, by_p = views.board_table(doc, "mae", "regression", ["mae"], {}, lambda b, s: None, "p_best")
    assert [r.entry["submission_id"] for r in by_p] == ["a", "b", "z"]


def test_metric_rows_scale_to_the_bounds() -> None:
    result = {
        "metrics": {
            "corr": {"value": 0.5, "bounds": [-1, 1], "interval": {"low": 0.0, "high": 1.0}},
            "mae": {"value": 2.0, "bounds": [0, None], "interval": {"low": 1.0, "high": 4.0}},
            "nll": {"value": None},
        }
    }
    rows = {r.name: r for r in views.metric_rows(result, "regression")}
    corr, mae = rows["corr"].bar, rows["mae"].bar
    assert corr is not None and mae is not None
    mid = views.BAR_W / 2
    assert abs(corr.value - (mid + (views.BAR_W / 2 - views.BAR_PAD) / 2)) < 0.01
    assert mae.low == round(views.BAR_PAD + (views.BAR_W - 2 * views.BAR_PAD) / 4, 2)
    assert mae.high == views.BAR_W - views.BAR_PAD
    assert rows["nll"].bar is None and rows["nll"].value == "—"


def test_forest_geometry() -> None:
    result = {
        "pairs": [
            {"a": "x", "b": "y", "metrics": {"mae": {"diff": -1.0, "low": -2.0, "high": 0.5}}},
            {"a": "x", "b": "z", "metrics": {"mae": {"diff": 1.0, "low": 0.5, "high": 2.0}}},
        ]
    }
    (panel,) = views.forests(result, ["mae", "crps"], "regression", {"x": "X", "y": "Y"})
    assert panel.metric == "mae" and len(panel.rows) == 2
    left, right = panel.plot_x, panel.plot_x + panel.plot_w
    assert left < panel.x_zero < right
    assert abs(panel.x_zero - (left + right) / 2) < 1e-6  # symmetric data: 0 in the middle
    first, second = panel.rows
    assert first.label == "X − Y" and second.label == "X − z"
    assert first.x_low < first.x_diff < first.x_high < panel.x_zero + 1e-9 + panel.plot_w
    assert second.x_low > panel.x_zero


def test_plot_addresses_prefer_svg() -> None:
    assert views.plot_src("/v1/submissions/s/plots/pit") == "/v1/submissions/s/plots/pit?format=svg"
    assert views.plot_src("/v1/b/plots/leaderboard?metric=mae").endswith("metric=mae&format=svg")
    assert views.plot_src("/x?format=png") == "/x?format=png"


def test_glossary_covers_the_registry() -> None:
    entries = glossary.entries()
    assert len(entries) == len(registry.specs())
    families = {(e.task, e.family) for e in entries}
    assert families <= set(glossary.WHEN_TO_USE), families - set(glossary.WHEN_TO_USE)
    for task, name in glossary.PITFALLS:
        assert registry.get(name, task).name == name
    for e in entries:
        assert "``" not in e.formula and ":func:" not in e.formula, e.name
        assert e.arrow == glossary.ARROWS[e.direction]
    spearman = glossary.lookup("regression", "spearman")
    assert spearman is not None and "xiong2024" in spearman.pitfalls[0].cite
    assert glossary.lookup("classification", "auroc_ood[entropy_bma]") is not None
