"""``evaluate`` and ``metric``: run registered metrics, with applicability, parameters,
warnings and provenance, and return a JSON-serialisable :class:`Report`."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from uqcore import registry
from uqcore._memory import release_free_memory
from uqcore._validation import UQValidationError
from uqcore.batch import is_reused, make_batch, reusing, reusing_batches
from uqcore.registry import MetricValue

__all__ = ["Report", "estimator_names", "evaluate", "json_safe", "metric"]


def json_safe(value: Any, where: str, notes: list[str]) -> Any:
    """Convert numpy scalars/arrays to Python types; NaN/inf become ``None`` with a note."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value  # already JSON (the options' strings and integers, mostly)
    # floats first (numpy float64 is a float subclass), before the slower ABC checks
    if isinstance(value, float):
        f = float(value)
        if not math.isfinite(f):
            notes.append(f"{where} was {f} and is reported as null")
            return None
        return f
    if kind is dict or isinstance(value, Mapping):
        return {
            str(k): v
            if type(v) is float and math.isfinite(v)
            else json_safe(v, f"{where}.{k}", notes)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        if len(value) > 8:  # a curve's points: all of one plain type, mostly
            types = set(map(type, value))
            # floats: a finite sum proves every one finite (a NaN or an infinity makes the sum
            # non-finite; a sum of finite ones that overflows is checked one by one below)
            if types == {int} or (types == {float} and math.isfinite(sum(value))):
                return list(value)
        return [
            v
            if (type(v) is float and math.isfinite(v)) or type(v) is int
            else json_safe(v, f"{where}[{i}]", notes)
            for i, v in enumerate(value)
        ]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist(), where, notes)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        if not math.isfinite(f):
            notes.append(f"{where} was {f} and is reported as null")
            return None
        return f
    if value is None or isinstance(value, str):
        return value
    # 0-d arrays of other namespaces
    try:
        return json_safe(float(value), where, notes)
    except (TypeError, ValueError):
        raise TypeError(f"{where}: cannot serialise {type(value).__name__}") from None


