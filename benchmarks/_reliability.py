"""The five reliability measurements, each on a stack of its own (:mod:`benchmarks._chaos`):
(a) chaos, (b) Redis killed, (c) SIGTERM of a worker and of the API, (d) the API killed
mid-upload, (e) the soak. Each returns its figures as a dict; ``benchmarks/reliability.py``
runs them at full size and writes the tables, ``tests/reliability/test_chaos.py`` runs them
small and asserts on the same figures. Every wait is bounded; every random draw is seeded.
"""

from __future__ import annotations

import io
import json
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks._chaos import ADMIN, ChaosStack, Child, rss_bytes
from benchmarks._load import Load, ReadyProbe, account, batch, span_of, statuses
from service import keys

# ------------------------------------------------------------------------------------------
# (a) chaos: pool children and whole workers SIGKILLed at random
# ------------------------------------------------------------------------------------------


class Killer(threading.Thread):
    """Until told to stop or ``max_kills`` is reached: wait a seeded uniform interval, then
    SIGKILL a pool child (probability ``p_child``) or a whole worker, restarting the latter
    after a short seeded pause (its pool children are restarted by the worker itself)."""

    def __init__(
        self,
        stack: ChaosStack,
        *,
        seed: int,
        max_kills: int,
        interval_s: tuple[float, float],
        p_child: float = 0.6,
        plan: list[str] | None = None,
    ) -> None:
        super().__init__(name="killer", daemon=True)
        self.stack = stack
        self.rng = np.random.default_rng(seed)
        self.max_kills = max_kills
        self.interval_s = interval_s
        self.p_child = p_child
        self.plan = plan
        #: (time, "child" or "worker", worker name, jobs running at that moment)
        self.events: list[tuple[float, str, str, int]] = []
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while len(self.events) < self.max_kills:
                if self.stopped.wait(float(self.rng.uniform(*self.interval_s))):
                    return
                busy = self._busy_worker()
                if busy is None:
                    continue
                w, running = busy
                if self.plan is not None:
                    action = self.plan[len(self.events) % len(self.plan)]
                else:
                    action = "child" if float(self.rng.random()) < self.p_child else "worker"
                if action == "child":
                    pid = self.stack.kill_pool_child(w, int(self.rng.integers(16)))
                    if pid is not None:
                        self.events.append((time.monotonic(), "child", w.name, running))
                    continue
                self.stack.hold(w)
                w.kill()
                self.events.append((time.monotonic(), "worker", w.name, running))
                self.stopped.wait(float(self.rng.uniform(0.5, 2.0)))
                self.stack.restart_worker(w)
        except BaseException as exc:  # reported by the part; the stack is stopped anyway
            self.error = exc

    def _busy_worker(self, timeout_s: float = 30.0) -> tuple[Child, int] | None:
        """A running worker that holds a running job (seeded pick among them), and how many
        jobs run; None when none did within ``timeout_s`` (or the killer was stopped)."""
        deadline = time.monotonic() + timeout_s
        while not self.stopped.is_set() and time.monotonic() < deadline:
            holders = self.stack.job_holders()
            busy = [w for w in self.stack.workers if w.running and w.name in holders]
            if busy:
                return busy[int(self.rng.integers(len(busy)))], sum(holders.values())
            self.stopped.wait(0.05)
        return None

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=180)


def ensure_workers(stack: ChaosStack) -> None:
    """Wait (at most 3 min) until every worker runs and is announced again: a kill may have
    come last (the killer or the watchdog restarts it)."""
    deadline = time.monotonic() + 180.0
    while time.monotonic() < deadline:
        live = stack.live_workers()
        if all(w.running and w.name in live for w in stack.workers):
            return
        time.sleep(0.2)


