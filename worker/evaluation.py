"""The computation of one submission: stored arrays + its analyses -> result document.

Pure with respect to the store: :func:`compute` receives the arrays and calls back
``checkpoint(progress)`` between phases (metrics, bootstrap, curves, stability) and within the
long ones (after each block of bootstrap resamples, each block of stability subsets), which is
where the caller reports progress and stops a cancelled job. All metric work is uqcore's
(:func:`uqcore.evaluate`, :func:`uqcore.stability.bootstrap`,
:func:`uqcore.stability.convergence`, the curve functions); this module only arranges the
result document of the service contract, keeps NaN/inf out of it (null plus a warning) and
puts uqcore's notes in the words of the API (:func:`service.rest_text.rest_document`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import uqcore
from service.analyses import Analyses
from service.kinds import (
    CLASSIFICATION_KINDS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    SCALAR_FIELDS,
    build_prediction,
    construct,
    target_field,
    task_of,
)
from service.plots import submission_plots
from service.rest_text import Origin, rest_document
from uqcore import registry, to_numpy
from uqcore.coarse import coarse_curves, coarse_details
from uqcore.curves import curve_to_json
from uqcore.curves import curves as all_curves
from uqcore.report import json_safe
from uqcore.stability import bootstrap, convergence
from worker.backend import Backend

__all__ = ["Inputs", "SplitBootstrap", "bootstrap_options", "compute", "inputs"]

Checkpoint = Callable[[float], None]


#: ``split(prediction, y, options, progress)``: the bootstrap values of a job computed in
#: parts (:mod:`worker.fanout`), or None to compute them here; ``options`` are the keyword
#: arguments of :func:`uqcore.stability.bootstrap_values` (:func:`bootstrap_options`).
SplitBootstrap = Callable[
    [Any, Any, Mapping[str, Any], Callable[[float], None]], Mapping[str, Any] | None
]


@dataclass(frozen=True)
class Inputs:
    """What uqcore takes from a submission's arrays: the prediction, the targets, the weights,
    the arrays on the backend's device and the batch's extra targets (``ood``,
    ``soft_labels``)."""

    prediction: Any
    y: Any
    sample_weight: Any
    arrays: Mapping[str, Any]
    extra: Mapping[str, Any]


def inputs(kind: str, arrays: Mapping[str, np.ndarray[Any, Any]], backend: Backend) -> Inputs:
    """The inputs of uqcore built from the stored ``arrays`` of a ``kind`` submission.

    The stored arrays may be read-only memory maps: they are passed on as they are (uqcore
    converts them once, e.g. float32 to float64), never written into nor copied here.
    """
    classification = kind in CLASSIFICATION_KINDS
    tname = target_field(kind)
    fields = {
        f: v
        for f, v in arrays.items()
        if f in KIND_FIELDS.get(kind, ()) or (classification and f.startswith(ESTIMATE_PREFIX))
    }
    if tname not in arrays:
        raise uqcore.UQValidationError(f"{tname} (the targets) is missing")
    extra: dict[str, Any] = {}
    if classification:
        # Classification is computed on the host, chunk by chunk over N, in the arrays' own
        # dtype (a float32 ensemble is never copied to float64 whole).
        pred = build_prediction(kind, fields)
        dev: Mapping[str, Any] = dict(arrays)
        extra = {k: arrays[k] for k in ("ood", "soft_labels") if k in arrays}
    elif backend.name == "numpy":
        pred = build_prediction(kind, fields)
        dev = dict(arrays)
    else:
        build_prediction(kind, fields)  # validation on the host, identical to the API's
        dev = {name: backend.asarray(np.asarray(v)) for name, v in arrays.items()}
        # a scalar field (an interval's level) stays a host number
        pred = construct(kind, {f: fields[f] if f in SCALAR_FIELDS else dev[f] for f in fields})
    return Inputs(pred, dev[tname], dev.get("sample_weight"), dev, extra)


def bootstrap_options(analyses: Analyses, names: list[str], given: Inputs) -> dict[str, Any]:
    """The keyword arguments of :func:`uqcore.stability.bootstrap` (and of
    :func:`~uqcore.stability.bootstrap_values`) for the metrics ``names`` of a job, but the
    method and level: what a job and the workers computing its parts share."""
    boot = analyses.bootstrap
    extra = dict(given.extra)
    if analyses.estimators is not None:
        extra["estimators"] = analyses.estimators
    return {
        "metrics": names,
        "n_resamples": boot.n_resamples,
        "seed": analyses.seed,
        "unit": boot.unit,
        "groups": given.arrays.get("groups") if boot.unit != "row" else None,
        "params": {k: v for k, v in analyses.params.items() if k in names},
        "sample_weight": given.sample_weight,
        **extra,
    }


def _host(value: Any) -> Any:
    """Arrays of any namespace (CuPy, torch) as numpy, for JSON."""
    if isinstance(value, (np.ndarray, float, int, str, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_host(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _host(v) for k, v in value.items()}
    try:
        return to_numpy(value)
    except Exception:  # not an array: leave it to json_safe to refuse
        return value


def _curves(
    pred: Any,
    y: Any,
    sample_weight: Any,
    notes: list[str],
    *,
    groups: Any = None,
    ood: Any = None,
    seed: int = 0,
    coarse: bool = False,
) -> dict[str, Any]:
    """Every :mod:`uqcore.curves` curve that applies to the prediction and the inputs
    present, as JSON (non-finite values as null plus a note); with ``coarse`` (a benchmark's
    hidden targets) only on the coarse grid of :mod:`uqcore.coarse`, computed here so that
    nothing finer ever leaves the worker."""
    if coarse:
        found, why = coarse_curves(pred, y, groups=groups, ood=ood)
        notes.extend(why)
    else:
        found = all_curves(
            pred, y, "all", sample_weight=sample_weight, groups=groups, ood=ood, seed=seed
        )
    return {
        name: json_safe(_host(curve_to_json(curve)), name, notes) for name, curve in found.items()
    }


class EstimatedProgress(threading.Thread):
    """Advances the progress of a phase that reports none (``uqcore.evaluate`` of a large
    batch) from the time elapsed: fraction 1 − exp(−t/τ) with τ the phase's expected
    duration for N rows (:data:`EVALUATE_S_PER_ROW`), written every :data:`TICK_S` and held
    below :data:`CAP` of the phase, so the bar moves and never claims the phase done. Only
    from :data:`MIN_ROWS` rows (smaller batches are done before the first tick).

    ``report`` is the phase's callback (the job's checkpoint): what it raises here (the job
    was cancelled) stops the ticks; the computation itself is stopped by the job's own
    interrupt.
    """

    def __init__(self, report: Callable[[float], None], n: int) -> None:
        super().__init__(name="estimated-progress", daemon=True)
        self.report = report
        self.tau = max(1.0, n * EVALUATE_S_PER_ROW)
        self.active = n >= MIN_ROWS
        self.stopped = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self.stopped.wait(TICK_S):
            fraction = CAP * (1.0 - math.exp(-(time.monotonic() - start) / self.tau))
            try:
                self.report(fraction)
            except BaseException:  # cancelled or lost: the job's thread stops itself
                return

    def __enter__(self) -> EstimatedProgress:
        if self.active:
            self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        if self.active:
            self.join()


#: Seconds per row of ``uqcore.evaluate`` of all regression metrics, the time scale of
#: :class:`EstimatedProgress`: measured 5.0–7.6 s at 10^7 (float64, every metric but group
#: calibration; ``benchmarks/RESULTS.md``, "Distance to the floor") and 100–176 s at 10^8
#: (float32, memory-mapped; "Large submission") on this project's 2-core machines.
EVALUATE_S_PER_ROW = 1e-6
#: Batches from this many rows get estimated progress during ``uqcore.evaluate``.
MIN_ROWS = 1_000_000
#: Seconds between two estimated progress reports.
TICK_S = 0.5
#: The estimated fraction of a phase stays below this.
CAP = 0.9


class _Phases:
    """The progress of :func:`compute`, 0..100: 5 when the inputs are built, then equal
    shares for the metrics, the bootstrap and the stability study (those asked for), and
    the rest for assembling the document. :meth:`part` gives a long phase the callback of
    its fraction done (uqcore calls it after each block), which reaches ``checkpoint``: the
    caller throttles its writes, and stops a cancelled job there."""

    def __init__(self, checkpoint: Checkpoint, phases: int) -> None:
        self.checkpoint = checkpoint
        self.per_phase = 90.0 / (phases + 1)
        self.done = 5.0

    def end_phase(self) -> None:
        self.done += self.per_phase
        self.checkpoint(self.done)

    def part(self) -> Callable[[float], None]:
        """The callback of the phase now running: its fraction done -> checkpoint."""
        start, width = self.done, self.per_phase
        return lambda fraction: self.checkpoint(start + width * fraction)


def compute(
    kind: str,
    arrays: Mapping[str, np.ndarray[Any, Any]],
    analyses: Analyses,
    *,
    backend: Backend,
    checkpoint: Checkpoint,
    input_hash: str = "",
    load_s: float = 0.0,
    origin: Origin = "submission",
    sub_id: str | None = None,
    split: SplitBootstrap | None = None,
    given: Inputs | None = None,
    meanwhile: tuple[str, Callable[[], object]] | None = None,
) -> dict[str, Any]:
    """The result document of one submission.

    ``arrays`` holds the prediction fields of ``KIND_FIELDS[kind]``, the targets (``y``, or
    ``labels`` for a classification kind) and optionally ``sample_weight`` and ``groups``; a
    classification kind also ``soft_labels``, ``ood`` and estimates ``estimate:<name>``. The
    metrics are those of the kind's task; with ``analyses.estimators`` the metric ×
    estimator table is ``by_estimator`` (metric -> estimator -> value) and, when bootstrapped,
    ``by_estimator_intervals`` (metric -> estimator -> interval). Bad input raises
    :class:`uqcore.UQValidationError`.
    ``checkpoint(p)`` is called with the progress p (0..100, increasing) after each phase and
    within the long ones, and may raise to stop the computation. The curves (every
    :mod:`uqcore.curves` curve that applies to the prediction and the inputs present) are
    computed only with ``analyses.curves``; ``curves`` is ``{}`` otherwise. ``origin`` says
    whose analyses these are (``"benchmark"``: the benchmark's, for the wording of the notes;
    its targets are hidden, so its curves are those of :func:`uqcore.coarse.coarse_curves`
    and its metrics' details leave out small groups).
    With ``sub_id``, the document lists the submission's plots (``plots``, see
    :func:`service.plots.submission_plots`). ``split(prediction, y, options, progress)``, when
    given, may compute the bootstrap values elsewhere (:mod:`worker.fanout`): it returns them
    (:func:`uqcore.stability.bootstrap_values` of every resample, combined) or None to let
    :func:`uqcore.stability.bootstrap` resample here. ``given``: the :func:`inputs` of
    ``arrays`` when the caller built them already (to use the same prediction object after).
    ``meanwhile``: (name, work) of the caller's to do while the metrics computed in helper
    threads finish (:func:`uqcore.evaluate`'s ``meanwhile``: the job keeps its plots' curves
    there); its time is ``timings[name]``, not the metrics'.
    """
    start = time.perf_counter()
    task = task_of(kind)
    # A benchmark's targets are hidden: its curves are coarse, its details of small groups
    # left out (uqcore.coarse).
    hidden = origin == "benchmark"
    classification = kind in CLASSIFICATION_KINDS
    tname = target_field(kind)
    if given is None:
        given = inputs(kind, arrays, backend)
    pred, y, weights, dev = given.prediction, given.y, given.sample_weight, given.arrays
    extra = dict(given.extra)
    estimators = analyses.estimators
    if estimators is not None:
        extra["estimators"] = estimators
    metrics = analyses.metrics
    params = analyses.params
    seed = analyses.seed
    timings: dict[str, float] = {"load": load_s}
    notes: list[str] = []
    checkpoint(5.0)
    boot = analyses.bootstrap
    n_resamples = boot.n_resamples
    stability_on = analyses.stability.enabled
    phases = _Phases(checkpoint, 1 + (n_resamples > 0) + stability_on)

    t0 = time.perf_counter()
    n = int(np.shape(y)[0])
    spent: list[float] = []

    def timed() -> None:
        assert meanwhile is not None
        begun = time.perf_counter()
        try:
            meanwhile[1]()
        finally:
            spent.append(time.perf_counter() - begun)

    with EstimatedProgress(phases.part(), n):
        report = uqcore.evaluate(
            pred,
            y,
            metrics,
            params=params,
            sample_weight=weights,
            meanwhile=None if meanwhile is None else timed,
            **extra,
        )
    timings["metrics"] = time.perf_counter() - t0 - sum(spent)
    if meanwhile is not None and spent:
        timings[meanwhile[0]] = sum(spent)
    notes.extend(report.warnings)
    phases.end_phase()

    names = list(report)
    if not names and metrics == "all":
        # said in the document rather than left as an empty table (the API refuses such a
        # request; a local evaluation or an older job can still get here)
        caps = ", ".join(sorted(getattr(pred, "capabilities", ()))) or "nothing"
        notes.append(f"no {task} metric applies to this {kind} prediction (it provides {caps})")
    result_metrics: dict[str, Any] = {}
    for name in names:
        spec = registry.get(name, task)
        value = report[name]
        entry: dict[str, Any] = {
            "value": report.scalar(name),
            "params": report.params.get(name, {}),
            "direction": spec.direction,
            "bounds": list(spec.bounds),
            "interval": None,
        }
        if isinstance(value, dict):
            details = {k: v for k, v in value.items() if k != "value"}
            # On a benchmark, no value of a small group of its hidden rows leaves the worker.
            entry["details"] = coarse_details(details) if hidden else details
        result_metrics[name] = entry

    by_est_ci: dict[str, dict[str, Any]] = {}
    if n_resamples > 0 and names:
        t0 = time.perf_counter()
        options = bootstrap_options(analyses, names, given)
        part = phases.part()
        values = None
        if split is not None:
            # the parts' share of the phase; the intervals (and BCa's jackknife) the rest
            values = split(pred, y, options, lambda f: part(0.9 * f))
        ci = bootstrap(
            pred,
            y,
            method=boot.method,
            level=boot.level,
            progress=part if values is None else (lambda f: part(0.9 + 0.1 * f)),
            values=values,
            **options,
        )
        for name in names:
            if name not in ci:
                continue
            r = ci[name]
            result_metrics[name]["interval"] = {
                "low": r.get("low"),
                "high": r.get("high"),
                "std": r.get("std"),
                "method": r.get("method"),
                "level": r.get("level"),
                "n_resamples": n_resamples,
                "n_valid": r.get("n_valid"),
            }
            notes.extend(f"{name} bootstrap: {w}" for w in r.get("warnings", []))
        if estimators is not None:
            for metric_name, row in report.by_estimator.items():
                own = report.params.get(metric_name, {}).get("estimator")
                for est in row:
                    key = metric_name if est == own else f"{metric_name}[{est}]"
                    if key not in ci:
                        continue
                    r = ci[key]
                    by_est_ci.setdefault(metric_name, {})[est] = {
                        "low": r.get("low"),
                        "high": r.get("high"),
                        "std": r.get("std"),
                        "method": r.get("method"),
                        "level": r.get("level"),
                        "n_resamples": n_resamples,
                        "n_valid": r.get("n_valid"),
                    }
        timings["bootstrap"] = time.perf_counter() - t0
        phases.end_phase()

    curves: dict[str, Any] = {}
    if analyses.curves:
        t0 = time.perf_counter()
        curves = _curves(
            pred,
            y,
            weights,
            notes,
            groups=dev.get("groups"),
            ood=extra.get("ood"),
            seed=seed,
            coarse=hidden,
        )
        timings["curves"] = time.perf_counter() - t0

    stability: Any = None
    if stability_on and names:
        t0 = time.perf_counter()
        st = convergence(
            pred,
            y,
            names,
            repeats=analyses.stability.repeats,
            seed=seed,
            params={k: v for k, v in params.items() if k in names},
            sample_weight=weights,
            progress=phases.part(),
            **extra,
        )
        stability = _host(st.to_dict())
        timings["stability"] = time.perf_counter() - t0
        phases.end_phase()

    timings["total"] = time.perf_counter() - start + load_s
    doc = {
        "metrics": result_metrics,
        "not_applicable": dict(report.not_applicable),
        "warnings": [],
        "curves": curves,
        "stability": stability,
        "provenance": {
            "uqcore_version": uqcore.__version__,
            # Classification computes on the host (numpy), whatever backend the worker has.
            "backend": "numpy" if classification else backend.name,
            "device": "cpu" if classification else backend.device,
            "input_hash": input_hash,
            "n": int(np.asarray(arrays[tname]).shape[0]),
            "kind": kind,
            "task": task,
            "seed": seed,
            "timings_s": timings,
        },
    }
    if estimators is not None:
        doc["estimators"] = list(report.meta.get("estimators", []))
        doc["by_estimator"] = report.by_estimator
        if by_est_ci:
            doc["by_estimator_intervals"] = by_est_ci
    if sub_id is not None:
        available = frozenset(k for k in ("groups", "ood") if k in arrays)
        doc["plots"] = submission_plots(
            sub_id, pred, available, doc, benchmark=origin == "benchmark"
        )
    safe = json_safe(doc, "result", notes)
    safe["warnings"] = list(dict.fromkeys(notes))
    asked = names if metrics == "all" else list(metrics)
    return dict(rest_document(safe, task=task, origin=origin, metrics=asked))