class Report(Mapping[str, MetricValue]):
    """Metric name -> value (float, ``None`` when undefined, or a dict with ``"value"``).

    Attributes
    ----------
    params : dict
        Every parameter used, per metric (defaults included).
    not_applicable : dict
        For ``metrics="all"``: metric name -> why it does not apply to this prediction kind.
    curves : dict
        With ``evaluate(..., curves=...)``: curve name -> curve object (:mod:`uqcore.curves`),
        what :mod:`uqcore.plots` draws; empty otherwise.
    warnings : list of str
        Why a value is ``None``, and any other warning raised while computing.
    """

    def __init__(
        self,
        values: dict[str, MetricValue],
        params: dict[str, dict[str, Any]],
        not_applicable: dict[str, str],
        warnings_: list[str],
        meta: dict[str, Any],
        curves: dict[str, Any] | None = None,
    ) -> None:
        self._values = values
        self.curves: dict[str, Any] = dict(curves or {})
        self.params = params
        self.not_applicable = not_applicable
        self.warnings = warnings_
        self.meta = meta

    def __getitem__(self, name: str) -> MetricValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    @property
    def by_estimator(self) -> dict[str, dict[str, MetricValue]]:
        """Classification with ``estimators=``: metric -> estimator -> value (the table)."""
        return dict(self.meta.get("by_estimator", {}))

    def scalar(self, name: str) -> float | None:
        """The scalar value of ``name`` (the ``"value"`` entry of a structured result)."""
        v = self._values[name]
        if isinstance(v, dict):
            inner = v.get("value")
            return None if inner is None else float(inner)
        return v

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form: values, params, not_applicable, warnings and provenance."""
        return {
            "values": dict(self._values),
            "params": self.params,
            "not_applicable": dict(self.not_applicable),
            "warnings": list(self.warnings),
            **self.meta,
        }

    def __repr__(self) -> str:
        return f"Report({dict(self._values)!r})"


#: Metrics whose working memory is their own (the HSIC's kernel passes, CORP's sorted
#: forecasts and isotonic fit, the intervals' widths and strata, WIS's quantile blocks, the
#: skill scores' sorted targets): ``evaluate`` runs them first, group by group in this order,
#: and drops what a group cached before the next one starts, so that their peaks do not add
#: to each other's or to the arrays the other metrics share (orders, sorted errors, PIT
#: values). The three CORP parts share one fit, the skill scores the sorted targets. The
#: last group shares the PIT values F_i(y_i) and their sort (and the Gaussian CRPS reads Φ(z_i)
#: from them): they are dropped before the ranking metrics make their orders and sorted errors,
#: two N-arrays fewer under the largest peak of a 10^8-row report. Their values, and the
#: others', do not depend on the order.
RUN_FIRST: tuple[tuple[str, ...], ...] = (
    ("hsic_width_coverage",),
    ("corp_mcb", "corp_dsc", "corp_unc"),
    ("coverage_pvalue",),
    ("size_stratified_coverage",),
    ("cwc",),
    ("wis", "wis_dispersion", "wis_overprediction", "wis_underprediction"),
    ("check_score_skill", "interval_score_skill", "crps_skill", "nll_skill"),
    (
        "pit",
        "calibration_error",
        "ece",
        "rmsce",
        "miscalibration_area",
        "adversarial_group_calibration",
        "crps",
    ),
)
#: name -> (its group, its place in the group): a group runs in its listed order (the PIT
#: values are made before the CRPS reads them).
_FIRST_GROUP = {name: (i, j) for i, group in enumerate(RUN_FIRST) for j, name in enumerate(group)}
#: From this many rows on, freed heap pages are given back after each group (below, the
#: blocks are small and the walk over the heap costs more than it returns).
_TRIM_ROWS = 1 << 20
#: Below this many rows ``evaluate`` starts the metrics that have a start before the others
#: (see :attr:`uqcore.registry.MetricSpec.start`); from it on, in their turn, so that what
#: they share (the PIT values of adversarial group calibration) is not held under the peaks
#: of the groups that run first.
_EARLY_START_ROWS = 1 << 20


def _evaluation_order(chosen: list[Any]) -> tuple[list[Any], set[int]]:
    """The metrics in the order ``evaluate`` runs them (:data:`RUN_FIRST` first, group by
    group), and the positions after which the batch's caches are dropped."""
    first = sorted(
        (s for s in chosen if s.name in _FIRST_GROUP), key=lambda s: _FIRST_GROUP[s.name]
    )
    rest = [s for s in chosen if s.name not in _FIRST_GROUP]
    ends = {
        i
        for i, s in enumerate(first)
        if i + 1 == len(first) or _FIRST_GROUP[first[i + 1].name][0] != _FIRST_GROUP[s.name][0]
    }
    return first + rest, ends


def _run_one(
    spec: registry.MetricSpec,
    batch: Any,
    params: dict[str, Any],
    caught: list[Any],
    run: Callable[..., MetricValue] | None = None,
) -> tuple[MetricValue, list[str]]:
    """One metric's value and notes; ``caught`` is the list that the caller's
    ``warnings.catch_warnings(record=True)`` (filter "always") records into: the warnings
    this metric raises are taken from its end (one context for all the metrics of a call,
    not one each: a context costs as much as a small metric). ``run(batch, **params)``
    replaces ``spec.impl`` (the callable that finishes a started metric)."""
    start = len(caught)
    held = None if run is not None else batch.remembered_score(spec.name, params)
    if held is None:
        value = (run or spec.impl)(batch, **params)
    else:  # computed already by a metric that needed it (a skill score): the same report
        value, raised = held
        for category, message in raised:
            warnings.warn(message, category, stacklevel=2)
    notes = _notes_since(caught, start)
    value = json_safe(value, spec.name, notes)
    return value, notes


