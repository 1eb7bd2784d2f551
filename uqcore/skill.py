"""Skill of a prediction against a reference prediction (a baseline): 1 − S/S_ref.

For leaderboards' "skill vs baseline" column and for comparing scores across datasets. The
skill against climatology (the targets' own distribution) is a metric of its own for each
score (``crps_skill``, ``brier_skill``, ...); here the reference is any prediction.

Skill is meaningful only for a score S ≥ 0 whose best value is 0 and lower is better (a
negatively oriented score such as ``crps``, ``brier``, ``check_score``, or an error such as
``mae``): then 1 is perfect, 0 is the reference's score and negative is worse. Every other
metric is refused with :class:`UQValidationError`: one of another direction (``r2``, a
"target" metric such as ``coverage``) or without a best value of 0 (the regression ``nll``,
unbounded below: use ``nll_skill``, whose ratio is of perplexities). A structured metric (a
dict) is accepted when it meets the same conditions, and its ``"value"`` entry is the score.
"""

from __future__ import annotations

from typing import Any

from uqcore import registry
from uqcore._validation import UQValidationError
from uqcore.batch import make_batch
from uqcore.registry import MetricSpec, undefined

__all__ = ["skill", "skill_from_values"]


def _score_spec(metric: str, task: str | None) -> MetricSpec:
    """The spec of ``metric``, checked to be a score that skill applies to (module doc)."""
    spec = registry.get(metric, task)
    if spec.direction != "lower" or spec.best != 0.0:
        best = "no best value" if spec.best is None else f"best value {spec.best:g}"
        raise UQValidationError(
            f"skill is 1 − S/S_ref for a score S where lower is better and 0 is best; "
            f"{spec.task} metric {spec.name!r} has direction {spec.direction!r} and {best}",
            argument="metric",
            value=metric,
        )
    return spec


def _scalar(value: Any, which: str) -> float | None:
    if isinstance(value, dict):
        value = value.get("value")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UQValidationError(f"{which} must be a number or None, found {value!r}")
    return float(value)


def skill_from_values(
    metric: str, value: Any, reference_value: Any, *, task: str | None = None
) -> float | None:
    """1 − value/reference_value for a score ``metric`` (module doc), from two values of it.

    ``task`` chooses between the metrics of one name in both tasks (``"nll"``, ``"ece"``;
    default: :func:`uqcore.registry.get`'s rule). ``None`` when either value is ``None``, or,
    with an :class:`UndefinedMetricWarning`, when the reference scores 0.

    >>> skill_from_values("crps", 0.2, 0.8)
    0.75
    >>> skill_from_values("r2", 0.2, 0.8)
    Traceback (most recent call last):
    ...
    uqcore._validation.UQValidationError: skill is 1 − S/S_ref for a score S where lower is better and 0 is best; regression metric 'r2' has direction 'higher' and best value 1
    """
    spec = _score_spec(metric, task)
    s = _scalar(value, "value")
    ref = _scalar(reference_value, "reference_value")
    if s is None or ref is None:
        return None
    if ref == 0.0:
        undefined(f"skill of {spec.name}", "the reference prediction scores 0 (it is perfect)")
        return None
    return 1.0 - s / ref


def skill(
    metric: str,
    prediction: Any,
    reference: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    **options: Any,
) -> float | None:
    """Skill of ``prediction`` against the baseline ``reference``: 1 − S(prediction)/S(reference).

    S is the registered score ``metric`` of the predictions' task, computed on the same
    targets ``y`` (labels for classification), ``sample_weight`` and ``options`` (and the
    targets ``ood`` / ``soft_labels`` where the metric needs them); both predictions must be
    of one task and S must apply to both. ``None`` where either score is undefined or the
    reference scores 0 (with the warning); :class:`UQValidationError` for a metric that is
    not a score with best value 0 (module doc).

    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.array([0.0, 1.0])
    >>> sharp, wide = P.Gaussian(y, np.full(2, 0.5)), P.Gaussian(y, np.full(2, 2.0))
    >>> round(skill("crps", sharp, wide, y), 10)  # the CRPS at the mean scales with σ
    0.75
    """
    task = str(getattr(prediction, "task", "regression"))
    ref_task = str(getattr(reference, "task", "regression"))
    if task != ref_task:
        raise UQValidationError(
            f"the prediction is a {task} prediction and the reference a {ref_task} one",
            argument="reference",
        )
    spec = _score_spec(metric, task)
    targets = {k: options.pop(k) for k in ("ood", "soft_labels") if k in options}
    values = []
    for pred in (prediction, reference):
        batch = make_batch(pred, y, sample_weight, **targets)
        values.append(registry.call(spec, batch, options))
    return skill_from_values(spec.name, values[0], values[1], task=task)
