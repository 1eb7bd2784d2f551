"""Load and its accounting for the reliability measurements: client threads that submit
seeded Gaussian batches with an Idempotency-Key each (a retried POST is never a second
submission), a probe of ``/readyz``, and :func:`account`, which reads the store directly
(not through the API) to tell what became of every accepted submission: lost, stuck,
duplicated, wrong or failed.

"Wrong" is judged against :func:`uqcore.evaluate` run here on the same arrays; "duplicated"
three ways: an Idempotency-Key answered with two ids, a result written more than once
(:class:`benchmarks._chaos.ResultWrites`), and more ``succeeded`` task runs in the workers'
logs, or in the store's job counter, than succeeded submissions.
"""

from __future__ import annotations

import json
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import uqcore
from benchmarks._chaos import ChaosStack
from service import keys
from service.store.documents import unpack
from uqcore import predictions as P

METRICS = ["mae", "crps", "nll"]
TERMINAL = {"succeeded", "failed", "cancelled"}
#: Answers after which the same POST is sent again (same Idempotency-Key).
RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


def batch(seed: int, n: int) -> dict[str, np.ndarray]:
    """A seeded Gaussian batch: mean, std, and targets drawn from the predictive law."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 1.5, size=n)
    return {"mean": mean, "std": std, "y": mean + std * rng.normal(size=n)}


def body(seed: int, n: int, bootstrap: int) -> bytes:
    a = batch(seed, n)
    doc = {
        "model_name": f"chaos-{seed}",
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
        "y": a["y"].tolist(),
        "analyses": {"metrics": METRICS, "bootstrap": {"n_resamples": bootstrap}, "seed": seed},
    }
    return json.dumps(doc).encode()


@dataclass
class Sent:
    """One submission as a client saw it."""

    index: int
    seed: int
    idem: str
    ids: list[str] = field(default_factory=list)
    #: every answer: (monotonic time, "202", "503", "ConnectError", ...)
    attempts: list[tuple[float, str]] = field(default_factory=list)
    accepted_at: float | None = None
    refused: str | None = None

    @property
    def id(self) -> str | None:
        return self.ids[0] if self.ids else None


class Load:
    """``clients`` threads POSTing ``count`` submissions (every ``1/rate`` s when ``rate`` is
    set, else back to back), each retried with its Idempotency-Key on 5xx, 429 or a failed
    connection, for at most ``retry_s`` seconds."""

    def __init__(
        self,
        base: str,
        headers: dict[str, str],
        count: int,
        *,
        clients: int = 4,
        n: int = 2000,
        bootstrap: int = 100,
        seed: int = 0,
        rate: float | None = None,
        retry_s: float = 120.0,
        tag: str = "chaos",
    ) -> None:
        self.base = base
        self.headers = headers
        self.n = n
        self.bootstrap = bootstrap
        self.rate = rate
        self.retry_s = retry_s
        self.sent = [Sent(i, seed * 100_000 + i, f"{tag}-{seed}-{i}") for i in range(count)]
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"client-{c}", daemon=True)
            for c in range(clients)
        ]
        self.t0 = 0.0

    def start(self) -> Load:
        self.t0 = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def join(self, timeout_s: float) -> bool:
        """Wait for every client; True when all are done (else they are told to stop)."""
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        done = not any(t.is_alive() for t in self._threads)
        if not done:
            self._stop.set()
            for t in self._threads:
                t.join(timeout=self.retry_s + 30)
        return done

    @property
    def done(self) -> int:
        """How many submissions have an outcome (accepted or refused)."""
        return sum(1 for s in self.sent if s.id is not None or s.refused is not None)

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30.0) as http:
            while not self._stop.is_set():
                with self._lock:
                    i, self._next = self._next, self._next + 1
                if i >= len(self.sent):
                    return
                if self.rate:
                    self._stop.wait(max(0.0, self.t0 + i / self.rate - time.monotonic()))
                self._submit(http, self.sent[i])

    def _submit(self, http: httpx.Client, s: Sent) -> None:
        content = body(s.seed, self.n, self.bootstrap)
        headers = {**self.headers, "Content-Type": "application/json", "Idempotency-Key": s.idem}
        deadline = time.monotonic() + self.retry_s
        for attempt in range(1000):
            try:
                r = http.post("/v1/submissions", content=content, headers=headers)
                outcome = str(r.status_code)
            except httpx.HTTPError as exc:
                r, outcome = None, type(exc).__name__
            s.attempts.append((time.monotonic(), outcome))
            if r is not None and r.status_code == 202:
                sub_id = str(r.json()["id"])
                if sub_id not in s.ids:
                    s.ids.append(sub_id)
                s.accepted_at = time.monotonic()
                return
            if r is not None and r.status_code not in RETRY_STATUS:
                s.refused = f"{r.status_code}: {r.text[:200]}"
                return
            if time.monotonic() > deadline or self._stop.is_set():
                break
            time.sleep(min(0.1 * 2**attempt, 1.0))
        s.refused = f"gave up after {len(s.attempts)} attempts ({outcome})"


class ReadyProbe(threading.Thread):
    """GET /readyz every ``interval_s``; keeps (monotonic time, status or error name)."""

    def __init__(self, base: str, interval_s: float = 0.1) -> None:
        super().__init__(name="readyz-probe", daemon=True)
        self.base = base
        self.interval_s = interval_s
        self.samples: list[tuple[float, str]] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=2.0) as http:
            while not self.stopped.is_set():
                try:
                    outcome = str(http.get("/readyz").status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                self.samples.append((time.monotonic(), outcome))
                self.stopped.wait(self.interval_s)

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)

    def not_ready_s(self) -> float:
        """Seconds the probe saw anything but 200 (each sample counts until the next)."""
        total = 0.0
        for (t, outcome), (t_next, _) in zip(self.samples, self.samples[1:], strict=False):
            if outcome != "200":
                total += t_next - t
        return total

    def seconds_of(self, outcome: str) -> float:
        total = 0.0
        for (t, got), (t_next, _) in zip(self.samples, self.samples[1:], strict=False):
            if got == outcome:
                total += t_next - t
        return total


def client_errors(load: Load) -> dict[str, int]:
    """Answers other than 202 that the clients saw (then retried), by kind."""
    out: dict[str, int] = {}
    for s in load.sent:
        for _, outcome in s.attempts:
            if outcome != "202":
                out[outcome] = out.get(outcome, 0) + 1
    return dict(sorted(out.items()))


def span_of(load: Load, outcomes: set[str]) -> float:
    """Seconds from the first to the last POST answered with one of ``outcomes`` (0: none)."""
    times = [t for s in load.sent for t, o in s.attempts if o in outcomes]
    return max(times) - min(times) if times else 0.0


def statuses(stack: ChaosStack, ids: list[str]) -> dict[str, str | None]:
    """Status of every id as the store holds it (None: no record)."""
    pipe = stack.client.pipeline(transaction=False)
    for sub_id in ids:
        pipe.hget(keys.submission(sub_id), "status")
    return {
        sub_id: None if v is None else v.decode()
        for sub_id, v in zip(ids, pipe.execute(), strict=True)
    }


def wait_terminal(stack: ChaosStack, ids: list[str], timeout_s: float) -> dict[str, str | None]:
    """Poll the store until every id is terminal or gone, at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = statuses(stack, ids)
        if all(v is None or v in TERMINAL for v in got.values()) or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def succeeded_runs(logs: list[Path]) -> int:
    """Runs of the evaluation task that the workers' logs report as succeeded (the task's
    return value is the job's outcome: ``'succeeded'``, or ``'skipped:...'`` when the run
    found the job already done)."""
    count = 0
    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        count += sum(
            1
            for line in text.splitlines()
            if "uqeval.evaluate[" in line and "succeeded in" in line and "'succeeded'" in line
        )
    return count


