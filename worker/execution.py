"""Running one job: claim it, keep its heartbeat, compute, store the outcome — exactly once.

:func:`run_job` is what the Celery task calls with the submission id. It is idempotent: a job
that already ended (a re-delivered message), is held by another live delivery, or was deleted
is left alone. While it computes, a heartbeat thread refreshes the job's heartbeat every
``heartbeat_interval_s`` and watches for a cancel request, which the computation obeys at its
next checkpoint — or sooner: the heartbeat thread interrupts the computation (see
:class:`Interrupter`). Input that uqcore rejects fails the job at once with uqcore's message (no
retry: it would fail the same way); a lost Redis connection is re-raised so that the task
retries with backoff.

Memory: before it computes, a job's estimate (:func:`service.memory.estimate_job`) is checked
against this worker's budget (:func:`service.memory.job_memory_budget`), and the computation
runs under that budget (:func:`service.memory.enforced`); a job over it fails with a reason
naming the memory budget and is not retried, and the worker goes on with the next job.

The comparison and rank jobs are claimed the same way, with a heartbeat
(:func:`run_comparison_job`, :func:`run_rank_job`): a comparison whose worker vanished is
re-queued by the reaper (:func:`service.jobs.reap`), and a rank job's board claim lapses so
that the next leaderboard read queues it again.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from celery.exceptions import SoftTimeLimitExceeded

from service.kinds import CLASSIFICATION_KINDS, target_field, task_of
from service.memory import SETTING, enforced, estimate_job, format_bytes, over_budget
from service.rest_text import Origin, rest_text
from service.settings import Settings
from service.store import Store, StoreUnavailable
from uqcore import UQValidationError, reusing_batches
from worker.backend import Backend
from worker.comparisons import run_comparison
from worker.evaluation import compute, inputs
from worker.fanout import Enqueue, SplitJob
from worker.leaderboard import ranking
from worker.plots import keep_curves, pack_curves
from worker.ranks import compute_ranks

__all__ = [
    "Beat",
    "Cancelled",
    "Interrupter",
    "JobHeartbeat",
    "Lost",
    "ProgressWriter",
    "run_comparison_job",
    "run_job",
    "run_rank_job",
]

log = logging.getLogger(__name__)


class Stop(BaseException):
    """Stops a computation from outside. A BaseException, so that no ``except Exception``
    on the way (in uqcore or a library) swallows it."""


class Cancelled(Stop):
    """The job was cancelled while it ran: it ends as ``cancelled``."""


class Lost(Stop):
    """This delivery no longer holds the job (re-queued after its heartbeat lapsed, claimed
    by another delivery, ended or deleted): stop without writing anything."""


class Interrupter:
    """Raises :class:`Cancelled` or :class:`Lost` in the computing thread, while (and only
    while) it is armed.

    Checkpoints between phases are too coarse for a long bootstrap, so the heartbeat thread
    interrupts the computation itself: ``PyThreadState_SetAsyncExc`` makes the computing
    thread raise at its next bytecode (a numpy call in progress finishes first). Arming and
    firing share a lock, and disarming clears a pending exception, so it can only surface
    inside the armed region (see :func:`run_job`).

    Python drops an exception raised inside a finalizer (``__del__``, e.g. of a connection
    the garbage collector frees in the computing thread): an asynchronous one that lands
    there is lost. The heartbeat therefore sends it again while the thread stays armed
    (:class:`JobHeartbeat`, every :data:`RESEND_BEATS` beats), and :meth:`disarm` is safe
    against a resent one arriving while the first unwinds.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: int | None = None

    def arm(self) -> None:
        with self._lock:
            self._target = threading.get_ident()

    def disarm(self) -> None:
        with self._lock:
            target, self._target = self._target, None
            if target is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)

    def disarm_now(self) -> None:
        """:meth:`disarm`, also when a resent interrupt lands before it takes the lock (that
        one is dropped: the first is already in flight, or the next checkpoint stops the job,
        since the heartbeat's flag is set)."""
        while True:
            try:
                self.disarm()
                return
            except Stop:
                continue

    def interrupt(self, exc: type[Stop]) -> bool:
        """Raise ``exc`` in the armed thread; False when not armed."""
        with self._lock:
            if self._target is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._target), ctypes.py_object(exc)
            )
            return True


#: Beats between two sends of the same interrupt while the computation stays armed (the
#: first may have been dropped in a finalizer, see :class:`Interrupter`).
RESEND_BEATS = 2


