"""The regression figures and the stability figure: what is drawn is the curve's data."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np
import pytest
import scipy.stats

import uqcore
from tests.factories import make_classification, make_prediction
from uqcore import metric
from uqcore import predictions as P
from uqcore._validation import UQValidationError
from uqcore.curves import curve_to_json, curves
from uqcore.plots import PLOTS
from uqcore.plots import regression as plots
from uqcore.stability import convergence

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def data() -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    n = 240
    mu = rng.normal(size=n)
    s = np.exp(rng.normal(scale=0.4, size=n))
    y = mu + 1.3 * s * rng.normal(size=n) + 0.2
    return P.Gaussian(mu, s), y, mu, s


def shoelace(vertices: np.ndarray) -> float:
    x, y = vertices[:, 0], vertices[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def shaded_area(ax: Any) -> float:
    (coll,) = [c for c in ax.collections if c.get_label().startswith("Miscalibration area")]
    return sum(shoelace(p.vertices) for p in coll.get_paths())


def line(ax: Any, label: str) -> Any:
    (found,) = [ln for ln in ax.get_lines() if ln.get_label().startswith(label)]
    return found


def test_registered_plots() -> None:
    names = ["calibration", "pit", "sparsification", "group_calibration", "stratified"]
    for name in [*names, "interval_width"]:
        spec = PLOTS[name]
        assert spec.task == "regression" and spec.scope == "submission" and spec.curves
        assert spec.function is getattr(uqcore.plots, name)
    st = PLOTS["stability"]
    assert st.task is None and st.curves == () and st.result_field == "stability"
    assert set(plots.__all__) >= {*names, "stability", "interval_width", "CalibrationDisplay"}


def test_calibration_draws_the_curve_and_its_miscalibration_area(data: Any) -> None:
    pred, y, _, _ = data
    d = plots.calibration(pred, y)
    assert isinstance(d, plots.CalibrationDisplay) and len(d.axes_ or []) == 2
    held = curves(pred, y, ["calibration_curve", "quantile_calibration_curve"])
    for ax, key, prop in zip(d.axes_ or [], held, ["interval", "quantile"], strict=True):
        model = line(ax, "Model")
        np.testing.assert_array_equal(model.get_xdata(), held[key].expected)
        np.testing.assert_array_equal(model.get_ydata(), held[key].observed)
        area = metric("miscalibration_area", pred, y, prop_type=prop)
        assert shaded_area(ax) == pytest.approx(area, rel=1e-10, abs=1e-14)
        assert f"{area:.3f}" in ax.get_legend().get_texts()[1].get_text()
        assert ax.get_xlabel() and ax.get_ylabel() and "calibration" in ax.get_title()


def test_calibration_area_equals_uncertainty_toolbox(data: Any) -> None:
    uct = pytest.importorskip("uncertainty_toolbox")
    pred, y, mu, s = data
    d = plots.calibration(pred, y, prop_type="interval", compat="uncertainty_toolbox")
    assert d.n_axes == 1
    expected = uct.miscalibration_area(mu, s, y)
    assert shaded_area(d.ax_) == pytest.approx(expected, rel=1e-10)


def test_calibration_of_quantiles_is_completed_to_0_and_1() -> None:
    pred, y = make_prediction("quantiles", 150, seed=2)
    d = plots.calibration(pred, y, prop_type="interval")
    x = line(d.ax_, "Model").get_xdata()
    assert x[0] == 0.0 and x[-1] == 1.0
    assert shaded_area(d.ax_) == pytest.approx(metric("miscalibration_area", pred, y), rel=1e-10)


def test_pit_bars_are_the_histogram(data: Any) -> None:
    pred, y, mu, s = data
    d = plots.pit(pred, y, n_bins=12)
    counts, _ = np.histogram(scipy.stats.norm.cdf(y, mu, s), bins=12, range=(0, 1))
    heights = [p.get_height() for p in d.ax_.patches]
    np.testing.assert_allclose(heights, counts)
    labels = [c.get_label() for c in d.ax_.collections]
    assert "95% band of a uniform PIT" in labels
    assert d.ax_.get_xlabel() == "PIT value F(y)" and d.ax_.get_title().startswith("PIT")


def test_sparsification_draws_model_oracle_random(data: Any) -> None:
    pred, y, _, _ = data
    d = plots.sparsification(pred, y)
    c = d.curve
    np.testing.assert_array_equal(line(d.ax_, "Model").get_ydata(), c.model)
    np.testing.assert_array_equal(line(d.ax_, "Oracle").get_ydata(), c.oracle)
    np.testing.assert_array_equal(line(d.ax_, "Random").get_ydata(), c.random)
    np.testing.assert_array_equal(line(d.ax_, "Model").get_xdata(), c.fractions)
    assert d.ause == pytest.approx(metric("ause", pred, y, grid=100), rel=1e-10)
    assert "MAE" in d.ax_.get_ylabel()


def test_group_calibration_line_and_band(data: Any) -> None:
    pred, y, _, _ = data
    d = plots.group_calibration(pred, y, seed=3, num_trials=5)
    c = d.curve
    ln = line(d.ax_, "Worst group")
    np.testing.assert_array_equal(ln.get_xdata(), c.group_sizes)
    np.testing.assert_array_equal(ln.get_ydata(), c.score_mean)
    (band,) = [b for b in d.ax_.collections if b.get_label() == "± 1 s.e."]
    verts = band.get_paths()[0].vertices
    top = np.asarray(c.score_mean) + np.asarray(c.score_stderr)
    assert np.max(verts[:, 1]) == pytest.approx(np.max(top))


def test_stratified_bars_are_the_metrics_per_group(data: Any) -> None:
    pred, y, mu, _ = data
    groups = np.arange(240) % 4
    d = plots.stratified(pred, y, groups=groups, metrics=["mae", "rmse"])
    assert len(d.axes_ or []) == 2
    mae = [np.abs(y - mu)[groups == g].mean() for g in range(4)]
    np.testing.assert_allclose([p.get_height() for p in d.axes_[0].patches], mae, rtol=1e-12)
    assert d.axes_[1].get_title() == "rmse per group"
    with pytest.raises(UQValidationError, match="groups"):
        plots.stratified(pred, y)


def test_interval_width_points(data: Any) -> None:
    pred, y, mu, s = data
    d = plots.interval_width(pred, y, alpha=0.9)
    pts = d.ax_.collections[0].get_offsets()
    np.testing.assert_array_equal(pts[:, 0], s)
    np.testing.assert_array_equal(pts[:, 1], np.abs(y - mu))
    lam = np.quantile(np.abs(y - mu) / s, 0.9)
    ln = line(d.ax_, "λ·u")
    assert ln.get_ydata()[1] / ln.get_xdata()[1] == pytest.approx(lam, rel=1e-12)
    assert "n-MeRCI" in d.ax_.get_title()


def stability_doc(data: Any) -> dict[str, Any]:
    pred, y, _, _ = data
    return convergence(pred, y, ["nll", "mae"], repeats=12, seed=1).to_dict()


def test_stability_draws_path_and_bias(data: Any) -> None:
    doc = stability_doc(data)
    d = plots.stability(doc, metrics=["mae", "nll"])
    assert len(d.axes_ or []) == 4
    for k, m in enumerate(["mae", "nll"]):
        e = doc["results"][m]
        path = line(d.axes_[2 * k], "Nested subsets")
        np.testing.assert_array_equal(path.get_xdata(), doc["sizes"])
        np.testing.assert_allclose(path.get_ydata(), e["path"])
        bias = line(d.axes_[2 * k + 1], "Mean − full-set value")
        np.testing.assert_allclose(bias.get_ydata(), np.asarray(e["mean"]) - e["value"])
        assert d.axes_[2 * k].get_title() == f"{m}: convergence path"
        assert d.axes_[2 * k + 1].get_title() == f"{m}: bias of the mean"
    # default metrics: those of xiong2024 Fig. 4 that the study holds
    assert plots.stability(doc).metrics == ("nll",)


def test_stability_sources(data: Any) -> None:
    pred, y, _, _ = data
    result = convergence(pred, y, ["nll"], repeats=8, seed=2)
    doc = result.to_dict()

    class Held:
        def __init__(self) -> None:
            self.raw = {"stability": doc}

    for source in (result, doc, {"stability": doc, "curves": {}}, Held()):
        d = plots.stability(source)
        np.testing.assert_allclose(
            line(d.axes_[0], "Nested subsets").get_ydata(), doc["results"]["nll"]["path"]
        )
    computed = plots.stability(pred, y, metrics=["nll"], repeats=8, seed=2)
    assert computed.entries["nll"]["path"] == doc["results"]["nll"]["path"]
    with pytest.raises(UQValidationError, match="no stability study"):
        plots.stability({"stability": None})
    with pytest.raises(UQValidationError, match="holds no 'ause'"):
        plots.stability(doc, metrics=["ause"])


def test_images_png_and_deterministic_svg(data: Any) -> None:
    pred, y, _, _ = data
    d = plots.calibration(pred, y)
    png = d.to_bytes("png")
    assert png.startswith(PNG) and 10_000 < len(png) < 1_000_000
    svg = d.to_bytes("svg")
    assert ET.fromstring(svg).tag.endswith("svg")
    assert plots.calibration(pred, y).to_bytes("svg") == svg
    st = plots.stability(stability_doc(data))
    assert st.to_bytes("png").startswith(PNG)


def test_draws_on_the_callers_axes(data: Any) -> None:
    from matplotlib.figure import Figure

    pred, y, _, _ = data
    fig = Figure()
    ax = fig.add_subplot()
    d = plots.pit(pred, y, ax=ax)
    assert d.ax_ is ax and d.figure_ is fig and len(ax.patches) == 10
    fig2 = Figure()
    axes = fig2.subplots(1, 2)
    assert plots.calibration(pred, y, ax=list(axes)).axes_ == list(axes)
    with pytest.raises(ValueError, match="2 axes"):
        plots.calibration(pred, y, ax=ax)


def test_json_and_report_sources_draw_the_same_data(data: Any) -> None:
    pred, y, _, _ = data
    groups = np.arange(240) % 3
    report = uqcore.evaluate(pred, y, metrics=["mae"], curves=True, groups=groups, seed=1)
    doc = {
        "curves": json.loads(json.dumps({k: curve_to_json(v) for k, v in report.curves.items()}))
    }

    class Held:
        raw = doc

    for name in [
        "calibration",
        "pit",
        "sparsification",
        "group_calibration",
        "stratified",
        "interval_width",
    ]:
        draw = getattr(plots, name)
        direct = draw(report)
        for source in (doc, Held()):
            again = draw(source)
            for a, b in zip(direct.axes_ or [], again.axes_ or [], strict=True):
                for la, lb in zip(a.get_lines(), b.get_lines(), strict=True):
                    np.testing.assert_allclose(la.get_ydata(), lb.get_ydata())
                assert [p.get_height() for p in a.patches] == [p.get_height() for p in b.patches]
    one = curve_to_json(report.curves["pit_histogram"])
    assert plots.pit(one).curve == report.curves["pit_histogram"]
    assert plots.calibration(report.curves["calibration_curve"]).n_axes == 1


def test_wrong_inputs(data: Any) -> None:
    pred, y, _, _ = data
    cls, labels, _ = make_classification("probs", 30)
    with pytest.raises(UQValidationError, match="regression curve"):
        plots.pit(cls, labels)
    with pytest.raises(UQValidationError, match="targets y"):
        plots.sparsification(pred)
    report = uqcore.evaluate(pred, y, metrics=["mae"], curves=True)
    with pytest.raises(UQValidationError, match="no 'stratified' curve"):
        plots.stratified(report)
    with pytest.raises(UQValidationError, match="only with a prediction"):
        plots.pit(report, y)
    point, y2 = make_prediction("point_uncertainty", 30)
    with pytest.raises(UQValidationError, match="cdf"):
        plots.pit(point, y2)
    with pytest.raises(UQValidationError, match="cannot find"):
        plots.interval_width(42)


def test_importing_plots_does_not_load_matplotlib() -> None:
    code = "import sys, uqcore.plots; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
