"""``GET /v1/metrics``: the metric registry, filterable by task and prediction kind."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query

from service.api.errors import ApiError
from service.api.routes.common import errors
from service.api.schemas import (
    EXAMPLE_ARRAYS,
    EXAMPLE_FIELDS,
    KINDS,
    Kind,
    MetricCatalogue,
    MetricInfo,
)
from service.kinds import CLASSIFICATION_TARGETS, build_prediction
from uqcore import registry

router = APIRouter(tags=["metrics"])

#: The tasks whose prediction kinds the service accepts.
SERVICE_TASKS: tuple[str, ...] = ("regression", "classification")

#: Optional targets a submission may send: a metric that needs one (OOD flags, soft labels)
#: applies to a kind when the submission sends it.
_OPTIONAL_TARGETS = frozenset(CLASSIFICATION_TARGETS)


@lru_cache(maxsize=1)
def _kind_examples() -> dict[str, Any]:
    """One small valid prediction per kind: applicability is decided by the kind's capabilities."""
    return {
        k: build_prediction(k, {f: np.asarray(EXAMPLE_ARRAYS[f]) for f in EXAMPLE_FIELDS[k]})
        for k in KINDS
    }


def catalogue(task: str | None = None, kind: str | None = None) -> list[MetricInfo]:
    """The registry's metrics (of ``task``, applicable to ``kind``), with their kinds: the
    regression metrics first, then the classification ones (``ece`` and ``nll`` exist in both
    tasks: an entry is identified by its task and name)."""
    examples = _kind_examples()
    out = []
    specs = [s for t in (SERVICE_TASKS if task is None else (task,)) for s in registry.specs(t)]
    for spec in specs:
        if spec.task not in SERVICE_TASKS:
            continue
        kinds = [k for k, pred in examples.items() if spec.why_not(pred, _OPTIONAL_TARGETS) is None]
        if kind is not None and kind not in kinds:
            continue
        out.append(MetricInfo(**spec.describe(), kinds=kinds))
    return out


@router.get(
    "/v1/metrics",
    operation_id="listMetrics",
    summary="The metric catalogue",
    response_model=MetricCatalogue,
    responses=errors(422),
)
def list_metrics(
    task: Annotated[
        str | None, Query(max_length=50, description="Only metrics of this task.")
    ] = None,
    kind: Annotated[
        Kind | None, Query(description="Only metrics that apply to this prediction kind.")
    ] = None,
) -> MetricCatalogue:
    """Every registered metric: task, what it needs, direction, bounds, defaults, summary,
    reference, and the prediction kinds it applies to. No API key needed.

    A kind "applies" when it provides what the metric needs (classification metrics that need
    OOD flags or soft labels apply when the submission sends them; the probability metrics
    apply to a prediction_set sent with its probs); a Student-t prediction with some df <= 2
    has no finite std, so std-based metrics do not apply to that batch.
    """
    if task is not None:
        tasks = list(SERVICE_TASKS)
        if task not in tasks:
            raise ApiError(422, f"task must be one of {tasks}; found {task!r}", field="task")
    return MetricCatalogue(metrics=catalogue(task, kind))
