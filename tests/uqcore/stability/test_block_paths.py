"""The table of block paths agrees with the registry and with the metric implementations: every
key is a registered regression metric, and every reason a block path reports for an undefined
resample is the text of the implementation's own warning."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pytest

from uqcore import predictions as P
from uqcore import registry
from uqcore.batch import Batch
from uqcore.stability import blocks
from uqcore.stability.blocks.table import FIRST

# Inputs on which each metric whose block path reports a reason is undefined, for the reason
# that path reports.
_UNDEFINED_ON: dict[str, tuple[Any, Any]] = {
    # a constant uncertainty
    "spearman": (P.PointUncertainty(np.arange(6.0), np.ones(6)), np.zeros(6)),
    "pearson": (P.PointUncertainty(np.arange(6.0), np.ones(6)), np.zeros(6)),
    # every error zero
    "ause": (P.PointUncertainty(np.zeros(6), np.arange(1.0, 7.0)), np.zeros(6)),
    "aurg": (P.PointUncertainty(np.zeros(6), np.arange(1.0, 7.0)), np.zeros(6)),
    # a constant point prediction; constant targets
    "corr": (P.PointUncertainty(np.zeros(6), np.ones(6)), np.arange(6.0)),
    "r2": (P.PointUncertainty(np.arange(6.0), np.ones(6)), np.ones(6)),
    # equal absolute errors: Q_alpha(|e|) = MAE, so the normaliser is 0
    "nmerci": (P.PointUncertainty(np.zeros(6), np.arange(1.0, 7.0)), np.ones(6)),
    # constant targets: the range R is 0
    "cwc": (P.Interval(np.zeros(6), np.ones(6), level=0.9), np.ones(6)),
    # constant targets: the climatological reference scores 0
    "crps_skill": (P.Gaussian(np.zeros(6), np.ones(6)), np.ones(6)),
    "check_score_skill": (P.Gaussian(np.zeros(6), np.ones(6)), np.ones(6)),
    "interval_score_skill": (P.Interval(np.zeros(6), np.ones(6), level=0.9), np.ones(6)),
    "nll_skill": (P.Gaussian(np.zeros(6), np.ones(6)), np.ones(6)),
}


def _warning(name: str, pred: Any, y: Any) -> str:
    """The text of the implementation's UndefinedMetricWarning (the value is None)."""
    spec = registry.get(name, "regression")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = registry.call(spec, Batch(pred, y))
    assert value is None or (isinstance(value, dict) and value["value"] is None), name
    texts = [str(w.message) for w in caught if w.category is registry.UndefinedMetricWarning]
    assert len(texts) == 1, (name, texts)
    return texts[0]


def test_every_block_path_is_a_registered_regression_metric() -> None:
    regression = set(registry.names("regression"))
    assert set(blocks.PATHS) <= regression, sorted(set(blocks.PATHS) - regression)
    assert set(FIRST) <= set(blocks.PATHS)
    for name in blocks.PATHS:
        assert registry.get(name, "regression").task == "regression"


def test_every_reported_reason_has_an_input_here() -> None:
    with_reason = {n for n, p in blocks.PATHS.items() if p.why_undefined is not None}
    assert with_reason == set(_UNDEFINED_ON)
    for name in blocks.PATHS:
        assert (blocks.undefined_reason(name) is None) == (name not in with_reason)


@pytest.mark.parametrize("name", sorted(_UNDEFINED_ON))
def test_block_path_reason_is_the_implementations_warning(name: str) -> None:
    pred, y = _UNDEFINED_ON[name]
    text = _warning(name, pred, y)
    if name == "nmerci":
        # the implementation also gives the normaliser's value, which the block path does not
        text = re.sub(r" = \S+ is not positive", " is not positive", text)
    assert blocks.undefined_reason(name) == text


def test_engine_reports_the_block_paths_reason() -> None:
    """A resample on which r2 is undefined: the block path and the per-resample path report
    the same text."""
    from uqcore.stability._engine import Engine, Resample, select_metrics

    pred = P.PointUncertainty(np.arange(6.0), np.arange(1.0, 7.0))
    y = np.array([1.0, 2.5, 3.0, 2.0, 3.5, 4.0])  # no ties: the block path applies
    counts = np.array([[3.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0] * 6])  # one row: y constant
    chosen, _ = select_metrics([pred], ["r2"], None)
    reasons = {}
    for fast in (True, False):
        engine = Engine(Batch(pred, y), chosen, use_blocks=fast)
        assert ("r2" in engine._fast) is fast
        got = engine.values([Resample(row) for row in counts])["r2"]
        assert np.isnan(got[0]) and np.isfinite(got[1])
        reasons[fast] = engine.undefined_reasons["r2"]
    assert reasons[True] == reasons[False] == [blocks.undefined_reason("r2")]