def _start_one(
    spec: registry.MetricSpec, batch: Any, params: dict[str, Any], caught: list[Any]
) -> tuple[Callable[[], MetricValue], list[str]]:
    """``spec.start``'s callable that finishes the metric, and the notes of its start."""
    assert spec.start is not None
    start = len(caught)
    finish = spec.start(batch, **params)
    return finish, _notes_since(caught, start)


def _finisher(finish: Callable[[], MetricValue]) -> Callable[..., MetricValue]:
    """``finish`` as a ``run`` of :func:`_run_one` (which passes the batch)."""
    return lambda _batch: finish()


def _notes_since(caught: list[Any], start: int) -> list[str]:
    """The messages of the warnings recorded from ``start`` on, taken out of ``caught``."""
    if len(caught) == start:
        return []
    notes = [str(w.message) for w in caught[start:]]
    del caught[start:]
    return notes


def evaluate(
    prediction: Any,
    y: Any,
    metrics: str | Sequence[str] = "all",
    *,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    estimators: str | Sequence[str] | None = None,
    ood: Any = None,
    soft_labels: Any = None,
    groups: Any = None,
    curves: bool | Sequence[str] = False,
    seed: int = 0,
    meanwhile: Callable[[], object] | None = None,
) -> Report:
    """Compute several metrics on one batch, sharing sorts and PIT values between them.

    Parameters
    ----------
    prediction : a uqcore prediction object
    y : array_like, shape (N,)
    metrics : "all" or list of str
        ``"all"`` computes every registered metric of the prediction's task that applies to its
        kind (and to the sample weights: some metrics need integer weights) and lists the
        others with the reason in ``Report.not_applicable``. An explicit name that is unknown
        or does not apply raises :class:`UQValidationError`.
    params : dict, optional
        Per-metric options, e.g. ``{"nmerci": {"alpha": 0.9}}``.
    sample_weight : array_like, shape (N,), optional
    estimators : "all" or list of str, optional
        Classification only: evaluate every metric that takes an ``estimator`` option for each
        of these estimators (``"all"``: every one the prediction provides, built-in
        aggregators then user-supplied estimates). The metric × estimator table is
        ``Report.by_estimator`` (and ``"by_estimator"`` in :meth:`Report.to_dict`);
        ``Report[name]`` stays the value for the metric's own ``estimator`` parameter.
    ood : array_like of bool, shape (N,), optional
        Classification only: OOD flags (the OOD-detection metrics need them).
    soft_labels : array_like, shape (N, C), optional
        Classification only: label distributions (the aleatoric metrics need them).
    groups : array_like of int, shape (N,), optional
        Group ids, for the curves that stratify by group.
    curves : bool or list of str, default False
        Also compute curves (:func:`uqcore.curves.curves`) into ``Report.curves``: ``True``
        for every one that applies, or a list of curve names. :mod:`uqcore.plots` draws them.
    seed : int, default 0
        The seed of the curves that draw at random (adversarial group calibration).
    meanwhile : callable, optional
        Called once with no arguments after the metrics and the curves, while the metrics
        that compute in a helper thread (adversarial group calibration at N < 2^20) finish:
        work of the caller's own to overlap with theirs (the service keeps its plots' curves
        there). Its exceptions propagate; its warnings are emitted as usual (they are not
        notes of the report).

    The curves are computed while those helper threads run too (a curve that reads such a
    metric's result waits for it, :attr:`uqcore.curves.CurveSpec.late`); their warnings are
    emitted as usual, not collected as notes.

    The task (regression or classification) is the prediction's; ``y`` holds the hard labels
    for classification.

    Returns
    -------
    Report
        JSON-serialisable via :meth:`Report.to_dict`; never contains NaN (undefined values are
        ``None`` with the reason in ``Report.warnings``).
    """
    from uqcore import __version__

    if curves is not False and not reusing():
        # one batch (its sorts, PIT values, errors) for the metrics and the curves
        with reusing_batches():
            return evaluate(
                prediction,
                y,
                metrics,
                params=params,
                sample_weight=sample_weight,
                estimators=estimators,
                ood=ood,
                soft_labels=soft_labels,
                groups=groups,
                curves=curves,
                seed=seed,
                meanwhile=meanwhile,
            )
    batch = make_batch(prediction, y, sample_weight, ood=ood, soft_labels=soft_labels)
    task = str(getattr(prediction, "task", "regression"))
    targets: frozenset[str] = getattr(batch, "targets", frozenset())
    est_names = estimator_names(prediction, estimators)
    params = dict(params or {})
    not_applicable: dict[str, str] = {}
    if isinstance(metrics, str):
        if metrics != "all":
            raise UQValidationError(
                f"metrics must be 'all' or a list of metric names, found {metrics!r}",
                argument="metrics",
                value=metrics,
            )
        chosen = []
        for spec in registry.specs(task):
            reason = spec.why_not(prediction, targets, batch.weights, params.get(spec.name))
            if reason is None:
                chosen.append(spec)
            else:
                not_applicable[spec.name] = reason
    else:
        if len(metrics) == 0:
            raise UQValidationError("metrics must name at least one metric", argument="metrics")
        chosen = []
        listed = list(metrics)
        for name in dict.fromkeys(listed):
            spec = registry.get(name, task)
            reason = spec.why_not(prediction, targets, batch.weights, params.get(name))
            if reason is not None:
                raise UQValidationError(
                    reason, argument="metrics", index=listed.index(name), value=name
                )
            chosen.append(spec)
    chosen_names = {s.name for s in chosen}
    stray = sorted(set(params) - chosen_names - set(not_applicable))
    if stray:
        raise UQValidationError(
            f"params given for metric(s) not requested: {', '.join(map(repr, stray))}",
            argument="params",
            value=stray[0],
        )
    batch.plan = frozenset(chosen_names)
    values: dict[str, MetricValue] = {}
    by_estimator: dict[str, dict[str, MetricValue]] = {}
    used: dict[str, dict[str, Any]] = {}
    timings: dict[str, float] = {}
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", ResourceWarning)  # a finalizer's, no metric's
        order, drop_after = _evaluation_order(chosen)
        # Metrics with a start (MetricSpec.start) are finished after the others; below
        # _EARLY_START_ROWS they are started before them (what they share stays cached
        # meanwhile: a few MB), so that their helper thread's work overlaps all the others.
        startable = {
            s.name
            for s in order
            if s.start is not None and not (est_names and "estimator" in s.defaults)
        }
        started: list[tuple[registry.MetricSpec, Callable[[], MetricValue]]] = []

        def begin(spec: registry.MetricSpec, resolved: dict[str, Any]) -> None:
            start = time.perf_counter()
            finish, msgs = _start_one(spec, batch, resolved, caught)
            started.append((spec, finish))
            timings[spec.name] = time.perf_counter() - start
            notes.extend(msgs)

        early = batch.n < _EARLY_START_ROWS
        if early:
            for spec in order:
                if spec.name in startable:
                    begin(spec, spec.resolve_params(params.get(spec.name)))
        before = batch.cached_keys()
        # a batch that a reusing_batches block keeps for later calls keeps its caches
        reused = is_reused(batch)
        for position, spec in enumerate(order):
            resolved = spec.resolve_params(params.get(spec.name))
            value = None
            if spec.name in startable:
                if not early:
                    begin(spec, resolved)
            else:
                start = time.perf_counter()
                value, msgs = _run_one(spec, batch, resolved, caught)
                timings[spec.name] = time.perf_counter() - start
                notes.extend(msgs)
            values[spec.name] = value
            used[spec.name] = spec.reported_params(resolved, params.get(spec.name), json_safe)
            if est_names and "estimator" in spec.defaults:
                row: dict[str, MetricValue] = {}
                for est in est_names:
                    if est == resolved["estimator"]:
                        row[est] = value
                        continue
                    v, msgs = _run_one(spec, batch, {**resolved, "estimator": est}, caught)
                    row[est] = v
                    notes.extend(f"[{est}] {m}" for m in msgs)
                by_estimator[spec.name] = row
            if position in drop_after and not reused:
                batch.forget_since(before)  # a group's working set, before the next one's
                if batch.n >= _TRIM_ROWS:
                    release_free_memory()
        # The curves and the caller's own work while the started metrics' helper threads
        # run; their warnings are not the metrics' notes: emitted after this block.
        mark = len(caught)
        held: dict[str, Any] = {}
        if curves is not False:
            from uqcore.curves import curves as compute_curves

            held = compute_curves(
                prediction,
                y,
                "all" if curves is True else list(curves),
                sample_weight=sample_weight,
                groups=groups,
                ood=ood,
                seed=seed,
            )
        if meanwhile is not None:
            meanwhile()
        theirs = caught[mark:]
        del caught[mark:]
        for spec, finish in started:
            start = time.perf_counter()
            done = _finisher(finish)
            values[spec.name], msgs = _run_one(spec, batch, {}, caught, run=done)
            timings[spec.name] += time.perf_counter() - start
            notes.extend(msgs)
    for w in theirs:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    values = {s.name: values[s.name] for s in chosen}
    meta: dict[str, Any] = {
        "uqcore_version": __version__,
        "task": task,
        "prediction_kind": prediction.kind,
        "n": batch.n,
        "weighted": batch.weights is not None,
        # Wall time per metric, in evaluation order: shared work (sorts, PIT values) is
        # charged to the first metric that needs it.
        "timings_s": timings,
    }
    if est_names:
        meta["estimators"] = est_names
        meta["by_estimator"] = by_estimator
    return Report(values, used, not_applicable, notes, meta, held)