def is_wrong(result: dict[str, Any], seed: int, n: int) -> str | None:
    """Why the stored ``result`` differs from uqcore on the same arrays (None: it agrees)."""
    a = batch(seed, n)
    direct = uqcore.evaluate(P.Gaussian(a["mean"], a["std"]), a["y"], METRICS)
    for name in METRICS:
        got = result.get("metrics", {}).get(name, {}).get("value")
        want = direct.scalar(name)
        if got is None or want is None or not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12):
            return f"{name}: {got} != {want}"
    return None


def stuck_detail(stack: ChaosStack, sub_id: str) -> dict[str, Any]:
    """What the store holds of a submission that did not end: its record's lifecycle fields,
    its heartbeat, the job sets it is in, and where its task message is (queue lists or
    Celery's unacknowledged hash). Diagnostics for a failed run."""
    c = stack.client
    fields = ("status", "attempts", "started_at", "error", "queue", "cancel_requested")
    record = dict(zip(fields, c.hmget(keys.submission(sub_id), fields), strict=True))
    detail: dict[str, Any] = {k: None if v is None else v.decode() for k, v in record.items()}
    detail["heartbeat_ttl_ms"] = c.pttl(keys.heartbeat(sub_id))
    detail["in_running"] = c.zscore(keys.running(), sub_id)
    detail["in_pending"] = c.zscore(keys.pending(), sub_id)
    detail["in_resend"] = c.zscore(keys.resend(), sub_id)
    needle = sub_id.encode()
    where = []
    for name in ("cpu", "gpu"):
        if any(needle in m for m in c.lrange(name, 0, -1)):
            where.append(f"list:{name}")
    if any(needle in m for m in c.hvals("unacked")):
        where.append("unacked")
    detail["message"] = where
    return detail


