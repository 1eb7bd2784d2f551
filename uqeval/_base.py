"""The sans-I/O core of :class:`uqeval.Client` and :class:`uqeval.AsyncClient`: settings,
request building and answer reading, and the operations every call is made of (send with
retries, poll until a job ends); the transports only perform their effects."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
import numpy as np

from service.kinds import CLASSIFICATION_KINDS, ESTIMATE_PREFIX, KIND_FIELDS
from uqeval import arrays as A
from uqeval._http import (
    Call,
    Op,
    ProgressFn,
    Sleep,
    backoff_delay,
    failure,
    may_retry_status,
    may_retry_transport,
    retry_after,
    too_long_wait,
    unavailable,
)
from uqeval.config import resolve
from uqeval.errors import BadRequest, JobFailed
from uqeval.gates import parse_checks
from uqeval.models import (
    ApiKey,
    Benchmark,
    Comparison,
    Leaderboard,
    Submission,
    SubmissionPage,
    Team,
)

SubmissionProgress = Callable[[Submission], None]
ComparisonProgress = Callable[[Comparison], None]

#: Above this many bytes a body goes by the resumable upload (``POST /v1/uploads``).
UPLOAD_THRESHOLD_BYTES = 64 << 20
NPZ_MEDIA = "application/x-npz"

#: The wait between polls grows from the first value to the second.
POLL_START_S = 0.25
POLL_MAX_S = 2.0


class Job(Protocol):
    """What waiting reads of a submission, a comparison or a gate."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def done(self) -> bool: ...


J = TypeVar("J", bound=Job)


def succeeded(job: J, noun: str) -> J:
    """``job`` if it succeeded; JobFailed if it failed or was cancelled."""
    if job.status == "succeeded":
        return job
    why = f": {job.error}" if job.error else ""
    raise JobFailed(f"{noun} {job.id} {job.status}{why}", job=job)


def metric_list(metrics: Any) -> list[str] | str:
    """``"all"``, a list of names, or a comma-separated string, as the API's ``metrics``."""
    if metrics is None or metrics == "all":
        return "all"
    if isinstance(metrics, str):
        names = [m.strip() for m in metrics.split(",") if m.strip()]
    else:
        names = [str(m) for m in metrics]
    if not names:
        raise BadRequest("metrics must name at least one metric (or be 'all')", field="metrics")
    return names


def bootstrap_doc(bootstrap: Any) -> dict[str, Any] | None:
    """The API's ``analyses.bootstrap`` from an int B or a dict (None: no bootstrap asked)."""
    if bootstrap is None or bootstrap is False:
        return None
    if isinstance(bootstrap, Mapping):
        return dict(bootstrap)
    if isinstance(bootstrap, bool) or not isinstance(bootstrap, (int, np.integer)):
        raise BadRequest(
            f"bootstrap must be an int (B) or a dict; found {bootstrap!r}", field="bootstrap"
        )
    return {"n_resamples": int(bootstrap)} if bootstrap else None


def stability_doc(stability: Any) -> dict[str, Any] | None:
    """The API's ``analyses.stability`` from a bool or an int (repeats)."""
    if stability is None or stability is False:
        return None
    if stability is True:
        return {"enabled": True}
    if isinstance(stability, Mapping):
        return dict(stability)
    if isinstance(stability, (int, np.integer)):
        return {"enabled": True, "repeats": int(stability)}
    raise BadRequest(
        f"stability must be a bool or an int (repeats); found {stability!r}", field="stability"
    )


def _id(obj: Any) -> str:
    """An id given as a string or as an object with ``.id`` (a Submission, a Benchmark)."""
    value = getattr(obj, "id", obj)
    if not isinstance(value, str) or not value:
        raise BadRequest(f"expected an id; found {obj!r}", field="id")
    return value


