"""The calibration conventions by name, against the peers' own functions.

``bins_closed="left"`` against torchmetrics' ``multiclass_calibration_error``;
``bins_closed="left_last_closed"`` and the metric ``ace`` against netcal's ``ECE``, ``MCE`` and
``ACE``; ``ties="split"`` against torch-uncertainty's ``AdaptiveCalibrationError``. The inputs
are tie-heavy, with confidences exactly on the bin edges, where the conventions differ.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from tests.peers import torch_uncertainty_metrics
from uqcore import UQValidationError, evaluate, metric, registry
from uqcore import predictions as P
from uqcore.classification import reliability_diagram

C = 4


def _on_grid(seed: int, n: int, denominator: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidences k/denominator above 1/C (bin edges b/B among them when B
    divides the denominator), a few of exactly 1, and labels that make them about right."""
    rng = np.random.default_rng(seed)
    lo = denominator // C + 1
    conf = rng.integers(lo, denominator + 1, size=n) / denominator
    conf[:5] = 1.0
    rest = (1.0 - conf) / (C - 1)
    p = np.column_stack([conf, rest, rest, rest])
    right = rng.random(n) < conf
    y = np.where(right, 0, rng.integers(1, C, size=n))
    return p, y


def _ours(name: str, p: np.ndarray, y: np.ndarray, w: Any = None, **options: Any) -> Any:
    return metric(name, P.Probs(p), y, sample_weight=w, **options)


# -- bins_closed="left": torchmetrics ------------------------------------------------------------
def _torchmetrics(p: np.ndarray, y: np.ndarray, n_bins: int, norm: str) -> float:
    torch = pytest.importorskip("torch")
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    return float(
        tmf.multiclass_calibration_error(
            torch.as_tensor(p),
            torch.as_tensor(y),
            num_classes=p.shape[1],
            n_bins=n_bins,
            norm=norm,
        )
    )


@pytest.mark.parametrize("n_bins", [4, 5, 8, 10])
@pytest.mark.parametrize("seed", [1, 2])
def test_left_closed_bins_equal_torchmetrics(n_bins: int, seed: int) -> None:
    # confidences k/40 hit every edge b/B exactly; torchmetrics bins in float32, whose edges
    # and confidences are the float32 roundings of the same numbers for these B
    p, y = _on_grid(seed, 400, 40)
    for name, norm in (("ece", "l1"), ("mce", "max"), ("ece_l2", "l2")):
        extra = {"debias": False} if name == "ece_l2" else {}  # torchmetrics does not debias
        ours = _ours(name, p, y, n_bins=n_bins, bins_closed="left", **extra)
        assert ours == pytest.approx(_torchmetrics(p, y, n_bins, norm), abs=2e-7), name
    # and the right-closed default differs on these inputs
    assert _ours("ece", p, y, n_bins=n_bins) != pytest.approx(
        _ours("ece", p, y, n_bins=n_bins, bins_closed="left"), abs=1e-4
    )


def test_left_closed_bins_put_a_confidence_of_one_in_a_bin_of_its_own() -> None:
    p = np.array([[1.0, 0.0], [0.75, 0.25], [0.5, 0.5], [0.75, 0.25]])
    y = np.array([0, 1, 0, 0])
    d = reliability_diagram(P.Probs(p), y, n_bins=4, bins_closed="left")
    assert d.count == (0, 0, 1, 2, 1)  # [0.5, 0.75) holds 0.5; [0.75, 1) the two 0.75
    assert d.lower == (0.0, 0.25, 0.5, 0.75, 1.0) and d.upper[-1] == 1.0
    assert d.bins_closed == "left"
    right = reliability_diagram(P.Probs(p), y, n_bins=4)
    assert right.count == (0, 1, 2, 1)  # (0.25, 0.5] holds 0.5; (0.5, 0.75] the 0.75s
    assert _ours("ece", p, y, n_bins=4, bins_closed="left") == pytest.approx(
        _torchmetrics(p, y, 4, "l1"), abs=1e-7
    )
    # netcal's rule keeps 1 in the last bin
    last = reliability_diagram(P.Probs(p), y, n_bins=4, bins_closed="left_last_closed")
    assert last.count == (0, 0, 1, 3)