def chaos(
    tmp: Path,
    *,
    count: int = 200,
    clients: int = 4,
    kills: int = 20,
    interval_s: tuple[float, float] = (2.0, 6.0),
    n: int = 2000,
    bootstrap: int = 2000,
    seed: int = 1,
    wait_s: float = 600.0,
    plan: list[str] | None = None,
) -> dict[str, Any]:
    """(a) ``count`` submissions from ``clients`` threads while a :class:`Killer` SIGKILLs
    pool children and whole workers (2 workers of 2 children each) that hold a running job;
    ``plan`` fixes the sequence of kinds of kill (else a seeded draw each time)."""
    with ChaosStack(tmp, workers=2) as stack:
        t0 = time.monotonic()
        load = Load(stack.base, ADMIN, count, clients=clients, n=n, bootstrap=bootstrap, seed=seed)
        killer = Killer(stack, seed=seed, max_kills=kills, interval_s=interval_s, plan=plan)
        load.start()
        killer.start()
        load.join(wait_s)
        # Kills go on while the queue drains (most jobs run after their POST), until all
        # planned kills happened or every accepted job ended.
        deadline = time.monotonic() + wait_s
        ids = [s.id for s in load.sent if s.id is not None]
        while killer.is_alive() and time.monotonic() < deadline:
            if all(
                v in ("succeeded", "failed", "cancelled") for v in statuses(stack, ids).values()
            ):
                break
            time.sleep(0.5)
        killer.stop()
        ensure_workers(stack)
        out = account(stack, load, wait_s=wait_s)
        out["kills_child"] = sum(1 for e in killer.events if e[1] == "child")
        out["kills_worker"] = sum(1 for e in killer.events if e[1] == "worker")
        out["kills_busy"] = sum(1 for e in killer.events if e[3] > 0)
        out["killer_error"] = repr(killer.error) if killer.error else None
        out["wall_s"] = time.monotonic() - t0
        out["settings"] = {"count": count, "clients": clients, "n": n, "bootstrap": bootstrap}
        out["requeued"] = int(stack.client.hget(keys.stats(), "requeued") or 0)
    out["survivors"] = stack.stop()
    return out


# ------------------------------------------------------------------------------------------
# (b) Redis SIGKILLed and restarted under load
# ------------------------------------------------------------------------------------------


