"""The asynchronous client: :class:`AsyncClient` has the methods of :class:`uqeval.Client`,
as coroutines on an ``httpx.AsyncClient``.

>>> async with AsyncClient("http://127.0.0.1:8000", key) as client:   # doctest: +SKIP
...     sub = await client.submit({"mean": mean, "std": std}, y, metrics="crps", wait=True)
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from uqeval._aplatform import AsyncPlatformCalls
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
    achunks,
    backoff_delay,
    failure,
    may_retry_status,
    may_retry_transport,
    retry_after,
    too_long_wait,
    unavailable,
)
from uqeval.errors import BadRequest, NotFound, RateLimited, ServerUnavailable
from uqeval.gates import Gate
from uqeval.models import (
    ApiKey,
    Benchmark,
    Comparison,
    Leaderboard,
    Result,
    Submission,
    SubmissionPage,
    Team,
)

__all__ = ["AsyncClient"]


class AsyncClient(AsyncPlatformCalls):
    """An asynchronous client of the uq-eval API: the parameters and methods of
    :class:`uqeval.Client`, each method a coroutine (``async with`` closes it).
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
        transport: httpx.AsyncBaseTransport | None = None,
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
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=self._headers(),
            timeout=httpx.Timeout(timeout),
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    # -- sending ---------------------------------------------------------------------------

    async def _send(self, call: Call) -> httpx.Response:
        """Send ``call``, repeating it as its policy allows; the answer, or the error."""
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.query(),
                    json=call.json,
                    content=None
                    if call.content is None
                    else achunks(call.content, call.upload_progress),
                    headers=call.headers,
                )
            except httpx.TransportError as exc:
                if attempt >= self.retries or not may_retry_transport(call, exc):
                    raise unavailable(self.url, exc) from None
                await asyncio.sleep(backoff_delay(self.backoff, attempt, self.max_retry_wait))
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
                await asyncio.sleep(wait)
                attempt += 1
                continue
            raise failure(response)

    async def _json(self, call: Call) -> Any:
        return (await self._send(call)).json()

    async def _post_body(self, call: Call, purpose: str, upload_id: str | None = None) -> Any:
        """As :meth:`uqeval.Client._post_body`, awaited."""
        if upload_id is None and not self._resumable(call):
            return await self._json(call)
        assert call.content is not None
        answer = await self._upload(
            UploadBody(call.content),
            purpose=purpose,
            encoding=call.headers.get("Content-Encoding"),
            idempotency_key=call.headers.get("Idempotency-Key") or uuid.uuid4().hex,
            progress=call.upload_progress,
            upload_id=upload_id,
        )
        return answer.json()

    async def _upload(
        self,
        body: UploadBody,
        *,
        purpose: str,
        encoding: str | None,
        idempotency_key: str,
        progress: ProgressFn | None,
        upload_id: str | None = None,
    ) -> httpx.Response:
        """As :meth:`uqeval.Client._upload`, awaited."""
        if upload_id is None:
            call = self._upload_create_call(body, purpose=purpose, encoding=encoding)
        else:
            call = self._upload_status_call(upload_id)
        info = await self._json(call)
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
                        await self._send(self._upload_part_call(upload_id, n, data, shown))
                        break
                    except BadRequest as exc:  # damaged on the way: send it again
                        if exc.code != "digest_mismatch" or attempt >= self.retries:
                            raise
                done += length
        except (ServerUnavailable, RateLimited) as exc:
            raise self._interrupted(upload_id, body, exc) from exc
        return await self._send(self._upload_complete_call(upload_id, idempotency_key))

    async def resume_upload(
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
        """As :meth:`uqeval.Client.resume_upload`, awaited."""
        key = idempotency_key or uuid.uuid4().hex
        answer = await self._upload(
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
        final = await self.wait(sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(final.raw, idempotency_key=key, replayed=sub.replayed)

    # -- submissions -----------------------------------------------------------------------

    async def submit(
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
        """As :meth:`uqeval.Client.submit`, awaited."""
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
        sub = self._accepted(await self._post_body(call, "submission", upload_id), extra)
        if not wait:
            return sub
        final = await self.wait(sub.id, progress=progress, timeout=timeout)
        return Submission.from_json(
            final.raw, idempotency_key=sub.idempotency_key, replayed=sub.replayed
        )

    async def wait(
        self,
        id: Any,
        *,
        progress: SubmissionProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Submission:
        """As :meth:`uqeval.Client.wait`, awaited."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: tuple[str, float] | None = None
        while True:
            sub = await self.get(id)
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
            await asyncio.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)

    async def get(self, id: Any) -> Submission:
        """As :meth:`uqeval.Client.get`, awaited."""
        return Submission.from_json(await self._json(self._get_call(id)))

    async def result(self, id: Any, *, wait: bool = False) -> Result:
        """As :meth:`uqeval.Client.result`, awaited."""
        sub = await self.get(id)
        if not sub.done:
            if not wait:
                raise self._not_finished(sub)
            sub = await self.wait(sub.id)
        sub = self._finished(sub)
        assert sub.result is not None
        return sub.result

    async def submissions(
        self,
        *,
        status: str | None = None,
        benchmark: Any = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SubmissionPage:
        """As :meth:`uqeval.Client.submissions`, awaited."""
        if benchmark is None:
            return SubmissionPage.from_json(
                await self._json(self._list_call(status, limit, offset))
            )
        bench_id = _id(benchmark)
        matching: list[Submission] = []
        start = 0
        while True:
            page = SubmissionPage.from_json(await self._json(self._list_call(status, 100, start)))
            matching += [s for s in page.items if s.benchmark_id == bench_id]
            start += len(page.items)
            if not page.items or start >= page.total:
                break
        return self._page(matching[offset : offset + limit], len(matching), offset, limit)

    async def cancel(self, id: Any) -> Submission:
        """As :meth:`uqeval.Client.cancel`, awaited."""
        return Submission.from_json(await self._json(self._cancel_call(id)))

    async def delete(self, id: Any) -> None:
        """As :meth:`uqeval.Client.delete`, awaited."""
        await self._send(self._delete_call(f"/v1/submissions/{_id(id)}"))

    async def set_visibility(self, id: Any, visibility: str) -> Submission:
        """As :meth:`uqeval.Client.set_visibility`, awaited."""
        return Submission.from_json(await self._json(self._visibility_call(id, visibility)))

    async def plot(self, id: Any, name: str, format: str = "png") -> bytes:
        """As :meth:`uqeval.Client.plot`, awaited."""
        return (await self._send(self._plot_call(id, name, format))).content

    # -- leaderboards and comparisons --------------------------------------------------------

    async def leaderboard(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        limit: int | None = None,
        offset: int | None = None,
        part: str = "public",
    ) -> Leaderboard:
        """As :meth:`uqeval.Client.leaderboard`, awaited."""
        call = self._leaderboard_call(benchmark, metric, estimator, limit, offset, part=part)
        return self._leaderboard(await self._json(call))

    async def leaderboard_csv(
        self,
        benchmark: Any,
        *,
        metric: str | None = None,
        estimator: str | None = None,
        part: str = "public",
    ) -> str:
        """As :meth:`uqeval.Client.leaderboard_csv`, awaited."""
        call = self._leaderboard_call(benchmark, metric, estimator, None, None, csv=True, part=part)
        return (await self._send(call)).text

    async def compare(
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
        """As :meth:`uqeval.Client.compare`, awaited."""
        id_list = [_id(i) for i in ids]
        if benchmark is None:
            bench_id = (await self.get(id_list[0])).benchmark_id if id_list else None
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
        cmp_id = (await self._json(call))["id"]
        if wait:
            return await self.wait_comparison(cmp_id, progress=progress, timeout=timeout)
        return await self.comparison(cmp_id)

    async def comparison(self, id: Any) -> Comparison:
        """As :meth:`uqeval.Client.comparison`, awaited."""
        return Comparison.from_json(await self._json(self._comparison_call(id)))

    async def wait_comparison(
        self,
        id: Any,
        *,
        progress: ComparisonProgress | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Comparison:
        """As :meth:`uqeval.Client.wait_comparison`, awaited."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: str | None = None
        while True:
            cmp = await self.comparison(id)
            if cmp.status != seen:
                seen = cmp.status
                if progress is not None:
                    progress(cmp)
            if cmp.done:
                return self._comparison_finished(cmp)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"comparison {cmp.id} is still {cmp.status} after {timeout} s")
            await asyncio.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)

    # -- benchmarks ------------------------------------------------------------------------

    async def benchmarks(self) -> list[Benchmark]:
        """As :meth:`uqeval.Client.benchmarks`, awaited."""
        return self._benchmarks(await self._json(Call("GET", "/v1/benchmarks")))

    async def benchmark(self, id: Any) -> Benchmark:
        """As :meth:`uqeval.Client.benchmark`, awaited."""
        return Benchmark.from_json(await self._json(Call("GET", f"/v1/benchmarks/{_id(id)}")))

    async def create_benchmark(
        self,
        name: str,
        *,
        task: str = "regression",
        y: Any = None,
        labels: Any = None,
        soft_labels: Any = None,
        ood: Any = None,
        groups: Any = None,
        primary_metric: str,
        metrics: Any = None,
        private_mask: Any = None,
        **settings: Any,
    ) -> Benchmark:
        """As :meth:`uqeval.Client.create_benchmark`, awaited."""
        targets = {"y": y, "labels": labels, "soft_labels": soft_labels, "ood": ood}
        targets["groups"] = groups
        targets["private_mask"] = self._mask(private_mask)
        call = self._create_benchmark_call(name, task, targets, primary_metric, metrics, settings)
        return Benchmark.from_json(await self._post_body(call, "benchmark"))

    async def update_benchmark(self, id: Any, **changes: Any) -> Benchmark:
        """As :meth:`uqeval.Client.update_benchmark`, awaited."""
        call = Call("PATCH", f"/v1/benchmarks/{_id(id)}", json=changes)
        return Benchmark.from_json(await self._json(call))

    async def delete_benchmark(self, id: Any) -> None:
        """As :meth:`uqeval.Client.delete_benchmark`, awaited."""
        await self._send(self._delete_call(f"/v1/benchmarks/{_id(id)}"))

    async def close_benchmark(self, id: Any) -> Benchmark:
        """As :meth:`uqeval.Client.close_benchmark`, awaited."""
        return Benchmark.from_json(await self._json(self._close_call(id)))

    # -- admin -----------------------------------------------------------------------------

    async def teams(self) -> list[Team]:
        """As :meth:`uqeval.Client.teams`, awaited."""
        return self._teams(await self._json(Call("GET", "/v1/admin/teams")))

    async def create_team(self, name: str) -> Team:
        """As :meth:`uqeval.Client.create_team`, awaited."""
        call = Call("POST", "/v1/admin/teams", policy="write", json={"name": name}, ok=(201,))
        return Team.from_json(await self._json(call))

    async def keys(self) -> list[ApiKey]:
        """As :meth:`uqeval.Client.keys`, awaited."""
        return self._keys(await self._json(Call("GET", "/v1/admin/keys")))

    async def create_key(self, name: str, *, team_id: str | None = None) -> ApiKey:
        """As :meth:`uqeval.Client.create_key`, awaited."""
        body: dict[str, Any] = {"name": name}
        if team_id is not None:
            body["team_id"] = getattr(team_id, "team_id", team_id)
        call = Call("POST", "/v1/admin/keys", policy="write", json=body, ok=(201,))
        return ApiKey.from_json(await self._json(call))

    async def revoke_key(self, id: Any) -> None:
        """As :meth:`uqeval.Client.revoke_key`, awaited."""
        key_id = getattr(id, "key_id", id)
        await self._send(self._delete_call(f"/v1/admin/keys/{key_id}"))

    # -- catalogue and health --------------------------------------------------------------

    async def metrics(
        self, task: str | None = None, *, kind: str | None = None
    ) -> list[dict[str, Any]]:
        """As :meth:`uqeval.Client.metrics`, awaited."""
        doc = await self._json(Call("GET", "/v1/metrics", params={"task": task, "kind": kind}))
        return list(doc.get("metrics") or [])

    async def health(self) -> dict[str, Any]:
        """As :meth:`uqeval.Client.health`, awaited."""
        return dict(await self._json(Call("GET", "/healthz")))

    async def ready(self) -> dict[str, Any]:
        """As :meth:`uqeval.Client.ready`, awaited."""
        response = await self._send(Call("GET", "/readyz", ok=(200, 503), policy="write"))
        return dict(response.json())

    # -- quality gates -------------------------------------------------------------------

    async def gate(
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
        """As :meth:`uqeval.Client.gate`, awaited."""
        call = self._gate_call(
            benchmark, candidate, reference, checks, confidence, correction, n_resamples, seed
        )
        gate_id = (await self._json(call))["id"]
        if wait:
            return await self.wait_gate(gate_id, progress=progress, timeout=timeout)
        return await self.get_gate(gate_id)

    async def get_gate(self, id: Any) -> Gate:
        """As :meth:`uqeval.Client.get_gate`, awaited."""
        return Gate.from_json(await self._json(self._get_gate_call(id)))

    async def wait_gate(
        self,
        id: Any,
        *,
        progress: Callable[[Gate], None] | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_START_S,
    ) -> Gate:
        """As :meth:`uqeval.Client.wait_gate`, awaited."""
        deadline = None if timeout is None else time.monotonic() + timeout
        interval = poll_interval
        seen: str | None = None
        while True:
            gate = await self.get_gate(id)
            if gate.status != seen:
                seen = gate.status
                if progress is not None:
                    progress(gate)
            if gate.done:
                return self._gate_finished(gate)
            if deadline is not None and time.monotonic() + interval > deadline:
                raise TimeoutError(f"gate {gate.id} is still {gate.status} after {timeout} s")
            await asyncio.sleep(interval)
            interval = min(max(POLL_MAX_S, poll_interval), interval * 1.5)


def _offset(progress: ProgressFn, done: int, total: int) -> ProgressFn:
    """``progress`` of one part as progress of the whole body (``done`` bytes before it)."""
    return lambda sent, _part: progress(done + sent, total)
