"""Validation of a decoded submission before the 202: sizes, uqcore's kind rules, metrics.

Everything that needs only the request is checked here, so that a job that reaches a worker
can fail only for reasons the request could not show. Every failure is an :class:`ApiError`
(422) naming the field as sent, the rule and the first offending index; uqcore's texts are
put in the words of the API (:func:`service.rest_text.rest_text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.lib.format as npy_format

from service.analyses import Analyses
from service.api import spool as spooling
from service.api.errors import ApiError, uq_location
from service.api.payload import DecodedSubmission
from service.api.spool import release, row_blocks
from service.kinds import (
    CLASSIFICATION_KINDS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    TENSOR_FIELDS,
    build_prediction,
    target_field,
    task_of,
)
from service.leaderboard import ESTIMATOR_PARAMS
from service.rest_text import Origin, rest_text
from service.settings import Settings
from service.store import BenchmarkRecord
from uqcore import UQValidationError, registry
from uqcore.batch import make_batch


@dataclass(frozen=True)
class ValidSubmission:
    """A submission that passed every check: what :func:`service.jobs.submit` needs."""

    kind: str
    n: int
    model_name: str
    metadata: dict[str, Any]
    analyses: Analyses
    arrays: dict[str, Any]
    body_hash: str
    visibility: Literal["private", "public"] = "private"
    benchmark_id: str | None = None
    callback_url: str | None = None


_ARRAY_FIELDS = ("y", "labels", "sample_weight", "groups", "soft_labels", "ood")


def _uq_error(exc: UQValidationError, sub: DecodedSubmission) -> ApiError:
    """A 422 from a uqcore validation error, with the field and index it names."""
    message = rest_text(str(exc), task=task_of(sub.kind))
    given = (*KIND_FIELDS.get(sub.kind, ()), *sub.prediction, *_ARRAY_FIELDS)
    fields = {name: name for name in given}
    # uqcore names an estimate as the caller passed it, estimates['name']
    fields.update({f"estimates[{k!r}]": f"{ESTIMATE_PREFIX}{k}" for k in sub.estimates})
    field, index = uq_location(exc, fields)
    if field is not None:
        path = sub.field_path(field)
        if path != field:
            message = f"{path}: {message}"
        field = path
    return ApiError(422, message, field=field, index=index)


def _check_sizes(sub: DecodedSubmission, settings: Settings) -> None:
    t = sub.targets
    tname = target_field(sub.kind)
    n = 0 if t is None else int(t.shape[0]) if t.ndim >= 1 else 1
    if n > settings.max_points:
        raise ApiError(
            422,
            f"{tname} has N = {n} targets; at most {settings.max_points} are accepted per "
            "submission",
            field=tname,
            code="too_many_points",
        )
    extra = {"soft_labels": sub.soft_labels} if sub.soft_labels is not None else {}
    for name, arr in {**sub.prediction, **extra}.items():
        if arr.size > settings.max_elements:
            raise ApiError(
                422,
                f"{name} holds {arr.size} values; at most {settings.max_elements} are accepted",
                field=sub.field_path(name),
                code="too_many_points",
            )


def _check_groups(sub: DecodedSubmission, n: int) -> None:
    g = sub.groups
    if g is None:
        return
    if g.ndim != 1:
        raise ApiError(
            422, f"groups must be a vector; found shape {tuple(g.shape)}", field="groups"
        )
    if g.shape[0] != n:
        raise ApiError(
            422,
            f"groups must have the same length as the prediction ({n}), found {g.shape[0]}",
            field="groups",
        )


# --------------------------------------------------------------------------------------------
# uqcore's rules in blocks of rows (large submissions)
# --------------------------------------------------------------------------------------------


def _row_axis(name: str, a: Any) -> int | None:
    """The axis of ``a`` that runs over the N rows (1 for an ensemble's M×N×C arrays), or
    None for an array without rows (a quantile prediction's levels, a 0-d array)."""
    if name == "levels" or getattr(a, "ndim", 0) == 0:
        return None
    if name in TENSOR_FIELDS:
        return 1 if a.ndim == 3 else None
    return 0


def _rows(name: str, a: Any, start: int, stop: int) -> Any:
    axis = _row_axis(name, a)
    if axis is None:
        return a
    return a[start:stop] if axis == 0 else a[:, start:stop]


def _shift_message(message: str, argument: str, start: int, axis: int) -> str:
    """``message`` with the row of ``argument[...]`` moved by ``start`` (a block's rows are
    numbered from its start; the body's from 0)."""
    if axis == 0:
        pattern = re.compile(r"(?<![\w'])" + re.escape(argument) + r"\[(\d+)")
        return pattern.sub(lambda m: f"{argument}[{int(m.group(1)) + start}", message)
    pattern = re.compile(re.escape(argument) + r"\[(\d+), (\d+)")
    return pattern.sub(lambda m: f"{argument}[{m.group(1)}, {int(m.group(2)) + start}", message)


def _shifted(
    exc: UQValidationError, start: int, names: dict[str, str], others: tuple[str, ...] = ()
) -> UQValidationError:
    """The error of a block starting at row ``start`` as the whole array's error. ``others``
    are the block's other arrays with rows on axis 0: a rule across fields names their rows
    too ("upper[3] < lower[3]"), which move with the argument's."""
    arg = exc.argument
    if start == 0 or arg is None or exc.index is None:
        return exc
    field = names.get(arg, arg)
    axis = 1 if field in TENSOR_FIELDS else 0
    if field == "levels":
        return exc
    index = exc.index
    if isinstance(index, tuple):
        index = tuple(v + start if k == axis else v for k, v in enumerate(index))
    elif axis == 0:
        index = index + start
    message = _shift_message(str(exc), arg, start, axis)
    for other in others:
        if other != arg:
            message = _shift_message(message, other, start, 0)
    return UQValidationError(message, argument=arg, index=index, value=exc.value)


def _global_weight_rule(exc: UQValidationError) -> bool:
    """An error about the weights as a whole (not all zero), which one block cannot decide."""
    return exc.argument == "sample_weight" and exc.index is None


def _blockwise(
    sub: DecodedSubmission, arrays: dict[str, Any], with_targets: bool
) -> tuple[Any, frozenset[str], int] | None:
    """uqcore's rules (the prediction's, and with ``with_targets`` the batch's) checked on
    blocks of :data:`~service.api.spool.CHUNK_ROWS` rows: the prediction built on the first
    block (for the metric checks), the optional targets given, and N. None when the body is
    small (uqcore then checks the whole arrays); a failure is the error of the first bad row
    of the body, as on the whole arrays. Arrays that disagree on N are a 422 from their
    shapes alone (:func:`_check_rows_agree`), whatever their size."""
    extra: dict[str, Any] = {}
    if with_targets:
        extra = {
            k: v
            for k, v in {
                target_field(sub.kind): sub.targets,
                "sample_weight": sub.sample_weight,
                "ood": sub.ood,
                "soft_labels": sub.soft_labels,
            }.items()
            if v is not None
        }
    every = {**arrays, **extra}
    row_counts = {
        k: int(a.shape[axis]) for k, a in every.items() if (axis := _row_axis(k, a)) is not None
    }
    if not row_counts:
        return None
    if len(set(row_counts.values())) > 1:
        if max(row_counts.values()) <= spooling.CHUNK_ROWS:
            return None  # small: uqcore checks the whole arrays and names the lengths
        _check_rows_agree(sub, arrays, extra, row_counts)
    n = next(iter(row_counts.values()))
    if n <= spooling.CHUNK_ROWS:
        return None
    names = {f"estimates[{k[len(ESTIMATE_PREFIX) :]!r}]": k for k in arrays}
    others = tuple(
        k
        for k, a in {**arrays, **extra}.items()
        if not k.startswith(ESTIMATE_PREFIX) and _row_axis(k, a) == 0
    )
    first: tuple[Any, frozenset[str]] | None = None
    weight_error: UQValidationError | None = None
    weights_ok = False
    for start, stop in row_blocks(n):
        block = {k: _rows(k, a, start, stop) for k, a in arrays.items()}
        try:
            prediction = build_prediction(sub.kind, block)
            targets: frozenset[str] = frozenset()
            if with_targets:
                rows = {k: _rows(k, a, start, stop) for k, a in extra.items()}
                y = rows.pop(target_field(sub.kind))
                try:
                    batch = make_batch(prediction, y, rows.pop("sample_weight", None), **rows)
                    weights_ok = weights_ok or "sample_weight" in extra
                except UQValidationError as exc:
                    if not _global_weight_rule(exc):
                        raise
                    weight_error = weight_error or exc
                    batch = make_batch(prediction, y, None, **rows)
                targets = getattr(batch, "targets", frozenset())
        except UQValidationError as exc:
            raise _uq_error(_shifted(exc, start, names, others), sub) from None
        finally:
            release(*arrays.values(), *extra.values())
        if first is None:
            first = (prediction, targets)
    if weight_error is not None and not weights_ok:
        raise _uq_error(weight_error, sub)
    assert first is not None
    return first[0], first[1], n


def _check_rows_agree(
    sub: DecodedSubmission, arrays: dict[str, Any], extra: dict[str, Any], rows: dict[str, int]
) -> None:
    """The 422 of a large body whose arrays disagree on N, in uqcore's words, without reading
    the arrays (uqcore's own check builds the prediction from the whole arrays first): the
    rules of the first row (ranks, types, values) as uqcore states them, then the shapes. The
    first array (the prediction's first field) gives N; the first array whose rows differ is
    named."""
    every = {**arrays, **extra}
    if min(rows.values()) > 0:
        head = {k: _rows(k, a, 0, 1) for k, a in every.items()}
        try:
            prediction = build_prediction(sub.kind, {k: head[k] for k in arrays})
            if extra:
                tname = target_field(sub.kind)
                others = {k: head[k] for k in extra if k != tname}
                make_batch(prediction, head[tname], others.pop("sample_weight", None), **others)
        except UQValidationError as exc:
            raise _uq_error(exc, sub) from None
        finally:
            release(*every.values())
    first, n = next(iter(rows.items()))
    for name, count in rows.items():
        if count == n:
            continue
        if name in sub.prediction:
            shape, want = tuple(every[name].shape), tuple(every[first].shape)
            message = f"{name} must have the same shape as {first} {want}, found {shape}"
        else:
            label = (
                f"estimates[{name[len(ESTIMATE_PREFIX) :]!r}]"
                if name.startswith(ESTIMATE_PREFIX)
                else name
            )
            message = f"{label} must have the same length as the prediction ({n}), found {count}"
        path = sub.field_path(name)
        raise ApiError(422, message if path == name else f"{path}: {message}", field=path)


def convert_blockwise(
    a: Any, n: int, convert: Any, spool: Any, names: dict[str, str] | None = None
) -> Any:
    """``convert(block, rows)`` (a uqcore validator returning the checked array) applied to
    ``a`` in blocks of rows, the results written to a memory-mapped ``.npy`` file of
    ``spool``; a failure names the body's row. Small or in-memory arrays are converted
    whole."""
    if spool is None or n <= spooling.CHUNK_ROWS or not spooling.is_mapped(a):
        return convert(a, n)
    out: Any = None
    path = spool.path(".npy")
    for start, stop in row_blocks(n):
        try:
            block = convert(a[start:stop], stop - start)
        except UQValidationError as exc:
            raise _shifted(exc, start, names or {}) from None
        if out is None:
            out = npy_format.open_memmap(
                path, mode="w+", dtype=block.dtype, shape=(n, *block.shape[1:])
            )
        out[start:stop] = block
        release(a, out)
    out.flush()
    del out
    return np.load(path, mmap_mode="r")


def _why_not(
    spec: Any, prediction: Any, targets: frozenset[str], weights: Any, params: Any
) -> str | None:
    """``spec.why_not`` with large weights read in blocks (the integer-weights rule looks at
    every weight) and the first fractional weight named by its row in the body."""
    if weights is None or weights.shape[0] <= spooling.CHUNK_ROWS:
        why: str | None = spec.why_not(prediction, targets, weights, params)
        return why
    why = spec.why_not(prediction, targets, None, params)
    if why is not None:
        return why
    for start, stop in row_blocks(int(weights.shape[0])):
        why = spec.why_not(prediction, targets, np.asarray(weights[start:stop]), params)
        release(weights)
        if why is not None:
            return _shift_message(why, "sample_weight", start, 0)
    return None


def check_params(spec: Any, params: dict[str, Any], where: str, n: int | None = None) -> None:
    """The parameters of metric ``spec`` as uqcore checks them before it computes anything
    (known names, each value in its option's domain, rules across options, one value per row
    for a per-row option on ``n`` rows): an ApiError 422 at ``where`` (``where.<option>`` for
    a value), so no refused value gets a 202. The message names the fields of ``where``'s
    request (a submission's ``analyses.params``, else a benchmark's ``params``)."""
    try:
        spec.resolve_params(params, n)
    except UQValidationError as exc:
        origin: Origin = "submission" if "analyses." in where else "benchmark"
        message = rest_text(str(exc), task=spec.task, origin=origin, metric=spec.name)
        if exc.argument in spec.defaults:
            raise ApiError(422, message, field=f"{where}.{exc.argument}") from None
        raise ApiError(422, message, field=where, code="unknown_parameter") from None


def _check_estimators(sub: DecodedSubmission, prediction: Any) -> None:
    wanted = sub.analyses.estimators
    if wanted is None:
        return
    if sub.kind not in CLASSIFICATION_KINDS:
        raise ApiError(
            422,
            "estimators apply to classification predictions only",
            field="analyses.estimators",
        )
    if wanted == "all":
        return
    available = prediction.estimator_names()
    for i, name in enumerate(wanted):
        if name not in available:
            raise ApiError(
                422,
                f"estimator {name!r} does not apply to this {sub.kind} prediction; available: "
                f"{', '.join(available)}",
                field="analyses.estimators",
                index=i,
            )
        if name in wanted[:i]:
            raise ApiError(
                422,
                f"estimator {name!r} is listed twice",
                field="analyses.estimators",
                index=i,
            )


def _check_some_metric_applies(
    sub: DecodedSubmission, prediction: Any, targets: frozenset[str]
) -> None:
    """``metrics: "all"`` computes the metrics that apply: when none does (a kind whose
    metrics the registry lacks), a 422 says so rather than an empty result. The weights'
    rules are left to the metrics' own checks (they do not decide whether a metric exists)."""
    task = task_of(sub.kind)
    for spec in registry.specs(task):
        if spec.why_not(prediction, targets, None, sub.analyses.params.get(spec.name)) is None:
            return
    caps = ", ".join(sorted(prediction.capabilities)) or "nothing"
    raise ApiError(
        422,
        f"no {task} metric applies to this {sub.kind} prediction (it provides {caps}); "
        f"GET /v1/metrics?kind={sub.kind} lists the metrics of each kind",
        field="analyses.metrics",
        code="metric_not_applicable",
    )


def _check_analyses(
    sub: DecodedSubmission, prediction: Any, targets: frozenset[str], n: int
) -> Analyses:
    analyses = sub.analyses
    task = task_of(sub.kind)
    wanted = analyses.metrics
    if wanted == "all":
        _check_some_metric_applies(sub, prediction, targets)
    else:
        for i, name in enumerate(wanted):
            try:
                spec = registry.get(name, task)
            except UQValidationError as exc:
                raise ApiError(
                    422, str(exc), field="analyses.metrics", index=i, code="unknown_metric"
                ) from None
            why = _why_not(spec, prediction, targets, sub.sample_weight, analyses.params.get(name))
            if why is not None:
                why = rest_text(why, task=task, metric=name)
                raise ApiError(
                    422,
                    f"metric {name!r} does not apply to this submission: {why}",
                    field="analyses.metrics",
                    index=i,
                    code="metric_not_applicable",
                )
    for name, params in analyses.params.items():
        where = f"analyses.params.{name}"
        try:
            spec = registry.get(name, task)
        except UQValidationError as exc:
            raise ApiError(422, str(exc), field=where, code="unknown_metric") from None
        if wanted != "all" and name not in wanted:
            raise ApiError(
                422,
                f"parameters are given for metric {name!r}, which analyses.metrics does not list",
                field=where,
            )
        check_params(spec, params, where, n)
        est = params.get("estimator")
        if task == "classification" and est is not None:
            available = prediction.estimator_names()
            if est not in available:
                raise ApiError(
                    422,
                    f"estimator {est!r} of metric {name!r} does not apply to this {sub.kind} "
                    f"prediction; available: {', '.join(available)}",
                    field=f"{where}.estimator",
                )
    _check_estimators(sub, prediction)
    return analyses


def validate(
    sub: DecodedSubmission, settings: Settings, benchmark: BenchmarkRecord | None = None
) -> ValidSubmission:
    """Check ``sub`` against the limits, uqcore's rules for its kind, and the registry; a
    submission against ``benchmark`` also against the benchmark's N, kinds and metrics."""
    if benchmark is not None:
        return _validate_for_benchmark(sub, settings, benchmark)
    targets = sub.targets
    tname = target_field(sub.kind)
    assert targets is not None, "the request models require targets without a benchmark_id"
    _check_sizes(sub, settings)
    estimates = {f"{ESTIMATE_PREFIX}{k}": v for k, v in sub.estimates.items()}
    checked = _blockwise(sub, {**sub.prediction, **estimates}, with_targets=True)
    if checked is not None:
        prediction, given, n = checked
    else:
        try:
            prediction = build_prediction(sub.kind, {**sub.prediction, **estimates})
            batch = make_batch(
                prediction, targets, sub.sample_weight, ood=sub.ood, soft_labels=sub.soft_labels
            )
        except UQValidationError as exc:
            raise _uq_error(exc, sub) from None
        n = int(prediction.n)
        given = getattr(batch, "targets", frozenset())
    _check_groups(sub, n)
    analyses = _check_analyses(sub, prediction, given, n)
    arrays: dict[str, Any] = {**sub.prediction, **estimates, tname: targets}
    for name in ("sample_weight", "groups", "soft_labels", "ood"):
        value = getattr(sub, name)
        if value is not None:
            arrays[name] = value
    return ValidSubmission(
        kind=sub.kind,
        n=n,
        model_name=sub.model_name,
        metadata=sub.metadata,
        analyses=analyses,
        arrays=arrays,
        body_hash=sub.body_hash,
        visibility=sub.visibility,
    )


def _why_not_on_benchmark(
    spec: Any, prediction: Any, bench: BenchmarkRecord, params: dict[str, Any]
) -> str | None:
    """Why metric ``spec`` does not apply to ``prediction`` on ``bench`` (its task, the
    optional targets it holds, and the estimators the metric's parameters name), or None."""
    why: str | None = spec.why_not(prediction, bench.targets)
    if why is not None or bench.task != "classification":
        return why
    available = prediction.estimator_names()
    resolved = spec.resolve_params(params)
    for key in ESTIMATOR_PARAMS:
        if key in spec.defaults and resolved[key] not in available:
            return (
                f"its {key} {resolved[key]!r} is not provided by a {prediction.kind} prediction "
                f"(available: {', '.join(available)})"
            )
    return None


def _check_classes(sub: DecodedSubmission, prediction: Any, bench: BenchmarkRecord) -> None:
    """The prediction's C against the benchmark's classes: equal to its declared C (or soft
    labels' width), and above every hidden label. The message names C, never a label."""
    field = sub.field_path(next(iter(sub.prediction), KIND_FIELDS[sub.kind][0]))
    c = int(prediction.n_classes)
    if bench.n_classes is not None and c != bench.n_classes:
        raise ApiError(
            422,
            f"the prediction has C = {c} classes; benchmark {bench.id!r} has C = {bench.n_classes}",
            field=field,
            code="length_mismatch",
        )
    if bench.label_max is not None and bench.label_max >= c:
        raise ApiError(
            422,
            f"the prediction has C = {c} classes; the labels of benchmark {bench.id!r} lie in "
            f"[0, {bench.label_max + 1}), so a prediction needs at least "
            f"{bench.label_max + 1} classes",
            field=field,
            code="length_mismatch",
        )


def _validate_for_benchmark(
    sub: DecodedSubmission, settings: Settings, bench: BenchmarkRecord
) -> ValidSubmission:
    """The prediction alone (the targets are the benchmark's): kind accepted (hence the task),
    N equal to the benchmark's, for classification C consistent with the hidden labels, and
    the primary metric applicable. The benchmark's other metrics that do not apply to the
    kind (or whose estimator the prediction does not provide) are left out of the evaluation
    (the leaderboard of such a metric does not list the submission); so are the benchmark's
    estimators that the prediction does not provide."""
    kind_field = "prediction.kind" if sub.format == "json" else "request.kind"
    if sub.kind not in bench.kinds:
        raise ApiError(
            422,
            f"benchmark {bench.id!r} accepts prediction kinds {bench.kinds}; found {sub.kind!r}",
            field=kind_field,
        )
    _check_sizes(sub, settings)
    estimates = {f"{ESTIMATE_PREFIX}{k}": v for k, v in sub.estimates.items()}
    checked = _blockwise(sub, {**sub.prediction, **estimates}, with_targets=False)
    if checked is not None:
        prediction, _, n = checked
    else:
        try:
            prediction = build_prediction(sub.kind, {**sub.prediction, **estimates})
        except UQValidationError as exc:
            raise _uq_error(exc, sub) from None
        n = int(prediction.n)
    if n != bench.n:
        first = next(iter(sub.prediction), KIND_FIELDS[sub.kind][0])
        raise ApiError(
            422,
            f"the prediction has N = {n} rows; benchmark {bench.id!r} has N = {bench.n} targets",
            field=sub.field_path(first if first != "levels" else "values"),
            code="length_mismatch",
        )
    if bench.task == "classification":
        _check_classes(sub, prediction, bench)
    applicable: list[str] = []
    for name in bench.metrics:
        spec = registry.get(name, bench.task)
        why = _why_not_on_benchmark(spec, prediction, bench, bench.params.get(name, {}))
        if why is None:
            applicable.append(name)
        elif name == bench.primary_metric:
            why = rest_text(why, task=bench.task, origin="benchmark", metric=name)
            raise ApiError(
                422,
                f"the benchmark's primary metric {name!r} does not apply to a {sub.kind} "
                f"prediction: {why}",
                field=kind_field,
                code="metric_not_applicable",
            )
    estimators = None
    if bench.task == "classification" and bench.estimators:
        available = prediction.estimator_names()
        estimators = [e for e in bench.estimators if e in available]
    return ValidSubmission(
        kind=sub.kind,
        n=n,
        model_name=sub.model_name,
        metadata=sub.metadata,
        analyses=bench.analyses(applicable, estimators),
        arrays={**sub.prediction, **estimates},
        body_hash=sub.body_hash,
        visibility=sub.visibility,
        benchmark_id=bench.id,
    )