def redis_kill(
    tmp: Path,
    *,
    appendonly: bool = True,
    count: int = 120,
    clients: int = 4,
    kills: int = 2,
    down_s: float = 3.0,
    rate: float = 8.0,
    n: int = 2000,
    bootstrap: int = 200,
    seed: int = 2,
    wait_s: float = 600.0,
) -> dict[str, Any]:
    """(b) Redis SIGKILLed ``kills`` times while ``clients`` submit ``rate`` per second (so
    that POSTs arrive during each outage), each time left down ``down_s`` seconds, then
    started on the same port and data directory. With ``appendonly=False`` (the control) a
    restarted Redis is empty."""
    rng = np.random.default_rng(seed)
    with ChaosStack(tmp, workers=2, appendonly=appendonly) as stack:
        probe = ReadyProbe(stack.base)
        probe.start()
        load = Load(
            stack.base,
            ADMIN,
            count,
            clients=clients,
            n=n,
            bootstrap=bootstrap,
            seed=seed,
            rate=rate,
        ).start()
        outages: list[float] = []
        for _ in range(kills):
            # Wait until a fresh share of the submissions went through, then kill.
            target = min(count, load.done + max(1, count // (kills + 1)))
            deadline = time.monotonic() + wait_s
            while load.done < target and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(float(rng.uniform(0.0, 0.5)))
            t = time.monotonic()
            stack.kill_redis()
            time.sleep(down_s)
            stack.restart_redis()
            outages.append(time.monotonic() - t)
        load.join(wait_s)
        ensure_workers(stack)
        out = account(stack, load, wait_s=wait_s)
        probe.stop()
        out["redis_kills"] = kills
        out["redis_down_s"] = sum(outages)
        out["readyz_not_ready_s"] = probe.not_ready_s()
        out["readyz_503_s"] = probe.seconds_of("503")
        out["post_503_span_s"] = span_of(load, {"503"})
        out["settings"] = {"appendonly": appendonly, "count": count, "rate": rate, "down_s": down_s}
    out["survivors"] = stack.stop()
    return out


# ------------------------------------------------------------------------------------------
# (c) SIGTERM of a worker and of the API mid-load
# ------------------------------------------------------------------------------------------


def _term(child: Child, timeout_s: float) -> float:
    """SIGTERM the leader only (as ``kill PID`` or ``docker stop`` do); seconds until it
    exited (then the group is reaped)."""
    t = time.monotonic()
    assert child.proc is not None
    child.proc.send_signal(signal.SIGTERM)
    exited = child.wait(timeout_s)
    took = time.monotonic() - t
    child.stop(5.0)
    return took if exited else float("inf")


def sigterm(
    tmp: Path,
    *,
    count: int = 120,
    clients: int = 4,
    rate: float = 8.0,
    n: int = 2000,
    bootstrap: int = 1000,
    seed: int = 3,
    wait_s: float = 600.0,
) -> dict[str, Any]:
    """(c) While ``clients`` submit ``rate`` per second, a worker that holds a running job
    and then the API get SIGTERM; each is started again at once (the API on the same port)."""
    with ChaosStack(tmp, workers=2) as stack:
        load = Load(
            stack.base,
            ADMIN,
            count,
            clients=clients,
            n=n,
            bootstrap=bootstrap,
            seed=seed,
            rate=rate,
        ).start()
        deadline = time.monotonic() + wait_s
        while load.done < count // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        holders: dict[str, int] = {}
        while not holders and time.monotonic() < deadline:
            holders = stack.job_holders()
            time.sleep(0.02)
        w = next((w for w in stack.workers if w.name in holders), stack.workers[0])
        jobs_held = holders.get(w.name, 0)
        # The worker's warm shutdown and restart go on beside the load and the API's turn.
        exits: list[float] = []

        def worker_turn() -> None:
            stack.hold(w)
            exits.append(_term(w, 120.0))
            stack.restart_worker(w)

        turn = threading.Thread(target=worker_turn, name="worker-sigterm", daemon=True)
        turn.start()
        while load.done < 2 * count // 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stack.api is not None
        t = time.monotonic()
        stack.hold(stack.api)
        api_exit_s = _term(stack.api, 60.0)
        stack.api.start()
        stack.wait_api()
        api_down_s = time.monotonic() - t
        load.join(wait_s)
        turn.join(timeout=300)
        ensure_workers(stack)
        worker_exit_s = exits[0] if exits else float("inf")
        out = account(stack, load, wait_s=wait_s)
        out["worker_jobs_held"] = jobs_held
        out["worker_exit_s"] = worker_exit_s
        out["api_exit_s"] = api_exit_s
        out["api_down_s"] = api_down_s
        out["settings"] = {"count": count, "rate": rate, "n": n, "bootstrap": bootstrap}
    out["survivors"] = stack.stop()
    return out


# ------------------------------------------------------------------------------------------
# (d) the API killed mid-upload; a client gone mid-upload
# ------------------------------------------------------------------------------------------


def npz_upload(n: int) -> bytes:
    a = batch(7, n)
    request = {"kind": "gaussian", "model_name": "partial", "analyses": {"metrics": ["mae"]}}
    buf = io.BytesIO()
    members: dict[str, Any] = {"request": np.array(json.dumps(request)), **a}
    np.savez(buf, **members)
    return buf.getvalue()


def json_upload(n: int) -> bytes:
    a = batch(8, n)
    doc = {
        "model_name": "partial",
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
        "y": a["y"].tolist(),
        "analyses": {"metrics": ["mae"]},
    }
    return json.dumps(doc).encode()


def half_upload(port: int, content: bytes, ctype: str, idem: str) -> socket.socket:
    """Send the headers of a POST /v1/submissions and half of its body; the open socket."""
    head = (
        "POST /v1/submissions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: {ADMIN['Authorization']}\r\nContent-Type: {ctype}\r\n"
        f"Idempotency-Key: {idem}\r\nContent-Length: {len(content)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head + content[: len(content) // 2])
    return sock


def _uqeval_keys(stack: ChaosStack) -> set[bytes]:
    return set(stack.client.scan_iter(match=keys.PREFIX + "*", count=1000))


def _visible(stack: ChaosStack) -> dict[str, Any]:
    """What a reader could see of a submission: the admin's list, the store's records."""
    with httpx.Client(base_url=stack.base, timeout=10.0) as http:
        r = http.get("/v1/submissions", headers=ADMIN)
        r.raise_for_status()
        total = int(r.json()["total"])
    sub_keys = {k for k in _uqeval_keys(stack) if k.startswith(keys.submission("").encode())}
    return {
        "listed": total,
        "sub_keys": len(sub_keys),
        "pending": int(stack.client.zcard(keys.pending())),
    }


def upload(tmp: Path, *, n: int = 1_000_000, wait_s: float = 120.0) -> dict[str, Any]:
    """(d) Half a large body sent, then the API SIGKILLed (NPZ and JSON), or the client gone
    (socket closed, API alive); after each, and once more after the reaper's window for
    never-enqueued submissions, nothing of the submission may be visible. Then the same
    Idempotency-Key submits a complete body: a new submission (the key was never bound)."""
    bodies = {
        "npz": (npz_upload(n), "application/x-npz"),
        "json": (json_upload(n // 4), "application/json"),
    }
    cases: list[dict[str, Any]] = []
    with ChaosStack(tmp, workers=1, settings={"worker_concurrency": "1"}) as stack:
        before = _visible(stack)
        assert stack.api is not None
        for fmt, (content, ctype) in bodies.items():
            for how in ("api-killed", "client-gone"):
                idem = f"partial-{fmt}-{how}"
                sock = half_upload(stack.port, content, ctype, idem)
                time.sleep(0.5)  # the server reads the half that arrived
                if how == "api-killed":
                    stack.hold(stack.api)
                    stack.api.kill()
                    sock.close()
                    stack.api.start()
                    stack.wait_api()
                else:
                    sock.close()
                    time.sleep(0.5)
                cases.append({"format": fmt, "how": how, "bytes": len(content), **_visible(stack)})
        # A submission stored but never enqueued is rolled back by the reaper after
        # 2 * enqueue_timeout_s + 1 s: look again after that.
        time.sleep(2 * 3.0 + 1.0 + 2.0)
        after = _visible(stack)
        replay = {}
        with httpx.Client(base_url=stack.base, timeout=60.0) as http:
            content, ctype = bodies["npz"]
            r = http.post(
                "/v1/submissions",
                content=content,
                headers={
                    **ADMIN,
                    "Content-Type": ctype,
                    "Idempotency-Key": "partial-npz-api-killed",
                },
            )
            replay = {"status": r.status_code, "replayed": r.json().get("replayed")}
            if r.status_code == 202:
                sub_id = r.json()["id"]
                replay["final"] = _wait_status(stack, sub_id, wait_s)
        api_log = stack.api.tail(20000)
    survivors = stack.stop()
    return {
        "before": before,
        "cases": cases,
        "after": after,
        "replay": replay,
        "unhandled_errors_logged": api_log.count("unhandled error"),
        "survivors": survivors,
    }


def _wait_status(stack: ChaosStack, sub_id: str, timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    while True:
        status = statuses(stack, [sub_id])[sub_id]
        if status in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------
# (e) soak
# ------------------------------------------------------------------------------------------

#: Per-submission keys and what must become of them after retention.
KEPT = (":result", ":curves")  # and the record sub:{id} itself
GONE = (":arrays", ":hb")


def classify(key: bytes) -> str:
    k = key.decode()
    if not k.startswith(keys.PREFIX):
        return "celery"
    rest = k[len(keys.PREFIX) :]
    if rest.startswith("sub:"):
        for suffix in GONE:
            if rest.endswith(suffix):
                return "sub" + suffix
        for suffix in KEPT:
            if rest.endswith(suffix):
                return "sub" + suffix
        return "sub"
    head = rest.split(":", 1)[0]
    return head if head in ("idem", "rate") else "other"


def key_census(stack: ChaosStack) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in stack.client.scan_iter(count=1000):
        c = classify(key)
        out[c] = out.get(c, 0) + 1
    return dict(sorted(out.items()))


class RssSampler(threading.Thread):
    """Every ``interval_s``: RSS of the API process and of the workers (masters + pool
    children, summed), and Redis's used memory."""

    def __init__(self, stack: ChaosStack, interval_s: float) -> None:
        super().__init__(name="rss", daemon=True)
        self.stack = stack
        self.interval_s = interval_s
        self.samples: list[dict[str, float]] = []
        self.stopped = threading.Event()

    def sample(self) -> None:
        procs = self.stack.processes()
        used = int(self.stack.client.info("memory")["used_memory"])
        self.samples.append(
            {
                "t": time.monotonic(),
                "api": sum(rss_bytes(p) for p in procs["api"]),
                "workers": sum(rss_bytes(p) for p in procs["workers"]),
                "redis_used": used,
            }
        )

    def run(self) -> None:
        while not self.stopped.wait(self.interval_s):
            self.sample()

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


def soak(
    tmp: Path,
    *,
    minutes: float = 30.0,
    rate: float = 1.0,
    retention_s: int = 30,
    n: int = 2000,
    bootstrap: int = 100,
    bound_s: float = 60.0,
) -> dict[str, Any]:
    """(e) One submission every ``1/rate`` s for ``minutes`` (a submitter key, rate limit on
    with a short window); raw arrays kept ``retention_s``. RSS of the API and the workers
    from the first minute (or tenth of the run) on; the store's keys by kind before and after
    retention; every job's time from creation to its end against ``bound_s``."""
    count = max(1, int(minutes * 60 * rate))
    settings = {
        "raw_retention_s": str(retention_s),
        "rate_limit": "100000",
        "rate_limit_window_s": "5",
        "worker_concurrency": "2",
    }
    with ChaosStack(tmp, workers=1, settings=settings) as stack:
        headers = stack.submitter("soak")
        census_before = key_census(stack)
        others_before = {
            k.decode().removeprefix(keys.PREFIX)
            for k in stack.client.scan_iter(count=1000)
            if classify(k) == "other"
        }
        sampler = RssSampler(stack, interval_s=max(1.0, min(10.0, minutes * 60 / 60)))
        sampler.sample()
        sampler.start()
        load = Load(stack.base, headers, count, clients=2, n=n, bootstrap=bootstrap, rate=rate)
        load.start().join(minutes * 60 + 300)
        out = account(stack, load, wait_s=bound_s + 60)
        sampler.sample()
        sampler.stop()
        ids = [s.id for s in load.sent if s.id is not None]
        took = _job_seconds(stack, ids)
        census_end = key_census(stack)
        # Retention: the last arrays expire retention_s after the last job ended.
        time.sleep(retention_s + 6)
        census_after = key_census(stack)
        idem_ttls = [stack.client.ttl(k) for k in stack.client.scan_iter(match="*:idem:*")]
        others_after = {
            k.decode().removeprefix(keys.PREFIX)
            for k in stack.client.scan_iter(count=1000)
            if classify(k) == "other"
        }
        warm = [s for s in sampler.samples if s["t"] >= load.t0 + min(60.0, minutes * 6)]
        first = warm[0] if warm else sampler.samples[0]
        last = sampler.samples[-1]
        out.update(
            {
                "count": count,
                "minutes": minutes,
                "retention_s": retention_s,
                "rss_first": first,
                "rss_last": last,
                "rss_max": {
                    k: max(s[k] for s in sampler.samples) for k in ("api", "workers", "redis_used")
                },
                "rss_growth": {k: last[k] - first[k] for k in ("api", "workers", "redis_used")},
                "job_s_max": max(took) if took else float("nan"),
                "job_s_p50": float(np.median(took)) if took else float("nan"),
                "over_bound": sum(1 for t in took if t > bound_s),
                "bound_s": bound_s,
                "census_before": census_before,
                "census_end": census_end,
                "census_after": census_after,
                "idem_without_ttl": sum(1 for t in idem_ttls if t < 0),
                "other_new": sorted(others_after - others_before),
            }
        )
    out["survivors"] = stack.stop()
    return out


def _job_seconds(stack: ChaosStack, ids: list[str]) -> list[float]:
    """Seconds from each submission's creation to its end, from the store's timestamps."""
    from datetime import datetime

    pipe = stack.client.pipeline(transaction=False)
    for sub_id in ids:
        pipe.hmget(keys.submission(sub_id), "created_at", "finished_at")
    out = []
    for created, finished in pipe.execute():
        if created and finished:
            a = datetime.fromisoformat(created.decode().replace("Z", "+00:00"))
            b = datetime.fromisoformat(finished.decode().replace("Z", "+00:00"))
            out.append((b - a).total_seconds())
        else:
            out.append(float("inf"))
    return out
