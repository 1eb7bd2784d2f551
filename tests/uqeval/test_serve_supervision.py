"""``uqeval serve`` supervises its children: a SIGKILLed worker, Redis or API is restarted,
``/readyz`` says so meanwhile, the accepted work completes exactly once, and Ctrl-C (also while
a restart is pending) or a SIGKILL of ``serve`` itself leaves no process behind.

Each test runs a real ``uqeval serve`` (free port, its own data directory) and kills real
processes, found from ``/proc`` (not from what ``serve`` says about them).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.stack import ROOT
from tests.uqeval.test_cli import alive, cmdline, descendants, read_banner

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

ADMIN = "supervision-test-admin-key"
HEADERS = {"Authorization": f"Bearer {ADMIN}"}


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 0.1) -> Any:
    """Poll ``check`` until it returns something truthy (returned), at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(every_s)


def pgid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def in_groups(groups: set[int]) -> list[int]:
    """Live processes of any of the process ``groups``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and pgid(int(entry.name)) in groups and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


class Serve:
    """A ``uqeval serve`` subprocess (its own session) with one worker."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        env = {k: v for k, v in os.environ.items() if not k.startswith("UQEVAL_")}
        env.pop("REDIS_URL", None)
        env.update(
            UQEVAL_ADMIN_KEY=ADMIN,
            UQEVAL_BACKEND="numpy",
            # A job whose worker died is re-queued once its heartbeat is this old.
            UQEVAL_HEARTBEAT_INTERVAL_S="0.5",
            UQEVAL_HEARTBEAT_TTL_S="4",
            UQEVAL_RATE_LIMIT="0",
            PYTHONPATH=str(ROOT),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uqeval", "serve", "--port", "0", "--data-dir", str(data_dir)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.seen: set[int] = set()  # every descendant seen, to check none is left
        self.url = read_banner(self.proc)["url"]
        self.http = httpx.Client(base_url=self.url, timeout=30.0)
        wait_for("ready", lambda: self.ready()[0] == 200, 90)

    def child(self, marker: str) -> int | None:
        """The pid of the direct child whose command line contains ``marker``."""
        self.seen |= descendants(self.proc.pid)
        for pid in descendants(self.proc.pid):
            if marker in cmdline(pid) and pgid(pid) == pid and alive(pid):
                return pid
        return None

    def ready(self) -> tuple[int, dict[str, Any]]:
        try:
            r = self.http.get("/readyz", timeout=5.0)
        except httpx.HTTPError:
            return 0, {}
        return r.status_code, r.json()

    def submit(self, body: dict[str, Any]) -> str:
        r = self.http.post("/v1/submissions", json=body, headers=HEADERS)
        assert r.status_code == 202, r.text
        return str(r.json()["id"])

    def status(self, sub_id: str) -> dict[str, Any] | None:
        try:
            r = self.http.get(f"/v1/submissions/{sub_id}", headers=HEADERS, timeout=5.0)
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    def statuses(self, ids: list[str]) -> list[str]:
        return [(d or {}).get("status", "?") for d in map(self.status, ids)]

    def all_ended(self, ids: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
        def ended() -> dict[str, dict[str, Any]] | None:
            docs = {i: self.status(i) for i in ids}
            if all(d is not None and d["status"] in TERMINAL for d in docs.values()):
                return docs  # type: ignore[return-value]
            return None

        docs: dict[str, dict[str, Any]] = wait_for("every job ended", ended, timeout_s, 0.5)
        return docs

    def succeeded_count(self) -> float:
        """``uqeval_jobs_total{outcome="succeeded"}`` of ``/metrics`` (jobs that ended
        succeeded, counted in Redis as each one ends)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.http.get("/metrics").text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "uqeval_jobs_total" and sample.labels == {"outcome": "succeeded"}:
                    return sample.value
        raise AssertionError("no uqeval_jobs_total{outcome=succeeded}")

    def state(self) -> dict[str, dict[str, Any]]:
        """The supervisor's state file, by child name ({} while there is none)."""
        try:
            doc = json.loads((self.data_dir / "supervisor-state.json").read_text())
        except (OSError, ValueError):
            return {}
        return {c["name"]: c for c in doc["children"]}

    def log(self) -> str:
        path = self.data_dir / "logs" / "supervisor.log"
        return path.read_text() if path.exists() else ""

    def close(self) -> list[int]:
        """Stop it (SIGTERM, then SIGKILL of what is left); returns the pids that were
        left behind."""
        self.http.close()
        self.seen |= descendants(self.proc.pid)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return self.reap_leftovers()

    def reap_leftovers(self, timeout_s: float = 0.0) -> list[int]:
        """The children still alive after ``timeout_s`` (then SIGKILLed, so that a failing
        test leaves nothing either)."""
        groups = {g for g in (pgid(p) for p in self.seen) if g is not None} | self.seen

        def leftovers() -> list[int]:
            return sorted({p for p in self.seen if alive(p)} | set(in_groups(groups)))

        deadline = time.monotonic() + timeout_s
        while leftovers() and time.monotonic() < deadline:
            time.sleep(0.2)
        left = leftovers()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left


TERMINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    stack = Serve(tmp_path)
    try:
        yield stack
    finally:
        stack.close()


def body(seed: int, n: int = 10_000, resamples: int = 3000) -> dict[str, Any]:
    """A Gaussian submission whose bootstrap keeps a worker busy for about a second (six of
    them: several seconds of work in flight when a process is killed)."""
    rng = np.random.default_rng(seed)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 1.5, size=n)
    return {
        "model_name": f"m{seed}",
        "prediction": {"kind": "gaussian", "mean": mean.tolist(), "std": std.tolist()},
        "y": (mean + std * rng.normal(size=n)).tolist(),
        "analyses": {"metrics": ["mae", "crps", "nll"], "bootstrap": {"n_resamples": resamples}},
    }


def test_a_killed_worker_is_restarted_and_every_job_succeeds_once(serve: Serve) -> None:
    ids = [serve.submit(body(seed)) for seed in range(6)]
    wait_for("a job running", lambda: "running" in serve.statuses(ids), 60, 0.05)
    running = ids[serve.statuses(ids).index("running")]
    worker = serve.child("uqeval worker")
    assert worker is not None
    os.kill(worker, signal.SIGKILL)

    # /readyz names it (503: it was the only worker) until the new process announced itself.
    _code, ready = wait_for(
        "/readyz reports worker-1 restarting",
        lambda: (r := serve.ready())[0] == 503 and "worker-1" in r[1]["restarting"] and r,
        30,
        0.05,
    )
    assert "worker-1" in ready["reason"] and ready["status"] == "not_ready"
    wait_for("a new worker process", lambda: serve.child("uqeval worker") not in (None, worker), 60)
    wait_for("ready again", lambda: serve.ready()[0] == 200, 90)
    assert serve.ready()[1]["restarting"] == []

    docs = serve.all_ended(ids, 240)
    assert {i: d["status"] for i, d in docs.items()} == dict.fromkeys(ids, "succeeded")
    assert all(d["result"]["metrics"]["crps"]["value"] > 0 for d in docs.values())
    assert serve.succeeded_count() == len(ids)  # exactly once each
    assert docs[running]["attempts"] == 2  # killed with its worker, run again by the reaper
    log = serve.log()
    assert f"worker-1 (pid {worker}) died: killed by signal 9 (SIGKILL)" in log, log
    assert "worker-1 restarted" in log and "worker-1 is back" in log, log
    assert serve.proc.poll() is None  # serve itself kept running


def listening_port(pid: int) -> str:
    """The port a redis-server process was started on.

    Right after exec its /proc cmdline is still the argv (``... --port P ...``); once the
    server has set its process title it reads ``redis-server HOST:P``. Either form answers.
    """
    words = cmdline(pid).split()
    if "--port" in words:
        return words[words.index("--port") + 1]
    return words[-1].rpartition(":")[2]


def test_a_killed_redis_is_restarted_and_the_accepted_work_completes(serve: Serve) -> None:
    # appendfsync everysec: what Redis accepted is on disk within about a second. Work is
    # sent, twice as much each time, until some of it, accepted two seconds before, is still
    # queued or running (on a fast machine six jobs may all be done by then): that is the
    # work in flight.
    ids: list[str] = []
    for count in (6, 12, 24, 48):
        batch = [serve.submit(body(100 + len(ids) + i)) for i in range(count)]
        ids += batch
        time.sleep(2.0)
        if set(serve.statuses(batch)) & {"queued", "running"}:
            break
    else:
        pytest.fail(f"no work in flight: all of {len(ids)} jobs ended within 2 s of being sent")
    redis_pid = serve.child("redis-server")
    assert redis_pid is not None
    redis_port = listening_port(redis_pid)
    os.kill(redis_pid, signal.SIGKILL)

    _code, ready = wait_for(
        "/readyz 503 with redis restarting",
        lambda: (r := serve.ready())[0] == 503 and "redis" in r[1]["restarting"] and r,
        30,
        0.05,
    )
    assert "redis" in ready["reason"]
    new_pid = wait_for(
        "a new redis-server",
        lambda: (p := serve.child("redis-server")) not in (None, redis_pid) and p,
        60,
    )
    assert listening_port(new_pid) == redis_port  # same port: clients reconnect
    wait_for("ready again", lambda: serve.ready()[0] == 200, 90)

    docs = serve.all_ended(ids, 240)
    assert {i: d["status"] for i, d in docs.items()} == dict.fromkeys(ids, "succeeded")
    assert serve.succeeded_count() == len(ids)
    assert f"redis (pid {redis_pid}) died: killed by signal 9 (SIGKILL)" in serve.log()
    # Work accepted after the restart runs too.
    late = serve.submit(body(200, n=200, resamples=0))
    assert serve.all_ended([late], 120)[late]["status"] == "succeeded"


def test_a_killed_api_comes_back_and_a_killed_serve_takes_every_child_along(
    serve: Serve,
) -> None:
    api = serve.child("uvicorn")
    assert api is not None
    os.kill(api, signal.SIGKILL)
    new_api = wait_for(
        "a new API process", lambda: (p := serve.child("uvicorn")) not in (None, api) and p, 60
    )
    wait_for("the API answers again", lambda: serve.ready()[0] == 200, 90, 0.2)
    # The supervisor notes it once it sees the API answer (a poll later than this test).
    wait_for("the log says it is back", lambda: f"api is back (pid {new_api})" in serve.log(), 30)
    assert f"api (pid {api}) died: killed by signal 9 (SIGKILL)" in serve.log()

    # The restarted children die with the supervisor too (PR_SET_PDEATHSIG).
    children = descendants(serve.proc.pid)
    serve.seen |= children
    assert new_api in children and len(children) >= 3
    os.kill(serve.proc.pid, signal.SIGKILL)
    serve.proc.wait(timeout=30)
    assert serve.reap_leftovers(timeout_s=60) == []


def test_ctrl_c_while_a_restart_is_pending_leaves_nothing_behind(serve: Serve) -> None:
    worker = serve.child("uqeval worker")
    assert worker is not None
    os.kill(worker, signal.SIGKILL)
    # The supervisor noticed and waits for the backoff (no process for worker-1 yet).
    wait_for(
        "worker-1 waiting for its restart",
        lambda: serve.state().get("worker-1", {}).get("state") == "restarting",
        30,
        0.02,
    )
    groups = {pgid(p) for p in descendants(serve.proc.pid)} - {None}
    serve.proc.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C sends to it
    assert serve.proc.wait(timeout=90) == 0
    assert serve.reap_leftovers() == []
    assert in_groups({g for g in groups if g is not None}) == []
    assert not (serve.data_dir / "supervisor-state.json").exists()
