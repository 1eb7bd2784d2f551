"""The suite leaderboard read at 20 tasks × 200 teams, on ``uqeval serve`` over HTTP.

A stack is started as :mod:`benchmarks.service` starts it (``uqeval serve`` on loopback with
a managed Redis, 1 worker). 20 benchmarks (N = 200) are created through the admin API and 200
teams; each benchmark's ``mae`` board is then filled with one entry per team written straight
into the stack's Redis with the keys the finishing script writes (sorted set, team →
submission map, shown entries, and the boards' version bumped) — the 4,000 evaluations are not
what is measured, and the read path is the production one. A suite of the 20 tasks
(``missing="exclude"``, the first team as the baseline, B = 200) is created, read once (which
queues its interval job; the entries have no prediction arrays, so only the ``tasks`` view,
which resamples the tasks with their point values, has intervals), then 50 minimal
closed-loop clients GET its first page (``limit=50``, ``view=tasks``: every aggregate with its
interval) for ``--read-seconds`` (target p99 < 100 ms, zero errors).
The cost of a render (a miss: 20 boards read, aggregates of 200 teams) is timed in this
process against the stack's Redis.

    python benchmarks/suites.py             # about 1 minute
    python benchmarks/suites.py --no-write  # print only

Writes the "Service: suite leaderboard" section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_section  # noqa: E402
from benchmarks.service import (  # noqa: E402
    ADMIN_KEY,
    Stack,
    _raw_reader,
    bucket_quantile,
    create_benchmark,
    loadavg,
    machine,
    pct,
    redis_url,
    run_clients,
    server_latency,
)

TASKS = 20
TEAMS = 200
N = 200
ROUTE = "/v1/suites/{suite_id}/leaderboard"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def populate(stack: Stack, client: httpx.Client) -> str:
    """20 benchmarks with a board of 200 teams each, and a suite of them; its id."""
    from service import keys
    from service.store import Store

    rng = np.random.default_rng(0)
    benches = [
        create_benchmark(
            client,
            rng.normal(size=N),
            {"name": f"task{k}", "primary_metric": "mae", "metrics": ["mae"], "seed": k},
        )
        for k in range(TASKS)
    ]
    teams = []
    for i in range(TEAMS):
        r = client.post("/v1/admin/teams", json={"name": f"team{i:03d}"}, headers=ADMIN)
        r.raise_for_status()
        teams.append(r.json()["team_id"])
    store = Store.from_url(redis_url(stack))
    try:
        pipe = store.client.pipeline(transaction=False)
        for k, bench in enumerate(benches):
            values = rng.uniform(0.5, 1.5, size=TEAMS)
            subs = {team: f"sub_bench{k:02d}{i:04d}" for i, team in enumerate(teams)}
            pipe.zadd(
                keys.leaderboard(bench, "mae", "best"),
                {t: float(v) for t, v in zip(teams, values, strict=True)},
            )
            pipe.hset(keys.leaderboard_map(bench, "mae", "best"), mapping=subs)
            pipe.hset(
                keys.leaderboard_entries(bench, "mae"),
                mapping={
                    subs[t]: json.dumps({"value": float(v), "low": None, "high": None})
                    for t, v in zip(teams, values, strict=True)
                },
            )
            pipe.hincrby(keys.leaderboard_info(bench), "__version", 1)
        pipe.execute()
    finally:
        store.close()
    r = client.post(
        "/v1/suites",
        json={
            "name": "bench suite",
            "tasks": [{"benchmark_id": b} for b in benches],
            "baseline_team": teams[0],
            "n_resamples": 200,
        },
        headers=ADMIN,
    )
    r.raise_for_status()
    return str(r.json()["id"])


def wait_current(client: httpx.Client, path: str, key: dict[str, str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        doc = client.get(path, headers=key).json()
        if doc["intervals"]["status"] == "current":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"suite intervals still {doc['intervals']}")
        time.sleep(0.2)


def render_cost(stack: Stack, suite_id: str, calls: int) -> dict[str, float]:
    """Seconds per call of a cached read (authentication and the cached answer: one round
    trip; the first call fills the process's memo) and of a render, in this process."""
    from service.api.routes import suites as routes
    from service.settings import Settings
    from service.store import Store

    store = Store.from_url(redis_url(stack))
    settings = Settings(redis_url=redis_url(stack))
    page = routes.page_key(suite_id, "tasks", 0, 50, "json")
    try:
        token = stack.key["Authorization"].removeprefix("Bearer ")
        routes.answer(store, settings, suite_id, "tasks", 0, 50, "json")  # fills the memo
        store.suite_cached(token, page, suite_id, rate_limit=0, window_s=60)  # the key's id
        t0 = time.perf_counter()
        for _ in range(calls):
            found = store.suite_cached(token, page, suite_id, rate_limit=0, window_s=60)
            assert found.body is not None
        hit = (time.perf_counter() - t0) / calls
        t0 = time.perf_counter()
        for _ in range(calls):
            snap = store.suite_snapshot(suite_id)
            assert snap is not None
            routes.render(store, settings, snap, "tasks", 0, 50, "json")
        miss = (time.perf_counter() - t0) / calls
    finally:
        store.close()
    return {"hit": hit, "miss": miss}


def reads(
    stack: Stack,
    path: str,
    clients: int,
    seconds: float,
    route: str = ROUTE,
    expect: str = "current",
) -> dict[str, Any]:
    """``clients`` minimal closed-loop readers of ``path`` for ``seconds`` (an answer is an
    error unless it is a 200 holding ``"status":"<expect>"``)."""
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        size = len(client.get(path, headers=stack.key).content)
        hist0, _ = server_latency(client, route)
    lat: list[float] = []
    errors: list[str] = []

    async def run() -> None:
        import asyncio

        stop_at = time.perf_counter() + seconds
        await asyncio.gather(
            *(
                _raw_reader(stack.base, stack.key, path, stop_at, lat, errors, expect)
                for _ in range(clients)
            )
        )

    elapsed = run_clients(run)
    with httpx.Client(base_url=stack.base, timeout=60.0) as client:
        hist1, _ = server_latency(client, route)
    hist = {le: hist1[le] - hist0.get(le, 0.0) for le in hist1}
    return {
        "size": size,
        "elapsed": elapsed,
        "lat": lat,
        "errors": errors,
        "server_p50": bucket_quantile(hist, 0.5),
        "server_p99": bucket_quantile(hist, 0.99),
    }


def report(res: dict[str, Any], started: str, seconds: float) -> str:
    r = res["reads"]
    lat = sorted(r["lat"])
    p50, p99 = pct(lat, 50) * 1000, pct(lat, 99) * 1000
    ok = p99 < 100 and not r["errors"]
    c = sorted(res["control"]["lat"])
    return f"""Written by `benchmarks/suites.py` on {started} ({machine()}; load {res["load"]}).

A suite of {TASKS} tasks × {TEAMS} teams (boards filled straight into Redis, see the script's
docstring); `GET /v1/suites/{{id}}/leaderboard?view=tasks` (first page, limit 50, {r["size"]:,}
bytes) by 50 minimal closed-loop clients for {seconds:g} s through 1 API process, intervals
`current` (the cached answer is served while the stamp of the suite record, the 20 member
records and board versions and the interval document is unchanged).

| | value | target |
|---|---|---|
| reads | {len(lat):,} in {r["elapsed"]:.1f} s ({len(lat) / r["elapsed"]:.0f}/s), errors {len(r["errors"])} | zero errors |
| client p50 / p99 | {p50:.1f} ms / {p99:.1f} ms | p99 < 100 ms: {"met" if ok else "NOT met"} |
| server p50 / p99 (histogram bucket bound) | ≤ {r["server_p50"] * 1000:g} ms / ≤ {r["server_p99"] * 1000:g} ms | |
| control: `GET /healthz` by the same 50 clients, p50 / p99 | {pct(c, 50) * 1000:.1f} ms / {pct(c, 99) * 1000:.1f} ms ({len(c) / res["control"]["elapsed"]:.0f}/s) | the floor of one API process on this machine now |
| a cached read's store work (this process) | {res["cost"]["hit"] * 1000:.2f} ms | |
| a render (20 boards, 200 teams; a miss) | {res["cost"]["miss"] * 1000:.1f} ms | |
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--read-seconds", type=float, default=10.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    started = datetime.now().strftime("%Y-%m-%d")
    res: dict[str, Any] = {"load": loadavg()}
    with tempfile.TemporaryDirectory(prefix="uqeval-suites-") as tmp:
        st = Stack(1, Path(tmp))
        try:
            st.start()
            with httpx.Client(base_url=st.base, timeout=60.0) as client:
                suite_id = populate(st, client)
                path = f"/v1/suites/{suite_id}/leaderboard?view=tasks&limit=50"
                wait_current(client, path, st.key, 120.0)
            res["reads"] = reads(st, path, 50, args.read_seconds)
            res["control"] = reads(st, "/healthz", 50, args.read_seconds, "/healthz", "ok")
            res["cost"] = render_cost(st, suite_id, 100)
        finally:
            st.stop()
    text = report(res, started, args.read_seconds)
    print(text)
    if not args.no_write:
        write_section("Service: suite leaderboard", text)


if __name__ == "__main__":
    main()
