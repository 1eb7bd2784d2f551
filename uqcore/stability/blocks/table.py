"""The metrics that have a block path: how each is prepared for a batch, and what it reports
for a resample on which the metric is undefined.

Every key is a registered regression metric, and every reason is the one the metric's
implementation gives in its :class:`~uqcore.registry.UndefinedMetricWarning` (the same
constant of the metric's module); the stability tests check both against the registry and the
implementations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqcore.batch import Batch
from uqcore.registry import undefined_message
from uqcore.regression import accuracy, ranking
from uqcore.regression import skill as rskill
from uqcore.stability.blocks import (
    binned,
    calibration,
    hsic,
    intervals,
    isotonic,
    quantiles,
    ranks,
    row_sums,
    skill,
    strata,
)
from uqcore.stability.blocks.context import BlockEvaluator, Keys

__all__ = ["BESIDE", "FIRST", "PATHS", "BlockPath", "Prepare", "prepare", "undefined_reason"]

#: ``prepare(keys, name, params)``: the evaluator of metric ``name`` with options ``params`` on
#: the batch of ``keys``, or None where the path's conditions do not hold on it.
Prepare = Callable[[Keys, str, Mapping[str, Any]], BlockEvaluator | None]


@dataclass(frozen=True)
class BlockPath:
    """The block path of one metric."""

    prepare: Prepare
    #: Why the metric is undefined on a resample where the evaluator returns NaN, in the words
    #: of the implementation's warning; None where the path reports no reason.
    why_undefined: str | None = None


PATHS: dict[str, BlockPath] = {
    "spearman": BlockPath(ranks.spearman, ranking.CONSTANT_UNCERTAINTY_OR_ERRORS),
    "ause": BlockPath(ranks.sparsification, ranking.ALL_ERRORS_ZERO),
    "aurg": BlockPath(ranks.sparsification, ranking.ALL_ERRORS_ZERO),
    "pit": BlockPath(calibration.pit),
    "ece": BlockPath(calibration.calibration),
    "rmsce": BlockPath(calibration.calibration),
    "calibration_error": BlockPath(calibration.calibration),
    "miscalibration_area": BlockPath(calibration.calibration),
    "adversarial_group_calibration": BlockPath(calibration.adversarial),
    "pearson": BlockPath(row_sums.moments, ranking.CONSTANT_UNCERTAINTY_OR_ERRORS),
    "corr": BlockPath(row_sums.moments, accuracy.CONSTANT_POINT_OR_TARGETS),
    "r2": BlockPath(row_sums.moments, accuracy.CONSTANT_TARGETS),
    "coverage": BlockPath(row_sums.interval),
    "mean_width": BlockPath(row_sums.interval),
    "mdae": BlockPath(quantiles.mdae),
    "ence": BlockPath(binned.binned_by_sigma),
    "uce": BlockPath(binned.binned_by_sigma),
    "merci": BlockPath(quantiles.merci),
    # the path exists for variant="paper" only; the value of the normaliser is not reported
    "nmerci": BlockPath(quantiles.merci, ranking.normaliser_not_positive(None, "paper")),
    "crps_skill": BlockPath(skill.skill, rskill.CONSTANT),
    "check_score_skill": BlockPath(skill.skill, rskill.CONSTANT),
    "interval_score_skill": BlockPath(skill.skill, rskill.CONSTANT),
    "nll_skill": BlockPath(skill.skill, rskill.CONSTANT),
    "cwc": BlockPath(intervals.interval_sums, "the targets are constant (their range R is 0)"),
    "coverage_pvalue": BlockPath(intervals.interval_sums),
    "size_stratified_coverage": BlockPath(strata.size_stratified),
    "hsic_width_coverage": BlockPath(hsic.hsic),
    "corp_mcb": BlockPath(isotonic.corp),
    "corp_dsc": BlockPath(isotonic.corp),
    "corp_unc": BlockPath(isotonic.corp),
}

#: Evaluators that run first in a block: adversarial group calibration, whose random groups
#: then overlap everything else (:data:`~uqcore.stability.blocks.tuning.BACKGROUND`), and those
#: that need the full cumulative weights along an order, so that the others (weighted
#: quantiles) read them instead of searching.
FIRST = ("adversarial_group_calibration", "spearman", "ause", "aurg", "ence", "uce")


#: Evaluators that run in a helper thread beside the others on each piece of a block: those of
#: the uncertainty, |e| and ratio orders (gathers and cumulative sums of their own, about half
#: of the block work at N = 10⁶; the quantiles after the ranks, so that they read the
#: cumulative weights along |e| instead of searching), and HSIC's compiled passes (which read
#: only the piece's weights, totals and row sums), while the main thread computes those of the
#: PIT order, the other interval metrics, the decompositions, the skill scores and the row-sum
#: functions. The two sets share no cached array that either writes, and the piece's totals
#: are computed before they start.
BESIDE = frozenset(
    {"spearman", "ause", "aurg", "ence", "uce", "mdae", "merci", "nmerci", "hsic_width_coverage"}
)


def undefined_reason(name: str) -> str | None:
    """The warning text for a resample on which the block path of ``name`` found the metric
    undefined (:func:`~uqcore.registry.undefined_message`), or None."""
    path = PATHS.get(name)
    if path is None or path.why_undefined is None:
        return None
    return undefined_message(name, path.why_undefined)


def prepare(
    batch: Any, chosen: Sequence[tuple[str, Mapping[str, Any]]]
) -> tuple[Keys | None, dict[str, BlockEvaluator]]:
    """Block evaluators for the metrics of ``chosen`` (name, params) that have one and whose
    conditions hold on this batch (regression batches of numpy arrays only)."""
    if not isinstance(batch, Batch) or not isinstance(getattr(batch, "y", None), np.ndarray):
        return None, {}
    keys = Keys(batch)
    out: dict[str, BlockEvaluator] = {}
    first = [c for c in chosen if c[0] in FIRST]
    rest = [c for c in chosen if c[0] not in FIRST]
    for name, params in sorted(first, key=lambda c: FIRST.index(c[0])) + rest:
        path = PATHS.get(name)
        if path is None:
            continue
        ev = path.prepare(keys, name, params)
        if ev is not None:
            out[name] = ev
    return keys, out