def estimator_names(prediction: Any, estimators: str | Sequence[str] | None) -> list[str]:
    """The estimator names that ``estimators`` selects for ``prediction`` (``evaluate``'s
    argument): none for None, every one the prediction provides for ``"all"`` (its
    aggregators and named estimates), else the listed names, each checked to apply."""
    if estimators is None:
        return []
    if getattr(prediction, "task", "regression") != "classification":
        raise UQValidationError(
            "estimators apply to classification predictions only", argument="estimators"
        )
    available = prediction.estimator_names()
    if isinstance(estimators, str):
        if estimators != "all":
            raise UQValidationError(
                f"estimators must be 'all' or a list of estimator names, found {estimators!r}",
                argument="estimators",
                value=estimators,
            )
        return list(available)
    listed = list(estimators)
    chosen = list(dict.fromkeys(listed))
    if not chosen:
        raise UQValidationError(
            "estimators must name at least one estimator", argument="estimators"
        )
    for name in chosen:
        if name not in available:
            raise UQValidationError(
                f"estimator {name!r} does not apply to this {prediction.kind} prediction; "
                f"available: {', '.join(available)}",
                argument="estimators",
                index=listed.index(name),
                value=name,
            )
    return chosen


def metric(
    name: str,
    prediction: Any,
    y: Any,
    *,
    sample_weight: Any = None,
    ood: Any = None,
    soft_labels: Any = None,
    **options: Any,
) -> MetricValue:
    """Compute one registered metric: ``metric("crps", pred, y, sample_weight=w)``.

    The metric of the prediction's task is used (``"ece"`` and ``"nll"`` exist for both);
    ``ood`` and ``soft_labels`` are classification targets, e.g.
    ``metric("auroc_ood", ens, labels, ood=is_ood, estimator="mutual_information")``.
    """
    spec = registry.get(name, str(getattr(prediction, "task", "regression")))
    # y checked finite when first used: mae and rmse prove it with their own sum (one read)
    batch = make_batch(
        prediction, y, sample_weight, ood=ood, soft_labels=soft_labels, defer_finite=True
    )
    return registry.call(spec, batch, options)
