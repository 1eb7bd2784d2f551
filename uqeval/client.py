"""The Python client of the uq-eval service: submit predictions, wait for results, read
leaderboards, compare submissions, and the admin calls.

>>> from uqeval import Client                                       # doctest: +SKIP
>>> with Client("http://127.0.0.1:8000", "uqe_...") as client:      # doctest: +SKIP
...     sub = client.submit(Gaussian(mean, std), y, metrics="crps,nll", wait=True)
...     print(sub.result.value("crps"))
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from uqeval._admin import AdminCalls
from uqeval._base import (
    POLL_MAX_S,
    POLL_START_S,
    UPLOAD_THRESHOLD_BYTES,
    ComparisonProgress,
    SubmissionProgress,
    UploadBody,
    _id,
)
from uqeval._http import (
    Call,
    ProgressFn,
    backoff_delay,
    chunks,
    failure,
    may_retry_status,
    may_retry_transport,
    retry_after,
    too_long_wait,
    unavailable,
)
from uqeval._platform import PlatformCalls
from uqeval.errors import BadRequest, NotFound, RateLimited, ServerUnavailable
from uqeval.gates import Gate
from uqeval.models import (
    Benchmark,
    Comparison,
    Leaderboard,
    Result,
    Submission,
    SubmissionPage,
)

__all__ = ["Client"]


class Client(AdminCalls, PlatformCalls):
    """A synchronous client of the uq-eval API.

    Parameters
    ----------
    url : str, optional
        The server, e.g. ``http://127.0.0.1:8000``. Default: ``$UQEVAL_URL``, else ``url`` in
        the config file (``uqeval login``), else ``http://127.0.0.1:8000``.
    key : str, optional
        The API key. Default: ``$UQEVAL_KEY``, else ``key`` in the config file. It is sent
        as ``Authorization: Bearer`` and never shown in a repr, a message or a log.
    timeout : float
        Seconds allowed for connecting and for each read or write of one request.
    retries : int
        How many times a request is repeated after 429, 502, 503, 504 or a failed
        connection. A submission is repeated with the same Idempotency-Key, so it is never
        made twice; other writes are repeated only when the server did nothing (429, 503,
        or no connection).
    backoff : float
        The first wait (seconds) of the exponential backoff with jitter, when the server
        gives no Retry-After.
    max_retry_wait : float
        The longest wait before a repeat; a 429 whose Retry-After is longer (a spent daily
        quota) raises :class:`~uqeval.errors.RateLimited` at once.
    npz_threshold : int
        ``format="auto"`` sends NPZ when the arrays take this many bytes or more.
    upload_threshold_bytes : int
        An NPZ body of this many bytes or more (default 64 MiB) goes by the resumable upload
        (``POST /v1/uploads``): sent in parts, each checked by its SHA-256 and sent again
        (up to ``retries`` times) when it fails; an upload that stops midway raises
        :class:`~uqeval.errors.UploadInterrupted`, and :meth:`resume_upload` sends the rest.
    transport : httpx.BaseTransport, optional
        An httpx transport (for proxies, custom TLS or tests).

    Examples
    --------
    >>> with Client("http://127.0.0.1:8000", key) as client:      # doctest: +SKIP
    ...     sub = client.submit({"mean": mean, "std": std}, y, metrics="mae,crps", wait=True)
    ...     sub.result.value("crps")
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_retry_wait: float = 60.0,
        npz_threshold: int = 64 * 1024,
        upload_threshold_bytes: int = UPLOAD_THRESHOLD_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            url,
            key,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_retry_wait=max_retry_wait,
            npz_threshold=npz_threshold,
            upload_threshold_bytes=upload_threshold_bytes,
        )
        self._http = httpx.Client(
            base_url=self.url,
            headers=self._headers(),
            timeout=httpx.Timeout(timeout),
            transport=transport,
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    # -- sending ---------------------------------------------------------------------------

    def _send(self, call: Call) -> httpx.Response:
        """Send ``call``, repeating it as its policy allows; the answer, or the error."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.query(),
                    json=call.json,
                    content=None
                    if call.content is None
                    else chunks(call.content, call.upload_progress),
                    headers=call.headers,
                )
            except httpx.TransportError as exc:
                if attempt >= self.retries or not may_retry_transport(call, exc):
                    raise unavailable(self.url, exc) from None
                time.sleep(backoff_delay(self.backoff, attempt, self.max_retry_wait))
                attempt += 1
                continue
            if response.status_code in call.ok:
                return response
            if response.status_code == 404 and call.gone_ok_after_retry and attempt > 0:
                return response
            if attempt < self.retries and may_retry_status(call, response.status_code):
                wait = retry_after(response)
                if wait is None:
                    wait = backoff_delay(self.backoff, attempt, self.max_retry_wait)
                final = too_long_wait(wait, self.max_retry_wait, response)
                if final is not None:
                    raise final
                time.sleep(wait)
                attempt += 1
                continue
            raise failure(response)

    def _json(self, call: Call) -> Any:
        return self._send(call).json()

    def _post_body(self, call: Call, purpose: str, upload_id: str | None = None) -> Any:
        """The answer to ``call`` (a submission or benchmark POST): sent as it is, or by the
        resumable upload when its body is large (or ``upload_id`` names one to resume)."""
        if upload_id is None and not self._resumable(call):
            return self._json(call)
        assert call.content is not None
        return self._upload(
            UploadBody(call.content),
            purpose=purpose,
            encoding=call.headers.get("Content-Encoding"),
            idempotency_key=call.headers.get("Idempotency-Key") or uuid.uuid4().hex,
            progress=call.upload_progress,
            upload_id=upload_id,
        ).json()

    def _upload(
        self,
        body: UploadBody,
        *,
        purpose: str,
        encoding: str | None,
        idempotency_key: str,
        progress: ProgressFn | None,
        upload_id: str | None = None,
    ) -> httpx.Response:
        """Send ``body`` by the resumable upload (a new one, or the parts ``upload_id`` lacks)
        and complete it: the answer of the completion."""
        if upload_id is None:
            info = self._json(self._upload_create_call(body, purpose=purpose, encoding=encoding))
        else:
            info = self._json(self._upload_status_call(upload_id))
        upload_id = str(info["id"])
        todo = self._parts_to_send(info, body)
        done = body.size - sum(length for _, _, length in todo)
        if progress is not None:
            progress(done, body.size)
        try:
            for n, offset, length in todo:
                data = body.read(offset, length)
                shown = None if progress is None else _offset(progress, done, body.size)
                for attempt in range(self.retries + 1):
                    try:
                        self._send(self._upload_part_call(upload_id, n, data, shown))
                        break
                    except BadRequest as exc:  # damaged on the way: send it again
                        if exc.code != "digest_mismatch" or attempt >= self.retries:
                            raise
                done += length
        except (ServerUnavailable, RateLimited) as exc:
            raise self._interrupted(upload_id, body, exc) from exc
        return self._send(self._upload_complete_call(upload_id, idempotency_key))

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
    ) -> Submission | Benchmark:
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
        answer = self._upload(
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
        final = self.wait(sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(final.raw, idempotency_key=key, replayed=sub.replayed)

    # -- submissions -----------------------------------------------------------------------

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
    ) -> Submission:
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
        sub = self._accepted(self._post_body(call, "submission", upload_id), extra)
        if not wait:
            return sub
        final = self.wait(sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(
            final.raw, idempotency_key=sub.idempotency_key, replayed=sub.replayed
        )

    def wait(
        self,
        id: Any,
        *,
        progress: SubmissionProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Submission:
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
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: tuple[str, float] | None = None
        while True:
            sub = self.get(id)
            state = (sub.status, sub.progress)
            if state != seen:
                seen = state
                interval = poll_interval
                if progress is not None:
                    progress(sub)
            if sub.done:
                return self._finished(sub)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(
                    f"submission {sub.id} is still {sub.status} ({sub.progress:.0f}%) after "
                    f"{timeout} s"
                )
            time.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)

    def get(self, id: Any) -> Submission:
        """A submission's state, progress, timings and, once it succeeded, its result.

        Parameters
        ----------
        id : str or Submission
            The submission.

        Returns
        -------
        Submission
        """
        return Submission.from_json(self._json(self._get_call(id)))

    def result(self, id: Any, *, wait: bool = False) -> Result:
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
        sub = self.get(id)
        if not sub.done:
            if not wait:
                raise self._not_finished(sub)
            sub = self.wait(sub.id)
        sub = self._finished(sub)
        assert sub.result is not None
        return sub.result

    def submissions(
        self,
        *,
        status: str | None = None,
        benchmark: Any = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SubmissionPage:
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
            return SubmissionPage.from_json(self._json(self._list_call(status, limit, offset)))
        bench_id = _id(benchmark)
        matching: list[Submission] = []
        start = 0
        while True:
            page = SubmissionPage.from_json(self._json(self._list_call(status, 100, start)))
            matching += [s for s in page.items if s.benchmark_id == bench_id]
            start += len(page.items)
            if not page.items or start >= page.total:
                break
        return self._page(matching[offset : offset + limit], len(matching), offset, limit)

    def cancel(self, id: Any) -> Submission:
        """Cancel a queued or running submission (a running one stops at its next
        checkpoint); BadRequest (409) if it has already ended.

        Returns
        -------
        Submission
        """
        return Submission.from_json(self._json(self._cancel_call(id)))

    def delete(self, id: Any) -> None:
        """Delete a submission, its arrays and its result (cancelling it first if it runs)."""
        self._send(self._delete_call(f"/v1/submissions/{_id(id)}"))

    def set_visibility(self, id: Any, visibility: str) -> Submission:
        """Make a submission ``"public"`` (ranked on its benchmark's leaderboards) or
        ``"private"``.

        Returns
        -------
        Submission
        """
        return Submission.from_json(self._json(self._visibility_call(id, visibility)))

    def plot(self, id: Any, name: str, format: str = "png") -> bytes:
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
        return self._send(self._plot_call(id, name, format)).content

    # -- leaderboards and comparisons --------------------------------------------------------

    def leaderboard(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        part: str = "public",
    ) -> Leaderboard:
        """A benchmark's leaderboard, best first.

        Parameters
        ----------
        benchmark : str or Benchmark
            The benchmark.
        metric : str, optional
            One of its metrics (default: its primary metric).
        estimator : str, optional
            Classification: rank the metric under this estimator.
        limit, offset : int, optional
            The page (server default: the first 50 entries).
        part : {"public", "private"}
            ``public``: the public rows (the only board while the benchmark is open);
            ``private``: once an admin closed it (:meth:`close_benchmark`), each team's best
            final submission ranked on the private rows. Asked while it is open, BadRequest
            (409, code ``benchmark_open``).

        Returns
        -------
        Leaderboard
            Entries with the value, its interval, the rank interval, ``p_best`` and whether
            each is separable from the leader and from the baseline.
        """
        call = self._leaderboard_call(benchmark, metric, estimator, limit, offset, part=part)
        return self._leaderboard(self._json(call))

    def leaderboard_csv(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        part: str = "public",
    ) -> str:
        """A benchmark's leaderboard as CSV text (as the server writes it); ``part`` as for
        :meth:`leaderboard`."""
        call = self._leaderboard_call(benchmark, metric, estimator, None, None, csv=True, part=part)
        return self._send(call).text

    def compare(
        self,
        ids: Any,
        *,
        benchmark: Any = None,
        metrics: Any = None,
        estimators: Any = None,
        n_resamples: int | None = None,
        seed: int | None = None,
        level: float | None = None,
        method: str | None = None,
        wait: bool = False,
        progress: ComparisonProgress | None = None,
        timeout: float | None = None,
        callback_url: str | None = None,
    ) -> Comparison:
        """Compare two or more succeeded submissions on one benchmark (paired bootstrap).

        Parameters
        ----------
        ids : list of str or Submission
            The submissions (2 to 20).
        benchmark : str or Benchmark, optional
            Default: the benchmark of the first submission.
        metrics : list of str or str, optional
            Default: the benchmark's primary metric.
        estimators : list of str, optional
            Classification: also compare under these estimators.
        n_resamples, seed, level, method
            The bootstrap: B, its seed, the interval level and method (``percentile`` or
            ``bca``); each not given is the benchmark's. Only admins choose others: any
            other key's different value is refused (the targets are hidden).
        wait : bool
            Wait for the comparison to end.
        progress : callable, optional
            With ``wait``: ``progress(comparison)`` when its status changes.
        timeout : float, optional
            With ``wait``: the longest wait in seconds.
        callback_url : str, optional
            An http(s) URL that receives a signed JSON event when the comparison ends (as
            for :meth:`submit`).

        Returns
        -------
        Comparison
            Queued, or with ``wait`` the final state with its ``result``.
        """
        id_list = [_id(i) for i in ids]
        if benchmark is None:
            bench_id = self.get(id_list[0]).benchmark_id if id_list else None
            if bench_id is None:
                raise NotFound(
                    f"submission {id_list[0] if id_list else None!r} is on no benchmark; "
                    "give benchmark=",
                    field="benchmark_id",
                )
        else:
            bench_id = _id(benchmark)
        call = self._compare_call(
            id_list, bench_id, metrics, estimators, n_resamples, seed, level, method, callback_url
        )
        cmp_id = self._json(call)["id"]
        if wait:
            return self.wait_comparison(cmp_id, progress=progress, timeout=timeout)
        return self.comparison(cmp_id)

    def comparison(self, id: Any) -> Comparison:
        """A comparison's state and, once it succeeded, its result."""
        return Comparison.from_json(self._json(self._comparison_call(id)))

    def wait_comparison(
        self,
        id: Any,
        *,
        progress: ComparisonProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Comparison:
        """Wait until a comparison ends (as :meth:`wait` for a submission).

        Raises
        ------
        JobFailed
            It failed or was cancelled.
        TimeoutError
            It had not ended after ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: str | None = None
        while True:
            cmp = self.comparison(id)
            if cmp.status != seen:
                seen = cmp.status
                if progress is not None:
                    progress(cmp)
            if cmp.done:
                return self._comparison_finished(cmp)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"comparison {cmp.id} is still {cmp.status} after {timeout} s")
            time.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)

    # -- quality gates -------------------------------------------------------------------

    def gate(
        self,
        benchmark: Any,
        candidate: Any,
        reference: Any,
        checks: Any,
        *,
        confidence: float | None = None,
        correction: str = "holm",
        n_resamples: int | None = None,
        seed: int | None = None,
        wait: bool = True,
        progress: Callable[[Gate], None] | None = None,
        timeout: float | None = None,
    ) -> Gate:
        """Gate a candidate submission against a reference on one benchmark.

        Each check fails only when the candidate is worse than the reference by more than its
        allowance with the stated confidence (a one-sided paired bootstrap bound; Holm's
        adjustment over the checks by default). See docs/gates.md.

        Parameters
        ----------
        benchmark : str or Benchmark
        candidate, reference : str or Submission
            Succeeded submissions on the benchmark that the key can read.
        checks : str, mapping, or a list of them
            ``"crps:0.01"`` (absolute), ``"ece:5%"`` (relative to the reference's |value|),
            ``"auroc_ood[entropy_bma]:0.02"``, or ``{"metric", "allowed", "mode",
            "estimator"}`` (1 to 50 checks).
        confidence : float, optional
            Default: the benchmark's level (other keys than admins: 0.9, 0.95 or 0.99).
        correction : "holm" or "none"
        n_resamples, seed
            The bootstrap's B and seed: the benchmark's unless an admin chooses them.
        wait : bool
            Wait for the decision (default).
        progress : callable, optional
            With ``wait``: ``progress(gate)`` when its status changes.
        timeout : float, optional
            With ``wait``: the longest wait in seconds.

        Returns
        -------
        Gate
            With ``wait``, the decision: ``passed`` True, False, or None (undecided).
        """
        call = self._gate_call(
            benchmark, candidate, reference, checks, confidence, correction, n_resamples, seed
        )
        gate_id = self._json(call)["id"]
        if wait:
            return self.wait_gate(gate_id, progress=progress, timeout=timeout)
        return self.get_gate(gate_id)

    def get_gate(self, id: Any) -> Gate:
        """A gate's state and, once it succeeded, its decision."""
        return Gate.from_json(self._json(self._get_gate_call(id)))

    def wait_gate(
        self,
        id: Any,
        *,
        progress: Callable[[Gate], None] | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Gate:
        """Wait until a gate ends (as :meth:`wait_comparison`); JobFailed if it failed,
        TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: str | None = None
        while True:
            gate = self.get_gate(id)
            if gate.status != seen:
                seen = gate.status
                if progress is not None:
                    progress(gate)
            if gate.done:
                return self._gate_finished(gate)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"gate {gate.id} is still {gate.status} after {timeout} s")
            time.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)


def _offset(progress: ProgressFn, done: int, total: int) -> ProgressFn:
    """``progress`` of one part as progress of the whole body (``done`` bytes before it)."""
    return lambda sent, _part: progress(done + sent, total)