def account(
    stack: ChaosStack,
    load: Load,
    *,
    wait_s: float,
    baseline_subs: int = 0,
    check_results: bool = True,
) -> dict[str, Any]:
    """What became of every accepted submission (read from Redis, after waiting at most
    ``wait_s`` for all of them to end)."""
    accepted = [s for s in load.sent if s.id is not None]
    ids = [s.id for s in accepted if s.id is not None]
    t0 = time.monotonic()
    final = wait_terminal(stack, ids, wait_s)
    settle_s = time.monotonic() - t0
    missing = [i for i, v in final.items() if v is None]
    stuck = [i for i, v in final.items() if v is not None and v not in TERMINAL]
    failed = [i for i, v in final.items() if v in ("failed", "cancelled")]
    succeeded = [i for i, v in final.items() if v == "succeeded"]
    errors = {}
    for sub_id in failed[:5]:
        err = stack.client.hget(keys.submission(sub_id), "error")
        errors[sub_id] = (err or b"").decode()[:200]
    wrong: dict[str, str] = {}
    if check_results:
        by_id = {s.id: s for s in accepted}
        for sub_id in succeeded:
            raw = stack.client.get(keys.result(sub_id))
            why = (
                "no result stored"
                if raw is None
                else is_wrong(json.loads(unpack(raw)), by_id[sub_id].seed, load.n)
            )
            if why is not None:
                wrong[sub_id] = why
    writes = stack.writes.counts if stack.writes is not None else {}
    written_twice = sorted(i for i in ids if writes.get(i, 0) > 1)
    two_ids = [s.idem for s in accepted if len(s.ids) > 1]
    stats = stack.client.hget(keys.stats(), "succeeded")
    listed = int(stack.client.zcard(keys.submissions()))
    runs = succeeded_runs([w.log for w in stack.workers])
    return {
        "submitted": len(load.sent),
        "accepted": len(accepted),
        "refused": sum(1 for s in load.sent if s.refused is not None and s.id is None),
        "refusals": sorted({s.refused for s in load.sent if s.refused and s.id is None})[:3],
        "lost": len(missing) + len(stuck),
        "missing": missing,
        "stuck": stuck,
        "stuck_detail": {i: stuck_detail(stack, i) for i in stuck[:5]},
        # what the client saw of each missing one: [(seconds after its first try, answer)]
        "missing_attempts": {
            s.id: [(round(t - s.attempts[0][0], 2), a) for t, a in s.attempts]
            for s in accepted
            if s.id in set(missing[:5])
        },
        "succeeded": len(succeeded),
        "failed": len(failed),
        "failed_reasons": errors,
        "wrong": len(wrong),
        "wrong_detail": dict(list(wrong.items())[:5]),
        "duplicated": len(set(written_twice) | {s.id for s in accepted if len(s.ids) > 1}),
        "written_twice": written_twice,
        "idem_two_ids": two_ids,
        "extra_records": max(0, listed - baseline_subs - len(set(ids))),
        "stats_succeeded": int(stats or 0),
        "log_succeeded_runs": runs,
        "settle_s": settle_s,
        "client_errors": client_errors(load),
        "worker_self_exits": len(stack.self_exits),
        "self_exit_reasons": sorted({why for _, why in stack.self_exits})[:3],
    }