def test_left_closed_integer_weights_equal_repeated_rows_of_torchmetrics() -> None:
    p, y = _on_grid(3, 120, 40)
    counts = np.random.default_rng(4).integers(0, 4, size=120)
    counts[5] = 1
    idx = np.repeat(np.arange(120), counts)
    for name, norm in (("ece", "l1"), ("mce", "max")):
        ours = _ours(name, p, y, counts.astype(float), n_bins=10, bins_closed="left")
        assert ours == pytest.approx(_torchmetrics(p[idx], y[idx], 10, norm), abs=2e-7)


# -- bins_closed="left_last_closed" and ace: netcal -----------------------------------------------
def _netcal(cls: str, p: np.ndarray, y: np.ndarray, n_bins: int) -> float:
    netcal_metrics = pytest.importorskip("netcal.metrics")
    return float(getattr(netcal_metrics, cls)(bins=n_bins).measure(p, y))


@pytest.mark.parametrize("n_bins", [4, 8, 15, 16])
@pytest.mark.parametrize("seed", [5, 6])
def test_left_last_closed_bins_and_ace_equal_netcal(n_bins: int, seed: int) -> None:
    # netcal's edges b·(1/B) equal b/B for these B; the confidences k/(2B) hit every edge
    p, y = _on_grid(seed, 300, 2 * n_bins)
    assert len(np.unique(y)) > 2  # netcal reads two distinct labels as a binary task
    opts = {"n_bins": n_bins, "bins_closed": "left_last_closed"}
    assert _ours("ece", p, y, **opts) == pytest.approx(_netcal("ECE", p, y, n_bins), abs=1e-13)
    assert _ours("mce", p, y, **opts) == pytest.approx(_netcal("MCE", p, y, n_bins), abs=1e-13)
    assert _ours("ace", p, y, **opts) == pytest.approx(_netcal("ACE", p, y, n_bins), abs=1e-13)


@pytest.mark.parametrize("seed", [7, 8])
def test_ace_equals_netcal_on_continuous_confidences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(500, 5))
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    y = rng.integers(0, 5, size=500)
    for n_bins in (10, 15):
        # away from the edges every closed side gives the same bins
        for closed in ("right", "left", "left_last_closed"):
            assert _ours("ace", p, y, n_bins=n_bins, bins_closed=closed) == pytest.approx(
                _netcal("ACE", p, y, n_bins), abs=1e-13
            )


def test_ace_with_weights_matches_the_formula_and_repeated_rows() -> None:
    p, y = _on_grid(9, 150, 30)
    w = np.random.default_rng(10).uniform(0.0, 2.0, size=150)
    w[::7] = 0.0
    conf, right = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    bins = np.clip(np.ceil(conf * 15).astype(int) - 1, 0, 14)  # right-closed, k/30 grid exact
    gaps = []
    for b in range(15):
        sel = (bins == b) & (w > 0)
        if sel.any():
            gaps.append(
                abs(np.average(right[sel], weights=w[sel]) - np.average(conf[sel], weights=w[sel]))
            )
    assert _ours("ace", p, y, w) == pytest.approx(float(np.mean(gaps)), rel=1e-12)
    counts = np.random.default_rng(11).integers(0, 3, size=150)
    counts[0] = 1
    idx = np.repeat(np.arange(150), counts)
    assert _ours("ace", p, y, counts.astype(float)) == pytest.approx(
        _ours("ace", p[idx], y[idx]), rel=1e-12
    )
    assert _netcal("ACE", p[idx], y[idx], 15) == pytest.approx(
        _ours("ace", p, y, counts.astype(float), bins_closed="left_last_closed"), abs=1e-13
    )


# -- ties="split": torch-uncertainty ---------------------------------------------------------------
def _tu_adaptive(conf: np.ndarray, right: np.ndarray, n_bins: int, norm: str) -> float:
    """torch-uncertainty's multiclass ``AdaptiveCalibrationError`` on given confidences and
    (possibly fractional) outcomes, set as its state as its ``update`` would set them."""
    tu = torch_uncertainty_metrics()
    import torch

    m = tu.AdaptiveCalibrationError(task="multiclass", num_classes=C, num_bins=n_bins, norm=norm)
    m.confidences.append(torch.as_tensor(conf).float())
    m.accuracies.append(torch.as_tensor(right).float())
    with warnings.catch_warnings():  # "compute called before update": the state is set above
        warnings.filterwarnings("ignore", "The ``compute`` method", UserWarning)
        return float(m.compute())