class ClientBase:
    """Settings and request builders of both clients (see :class:`uqeval.Client`)."""

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
    ) -> None:
        self.url, self._key = resolve(url, key)
        self.upload_threshold_bytes = int(upload_threshold_bytes)
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.max_retry_wait = max_retry_wait
        self.npz_threshold = npz_threshold

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"

    def _http_options(self) -> dict[str, Any]:
        """The options of the transport's ``httpx`` client."""
        return {
            "base_url": self.url,
            "headers": self._headers(),
            "timeout": httpx.Timeout(self.timeout),
        }

    def _headers(self) -> dict[str, str]:
        out = {"Accept": "application/json", "User-Agent": "uqeval-client"}
        if self._key:
            out["Authorization"] = f"Bearer {self._key}"
        return out

    # -- sending and polling -------------------------------------------------------------

    def _send(self, call: Call) -> Op[httpx.Response]:
        """Send ``call``, repeating it as its policy allows; the answer, or the error."""
        attempt = 0
        while True:
            try:
                response: httpx.Response = yield call
            except httpx.TransportError as exc:
                if attempt >= self.retries or not may_retry_transport(call, exc):
                    raise unavailable(self.url, exc) from None
                yield Sleep(backoff_delay(self.backoff, attempt, self.max_retry_wait))
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
                yield Sleep(wait)
                attempt += 1
                continue
            raise failure(response)

    def _json(self, call: Call) -> Op[Any]:
        return (yield from self._send(call)).json()

    @staticmethod
    def _poll(
        fetch: Callable[[], Op[J]],
        state: Callable[[J], object],
        *,
        progress: Callable[[J], None] | None,
        timeout: float | None,
        poll_interval: float,
        noun: str,
        still: Callable[[J], str],
        restart: bool = False,
    ) -> Op[J]:
        """Read a job until it ends: ``progress(job)`` whenever ``state(job)`` changes (then
        the wait starts again from ``poll_interval`` if ``restart``), waits growing to
        :data:`POLL_MAX_S`; the job if it succeeded, else JobFailed (naming it ``noun``);
        TimeoutError (``still(job)``) after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: object = None
        while True:
            job = yield from fetch()
            now = state(job)
            if now != seen:
                seen = now
                if restart:
                    interval = poll_interval
                if progress is not None:
                    progress(job)
            if job.done:
                return succeeded(job, noun)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"{still(job)} after {timeout} s")
            yield Sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)

    # -- submissions ---------------------------------------------------------------------

    def _submission_call(
        self,
        prediction: Any,
        y: Any,
        *,
        kind: str | None,
        labels: Any,
        benchmark: Any,
        soft_labels: Any,
        ood: Any,
        sample_weight: Any,
        groups: Any,
        estimates: Mapping[str, Any] | None,
        model_name: str,
        metadata: Mapping[str, Any] | None,
        metrics: Any,
        params: Mapping[str, Any] | None,
        bootstrap: Any,
        stability: Any,
        seed: int | None,
        estimators: Any,
        curves: bool,
        visibility: str,
        idempotency_key: str | None,
        format: str,
        upload_progress: ProgressFn | None,
        callback_url: str | None = None,
    ) -> tuple[Call, dict[str, Any]]:
        """The POST of a submission and what the answer does not say (for the Submission)."""
        if hasattr(prediction, "arrays") and hasattr(prediction, "kind"):
            found_kind, arrays = A.prediction_arrays(prediction)
            if kind is not None and kind != found_kind:
                raise BadRequest(
                    f"kind={kind!r} but the prediction is a {found_kind}", field="kind"
                )
            kind = found_kind
        elif isinstance(prediction, Mapping):
            arrays = {str(k): A.to_host(v, str(k)) for k, v in prediction.items()}
            if kind is None:
                kind = A.infer_kind(arrays)
        else:
            raise BadRequest(
                f"prediction must be a uqcore prediction object or a mapping of arrays named as "
                f"in the API; found {type(prediction).__name__}",
                field="prediction",
            )
        if kind not in KIND_FIELDS:
            raise BadRequest(
                f"kind must be one of {sorted(KIND_FIELDS)}; found {kind!r}", field="kind"
            )
        classification = kind in CLASSIFICATION_KINDS
        if classification and y is not None:
            if labels is not None:
                raise BadRequest("give y or labels, not both", field="labels")
            labels, y = y, None  # the targets of a classification kind are its labels
        extra = {
            "y": y,
            "labels": labels,
            "soft_labels": soft_labels,
            "ood": ood,
            "sample_weight": sample_weight,
            "groups": groups,
        }
        for name, value in extra.items():
            if value is None:
                continue
            if name in arrays:
                raise BadRequest(f"{name} is given twice (argument and mapping)", field=name)
            arrays[name] = A.to_host(value, name)
        for est, value in (estimates or {}).items():
            if not classification:
                raise BadRequest("estimates apply to classification kinds only", field="estimates")
            arrays[ESTIMATE_PREFIX + est] = A.to_host(value, ESTIMATE_PREFIX + est)

        analyses: dict[str, Any] = {"metrics": metric_list(metrics)}
        if params:
            analyses["params"] = {str(k): dict(v) for k, v in params.items()}
        if (b := bootstrap_doc(bootstrap)) is not None:
            analyses["bootstrap"] = b
        if (s := stability_doc(stability)) is not None:
            analyses["stability"] = s
        if seed is not None:
            analyses["seed"] = int(seed)
        if estimators is not None:
            analyses["estimators"] = estimators if estimators == "all" else list(estimators)
        if curves:
            analyses["curves"] = True
        request: dict[str, Any] = {
            "model_name": model_name,
            "metadata": dict(metadata or {}),
            "visibility": visibility,
        }
        if callback_url is not None:
            request["callback_url"] = callback_url
        bench_id = None if benchmark is None else _id(benchmark)
        if bench_id is not None:
            request["benchmark_id"] = bench_id
            # A benchmark sets its submissions' analyses: send them only when asked, so that
            # the server can say why they are refused.
            if analyses != {"metrics": "all"}:
                request["analyses"] = analyses
        else:
            request["analyses"] = analyses
        body = A.encode_body(kind, arrays, request, format=format, npz_threshold=self.npz_threshold)
        key = idempotency_key or uuid.uuid4().hex
        call = Call(
            "POST",
            "/v1/submissions",
            policy="submit",
            content=body.content,
            headers={**body.headers(), "Idempotency-Key": key},
            ok=(202,),
            upload_progress=upload_progress,
        )
        known = {
            "model_name": model_name,
            "kind": kind,
            "n": A.n_rows(kind, arrays),
            "visibility": visibility,
            "benchmark_id": bench_id,
            "metadata": request["metadata"],
            "progress": 0.0,
        }
        return call, {"known": known, "idempotency_key": key}

    @staticmethod
    def _accepted(doc: dict[str, Any], extra: dict[str, Any]) -> Submission:
        merged = {**extra["known"], **doc}
        return Submission.from_json(merged, idempotency_key=extra["idempotency_key"])

    @staticmethod
    def _get_call(sub_id: Any) -> Call:
        return Call("GET", f"/v1/submissions/{_id(sub_id)}")

    @staticmethod
    def _list_call(status: str | None, limit: int, offset: int) -> Call:
        return Call(
            "GET", "/v1/submissions", params={"status": status, "limit": limit, "offset": offset}
        )

    @staticmethod
    def _cancel_call(sub_id: Any) -> Call:
        return Call("POST", f"/v1/submissions/{_id(sub_id)}/cancel", policy="write", ok=(202,))

    @staticmethod
    def _delete_call(path: str) -> Call:
        return Call("DELETE", path, ok=(204,), gone_ok_after_retry=True)

    @staticmethod
    def _visibility_call(sub_id: Any, visibility: str) -> Call:
        return Call("PATCH", f"/v1/submissions/{_id(sub_id)}", json={"visibility": visibility})

    @staticmethod
    def _not_finished(sub: Submission) -> BadRequest:
        return BadRequest(
            f"submission {sub.id} has not finished (status {sub.status}, "
            f"{sub.progress:.0f}%); wait for it (wait=True)",
            code="not_finished",
            field="sub_id",
        )

    @staticmethod
    def _page(items: list[Submission], total: int, offset: int, limit: int) -> SubmissionPage:
        return SubmissionPage(
            items=items,
            total=total,
            offset=offset,
            limit=limit,
            raw={"items": [s.raw for s in items], "total": total, "offset": offset, "limit": limit},
        )

    @staticmethod
    def _plot_call(sub_id: Any, name: str, format: str) -> Call:
        if format not in ("png", "svg"):
            raise ValueError(f"format must be 'png' or 'svg', found {format!r}")
        path = f"/v1/submissions/{_id(sub_id)}/plots/{quote(name, safe='')}"
        return Call("GET", path, params={"format": format})

    # -- leaderboards and comparisons ----------------------------------------------------

    @staticmethod
    def _leaderboard_call(
        benchmark: Any,
        metric: str | None,
        estimator: str | None,
        limit: int | None,
        offset: int | None,
        csv: bool = False,
        part: str = "public",
    ) -> Call:
        return Call(
            "GET",
            f"/v1/benchmarks/{_id(benchmark)}/leaderboard",
            params={
                "metric": metric,
                "estimator": estimator,
                "limit": limit,
                "offset": offset,
                "format": "csv" if csv else None,
                # Left out for the default, so that a server without the split answers too.
                "part": None if part == "public" else part,
            },
        )

    @staticmethod
    def _compare_call(
        ids: list[str],
        benchmark: str,
        metrics: Any,
        estimators: Any,
        n_resamples: int | None,
        seed: int | None,
        level: float | None,
        method: str | None,
        callback_url: str | None = None,
    ) -> Call:
        body: dict[str, Any] = {"benchmark_id": benchmark, "submission_ids": ids}
        # Sent only when given: the service's defaults (for non-admin keys, the benchmark's).
        for name, value in (("n_resamples", n_resamples), ("level", level), ("method", method)):
            if value is not None:
                body[name] = value
        if metrics is not None:
            names = metric_list(metrics)
            if names == "all":
                raise BadRequest("a comparison takes a list of metrics", field="metrics")
            body["metrics"] = names
        if estimators is not None:
            body["estimators"] = list(estimators)
        if seed is not None:
            body["seed"] = int(seed)
        if callback_url is not None:
            body["callback_url"] = callback_url
        return Call("POST", "/v1/comparisons", policy="write", json=body, ok=(202,))

    @staticmethod
    def _comparison_call(cmp_id: Any) -> Call:
        return Call("GET", f"/v1/comparisons/{_id(cmp_id)}")

    # -- benchmarks and admin --------------------------------------------------------------

    def _create_benchmark_call(
        self,
        name: str,
        task: str,
        targets: dict[str, Any],
        primary_metric: str,
        metrics: Any,
        settings: dict[str, Any],
    ) -> Call:
        arrays = {k: A.to_host(v, k) for k, v in targets.items() if v is not None}
        request: dict[str, Any] = {
            "name": name,
            "task": task,
            "primary_metric": primary_metric,
            **settings,
        }
        if metrics is not None:
            request["metrics"] = metric_list(metrics)
        body = A.encode_body(None, arrays, request, npz_threshold=self.npz_threshold)
        return Call(
            "POST",
            "/v1/benchmarks",
            policy="write",
            content=body.content,
            headers=body.headers(),
            ok=(201,),
        )

    @staticmethod
    def _mask(mask: Any) -> np.ndarray | None:
        """``private_mask`` as N booleans (True: a private row); 0/1 integers are taken too."""
        if mask is None:
            return None
        a = A.to_host(mask, "private_mask")
        if a.dtype.kind in "iu" and np.all((a == 0) | (a == 1)):
            a = a.astype(bool)
        if a.dtype != np.bool_ or a.ndim != 1:
            raise BadRequest(
                f"private_mask must be N booleans (True: a private row); found dtype "
                f"{a.dtype}, shape {a.shape}",
                field="private_mask",
            )
        return a

    @staticmethod
    def _close_call(bench_id: Any) -> Call:
        # Setting a state: repeating it answers the same.
        return Call("PATCH", f"/v1/benchmarks/{_id(bench_id)}", json={"status": "closed"})

    @staticmethod
    def _benchmarks(doc: dict[str, Any]) -> list[Benchmark]:
        return [Benchmark.from_json(b) for b in doc.get("benchmarks") or []]

    @staticmethod
    def _teams(doc: dict[str, Any]) -> list[Team]:
        return [Team.from_json(t) for t in doc.get("teams") or []]

    @staticmethod
    def _keys(doc: dict[str, Any]) -> list[ApiKey]:
        return [ApiKey.from_json(k) for k in doc.get("keys") or []]

    @staticmethod
    def _leaderboard(doc: dict[str, Any]) -> Leaderboard:
        return Leaderboard.from_json(doc)

    # -- quality gates -------------------------------------------------------------------

    @staticmethod
    def _gate_call(
        benchmark: Any,
        candidate: Any,
        reference: Any,
        checks: Any,
        confidence: float | None,
        correction: str,
        n_resamples: int | None,
        seed: int | None,
    ) -> Call:
        body: dict[str, Any] = {
            "benchmark_id": _id(benchmark),
            "candidate": _id(candidate),
            "reference": _id(reference),
            "checks": parse_checks(checks),
            "correction": correction,
        }
        # Sent only when given: the service's defaults (for non-admin keys, the benchmark's).
        for name, value in (("confidence", confidence), ("n_resamples", n_resamples)):
            if value is not None:
                body[name] = value
        if seed is not None:
            body["seed"] = int(seed)
        return Call("POST", "/v1/gates", policy="write", json=body, ok=(202,))

    @staticmethod
    def _get_gate_call(gate_id: Any) -> Call:
        return Call("GET", f"/v1/gates/{_id(gate_id)}")
