"""The classification figures of uqcore.plots: what they draw is the data (checked against
independent computations and the metric values), from every kind of source, on a new figure
or the caller's axes, as PNG and SVG."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import precision_recall_curve, roc_curve

import uqcore
import uqcore.plots as up
from uqcore import UQValidationError
from uqcore import predictions as P
from uqcore.curves import CURVES, curve_to_json
from uqcore.plots import PLOTS

pytest.importorskip("matplotlib")
from matplotlib.figure import Figure

CURVE_PLOTS = {
    "reliability": "reliability_diagram",
    "accuracy_coverage": "risk_coverage_curve",
    "risk_coverage": "risk_coverage_curve",
    "roc_ood": "roc_ood",
    "pr_ood": "pr_ood",
    "roc_correctness": "roc_correctness",
    "pr_correctness": "pr_correctness",
}


@pytest.fixture(scope="module")
def case() -> dict[str, Any]:
    rng = np.random.default_rng(11)
    n = 500
    logits = rng.normal(size=(n, 4)) * 1.5
    y = rng.integers(0, 4, size=n)
    logits[np.arange(n), y] += rng.normal(1.5, 1.0, size=n)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    ood = rng.random(n) < 0.3
    w = rng.integers(1, 4, size=n).astype(float)
    pred = P.Probs(p)
    report = uqcore.evaluate(
        pred,
        y,
        sample_weight=w,
        ood=ood,
        curves=True,
        estimators=["one_minus_max_prob_bma", "entropy_bma", "margin"],
    )
    doc = json.loads(
        json.dumps(
            {**report.to_dict(), "curves": {k: curve_to_json(v) for k, v in report.curves.items()}}
        )
    )
    return {"pred": pred, "p": p, "y": y, "ood": ood, "w": w, "report": report, "doc": doc}


def _line(ax: Any, startswith: str) -> Any:
    found = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith(startswith)]
    assert len(found) == 1, [ln.get_label() for ln in ax.get_lines()]
    return found[0]


def _bars(ax: Any, label: str) -> Any:
    found = [c for c in ax.containers if c.get_label() == label]
    assert len(found) == 1
    return found[0]


def test_registry_names_and_namespace() -> None:
    for name, curve in CURVE_PLOTS.items():
        spec = PLOTS[name]
        assert spec.scope == "submission" and spec.task == "classification"
        assert spec.curves == (curve,) and curve in CURVES
        assert getattr(up, name) is spec.function and name in up.__all__
    est = PLOTS["estimators"]
    assert est.curves == () and est.result_field == "by_estimator"
    for cls in ("ReliabilityDisplay", "RiskCoverageDisplay", "RocDisplay", "EstimatorsDisplay"):
        assert cls in up.__all__


def test_reliability_bars_carry_the_bins(case: dict[str, Any]) -> None:
    d = up.reliability(case["pred"], case["y"], sample_weight=case["w"])
    # independent: 15 equal-width bins closed on the right, weighted accuracy, row counts
    conf = case["p"].max(axis=1)
    correct = (case["p"].argmax(axis=1) == case["y"]).astype(float)
    b = np.clip(np.ceil(conf * 15).astype(int) - 1, 0, 14)
    counts = np.bincount(b, minlength=15)
    acc = np.bincount(b, weights=case["w"] * correct, minlength=15) / np.maximum(
        np.bincount(b, weights=case["w"], minlength=15), 1e-300
    )
    filled = np.flatnonzero(counts)
    main, hist = d.axes_
    bars = _bars(main, "accuracy")
    np.testing.assert_allclose([r.get_height() for r in bars], acc[filled], rtol=1e-12)
    np.testing.assert_allclose([r.get_x() for r in bars], filled / 15, atol=1e-12)
    cbars = _bars(hist, "rows")
    assert [r.get_height() for r in cbars] == list(counts[filled])
    assert [t.get_text() for t in hist.texts] == [str(c) for c in counts[filled]]
    gap = _bars(main, "gap to the diagonal")
    conf_b = np.bincount(b, weights=case["w"] * conf, minlength=15) / np.bincount(
        b, weights=case["w"], minlength=15
    ).clip(1e-300)
    tops = [r.get_y() + r.get_height() for r in gap]
    np.testing.assert_allclose(tops, conf_b[filled], rtol=1e-12)
    ece = uqcore.metric("ece", case["pred"], case["y"], sample_weight=case["w"])
    assert f"ECE = {ece:.3f}" in main.get_title()
    assert d.to_bytes("png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_reliability_on_callers_axes(case: dict[str, Any]) -> None:
    fig = Figure()
    ax = fig.subplots()
    d = up.reliability(case["report"], ax=ax)
    assert d.figure_ is fig and d.ax_ is ax
    diagram = case["report"].curves["reliability_diagram"]
    shown = [str(c) for c in diagram.count if c > 0]
    assert [t.get_text() for t in ax.texts] == shown  # the counts label the bars
    with pytest.raises(ValueError, match="1 or 2 axes"):
        up.reliability(case["report"], ax=list(fig.subplots(1, 3)))


def test_risk_and_accuracy_coverage(case: dict[str, Any]) -> None:
    rep = case["report"]
    d = up.risk_coverage(case["doc"])
    ax = d.ax_
    curve = rep.curves["risk_coverage_curve"]
    model = _line(ax, "AURC")
    assert model.get_label() == f"AURC = {rep['aurc']:.3f}"
    np.testing.assert_array_equal(model.get_xdata(), curve.coverage)
    np.testing.assert_array_equal(model.get_ydata(), curve.risk)
    r = 1.0 - rep["accuracy"]
    oracle = _line(ax, "oracle")
    x = np.asarray(oracle.get_xdata())
    np.testing.assert_allclose(
        oracle.get_ydata(), np.maximum(0, 1 - (1 - r) / x.clip(1e-300)) * (x > 0), atol=1e-12
    )
    assert oracle.get_label() == f"oracle (AURC = {rep['aurc'] - rep['eaurc']:.3f})"
    random = _line(ax, "random")
    np.testing.assert_allclose(random.get_ydata(), r, rtol=1e-12)
    assert ax.get_legend().get_title().get_text() == "one_minus_max_prob_bma"

    a = up.accuracy_coverage(case["report"]).ax_
    assert _line(a, "AUAC").get_label() == f"AUAC = {rep['auac']:.3f}"
    np.testing.assert_allclose(_line(a, "random").get_ydata(), rep["accuracy"], rtol=1e-12)

    g = up.risk_coverage(case["pred"], case["y"], sample_weight=case["w"], risk="generalized")
    line = _line(g.ax_, "AUGRC")
    assert line.get_label() == f"AUGRC = {rep['augrc']:.3f}"
    assert (line.get_xdata()[0], line.get_ydata()[0]) == (0.0, 0.0)


@pytest.mark.parametrize("name", ["roc_ood", "pr_ood", "roc_correctness", "pr_correctness"])
def test_detector_curves_match_sklearn_and_metrics(case: dict[str, Any], name: str) -> None:
    rep = case["report"]
    u = case["pred"].estimate("entropy_bma")
    errors = case["p"].argmax(axis=1) != case["y"]
    truth = case["ood"] if name.endswith("ood") else errors
    d = getattr(up, name)(
        case["pred"], case["y"], ood=case["ood"], sample_weight=case["w"], estimator="entropy_bma"
    )
    metric = {
        "roc_ood": "auroc_ood",
        "pr_ood": "aupr_ood",
        "roc_correctness": "auroc_correctness",
        "pr_correctness": "aupr_error",
    }[name]
    value = rep.by_estimator[metric]["entropy_bma"]
    if name.startswith("roc"):
        x, yv, _ = roc_curve(truth, u, sample_weight=case["w"], drop_intermediate=False)
        line = _line(d.ax_, "AUROC")
        assert line.get_label() == f"AUROC = {value:.3f}"
        np.testing.assert_array_equal(_line(d.ax_, "chance").get_ydata(), [0, 1])
    else:
        yv, x, _ = precision_recall_curve(
            truth, u, sample_weight=case["w"], drop_intermediate=False
        )
        line = _line(d.ax_, "AP")
        assert line.get_label() == f"AP = {value:.3f}"
        prevalence = np.sum(case["w"] * truth) / np.sum(case["w"])
        np.testing.assert_allclose(_line(d.ax_, "chance").get_ydata(), prevalence, rtol=1e-12)
    np.testing.assert_allclose(line.get_xdata(), x, atol=1e-12)
    np.testing.assert_allclose(line.get_ydata(), yv, atol=1e-12)


def test_every_source_gives_the_same_data(case: dict[str, Any]) -> None:
    rep, doc = case["report"], case["doc"]
    curve = rep.curves["roc_ood"]
    ref = up.roc_ood(curve).to_dict()
    assert up.roc_ood(rep).to_dict() == ref
    assert up.roc_ood(doc).to_dict() == ref
    assert up.roc_ood(doc["curves"]["roc_ood"]).to_dict() == ref
    assert up.roc_ood(SimpleNamespace(raw=doc)).to_dict() == ref
    again = up.roc_ood(case["pred"], case["y"], ood=case["ood"], sample_weight=case["w"])
    assert again.to_dict() == ref
    assert json.loads(json.dumps(ref))["curve"]["auroc"] == rep["auroc_ood"]


def test_estimators_heatmap_cells_are_the_table(case: dict[str, Any]) -> None:
    rep = case["report"]
    d = up.estimators({"by_estimator": case["doc"]["by_estimator"]})
    table = rep.by_estimator
    assert d.metrics == tuple(table)
    assert d.estimators == ("one_minus_max_prob_bma", "entropy_bma", "margin")
    texts = [t.get_text() for t in d.ax_.texts]
    expected = []
    for e in d.estimators:
        for m in d.metrics:
            v = table[m][e]
            expected.append("—" if v is None else f"{v:.3g}")
    assert texts == expected
    # colour: rescaled per metric, flipped where lower is better (independent)
    image = np.ma.filled(d.ax_.images[0].get_array(), np.nan)
    for j, m in enumerate(d.metrics):
        col = np.array(
            [np.nan if table[m][e] is None else table[m][e] for e in d.estimators], float
        )
        lo, hi = np.nanmin(col), np.nanmax(col)
        s = np.full_like(col, 0.5) if hi == lo else (col - lo) / (hi - lo)
        if uqcore.registry.get(m, "classification").direction == "lower":
            s = 1 - s
        np.testing.assert_allclose(image[:, j], s, rtol=1e-12, equal_nan=True)
    labels = [t.get_text() for t in d.ax_.get_xticklabels()]
    assert "aurc ↓" in labels and "auroc_ood ↑" in labels
    # the Report itself, and a prediction with its labels, give the same table
    assert up.estimators(rep).to_dict() == d.to_dict()
    sub = up.estimators(
        case["pred"],
        case["y"],
        sample_weight=case["w"],
        ood=case["ood"],
        metrics=["aurc", "auroc_ood"],
    )
    assert sub.metrics == ("aurc", "auroc_ood")
    assert sub.values[1] == (table["aurc"]["entropy_bma"], table["auroc_ood"]["entropy_bma"])


def test_images_are_valid_and_deterministic(case: dict[str, Any]) -> None:
    a = up.pr_correctness(case["doc"])
    b = up.pr_correctness(case["doc"])
    svg = a.to_bytes("svg")
    assert svg == b.to_bytes("svg")
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    png = a.to_bytes("png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == b.to_bytes("png")
    with pytest.raises(ValueError, match="format"):
        a.to_bytes("jpg")  # type: ignore[arg-type]


def test_clear_errors(case: dict[str, Any]) -> None:
    pred, y = case["pred"], case["y"]
    with pytest.raises(UQValidationError, match=r"needs its labels"):
        up.reliability(pred)
    with pytest.raises(UQValidationError, match="y applies to a prediction only"):
        up.roc_correctness(case["report"], y)
    with pytest.raises(UQValidationError, match="roc_ood needs OOD flags"):
        up.roc_ood(pred, y)
    plain = uqcore.evaluate(pred, y, ["aurc"])
    with pytest.raises(UQValidationError, match="holds no 'risk_coverage_curve' curve"):
        up.risk_coverage(plain)
    with pytest.raises(UQValidationError, match=r"submit with analyses\.curves"):
        up.pr_ood({"values": {}, "curves": {}})
    with pytest.raises(UQValidationError, match="'error' positive"):
        up.roc_ood(case["report"].curves["roc_correctness"])
    with pytest.raises(UQValidationError, match="estimator 'one_minus_max_prob_bma', not 'margin'"):
        up.roc_correctness(case["report"], estimator="margin")
    with pytest.raises(TypeError, match="unexpected option"):
        up.roc_correctness(case["report"], colour="red")
    with pytest.raises(UQValidationError, match="no by_estimator table"):
        up.estimators(plain)
    with pytest.raises(UQValidationError, match="no row for metric"):
        up.estimators(case["report"], metrics=["ece"])
    with pytest.raises(UQValidationError, match="cannot find"):
        up.pr_correctness(42)
    with pytest.raises(UQValidationError, match="risk must be"):
        up.risk_coverage(case["report"], risk="total")  # type: ignore[arg-type]


def test_import_does_not_load_matplotlib() -> None:
    code = "import sys, uqcore.plots; assert 'matplotlib' not in sys.modules, 'loaded'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
