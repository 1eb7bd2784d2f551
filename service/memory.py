"""The memory of one job: its estimate, the per-job budget, and the limit that enforces it.

The API refuses a request whose estimate exceeds the budget with 422 before the 202
(:func:`estimate_job`, :func:`over_budget`); the worker checks the estimate again before it
runs the job (API and worker may run on different machines, each with its own budget) and runs
the computation under :func:`enforced`, an address-space limit of the budget, so that a job
that needs more than estimated fails with a reason instead of taking the machine.

The model
---------
A job holds its inputs, the per-row arrays of its metrics, and, for the resampling analyses,
blocks of weight vectors: the engine of :mod:`uqcore.stability` evaluates resamples a block at
a time, ``b = min(count, 2**23 // N, 256)`` weight vectors of N rows each, never all ``B × N``
weights at once. With 8-byte values, W the prediction's width (values per row: K for a mixture,
S samples, Q quantiles, C classes; an ensemble is reduced over its M members chunk by chunk,
so its working width is C) and E the number of elements of the arrays sent, the parts are

- inputs: ``2 · 8E`` (the stored bytes and the arrays decoded from them);
- metrics: ``8N · (16 + 2.5W)`` (each metric's per-row terms, sorts and temporaries of the
  prediction's matrices);
- bootstrap (B > 0): ``8N · (c + 2b + W)`` (the per-row columns, the weight block and its
  products, one resample's weighted batch), with ``c = 112`` for regression (the block
  evaluators' columns, the per-resample work of the interval, decomposition and skill
  metrics, and the next block's counts drawn while a block is evaluated) and ``c = 16`` for
  classification (computed chunk by chunk). The bootstrap itself draws its resamples as
  one-byte counts, ``b_c = min(B, 2**24 // N, 256)`` vectors per block
  (``uqcore.stability._engine.count_block``: at most 16 MiB, up to twice the resamples of
  ``b`` at an eighth of the bytes each); the ``8N · 2b`` term (at most 128 MiB) holds them
  and their products. BCa adds the delete-a-block jackknife,
  ``8N · 4·b_j`` with ``b_j = min(100, 2**23 // N, 256)``;
- stability: ``8N · (c + 3.5·b_s + W)`` with ``b_s = min(repeats, 2**23 // N, 256)``, plus
  16 MiB (the gathered small subsets and the per-size tables);
- curves: ``8N · (4 + W)`` (the curves read the batch's sorts and PIT values: a sparsification
  curve on its grid and a Murphy diagram by chunks need no N-long block of their own; measured
  below the metrics' peak, ``benchmarks/RESULTS.md``, "Memory estimate" and "Large
  submission");
- bins: ``64 · n_bins · max(b, 1)`` for each binned metric (per-bin tallies of a block);
- estimators (classification): ``8N · (4 + 8·[B > 0])`` per estimator beyond the metric's own;
- a fixed ``32 MiB`` per job (thread stacks, interpreter objects, the result document).

``benchmarks/memory.py`` measures real jobs (the worker's computation, peak of the traced
allocations and of the resident set) over a grid of shapes and checks that every estimate is
at least the measured peak and at most 4 times it; its table is in ``benchmarks/RESULTS.md``
("Memory estimate").

The budget
----------
``job_memory_budget_bytes`` (``UQEVAL_JOB_MEMORY_BUDGET_BYTES``); unset, each process derives
it once from its machine (:func:`default_budget`): half of the memory it may use — the
physical memory, or the cgroup's ``memory.max`` when that is set and lower — divided by the
worker concurrency, and at least :data:`FLOOR_BYTES`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.analyses import Analyses
from service.kinds import CLASSIFICATION_KINDS, ESTIMATE_PREFIX, KIND_FIELDS
from uqcore import registry

try:  # POSIX only: without it the budget is estimated but not enforced
    import resource
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

__all__ = [
    "FLOOR_BYTES",
    "SETTING",
    "JobEstimate",
    "default_budget",
    "enforced",
    "estimate_job",
    "estimate_job_bytes",
    "format_bytes",
    "job_memory_budget",
    "machine_memory_bytes",
    "over_budget",
]

log = logging.getLogger(__name__)

#: The environment variable of the setting, named in every refusal.
SETTING = "UQEVAL_JOB_MEMORY_BUDGET_BYTES"
#: The smallest derived budget (a machine with little memory still runs small jobs).
FLOOR_BYTES = 256 << 20
#: What every job holds whatever its size (thread stacks, objects, the result document).
FIXED_BYTES = 32 << 20
#: As the engine of :mod:`uqcore.stability` (``_engine.BLOCK_ELEMENTS``): the elements of
#: one dense block of weights, and the most resamples per block.
BLOCK_ELEMENTS = 2**23
MAX_BLOCK = 256
#: Blocks of the delete-a-block jackknife of a BCa interval.
JACKKNIFE_BLOCKS = 100

_ITEM = 8


@dataclass(frozen=True)
class JobEstimate:
    """The estimated peak memory of a job (bytes), by part: ``parts`` maps a description of
    each part (what sizes it, e.g. ``"bootstrap.n_resamples × N"``) to its bytes."""

    parts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    @property
    def biggest(self) -> tuple[str, int]:
        """The part that contributes most (its description and bytes)."""
        return max(self.parts.items(), key=lambda kv: kv[1])


def _block(count: int, n: int) -> int:
    """Resamples per dense block of 8-byte weights, as ``uqcore.stability._engine.default_block``
    (the stability analysis's blocks; the bootstrap's one-byte count blocks,
    ``_engine.count_block``, fit in the same bytes: see the module's model)."""
    return max(1, min(count, BLOCK_ELEMENTS // max(n, 1), MAX_BLOCK))


def _width(kind: str, shapes: Mapping[str, Sequence[int]]) -> int:
    """Values per row of the prediction as the metrics work on it (see the module's model)."""
    width = 1
    for name in KIND_FIELDS.get(kind, ()):
        shape = shapes.get(name)
        if shape is None or len(shape) < 2:
            continue
        # an ensemble (M×N×C) is reduced over its members chunk by chunk: C per row
        w = int(shape[-1])
        width = max(width, 3 * w if kind == "mixture" else w)
    return width


def _n_estimators(kind: str, analyses: Analyses, shapes: Mapping[str, Sequence[int]]) -> int:
    est = analyses.estimators
    if est is None or kind not in CLASSIFICATION_KINDS:
        return 0
    if est == "all":
        own = sum(1 for k in shapes if k.startswith(ESTIMATE_PREFIX))
        return own + (11 if kind == "ensemble" else 3)  # the built-in aggregators
    return len(est)


def _bins(kind: str, analyses: Analyses) -> int:
    """The sum of ``n_bins`` over the binned metrics the job computes."""
    task = "classification" if kind in CLASSIFICATION_KINDS else "regression"
    wanted = analyses.metrics
    names = [s.name for s in registry.specs(task)] if wanted == "all" else list(wanted)
    total = 0
    for name in names:
        try:
            spec = registry.get(name, task)
        except Exception:  # an unknown name is refused elsewhere; it sizes nothing here
            continue
        if "n_bins" in spec.defaults:
            value = analyses.params.get(name, {}).get("n_bins", spec.defaults["n_bins"])
            total += int(value) if isinstance(value, int) else int(spec.defaults["n_bins"])
    return total


def estimate_job(
    kind: str, n: int, analyses: Analyses, *, shapes: Mapping[str, Sequence[int]]
) -> JobEstimate:
    """The estimated peak memory of evaluating a submission (see the module's model).

    ``kind``: the prediction's kind; ``n``: N, its rows; ``analyses``: what the job computes;
    ``shapes``: the shape of every array the job holds (the prediction's fields, the targets,
    weights, groups, soft labels, estimates — a benchmark's hidden ones included).
    """
    n = max(int(n), 1)
    row = _ITEM * n
    width = _width(kind, shapes)
    elements = 0
    for shape in shapes.values():
        count = 1
        for d in shape:
            count *= int(d)
        elements += count
    parts: dict[str, int] = {
        "fixed per-job overhead": FIXED_BYTES,
        "inputs (N × prediction width)": 2 * _ITEM * elements,
        "metrics × N × prediction width": int(row * (16 + 2.5 * width)),
    }
    # the per-row columns of the resampling engine (see the module's model)
    columns = 16 if kind in CLASSIFICATION_KINDS else 112
    b_resamples = analyses.bootstrap.n_resamples
    block = 0
    if b_resamples > 0:
        block = _block(b_resamples, n)
        boot = row * (columns + 2 * block + width)
        if analyses.bootstrap.method == "bca":
            boot += row * 4 * _block(min(JACKKNIFE_BLOCKS, n), n)
        parts["bootstrap.n_resamples × N"] = boot
    if analyses.stability.enabled:
        s_block = _block(analyses.stability.repeats, n)
        block = max(block, s_block)
        parts["stability.repeats × N"] = int(row * (columns + 3.5 * s_block + width)) + (16 << 20)
    if analyses.curves:
        parts["curves × N"] = row * (4 + width)
    bins = _bins(kind, analyses)
    if bins:
        parts["n_bins of the binned metrics"] = 64 * bins * max(block, 1)
    n_est = _n_estimators(kind, analyses, shapes)
    if n_est:
        parts["estimators × N"] = n_est * row * (4 + (8 if b_resamples > 0 else 0))
    return JobEstimate(parts)


def benchmark_shapes(bench: Any) -> dict[str, tuple[int, ...]]:
    """The shapes of the hidden arrays a benchmark (a :class:`service.store.BenchmarkRecord`)
    adds to each of its jobs: targets, groups, soft labels, OOD flags."""
    n = int(bench.n)
    classification = bench.task == "classification"
    shapes: dict[str, tuple[int, ...]] = {"labels" if classification else "y": (n,)}
    if bench.has_groups:
        shapes["groups"] = (n,)
    if classification and bench.has_soft_labels:
        shapes["soft_labels"] = (n, _classes(bench))
    if classification and bench.has_ood:
        shapes["ood"] = (n,)
    return shapes


def _classes(bench: Any) -> int:
    if bench.n_classes is not None:
        return int(bench.n_classes)
    return max(2, int(bench.label_max or 0) + 1)


def estimate_benchmark(bench: Any) -> JobEstimate:
    """The estimate of the smallest job a benchmark can run: its analyses at its N for the
    narrowest prediction it accepts (regression: two values per row; classification: C class
    probabilities, C declared or the labels' least). A prediction's width is known only with
    the submission, which is checked again then."""
    analyses = bench.analyses(list(bench.metrics), bench.estimators)
    n = int(bench.n)
    pred: dict[str, tuple[int, ...]]
    if bench.task == "classification":
        kind, pred = "probs", {"probs": (n, _classes(bench))}
    else:
        kind, pred = "gaussian", {"mean": (n,), "std": (n,)}
    return estimate_job(kind, n, analyses, shapes={**pred, **benchmark_shapes(bench)})


def estimate_job_bytes(
    kind: str, n: int, analyses: Analyses, *, shapes: Mapping[str, Sequence[int]]
) -> int:
    """The estimated peak memory of a job in bytes (:func:`estimate_job`'s total)."""
    return estimate_job(kind, n, analyses, shapes=shapes).total


def format_bytes(n: float) -> str:
    """``1.5 GiB`` etc. (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def over_budget(estimate: JobEstimate, budget: int) -> str | None:
    """The reason a job of ``estimate`` is refused under ``budget`` (None when it fits)."""
    total = estimate.total
    if total <= budget:
        return None
    part, size = estimate.biggest
    return (
        f"the job needs an estimated {format_bytes(total)} of memory, over the job memory "
        f"budget of {format_bytes(budget)} ({budget} bytes, setting {SETTING}); its biggest "
        f"part is {part} ({format_bytes(size)}): ask for fewer bootstrap resamples or "
        "stability repeats, fewer bins, or split the batch"
    )


# --- the budget -------------------------------------------------------------------------------


def _cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``); None when there is none."""
    for path in (
        Path("/sys/fs/cgroup/memory.max"),
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    ):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 writes a huge number for "none"
            return int(text)
    return None


def machine_memory_bytes() -> int | None:
    """The memory this process may use: the physical memory, or the cgroup's limit when that
    is set and lower; None when neither can be read."""
    physical: int | None
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = None
    limits = [m for m in (physical, _cgroup_limit()) if m is not None and m > 0]
    return min(limits) if limits else None


def default_budget(concurrency: int, memory: int | None = None) -> int:
    """Half of ``memory`` (default :func:`machine_memory_bytes`) divided by the worker
    ``concurrency``, at least :data:`FLOOR_BYTES` (the floor also when nothing is known)."""
    mem = machine_memory_bytes() if memory is None else memory
    if mem is None:
        return FLOOR_BYTES
    return max(FLOOR_BYTES, mem // 2 // max(1, concurrency))


@functools.lru_cache(maxsize=8)
def _derived(concurrency: int) -> int:
    return default_budget(concurrency)


def job_memory_budget(settings: Any, concurrency: int | None = None) -> int:
    """The effective per-job budget of this process: the setting, or the budget derived from
    the machine (once per process, see :func:`default_budget`) for ``concurrency`` jobs at
    once (default the setting ``worker_concurrency``)."""
    value = settings.job_memory_budget_bytes
    if value is not None:
        return int(value)
    return _derived(int(concurrency or settings.worker_concurrency))


# --- enforcement ------------------------------------------------------------------------------


def data_bytes() -> int | None:
    """The process's data size now (``VmData``: private writable mappings, what
    ``RLIMIT_DATA`` limits); None where /proc does not tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


#: CPython's message when a new thread's stack cannot be mapped (``threading.Thread.start``).
_THREAD_REFUSED = "can't start new thread"


@contextlib.contextmanager
def enforced(budget: int) -> Iterator[int | None]:
    """Run the block with at most ``budget`` more bytes of data for this process.

    Sets the soft ``RLIMIT_DATA`` to the data size now plus ``budget`` (never above a lower
    limit already set), and restores the previous limit on the way out, also when the block
    raises. Past the limit an allocation fails: numpy raises :class:`MemoryError`. So does a
    thread the block cannot start (its stack is refused by the limit; Python raises
    ``RuntimeError("can't start new thread")``, which leaves the block as a
    :class:`MemoryError` that names the limit, chained to it). Yields the limit set (None
    where it cannot be enforced: no ``resource`` module, no /proc). The limit is the
    process's: a job runs alone in its process (solo or prefork pool).
    """
    now = data_bytes()
    if resource is None or now is None:
        yield None
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = now + budget
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ValueError, OSError) as exc:  # e.g. a platform without RLIMIT_DATA
        log.warning("the job memory budget is not enforced: %s", exc)
        yield None
        return
    try:
        yield limit
    except RuntimeError as exc:
        if _THREAD_REFUSED not in str(exc):
            raise
        raise MemoryError(
            f"a thread could not be started within the data limit of {limit} bytes ({exc})"
        ) from exc
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
