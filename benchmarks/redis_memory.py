"""Measures the Redis memory that one stored 10^6-point submission costs (target: <= 10 KB).

A Redis server of its own (a temporary directory) and a local blob store; each scenario
stores Gaussian submissions of N = 10^6 points with every metric (``service.jobs.submit``,
as the API does) and runs their jobs in this process (``worker.execution.run_job``, numpy
backend) to ``succeeded``. Then, for the last submission:

- per key: ``MEMORY USAGE`` (all samples) of each key of the submission — record, arrays
  manifest, result, curves — and the growth of each shared key (indexes, counters) between
  the states with one and with two such submissions;
- the sum, the figure held to the target;
- for comparison, ``MEMORY USAGE`` of the arrays hash as the previous codec kept it in Redis
  (zlib-compressed ``.npy`` chunks of the same arrays).

Run from the repository root:

    python benchmarks/redis_memory.py           # writes the "Redis memory" section of RESULTS.md
    python benchmarks/redis_memory.py --quick   # N = 10^5, prints only
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# first: this file's folder holds benchmarks/service.py, which would shadow the package
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_section  # noqa: E402
from service import jobs, keys  # noqa: E402
from service.analyses import Analyses  # noqa: E402
from service.redis_server import ManagedRedis  # noqa: E402
from service.settings import Settings  # noqa: E402
from service.store import Store, codec  # noqa: E402
from worker.backend import select_backend  # noqa: E402
from worker.execution import run_job  # noqa: E402

TARGET_BYTES = 10_000

#: (label, analyses): what the submissions ask for. Outside a benchmark and without
#: ``analyses.curves`` the job also stores its curves (``sub:{id}:curves``) so that curve
#: plots outlive the arrays; with ``curves: true`` they are in the result document instead.
SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("all metrics", {"metrics": "all"}),
    ("all metrics, curves in the result", {"metrics": "all", "curves": True}),
]


def arrays(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    std = rng.uniform(0.5, 2.0, size=n)
    return {"mean": y + std * rng.normal(size=n), "std": std, "y": y}


def usage(store: Store) -> dict[str, int]:
    """``MEMORY USAGE`` of every ``uqeval:`` key."""
    out: dict[str, int] = {}
    for key in store.client.scan_iter(match=keys.PREFIX + "*", count=1000):
        used = store.client.memory_usage(key, samples=0)
        if used is not None:
            out[key.decode()] = int(used)
    return out


def submit_and_run(store: Store, settings: Settings, n: int, seed: int, analyses: dict) -> str:
    data = arrays(n, seed)
    record, created = jobs.submit(
        store,
        settings,
        owner="key_mem",
        kind="gaussian",
        n=n,
        model_name="model",
        metadata={"run": seed},
        analyses=Analyses.model_validate(analyses),
        arrays=data,
        idempotency_key=f"mem-{seed}",
        body_hash=str(seed),
        team="team_mem",
    )
    assert created
    outcome = run_job(
        store,
        settings,
        select_backend("numpy"),
        record.id,
        token=f"bench-{seed}",
        worker_name="bench",
    )
    assert outcome == "succeeded", outcome
    return record.id


def scenario(
    store: Store, settings: Settings, n: int, label: str, analyses: dict, seed: int
) -> dict[str, Any]:
    store.client.flushdb()
    submit_and_run(store, settings, n, seed, analyses)
    before = usage(store)
    t0 = time.perf_counter()
    sub_id = submit_and_run(store, settings, n, seed + 1, analyses)
    job_s = time.perf_counter() - t0
    after = usage(store)
    own = {k: v for k, v in after.items() if sub_id in k}
    shared = {k: after[k] - before.get(k, 0) for k in after if sub_id not in k}
    shared = {k: v for k, v in shared.items() if v != 0}
    # A day later: the idempotency mappings (24 h) have expired and the blob sweep has had
    # its first look at the prefixes (kept curves are no longer followed); the arrays are
    # still within their retention.
    idem = [k for k in after if k.startswith(keys.PREFIX + "idem:")]
    assert all(0 < store.client.ttl(k) <= 86400 for k in idem)
    store.client.delete(*idem)
    store.sweep_blobs(now=time.time() + 86400)
    steady = usage(store)
    steady_total = sum(v for k, v in steady.items() if sub_id in k) + sum(
        steady.get(k, 0) - before.get(k, 0) for k in shared if sub_id not in k
    )
    # The same arrays as the previous codec kept them in Redis, for comparison.
    legacy_key = keys.PREFIX + "legacy-arrays"
    pipe = store.client.pipeline(transaction=True)
    codec.put_arrays(pipe, legacy_key, codec.array_fields(arrays(n, seed + 1)))
    pipe.execute()
    legacy = int(store.client.memory_usage(legacy_key, samples=0) or 0)
    store.client.delete(legacy_key)
    return {
        "label": label,
        "own": own,
        "shared": shared,
        "total": sum(own.values()) + sum(shared.values()),
        "steady": steady_total,
        "legacy_arrays": legacy,
        "job_s": job_s,
        "blob_bytes": sum(b.size for b in store.blobs.list(keys.submission_blobs(sub_id))),
    }


def short(key: str) -> str:
    key = key[len(keys.PREFIX) :]
    parts = key.split(":")
    if len(parts) >= 2 and parts[0] == "sub":
        parts[1] = "{id}"
    if parts[0] == "idem":
        parts[-1] = "{sha256}"
    return ":".join(parts)


def render(rows: list[dict[str, Any]], n: int) -> str:
    lines = [
        f"`python benchmarks/redis_memory.py`: `MEMORY USAGE` (all samples) of every key of one "
        f"stored Gaussian submission of N = {n:,} points with every metric, after its job "
        "succeeded (its own keys, and the growth of the shared keys — indexes, counters — "
        "from one to two such submissions). The arrays are in the blob store (a local "
        "directory here); for comparison, the arrays hash as the previous codec kept it in "
        f"Redis. Target: <= {TARGET_BYTES:,} bytes. "
        f"{platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}.",
        "",
        "| submission | key | bytes |",
        "|---|---|---:|",
    ]
    for row in rows:
        for key, used in sorted(row["own"].items()):
            lines.append(f"| {row['label']} | `{short(key)}` | {used:,} |")
        for key, used in sorted(row["shared"].items()):
            lines.append(f"| {row['label']} | `{short(key)}` (growth) | {used:,} |")
        verdict = "meets" if row["total"] <= TARGET_BYTES else "misses"
        lines.append(
            f"| {row['label']} | **total** ({verdict} the target) | **{row['total']:,}** |"
        )
    lines += [
        "",
        "| submission | Redis per submission, after its job | a day later | arrays in the "
        "blob store | the same arrays in Redis before (previous codec) | job s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['label']} | {row['total']:,} B | {row['steady']:,} B | "
            f"{row['blob_bytes'] / 2**20:.1f} MiB | {row['legacy_arrays'] / 2**20:.1f} MiB | "
            f"{row['job_s']:.1f} |"
        )
    lines += [
        "",
        "A day later: the idempotency mapping (kept 24 h) has expired and the blob sweep has "
        "looked at the submission's prefixes (the kept curves' prefix leaves `blobs:due`; the "
        "arrays' stays until their retention ends).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10^5, print only")
    args = parser.parse_args()
    n = 100_000 if args.quick else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        server = ManagedRedis(Path(tmp) / "redis").start()
        try:
            settings = Settings(
                redis_url=server.url,
                blob_url=str(Path(tmp) / "blobs"),
                scratch_dir=Path(tmp) / "scratch",
                backend="numpy",
                enqueue_timeout_s=60.0,
            )
            store = Store.from_url(server.url, settings)
            rows = [
                scenario(store, settings, n, label, analyses, seed=10 * i)
                for i, (label, analyses) in enumerate(SCENARIOS)
            ]
            store.close()
        finally:
            server.stop()
    body = render(rows, n)
    print(body)
    if not args.quick:
        write_section("Redis memory", body)
    return 0 if rows[0]["total"] <= TARGET_BYTES else 1


if __name__ == "__main__":
    raise SystemExit(main())