class JobHeartbeat(threading.Thread):
    """Refreshes a running job's heartbeat and notices cancel requests and deletion."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        sub_id: str,
        token: str,
        interrupter: Interrupter | None = None,
    ) -> None:
        super().__init__(name=f"heartbeat-{sub_id}", daemon=True)
        self.store = store
        self.settings = settings
        self.sub_id = sub_id
        self.token = token
        self.interrupter = interrupter
        self.stopped = threading.Event()
        self.cancelled = threading.Event()
        self.lost = threading.Event()
        self._beats_since_sent = 0

    def beat(self) -> None:
        try:
            _, cancel, held = self.store.heartbeat(
                self.sub_id, self.token, self.settings.heartbeat_ttl_s
            )
        except StoreUnavailable as exc:  # keep trying: the TTL decides when the job is orphaned
            log.warning("heartbeat of %s failed: %s", self.sub_id, exc)
            return
        # Interrupt on the transition, and again every RESEND_BEATS beats while the
        # computation is still armed (the first may have been dropped in a finalizer).
        if not held:
            self._send(self.lost, Lost)
        elif cancel:
            self._send(self.cancelled, Cancelled)

    def _send(self, flag: threading.Event, exc: type[Stop]) -> None:
        if not flag.is_set():
            flag.set()
            self._beats_since_sent = 0
        elif self._beats_since_sent < RESEND_BEATS - 1:
            self._beats_since_sent += 1
            return
        self._beats_since_sent = 0
        if self.interrupter is not None:
            self.interrupter.interrupt(exc)

    def check(self) -> None:
        """Raise Lost or Cancelled when the job must stop (a checkpoint)."""
        if self.lost.is_set():
            raise Lost
        if self.cancelled.is_set():
            raise Cancelled

    def run(self) -> None:
        while not self.stopped.wait(self.settings.heartbeat_interval_s):
            try:
                self.beat()
            except Exception:  # e.g. a MemoryError while the job holds its whole budget
                log.exception("heartbeat of %s failed", self.sub_id)

    def stop(self) -> None:
        self.stopped.set()


def run_job(
    store: Store,
    settings: Settings,
    backend: Backend,
    sub_id: str,
    *,
    token: str,
    worker_name: str,
    memory_budget: int | None = None,
    enqueue_parts: Enqueue | None = None,
) -> str:
    """Evaluate submission ``sub_id``; returns what happened (for logs and tests).

    "succeeded", "failed", "cancelled" — or "skipped:<why>" when the job was not claimed
    (already ended, held by another delivery, deleted). ``memory_budget``: the bytes the
    computation may use (None: not checked nor enforced). A bootstrap of N·B at least
    ``split_bootstrap_min_work`` is split into parts (:mod:`worker.fanout`) that
    ``enqueue_parts`` asks other workers to compute too (None: this process computes them).
    """
    # A blob store that is down is retried (StoreUnavailable) before the claim: a claim counts
    # an attempt, and an outage of the arrays' store is not the job's fault.
    store.ping_blobs()
    claim, detail = store.mark_running(
        sub_id, token, settings.heartbeat_ttl_s, settings.max_attempts, worker_name
    )
    if claim != "started":
        log.info("job %s not run: %s %s", sub_id, claim, detail)
        return f"skipped:{claim}:{detail}"
    t_start = time.perf_counter()
    interrupter = Interrupter()
    heartbeat = JobHeartbeat(store, settings, sub_id, token, interrupter)
    heartbeat.start()
    reuse = contextlib.ExitStack()
    try:
        record = store.get_submission(sub_id)
        if record is None:
            return "skipped:missing:"
        # The one loader: a benchmark submission sees its benchmark's public rows only; a
        # split benchmark's private rows are evaluated apart and sealed.
        bench = None if record.benchmark is None else store.get_benchmark(record.benchmark)
        arrays = store.load_part(record, "public")
        private = None
        if arrays is not None and bench is not None and bench.is_split:
            private = store.load_part(record, "private")
        if arrays is None or (bench is not None and bench.is_split and private is None):
            if record.benchmark is not None and (
                bench is None or store.load_benchmark_arrays(record.benchmark) is None
            ):
                return store.fail(
                    sub_id,
                    f"benchmark {record.benchmark!r} was deleted before this job ran",
                    system=True,
                )
            return store.fail(
                sub_id,
                "the submission's arrays are no longer stored (deleted or past the raw "
                "retention period); submit the batch again",
                system=True,
            )
        load_s = time.perf_counter() - t_start
        estimate = None
        if memory_budget is not None:
            # The private part is computed after the public one: the larger decides.
            for part in (arrays, private):
                if part is None:
                    continue
                estimate = _estimate(record, part)
                refused = over_budget(estimate, memory_budget)
                if refused is not None:
                    return store.fail(sub_id, f"refused by this worker: {refused}", system=True)
        task = task_of(record.kind)
        origin: Origin = "submission" if record.benchmark is None else "benchmark"
        asked = record.analyses.metrics

        def rest(exc: UQValidationError) -> str:
            return rest_text(str(exc), task=task, origin=origin, metrics=asked)

        progress = ProgressWriter(lambda p: store.set_progress(sub_id, p), delay_s=PROGRESS_DELAY_S)

        def checkpoint(value: float) -> None:
            heartbeat.check()
            progress(value)

        split = SplitJob(
            store,
            settings,
            sub_id,
            token,
            worker_name=worker_name,
            queue=record.queue,
            enqueue=enqueue_parts,
            check=heartbeat.check,
        )

        tname = target_field(record.kind)
        rows = int(np.shape(arrays[tname])[0]) if tname in arrays else 0
        keep = record.benchmark is None
        # Before the result, so that a succeeded submission's plots find them; for a large
        # batch after it (they take about as long as the metrics: the client need not wait
        # for them, and its plots are drawn from the arrays, still stored, meanwhile).
        later = keep and rows >= CURVES_AFTER_RESULT_ROWS
        # A small batch's curves, kept before the result, read the metrics' batch (its sorts
        # and PIT values): one prediction object for both, in one reusing_batches block.
        shared = (
            keep
            and not later
            and backend.name == "numpy"
            and record.kind not in CLASSIFICATION_KINDS
            and rows < SHARED_BATCH_ROWS
        )
        if shared:
            reuse.enter_context(reusing_batches(SHARED_BATCH_ROWS))
        given = None
        # A small batch's curves are kept while the metrics that draw in a helper thread
        # (adversarial group calibration) finish: packed during the evaluation, stored after.
        packed: list[bytes | None] = []
        meanwhile = None
        if keep and not later and not record.analyses.curves:

            def pack() -> None:
                pred = None if given is None else given.prediction
                packed.append(pack_curves(sub_id, record.kind, arrays, record.analyses.seed, pred))

            meanwhile = ("plot_curves", pack)
        try:
            try:
                interrupter.arm()
                heartbeat.check()
                with enforced(memory_budget) if memory_budget is not None else _unlimited():
                    if shared:
                        given = inputs(record.kind, arrays, backend)
                    doc = compute(
                        record.kind,
                        arrays,
                        record.analyses,
                        backend=backend,
                        checkpoint=checkpoint,
                        input_hash=record.input_hash,
                        load_s=load_s,
                        origin=origin,
                        sub_id=sub_id,
                        split=split,
                        given=given,
                        meanwhile=meanwhile,
                    )
                    if private is not None:
                        # Sealed: stored under its own key, read by no route while open.
                        # Computed here, without other workers (the parts read the public rows).
                        sealed = compute(
                            record.kind,
                            private,
                            record.analyses,
                            backend=backend,
                            checkpoint=heartbeat_check(heartbeat),
                            input_hash=record.input_hash,
                            load_s=load_s,
                            origin=origin,
                            sub_id=sub_id,
                            split=None,
                        )
            finally:
                interrupter.disarm_now()
            checkpoint(99.0)
        except Cancelled:
            return store.mark_cancelled(sub_id)
        except Lost:
            log.warning("job %s: this delivery lost it; stopped without writing", sub_id)
            return "skipped:lost:"
        except UQValidationError as exc:
            if record.benchmark is not None:
                # uqcore's message may quote target values; the targets are hidden.
                return store.fail(sub_id, _hide_targets(exc, rest(exc)))
            return store.fail(sub_id, f"invalid input: {rest(exc)}")
        except SoftTimeLimitExceeded:
            return store.fail(
                sub_id,
                f"the evaluation exceeded the time limit of {settings.job_soft_time_limit_s} s;"
                " ask for fewer bootstrap resamples or stability repeats, or split the batch",
                system=True,
            )
        except MemoryError:
            # numpy's allocation failures are MemoryErrors: past the enforced budget, or
            # (without one) the machine's memory. Not retried: it would fail the same way.
            if memory_budget is None:
                reason = "the worker ran out of memory"
            else:
                guess = "" if estimate is None else f", estimated {format_bytes(estimate.total)}"
                reason = (
                    f"the evaluation went past the job memory budget of "
                    f"{format_bytes(memory_budget)} ({memory_budget} bytes, setting {SETTING} "
                    f"of the worker{guess})"
                )
            return store.fail(
                sub_id,
                f"{reason}; ask for fewer bootstrap resamples or stability repeats, or split "
                "the batch",
                system=True,
            )
        except StoreUnavailable:
            raise
        except Exception as exc:  # a bug must not strand the job: fail it with the type
            log.exception("job %s crashed", sub_id)
            # On a benchmark the message may quote values of the hidden targets: the type only.
            what = (
                type(exc).__name__
                if record.benchmark is not None
                else f"{type(exc).__name__}: {exc}"
            )
            return store.fail(
                sub_id,
                f"internal error while computing ({what}); please report it with the submission id",
                system=True,
            )
        how_split = split.provenance()
        if how_split is not None:
            doc["provenance"]["bootstrap_split"] = how_split
        # The entries are stored with every benchmark submission's result; the finish script
        # puts them on the boards only if the submission is public then (its visibility can
        # change at any time, also while this job runs).
        entries = ranking(record, doc)
        if keep and not later and packed != [None]:  # [None]: packing failed (logged)
            pred = None if given is None else given.prediction
            keep_curves(
                store,
                sub_id,
                record.kind,
                arrays,
                doc,
                record.analyses.seed,
                pred,
                packed=packed[0] if packed else None,
            )
        reuse.close()  # the metrics' batch and its caches
        if private is not None:
            store.put_private_result(sub_id, sealed)
        outcome = store.finish(sub_id, doc, time.perf_counter() - t_start, record.queue, entries)
        if outcome == "succeeded" and later:
            keep_curves(store, sub_id, record.kind, arrays, doc, record.analyses.seed)
            if store.get_submission(sub_id) is None:  # deleted meanwhile: leave nothing
                store.drop_curves(sub_id)
        if outcome != "succeeded":
            log.info("result of %s not written: job is %s", sub_id, outcome)
            if outcome == "missing":  # deleted meanwhile: leave nothing of it behind
                store.drop_curves(sub_id)
                store.drop_private_result(sub_id)
        return outcome
    finally:
        reuse.close()
        interrupter.disarm_now()
        heartbeat.stop()


def _estimate(record: Any, arrays: dict[str, Any]) -> Any:
    """The memory estimate of evaluating ``arrays`` (one part's rows)."""
    tname = target_field(record.kind)
    n = int(np.shape(arrays[tname])[0]) if tname in arrays else 0
    shapes = {k: np.shape(v) for k, v in arrays.items()}
    return estimate_job(record.kind, n, record.analyses, shapes=shapes)


def heartbeat_check(heartbeat: JobHeartbeat) -> Callable[[float], None]:
    """A checkpoint that obeys cancel requests without reporting progress (the sealed
    private evaluation runs after the public one has reported 100 %)."""
    return lambda _value: heartbeat.check()


#: From this many rows a job keeps its curves after writing its result (see :func:`run_job`).
CURVES_AFTER_RESULT_ROWS = 1_000_000
#: A job writes no progress in its first this many seconds (see :class:`ProgressWriter`).
PROGRESS_DELAY_S = 0.1
#: Below this many rows the curves a job keeps share the metrics' batch and its caches
#: (``uqcore.reusing_batches``): a few MB held for the curves' few milliseconds.
SHARED_BATCH_ROWS = 1 << 17


@contextlib.contextmanager
def _unlimited() -> Iterator[None]:
    yield None


class Beat(threading.Thread):
    """Calls ``beat`` every ``interval_s`` until stopped (the heartbeat of a comparison or
    rank job); a failed call is logged and retried at the next beat."""

    def __init__(self, name: str, beat: Callable[[], object], interval_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.beat = beat
        self.interval_s = interval_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            try:
                self.beat()
            except StoreUnavailable as exc:  # the TTL decides when the job counts as lost
                log.warning("%s failed: %s", self.name, exc)
            except Exception:  # e.g. a MemoryError of the job: the beat must go on
                log.exception("%s failed", self.name)

    def stop(self) -> None:
        self.stopped.set()


def run_comparison_job(store: Store, settings: Settings, cmp_id: str, *, token: str) -> str:
    """Run comparison ``cmp_id`` for the task delivery ``token``; returns its final status, or
    "skipped:<why>" when it was not claimed (ended, held by a live delivery, deleted).

    The claim counts attempts and starts a heartbeat; a comparison whose heartbeat lapses
    (its worker was killed) is re-queued by the reaper, up to ``settings.max_attempts``. The
    result is a function of the request and its seed, so a second run writes the same one.
    A blob store that is down raises StoreUnavailable before the claim (the task is retried;
    an outage of the arrays' store uses up no attempt), as for an evaluation.
    """
    store.ping_blobs()
    claim, detail = store.claim_comparison(
        cmp_id, token, settings.heartbeat_ttl_s, settings.max_attempts
    )
    if claim != "started":
        log.info("comparison %s not run: %s %s", cmp_id, claim, detail)
        return f"skipped:{claim}:{detail}"
    beat = Beat(
        f"heartbeat-{cmp_id}",
        lambda: store.comparison_heartbeat(cmp_id, token, settings.heartbeat_ttl_s),
        settings.heartbeat_interval_s,
    )
    beat.start()
    progress = ProgressWriter(lambda p: store.set_comparison_progress(cmp_id, token, p))
    try:
        return run_comparison(store, cmp_id, progress)
    finally:
        beat.stop()


def run_rank_job(
    store: Store, settings: Settings, bench_id: str, metric: str, rule: str, *, token: str
) -> int:
    """Compute the rank intervals of one board (:func:`worker.ranks.compute_ranks`) for the
    task delivery ``token``; returns the board version described (-1: none computed).

    A board whose stored intervals are already current is left alone (a re-delivered task,
    or a reader that claimed the job just before another job wrote them), and the claim it
    was queued under is released: left to its reader's TTL (minutes), it would keep the next
    change of the board from queueing a job, and the board stale, that long.
    While it computes, the job holds its board's claim with a heartbeat-length TTL, so that
    a job lost with its worker is queued again by the next leaderboard read. A blob store
    that is down raises StoreUnavailable first (the task is retried): the predictions it
    ranks are read from it.
    """
    store.ping_blobs()
    doc = store.get_ranks(bench_id, metric, rule)
    if doc is not None and doc.get("version") == store.leaderboard_version(bench_id):
        store.release_ranks(bench_id, metric, rule)
        return int(doc["version"])
    ttl = settings.heartbeat_ttl_s
    store.hold_ranks(bench_id, metric, rule, token, ttl, take=True)
    beat = Beat(
        f"heartbeat-ranks-{bench_id}-{metric}-{rule}",
        lambda: store.hold_ranks(bench_id, metric, rule, token, ttl, take=False),
        settings.heartbeat_interval_s,
    )
    beat.start()
    try:
        done = compute_ranks(store, bench_id, metric, rule, settings.leaderboard_rank_limit)
    finally:
        beat.stop()
    return -1 if done is None else int(done["version"])


#: What a benchmark holds and never shows: its targets and groups.
HIDDEN_ARGUMENTS = frozenset({"y", "labels", "soft_labels", "ood", "groups"})


def _hide_targets(exc: UQValidationError, message: str | None = None) -> str:
    """The reason of an invalid benchmark submission (``message``: the error's text in REST
    words, default its own), without
    target values: an error about ``y``, ``labels``, ``soft_labels``, ``ood`` or ``groups``
    (what the benchmark hides, named by the error's ``argument``) gets a generic reason."""
    if exc.argument in HIDDEN_ARGUMENTS:
        return "invalid input: the prediction does not fit the benchmark's hidden targets"
    return f"invalid input: {str(exc) if message is None else message}"


class ProgressWriter:
    """Writes a running job's progress through ``write``, throttled: a value is written when
    it is at least ``step`` percent above the last one written, or ``interval_s`` seconds
    after it (uqcore reports after every block of resamples, which may be thousands of
    small blocks); a value that is not above the last one written is dropped, and so is
    every value reported within ``delay_s`` of the writer's creation (a job that ends
    sooner goes from running to its end without progress writes: a Redis round trip each)."""

    def __init__(
        self,
        write: Callable[[float], object],
        *,
        step: float = 1.0,
        interval_s: float = 0.25,
        delay_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._step = step
        self._interval_s = interval_s
        self._clock = clock
        self._last = -1.0
        self._at = -float("inf")
        self._quiet_until = clock() + delay_s

    def __call__(self, progress: float) -> None:
        if progress <= self._last:
            return
        now = self._clock()
        if now < self._quiet_until:
            return
        if progress - self._last < self._step and now - self._at < self._interval_s:
            return
        self._write(progress)
        self._last, self._at = progress, now


def worker_info(backend: Backend, queues: list[str], pid: int) -> dict[str, Any]:
    """What a worker announces about itself in the store."""
    return {"queues": queues, "backend": backend.name, "device": backend.device, "pid": pid}
