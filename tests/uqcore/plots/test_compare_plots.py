"""The comparison and leaderboard figures: what they draw is the document's numbers (the forest
plot's differences and intervals, the leaderboard's values, bootstrap and rank intervals), with
the zero line, the better side, the not-separable marks and the baseline; and every registered
plot of these scopes renders PNG and SVG."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from uqcore import UQValidationError
from uqcore.plots import PLOTS, forest, leaderboard
from uqcore.predictions import Gaussian
from uqcore.stability import compare_all


def _segments(ax: Any, gid: str) -> list[tuple[float, float, float]]:
    """(y, x0, x1) of the horizontal segments drawn under ``gid``."""
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]
    return [(float(s[0][1]), float(s[0][0]), float(s[1][0])) for s in coll.get_segments()]


def _points(ax: Any, gid: str) -> list[tuple[float, float]]:
    for line in ax.lines:
        if line.get_gid() == gid:
            return list(
                zip(map(float, line.get_xdata()), map(float, line.get_ydata()), strict=True)
            )
    (coll,) = [c for c in ax.collections if c.get_gid() == gid]
    return [(float(x), float(y)) for x, y in coll.get_offsets()]


def comparison_doc() -> dict[str, Any]:
    """A comparison's result as the worker builds it: uqcore's compare_all on three seeded
    Gaussian predictions, two metrics."""
    rng = np.random.default_rng(7)
    y = rng.normal(size=200)
    preds = {
        f"sub_{k}": Gaussian(y + rng.normal(scale=s, size=200), np.full(200, s))
        for k, s in (("a", 0.3), ("b", 0.6), ("c", 0.35))
    }
    done = compare_all(preds, y, ["crps", "coverage"], n_resamples=60, seed=3)
    pairs = [
        {"a": a, "b": b, "metrics": {m: dict(c[m]) for m in c}} for (a, b), c in done.pairs.items()
    ]
    return {
        "submissions": {
            s: {"model_name": s.upper(), "team_id": "t", "team_name": "T"} for s in preds
        },
        "pairs": pairs,
        "level": 0.95,
    }


def test_forest_draws_every_pair_and_metric() -> None:
    doc = comparison_doc()
    d = forest(doc)
    ax = d.ax_
    expected = [(p["a"], p["b"], m, e) for p in doc["pairs"] for m, e in p["metrics"].items()]
    assert len(expected) == 6
    n = len(expected)
    ys = list(range(n))[::-1]
    segs = _segments(ax, "intervals")
    pts = _points(ax, "differences")
    assert len(segs) == len(pts) == n
    labels = [t.get_text() for t in ax.get_yticklabels()]
    for i, (a, b, m, e) in enumerate(expected):
        assert segs[i] == (ys[i], e["low"], e["high"])
        assert pts[i] == (e["diff"], ys[i])
        assert e["low"] <= e["diff"] <= e["high"]
        # the tick at ys[i] names the metric and the two models
        tick = dict(zip([float(t) for t in ax.get_yticks()], labels, strict=True))[ys[i]]
        assert tick.startswith(m) and f"{a.upper()} \u2212 {b.upper()}" in tick
    zero = [line for line in ax.lines if line.get_gid() == "zero"]
    assert len(zero) == 1 and list(zero[0].get_xdata()) == [0, 0]


def test_forest_marks_the_better_side() -> None:
    doc = comparison_doc()
    d = forest(doc, metrics=["crps"])
    assert len(_points(d.ax_, "differences")) == 3
    (mark,) = [t for t in d.ax_.texts if t.get_gid() == "better"]
    assert mark.get_text() == "A better \u2190"  # crps: lower is better
    # intervals that exclude 0 are coloured, the others grey
    doc_rows = [p["metrics"]["crps"] for p in doc["pairs"]]
    (coll,) = [c for c in d.ax_.collections if c.get_gid() == "intervals"]
    grey = np.array([0x7F / 255] * 3)
    for row, color in zip(doc_rows, coll.get_colors(), strict=True):
        excludes = row["low"] > 0 or row["high"] < 0
        assert np.allclose(color[:3], grey) is (not excludes)


def test_forest_reads_the_whole_detail_and_raw() -> None:
    doc = comparison_doc()

    held = SimpleNamespace(raw={"id": "cmp_1", "status": "succeeded", "result": doc})
    assert _points(forest(held).ax_, "differences") == _points(forest(doc).ax_, "differences")
    with pytest.raises(UQValidationError, match="pairs"):
        forest({"entries": []})


def board_doc() -> dict[str, Any]:
    entries = [
        {"rank": 1, "team_id": "t1", "team_name": "Alpha", "submission_id": "s1", "model_name": "m1",
         "value": 0.21, "low": 0.19, "high": 0.24, "rank_low": 1, "rank_high": 2,
         "separable_from_leader": False, "is_baseline": False},
        {"rank": 2, "team_id": "t2", "team_name": "Beta", "submission_id": "s2", "model_name": "m2",
         "value": 0.23, "low": 0.2, "high": 0.26, "rank_low": 1, "rank_high": 3,
         "separable_from_leader": False, "is_baseline": False},
        {"rank": 3, "team_id": "t3", "team_name": None, "submission_id": "s3", "model_name": "m3",
         "value": 0.4, "low": 0.35, "high": 0.45, "rank_low": 3, "rank_high": 3,
         "separable_from_leader": True, "is_baseline": False},
    ]  # fmt: skip
    baseline = {"rank": 3, "team_id": "admin", "team_name": "Org", "submission_id": "s0",
                "model_name": "base", "value": 0.39, "low": None, "high": None, "rank_low": None,
                "rank_high": None, "separable_from_leader": None, "is_baseline": True}  # fmt: skip
    return {"metric": "crps", "direction": "lower", "entries": entries, "baseline": baseline}


def test_leaderboard_draws_values_and_rank_intervals() -> None:
    doc = board_doc()
    d = leaderboard(doc)
    ax, rax = d.axes_
    # the baseline is placed by its rank, after the entries of equal rank
    rows = sorted(doc["entries"] + [doc["baseline"]], key=lambda r: r["rank"])
    ys = list(range(len(rows)))[::-1]
    assert _points(ax, "values") == [(r["value"], ys[i]) for i, r in enumerate(rows)]
    with_ci = [(ys[i], r["low"], r["high"]) for i, r in enumerate(rows) if r["low"] is not None]
    assert _segments(ax, "intervals") == with_ci
    ranked = [(ys[i], r["rank_low"], r["rank_high"]) for i, r in enumerate(rows) if r["rank_low"]]
    assert _segments(rax, "rank_intervals") == ranked
    assert _points(rax, "ranks") == [(r["rank"], ys[i]) for i, r in enumerate(rows)]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "Alpha \u2014 m1"  # the leader is not marked
    assert labels[1] == "Beta \u2014 m2 \u2248 leader"
    assert "(baseline)" in labels[rows.index(doc["baseline"])]
    assert sum(1 for p in ax.patches if p.get_gid() == "baseline") == 1
    texts = [t.get_text() for t in rax.texts]
    assert texts == ["1\u20132", "1\u20133", "3", "rank: computing"]
    assert "\u2193 better" in ax.get_xlabel()


def test_leaderboard_baseline_among_entries_is_not_doubled() -> None:
    doc = board_doc()
    doc["entries"][2]["is_baseline"] = True
    doc["baseline"] = dict(doc["entries"][2])
    d = leaderboard(doc)
    assert len(_points(d.ax_, "values")) == 3


@pytest.mark.parametrize(
    "name", sorted(n for n, s in PLOTS.items() if s.scope in ("comparison", "leaderboard"))
)
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_registered_scope_plots_render(name: str, fmt: str) -> None:
    spec = PLOTS[name]
    doc = comparison_doc() if spec.scope == "comparison" else board_doc()
    data = spec.function(doc).to_bytes(fmt)
    if fmt == "png":
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert b"<svg" in data[:2000]
    assert spec.curves == () and spec.title


def test_scopes_registered() -> None:
    assert PLOTS["forest"].scope == "comparison"
    assert PLOTS["leaderboard"].scope == "leaderboard"
