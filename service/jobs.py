"""Submitting jobs: store a batch and enqueue its evaluation, all or nothing, within a deadline.

:func:`submit` stores the arrays, the record, its indexes and the idempotency mapping in one
Redis transaction, then publishes the Celery task ``uqeval.evaluate`` (by name: the API never
imports the worker) on the ``cpu`` or ``gpu`` queue. Each step has the budget
``settings.enqueue_timeout_s`` (the store's transaction, then the publication; hashing the
arrays and writing them to the blob store, which take as long as the batch is large, are not
counted); when either fails, what was stored is removed and
:class:`~service.store.StoreUnavailable` is raised (the API answers 503). Should the process
die between the two steps, the submission stays in the ``pending`` index and :func:`reap`
removes it later.

:func:`reap` is the safety net against stranded jobs, run periodically by every worker (and
callable from the API): running jobs — evaluations and comparisons — whose heartbeat expired
are re-queued (up to ``settings.max_attempts``, then failed with the reason), and their task is
published again. (A rank job needs no sweep: its board's claim expires with its heartbeat, and
the next leaderboard read queues it again.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from service import notifications
from service.analyses import Analyses
from service.celery_config import (
    COMPARE_TASK_NAME,
    PLOT_TASK_NAME,
    RANKS_TASK_NAME,
    TASK_NAME,
    producer,
)
from service.settings import Settings
from service.store import Quota, Store, StoreUnavailable, SubmissionRecord, codec, now_iso

__all__ = [
    "choose_queue",
    "enqueue",
    "enqueue_comparison",
    "enqueue_plot",
    "enqueue_ranks",
    "input_hash",
    "new_submission_id",
    "reap",
    "submit",
    "submit_comparison",
]

log = logging.getLogger(__name__)


def new_submission_id() -> str:
    return "sub_" + uuid.uuid4().hex


#: Bytes of a memory-mapped array's file hashed at a time.
HASH_PIECE_BYTES = 1 << 20


def input_hash(kind: str, arrays: Mapping[str, np.ndarray[Any, Any]], analyses: Any) -> str:
    """SHA-256 (hex) of the kind, the analyses requested and every array (name, dtype, shape,
    bytes), in name order: equal inputs give equal hashes whatever the transport encoding."""
    h = hashlib.sha256()
    h.update(json.dumps({"kind": kind, "analyses": analyses}, sort_keys=True).encode())
    for name in sorted(arrays):
        value = arrays[name]
        source = codec.npy_file_of(value)
        a = value if source is not None else np.asarray(value, order="C")
        h.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        if source is None:
            h.update(a.data)
            continue
        # The bytes of a memory-mapped .npy file, read from the file in pieces: through the
        # map, every page would stay counted in the process' memory.
        with source.open("rb") as fh:
            fh.seek(int(getattr(value, "offset", 0)))
            while piece := fh.read(HASH_PIECE_BYTES):
                h.update(piece)
    return h.hexdigest()


def choose_queue(store: Store, settings: Settings, n: int) -> str:
    """``gpu`` for batches of at least ``settings.gpu_min_points`` when a live worker consumes
    ``gpu``; ``cpu`` otherwise."""
    if n >= settings.gpu_min_points and store.gpu_worker_alive():
        return "gpu"
    return "cpu"


def enqueue(settings: Settings, sub_id: str, queue: str, timeout_s: float | None = None) -> None:
    """Publish the task for ``sub_id`` on ``queue``; raises on failure (no retry loop)."""
    app = producer(settings)
    app.send_task(
        TASK_NAME,
        args=[sub_id],
        queue=queue,
        routing_key=queue,
        retry=False,
        ignore_result=True,
        headers={"uqeval_enqueued_at": now_iso()},
        **({"timeout": timeout_s} if timeout_s is not None else {}),
    )


def enqueue_ranks(settings: Settings, bench_id: str, metric: str, rule: str) -> None:
    """Publish the rank job of one leaderboard on the ``cpu`` queue."""
    producer(settings).send_task(
        RANKS_TASK_NAME,
        args=[bench_id, metric, rule],
        queue="cpu",
        routing_key="cpu",
        retry=False,
        ignore_result=True,
        timeout=settings.enqueue_timeout_s,
    )


def enqueue_comparison(settings: Settings, cmp_id: str) -> None:
    """Publish the task of comparison ``cmp_id`` on the ``cpu`` queue; raises on failure."""
    producer(settings).send_task(
        COMPARE_TASK_NAME,
        args=[cmp_id],
        queue="cpu",
        routing_key="cpu",
        retry=False,
        ignore_result=True,
        timeout=settings.enqueue_timeout_s,
    )


def enqueue_plot(
    settings: Settings, scope: str, ident: str, name: str, fmt: str, digest: str = ""
) -> None:
    """Publish the render of one plot on the ``cpu`` queue; raises on failure."""
    producer(settings).send_task(
        PLOT_TASK_NAME,
        args=[scope, ident, name, fmt, digest],
        queue="cpu",
        routing_key="cpu",
        retry=False,
        ignore_result=True,
        timeout=settings.enqueue_timeout_s,
    )


def submit_comparison(store: Store, settings: Settings, record: Mapping[str, Any]) -> None:
    """Store a comparison and publish its task; on failure remove it and raise
    :class:`~service.store.StoreUnavailable`."""
    store.create_comparison(record)
    try:
        enqueue_comparison(settings, record["id"])
    except Exception as exc:
        try:
            store.delete_comparison(record["id"])
        except StoreUnavailable:
            log.warning("could not remove comparison %s after a failed enqueue", record["id"])
        raise StoreUnavailable(f"could not enqueue the comparison: {exc}") from exc


def _rollback(store: Store, sub_id: str) -> None:
    try:
        store.delete_submission(sub_id, refund=True)
    except StoreUnavailable:
        # Redis went away after storing: the submission stays in the pending index and the
        # reaper deletes it once Redis is back.
        log.warning("rollback of %s deferred to the reaper: Redis unavailable", sub_id)


def submit(
    store: Store,
    settings: Settings,
    *,
    owner: str,
    kind: str,
    n: int,
    model_name: str,
    metadata: dict[str, Any],
    analyses: Analyses,
    arrays: Mapping[str, np.ndarray[Any, Any]],
    idempotency_key: str | None,
    body_hash: str,
    team: str | None = None,
    visibility: Literal["private", "public"] = "private",
    benchmark: str | None = None,
    quota: Quota | None = None,
    callback_url: str | None = None,
) -> tuple[SubmissionRecord, bool]:
    """Store a submission and enqueue its evaluation; returns (record, created).

    ``created`` is False for an idempotent replay (same owner, same ``idempotency_key``, same
    ``body_hash``): the existing record is returned and nothing is enqueued. Raises
    :class:`~service.store.IdempotencyConflict` for the same key with another body, and
    :class:`~service.store.StoreUnavailable` when Redis cannot store or enqueue, each within
    ``settings.enqueue_timeout_s`` — after removing whatever was stored.

    ``team`` and ``visibility`` decide who reads it; with a ``benchmark`` the worker takes the
    targets from that benchmark (``arrays`` then holds the prediction only), and ``quota``
    counts it against the team's quota there (:class:`~service.store.QuotaExceeded`).
    """
    digest = input_hash(kind, arrays, analyses.document())
    deadline = time.monotonic() + settings.enqueue_timeout_s
    queue = choose_queue(store, settings, n)
    record = SubmissionRecord(
        id=new_submission_id(),
        owner=owner,
        status="queued",
        progress=0.0,
        created_at=now_iso(),
        started_at=None,
        finished_at=None,
        attempts=0,
        error=None,
        model_name=model_name,
        metadata=dict(metadata),
        kind=kind,
        n=int(n),
        queue=queue,
        input_hash=digest,
        analyses=analyses,
        created_ts=time.time(),
        team=team,
        visibility=visibility,
        benchmark=benchmark,
        callback_url=callback_url,
    )
    stored, created = store.create_submission(
        record,
        arrays,
        idempotency_key=idempotency_key,
        body_hash=body_hash,
        deadline=deadline,
        quota=quota,
    )
    if not created:
        _finish_replay(store, settings, stored)
        return stored, False
    try:
        # Its own budget: the store's deadline was moved by the time its blob writes took.
        enqueue(settings, record.id, queue, timeout_s=settings.enqueue_timeout_s)
        marked = store.mark_enqueued(record.id)
    except Exception as exc:
        _rollback(store, record.id)
        raise StoreUnavailable(f"could not enqueue the evaluation: {exc}") from exc
    if not marked:  # the reaper took it for rollback meanwhile (this request was too slow)
        raise StoreUnavailable(_ROLLED_BACK)
    return stored, True


_ROLLED_BACK = (
    "an earlier attempt of this request could not publish its evaluation and is being rolled "
    "back; retry with the same Idempotency-Key"
)


def _finish_replay(store: Store, settings: Settings, stored: SubmissionRecord) -> None:
    """An idempotent replay answers 202 only for a submission whose task is published: one
    still pending (its first request failed between storing and publishing, e.g. Redis went
    down) is published now; one the reaper is rolling back is a 503, so the retry stores it
    anew. Publishing twice is harmless: a task finds the job claimed or ended and stops."""
    state = store.claim_pending(stored.id)
    if state == "enqueued":
        return
    if state != "claimed":
        raise StoreUnavailable(_ROLLED_BACK)
    try:
        enqueue(settings, stored.id, stored.queue, timeout_s=settings.enqueue_timeout_s)
    except Exception as exc:  # it stays pending: the reaper rolls it back, or a retry claims it
        raise StoreUnavailable(f"could not enqueue the evaluation: {exc}") from exc
    if not store.mark_enqueued(stored.id):
        raise StoreUnavailable(_ROLLED_BACK)


def reap(store: Store, settings: Settings) -> dict[str, list[str]]:
    """One pass of the stranded-job sweep; returns the ids acted on, per outcome.

    - a running job whose heartbeat expired: re-queued and its task published again
      (``requeued``), or failed once it has used ``settings.max_attempts`` (``failed``), or
      cancelled when a cancel was requested (``cancelled``);
    - a submission stored but never enqueued (its producer died) for longer than twice the
      enqueue budget: deleted (``rolled_back``);
    - a job queued for longer than ``settings.unclaimed_requeue_s`` while its queue's broker
      list is empty — its task message was lost with a consumer or with Redis: published
      again (``republished``; a second delivery of a message is harmless);
    - a running comparison whose heartbeat expired: re-queued and its task published again
      (``comparisons_requeued``), or failed once it has used ``settings.max_attempts``
      (``comparisons_failed``);
    - a webhook delivery whose task was lost: its task is published again.

    A job failed or cancelled here gets its end notification (:func:`service.notifications.ended`).
    Safe to run concurrently from several processes: each transition is one atomic script.
    """
    out: dict[str, list[str]] = {
        "requeued": [],
        "failed": [],
        "cancelled": [],
        "rolled_back": [],
        "republished": [],
        "comparisons_requeued": [],
        "comparisons_failed": [],
    }
    for sub_id in store.orphaned():
        outcome = store.requeue_orphan(sub_id, settings.max_attempts, settings.heartbeat_ttl_s)
        if outcome in out:
            out[outcome].append(sub_id)
            log.warning("job %s had no heartbeat: %s", sub_id, outcome)
        if outcome in ("failed", "cancelled"):
            notifications.ended(store, settings, "submission", sub_id)
    for sub_id in store.to_resend():
        record = store.get_submission(sub_id)
        if record is not None and record.status == "queued":
            try:
                enqueue(settings, sub_id, record.queue, timeout_s=settings.enqueue_timeout_s)
            except Exception as exc:  # the broker is down: stays in "resend" for the next pass
                log.warning("could not re-enqueue %s: %s", sub_id, exc)
                continue
        store.mark_resent(sub_id)
    stale_s = 2 * settings.enqueue_timeout_s + 1.0
    for sub_id in store.stale_pending(stale_s):
        # Flagged first (atomically, unless a replay of its request claimed it meanwhile):
        # from then on no request answers 202 for it.
        if store.take_stale_pending(sub_id, stale_s) and store.delete_submission(
            sub_id, refund=True
        ):
            out["rolled_back"].append(sub_id)
    for sub_id, queue in store.unclaimed(settings.unclaimed_requeue_s):
        try:
            enqueue(settings, sub_id, queue, timeout_s=settings.enqueue_timeout_s)
        except Exception as exc:  # the broker is down: the next pass tries again
            log.warning("could not publish unclaimed job %s again: %s", sub_id, exc)
            continue
        store.mark_republished(sub_id, queue)
        out["republished"].append(sub_id)
        log.warning("job %s was queued with no task message left: published again", sub_id)
    for cmp_id in store.orphaned_comparisons():
        outcome = store.requeue_comparison(cmp_id, settings.max_attempts, settings.heartbeat_ttl_s)
        if outcome in ("requeued", "failed"):
            out[f"comparisons_{outcome}"].append(cmp_id)
            log.warning("comparison %s had no heartbeat: %s", cmp_id, outcome)
        if outcome == "failed":
            notifications.ended(store, settings, "comparison", cmp_id)
    for cmp_id in store.comparisons_to_resend():
        doc = store.get_comparison(cmp_id)
        if doc is not None and doc["status"] == "queued":
            try:
                enqueue_comparison(settings, cmp_id)
            except Exception as exc:  # the broker is down: stays in the set for the next pass
                log.warning("could not re-enqueue comparison %s: %s", cmp_id, exc)
                continue
        store.mark_comparison_resent(cmp_id)
    notifications.sweep(store, settings)
    return out