def _tie_averaged(conf: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Each row's outcome replaced by the mean outcome of its tied confidences: the peer's
    bin sums averaged over the orders its sort may give to tied rows."""
    out = np.empty_like(right)
    for v in np.unique(conf):
        out[conf == v] = right[conf == v].mean()
    return out


def _peer_adaptive_from_probs(p: np.ndarray, y: np.ndarray, n_bins: int, norm: str) -> float:
    tu = torch_uncertainty_metrics()
    import torch

    m = tu.AdaptiveCalibrationError(task="multiclass", num_classes=C, num_bins=n_bins, norm=norm)
    m.update(torch.as_tensor(p), torch.as_tensor(y))
    return float(m.compute())


@pytest.mark.parametrize(("n", "n_bins"), [(100, 10), (103, 15), (37, 15), (15, 15)])
def test_split_ties_equal_torch_uncertainty_without_ties(n: int, n_bins: int) -> None:
    rng = np.random.default_rng(n)
    # distinct confidences k/4096 above 1/C: exact in the peer's float32
    conf = rng.choice(np.arange(1100, 4097), size=n, replace=False) / 4096
    rest = (1.0 - conf) / (C - 1)
    p = np.column_stack([conf, rest, rest, rest])
    y = rng.integers(0, C, size=n)
    assert len(np.unique(p.max(axis=1))) == n  # no ties
    for name, norm in (("ece_adaptive", "l1"), ("mce", "max")):
        opts = {"binning": "mass"} if name == "mce" else {}
        ours = _ours(name, p, y, n_bins=n_bins, ties="split", **opts)
        assert ours == pytest.approx(_peer_adaptive_from_probs(p, y, n_bins, norm), abs=2e-7)


@pytest.mark.parametrize(("seed", "n", "n_bins"), [(12, 200, 15), (13, 97, 10), (14, 64, 7)])
def test_split_ties_with_ties_are_the_peer_averaged_over_tie_orders(
    seed: int, n: int, n_bins: int
) -> None:
    p, y = _on_grid(seed, n, 16)  # few distinct confidences, tied blocks straddle the cuts
    conf, right = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    avg = _tie_averaged(conf, right)
    for name, norm in (("ece_adaptive", "l1"), ("mce", "max"), ("ece_l2", "l2")):
        opts: dict[str, Any] = {} if name == "ece_adaptive" else {"binning": "mass"}
        if name == "ece_l2":
            opts["debias"] = False
        ours = _ours(name, p, y, n_bins=n_bins, ties="split", **opts)
        assert ours == pytest.approx(_tu_adaptive(conf, avg, n_bins, norm), abs=2e-7)
    # keeping ties together differs on these inputs
    assert _ours("ece_adaptive", p, y, n_bins=n_bins) != pytest.approx(
        _ours("ece_adaptive", p, y, n_bins=n_bins, ties="split"), abs=1e-6
    )


def test_split_ties_integer_weights_are_repeated_rows_of_the_peer() -> None:
    p, y = _on_grid(15, 80, 16)
    counts = np.random.default_rng(16).integers(0, 4, size=80)
    counts[0] = 1
    idx = np.repeat(np.arange(80), counts)
    conf, right = p[idx].max(axis=1), (p[idx].argmax(axis=1) == y[idx]).astype(float)
    ours = _ours("ece_adaptive", p, y, counts.astype(float), ties="split")
    assert ours == pytest.approx(_tu_adaptive(conf, _tie_averaged(conf, right), 15, "l1"), abs=2e-7)


def test_split_ties_with_fewer_rows_than_bins() -> None:
    # the peer's empty bins give NaN; here the empty bins count for nothing
    p, y = _on_grid(17, 6, 16)
    assert np.isnan(_peer_adaptive_from_probs(p, y, 10, "l1"))
    conf, right = p.max(axis=1), (p.argmax(axis=1) == y).astype(float)
    per_row = np.abs(right - conf).mean()  # one row per bin
    if len(np.unique(conf)) == 6:
        assert _ours("ece_adaptive", p, y, n_bins=10, ties="split") == pytest.approx(per_row)
    assert np.isfinite(_ours("ece_adaptive", p, y, n_bins=10, ties="split"))


# -- the options under weights and in the registry -------------------------------------------------
_OPTION_CASES = [
    ("ece", {"bins_closed": "left"}, True),
    ("ece", {"bins_closed": "left_last_closed"}, True),
    ("mce", {"bins_closed": "left"}, True),
    ("ece_l2", {"bins_closed": "left"}, False),
    ("ace", {}, True),
    ("ace", {"bins_closed": "left"}, True),
    ("ece_adaptive", {"ties": "split"}, False),
    ("ece", {"binning": "mass", "ties": "split"}, False),
    ("mce", {"binning": "mass", "ties": "split"}, False),
    ("ece_l2", {"binning": "mass", "ties": "split"}, False),
]


@pytest.mark.parametrize(("name", "options", "scale_free"), _OPTION_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_options_keep_the_weight_invariances(
    name: str, options: dict[str, Any], scale_free: bool, ties: bool
) -> None:
    p, y = _on_grid(18, 60, 30) if ties else _on_grid(18, 60, 10**6)
    rng = np.random.default_rng(19)
    w = rng.uniform(0.2, 3.0, size=60)
    value = _ours(name, p, y, w, **options)
    perm = rng.permutation(60)
    assert _ours(name, p[perm], y[perm], w[perm], **options) == pytest.approx(value, rel=1e-12)
    assert _ours(name, p, y, np.ones(60), **options) == pytest.approx(
        _ours(name, p, y, **options), rel=1e-12
    )
    w0 = w.copy()
    w0[::4] = 0.0
    keep = w0 > 0
    assert _ours(name, p, y, w0, **options) == pytest.approx(
        _ours(name, p[keep], y[keep], w0[keep], **options), rel=1e-12
    )
    counts = rng.integers(0, 4, size=60)
    counts[0] = 1
    idx = np.repeat(np.arange(60), counts)
    assert _ours(name, p, y, counts.astype(float), **options) == pytest.approx(
        _ours(name, p[idx], y[idx], **options), rel=1e-12
    )
    if scale_free:
        assert _ours(name, p, y, 3.7 * w, **options) == pytest.approx(value, rel=1e-12)


def test_option_values_are_checked() -> None:
    p, y = _on_grid(20, 20, 10)
    with pytest.raises(UQValidationError, match="bins_closed must be one of 'right', 'left',"):
        _ours("ece", p, y, bins_closed="both")
    with pytest.raises(UQValidationError, match="bins_closed applies to binning='width'"):
        _ours("ece", p, y, binning="mass", bins_closed="left")
    with pytest.raises(UQValidationError, match="ties applies to binning='mass'"):
        _ours("mce", p, y, ties="split")
    with pytest.raises(UQValidationError, match="ties must be one of 'together', 'split'"):
        _ours("ece_adaptive", p, y, ties="apart")


def test_new_options_are_in_the_registry_defaults_and_the_report() -> None:
    spec = registry.get("ece", "classification")
    assert spec.defaults["bins_closed"] == "right" and spec.defaults["ties"] == "together"
    assert registry.get("ace", "classification").defaults == {"n_bins": 15, "bins_closed": "right"}
    assert "ace" in registry.names("classification")
    p, y = _on_grid(21, 50, 16)
    report = evaluate(
        P.Probs(p),
        y,
        ["ece", "ece_adaptive", "ace"],
        params={
            "ece": {"bins_closed": "left"},
            "ece_adaptive": {"ties": "split"},
            "ace": {"n_bins": 8, "bins_closed": "left_last_closed"},
        },
    )
    assert report.params["ece"]["bins_closed"] == "left"
    assert report.params["ece_adaptive"]["ties"] == "split"
    assert report.params["ace"] == {"n_bins": 8, "bins_closed": "left_last_closed"}
    assert report["ace"] == pytest.approx(_netcal("ACE", p, y, 8), abs=1e-13)
