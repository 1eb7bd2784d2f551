"""The submission calls of the client, each written once as an operation of the sans-I/O
core: submit (sent whole or by the resumable upload), resume an upload, wait, read, list,
cancel, delete, change visibility, plots."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from typing import Any

from uqeval._base import POLL_START_S, SubmissionProgress, _id, succeeded
from uqeval._http import Op, ProgressFn
from uqeval._transport import operation
from uqeval._upload import UploadBody, UploadCalls
from uqeval.models import Benchmark, Result, Submission, SubmissionPage

__all__ = ["SubmissionCalls"]


class SubmissionCalls(UploadCalls):
    """Submissions: the operations of :class:`uqeval.Client` and :class:`uqeval.AsyncClient`."""

    @operation
    def resume_upload(
        self,
        upload_id: str,
        body: bytes | str | os.PathLike[str],
        *,
        idempotency_key: str | None = None,
        upload_progress: ProgressFn | None = None,
        wait: bool = False,
        progress: SubmissionProgress | None = None,
        timeout: float | None = None,
    ) -> Op[Submission | Benchmark]:
        """Send the parts of an interrupted resumable upload that the server lacks, then
        complete it.

        Parameters
        ----------
        upload_id : str
            The upload (:attr:`uqeval.errors.UploadInterrupted.upload_id`).
        body : bytes or path
            The whole body being uploaded (``UploadInterrupted.upload_body``), or the file
            holding it.
        idempotency_key, upload_progress, wait, progress, timeout
            As for :meth:`submit`.

        Returns
        -------
        Submission or Benchmark
            What the completed upload created.
        """
        key = idempotency_key or uuid.uuid4().hex
        answer = yield from self._upload(
            UploadBody(body),
            purpose="submission",
            encoding=None,
            idempotency_key=key,
            progress=upload_progress,
            upload_id=upload_id,
        )
        if answer.status_code == 201:
            return Benchmark.from_json(answer.json())
        sub = Submission.from_json(answer.json(), idempotency_key=key)
        if not wait:
            return sub
        final = yield from SubmissionCalls.wait(self, sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(final.raw, idempotency_key=key, replayed=sub.replayed)

    # -- submissions -----------------------------------------------------------------------

    @operation
    def submit(
        self,
        prediction: Any,
        y: Any = None,
        *,
        kind: str | None = None,
        labels: Any = None,
        benchmark: Any = None,
        soft_labels: Any = None,
        ood: Any = None,
        sample_weight: Any = None,
        groups: Any = None,
        estimates: Mapping[str, Any] | None = None,
        model_name: str = "model",
        metadata: Mapping[str, Any] | None = None,
        metrics: Any = "all",
        params: Mapping[str, Any] | None = None,
        bootstrap: Any = 0,
        stability: Any = False,
        seed: int | None = None,
        estimators: Any = None,
        curves: bool = False,
        visibility: str = "private",
        idempotency_key: str | None = None,
        format: str = "auto",
        upload_progress: ProgressFn | None = None,
        wait: bool = False,
        progress: SubmissionProgress | None = None,
        timeout: float | None = None,
        upload_id: str | None = None,
        callback_url: str | None = None,
    ) -> Op[Submission]:
        """Submit a prediction for evaluation.

        Parameters
        ----------
        prediction : uqcore prediction or mapping of arrays
            A ``uqcore.predictions`` object (Gaussian, ..., Probs, Ensemble, Dirichlet), or
            arrays named as in the API (``{"mean": ..., "std": ...}``), which may also hold
            ``y``, ``labels``, ``sample_weight``, ``groups``, ``soft_labels``, ``ood`` and
            ``estimate:<name>``. Arrays may be numpy arrays, lists, torch or CuPy tensors.
        y : array_like, optional
            The targets: N values (regression) or N class indices (classification, the same
            as ``labels``). Not with ``benchmark``.
        kind : str, optional
            The prediction kind; inferred from the mapping's names when not given.
        labels, soft_labels, ood : array_like, optional
            Classification targets: class indices, label distributions (N×C), OOD flags.
        benchmark : str or Benchmark, optional
            Evaluate against this benchmark's hidden targets, metrics and bootstrap.
        sample_weight, groups : array_like, optional
            Frequency weights; a group label per row.
        estimates : mapping of str to array_like, optional
            Classification: named uncertainty estimates (N values each).
        model_name : str
            The model's name on results and leaderboards.
        metadata : mapping, optional
            A JSON object kept with the submission.
        metrics : "all", list of str or str
            Metric names (a list or ``"mae,crps"``), or ``"all"`` applicable ones.
        params : mapping, optional
            Per-metric parameters, ``{"nmerci": {"alpha": 0.9}}``.
        bootstrap : int or dict
            B resamples for confidence intervals (0: none), or
            ``{"n_resamples", "method", "level"}``.
        stability : bool or int
            The test-set-size stability study (an int sets its repeats).
        seed : int, optional
            The seed of every random draw.
        estimators : list of str or "all", optional
            Classification: evaluate the metrics that take an estimator under each of these.
        curves : bool
            Also return the curves (reliability diagrams, sparsification ...).
        visibility : {"private", "public"}
            Public submissions are readable by every key and ranked on leaderboards.
        idempotency_key : str, optional
            Repeating a submission with the same key returns the first one; default: a new
            random key, sent on every retry so that a retry never submits twice.
        format : {"auto", "json", "npz"}
            The body format; ``auto`` picks JSON for small float64 data and NPZ otherwise
            (float32 stays float32). The body is gzip-encoded when that makes it smaller.
        upload_progress : callable, optional
            ``upload_progress(sent_bytes, total_bytes)`` while the body is uploaded (from 0;
            a retry starts again from 0).
        wait : bool
            Wait until the job ends and return its final state (with the result).
        progress : callable, optional
            With ``wait``: ``progress(submission)`` whenever its status or progress changes.
        timeout : float, optional
            With ``wait``: the longest wait in seconds (TimeoutError after it).
        upload_id : str, optional
            Resume this interrupted resumable upload of the same submission (the same arrays
            and options give the same body) instead of starting a new one.
        callback_url : str, optional
            An http(s) URL that receives a signed JSON event (POST) when the job ends; the
            key needs a webhook secret first (:meth:`webhook_secret`). See docs/webhooks.md.

        Returns
        -------
        Submission
            As accepted (queued), or with ``wait`` the final state with its ``result``;
            ``idempotency_key`` is the key used.

        Raises
        ------
        BadRequest
            The input is refused (the message names the field and the first bad row).
        JobFailed
            With ``wait``: the job failed or was cancelled.
        RateLimited, ServerUnavailable, AuthError
            See :mod:`uqeval.errors`.
        """
        call, extra = self._submission_call(
            prediction,
            y,
            kind=kind,
            labels=labels,
            benchmark=benchmark,
            soft_labels=soft_labels,
            ood=ood,
            sample_weight=sample_weight,
            groups=groups,
            estimates=estimates,
            model_name=model_name,
            metadata=metadata,
            metrics=metrics,
            params=params,
            bootstrap=bootstrap,
            stability=stability,
            seed=seed,
            estimators=estimators,
            curves=curves,
            visibility=visibility,
            idempotency_key=idempotency_key,
            format=format,
            upload_progress=upload_progress,
            callback_url=callback_url,
        )
        sub = self._accepted((yield from self._post_body(call, "submission", upload_id)), extra)
        if not wait:
            return sub
        final = yield from SubmissionCalls.wait(self, sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(
            final.raw, idempotency_key=sub.idempotency_key, replayed=sub.replayed
        )

    @operation
    def wait(
        self,
        id: Any,
        *,
        progress: SubmissionProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Op[Submission]:
        """Wait until a submission ends.

        Parameters
        ----------
        id : str or Submission
            The submission.
        progress : callable, optional
            ``progress(submission)`` on each poll where the status or progress changed.
        timeout : float, optional
            The longest wait in seconds (default: no limit).
        poll_interval : float
            The first wait between polls; it grows to 2 s while nothing changes.

        Returns
        -------
        Submission
            The succeeded submission with its ``result``.

        Raises
        ------
        JobFailed
            The job failed or was cancelled (the submission is attached as ``.submission``).
        TimeoutError
            It had not ended after ``timeout`` seconds.
        """
        return (
            yield from self._poll(
                lambda: SubmissionCalls.get(self, id),
                lambda sub: (sub.status, sub.progress),
                progress=progress,
                timeout=timeout,
                poll_interval=poll_interval,
                noun="submission",
                still=lambda sub: (
                    f"submission {sub.id} is still {sub.status} ({sub.progress:.0f}%)"
                ),
                restart=True,
            )
        )

    @operation
    def get(self, id: Any) -> Op[Submission]:
        """A submission's state, progress, timings and, once it succeeded, its result.

        Parameters
        ----------
        id : str or Submission
            The submission.

        Returns
        -------
        Submission
        """
        return Submission.from_json((yield from self._json(self._get_call(id))))

    @operation
    def result(self, id: Any, *, wait: bool = False) -> Op[Result]:
        """The result of a succeeded submission.

        Parameters
        ----------
        id : str or Submission
            The submission.
        wait : bool
            Wait for it to end if it is still queued or running.

        Returns
        -------
        Result

        Raises
        ------
        JobFailed
            It failed or was cancelled.
        BadRequest
            It has not finished and ``wait`` is False (code ``not_finished``).
        """
        sub = yield from SubmissionCalls.get(self, id)
        if not sub.done:
            if not wait:
                raise self._not_finished(sub)
            sub = yield from SubmissionCalls.wait(self, sub.id)
        sub = succeeded(sub, "submission")
        assert sub.result is not None
        return sub.result

    @operation
    def submissions(
        self,
        *,
        status: str | None = None,
        benchmark: Any = None,
        limit: int = 20,
        offset: int = 0,
    ) -> Op[SubmissionPage]:
        """The submissions of the key's team (an admin key: all), newest first.

        Parameters
        ----------
        status : str, optional
            Only those in this state (queued, running, succeeded, failed, cancelled).
        benchmark : str or Benchmark, optional
            Only those on this benchmark (filtered here: every page is read).
        limit, offset : int
            The page: at most ``limit`` items after skipping ``offset``.

        Returns
        -------
        SubmissionPage
        """
        if benchmark is None:
            page = yield from self._json(self._list_call(status, limit, offset))
            return SubmissionPage.from_json(page)
        bench_id = _id(benchmark)
        matching: list[Submission] = []
        start = 0
        while True:
            page = SubmissionPage.from_json(
                (yield from self._json(self._list_call(status, 100, start)))
            )
            matching += [s for s in page.items if s.benchmark_id == bench_id]
            start += len(page.items)
            if not page.items or start >= page.total:
                break
        return self._page(matching[offset : offset + limit], len(matching), offset, limit)

    @operation
    def cancel(self, id: Any) -> Op[Submission]:
        """Cancel a queued or running submission (a running one stops at its next
        checkpoint); BadRequest (409) if it has already ended.

        Returns
        -------
        Submission
        """
        return Submission.from_json((yield from self._json(self._cancel_call(id))))

    @operation
    def delete(self, id: Any) -> Op[None]:
        """Delete a submission, its arrays and its result (cancelling it first if it runs)."""
        yield from self._send(self._delete_call(f"/v1/submissions/{_id(id)}"))

    @operation
    def set_visibility(self, id: Any, visibility: str) -> Op[Submission]:
        """Make a submission ``"public"`` (ranked on its benchmark's leaderboards) or
        ``"private"``.

        Returns
        -------
        Submission
        """
        call = self._visibility_call(id, visibility)
        return Submission.from_json((yield from self._json(call)))

    @operation
    def plot(self, id: Any, name: str, format: str = "png") -> Op[bytes]:
        """One of a submission's plots (``result.plots`` lists them) as PNG or SVG bytes.

        Parameters
        ----------
        id : str or Submission
            The submission (succeeded).
        name : str
            The plot's name (``calibration``, ``reliability``, ``stability`` ...).
        format : {"png", "svg"}

        Returns
        -------
        bytes
            The image, drawn by the service (NotFound with the reason when the plot does not
            apply to this submission).
        """
        return (yield from self._send(self._plot_call(id, name, format))).content
