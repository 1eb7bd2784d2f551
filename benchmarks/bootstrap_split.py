"""A job's bootstrap split across worker processes: its speed-up with 2 workers against 1.

Each configuration is a stack on loopback (:class:`benchmarks._chaos.ChaosStack`: a managed
Redis, ``uqeval worker`` processes with the solo pool, the API), with the given settings:

* ``1 worker, unsplit``: ``UQEVAL_SPLIT_BOOTSTRAP_MIN_WORK`` above N·B (the job resamples
  alone, as before the split existed);
* ``1 worker, split``: the split on (threshold 1): the job computes every part itself, so
  this measures the split's own cost (Redis round trips, parts' values);
* ``2 workers, split``: the second worker may take the job's part tasks, and takes parts only
  while its machine has a free core (``UQEVAL_SPLIT_BOOTSTRAP_MIN_IDLE_CORES``, default 1);
* ``2 workers, split, parts whatever the load``: the same with that setting 0, so the second
  worker computes parts beside the job's own threads on the same cores.

The same submission (a seeded Gaussian, all regression metrics, B resamples, seed 0) is
posted as an NPZ body ``--repeats`` times, after a small untimed job per worker (imports,
caches);
the job's bootstrap time is the worker's own (``provenance.timings_s.bootstrap``), the job's
time its ``started_at`` → ``finished_at``. Every result's intervals must equal the first
configuration's bit for bit (checked, reported).

    python benchmarks/bootstrap_split.py                    # N = 10^6, B = 1000
    python benchmarks/bootstrap_split.py --n 200000 --b 400 # a quick check

Writes the "Bootstrap split across workers" section of ``benchmarks/RESULTS.md``
(``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._chaos import ChaosStack  # noqa: E402
from benchmarks._results import write_section  # noqa: E402

#: (label, worker processes, split, further settings)
CONFIGS: list[tuple[str, int, bool, dict[str, str]]] = [
    ("1 worker, unsplit", 1, False, {}),
    ("1 worker, split", 1, True, {}),
    ("2 workers, split", 2, True, {}),
    (
        "2 workers, split, parts whatever the load",
        2,
        True,
        {"split_bootstrap_min_idle_cores": "0"},
    ),
]


def npz_body(n: int, b: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 1.5, size=n)
    request = {
        "kind": "gaussian",
        "model_name": "split-bench",
        "analyses": {"metrics": "all", "seed": 0, "bootstrap": {"n_resamples": b}},
    }
    buf = io.BytesIO()
    np.savez(
        buf,
        request=np.array(json.dumps(request)),
        mean=mean,
        std=std,
        y=mean + std * rng.normal(size=n),
    )
    return buf.getvalue()


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run_job(http: httpx.Client, key: dict[str, str], body: bytes, timeout_s: float) -> Any:
    r = http.post(
        "/v1/submissions", content=body, headers={**key, "Content-Type": "application/x-npz"}
    )
    r.raise_for_status()
    sub_id = r.json()["id"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = http.get(f"/v1/submissions/{sub_id}", headers=key).json()
        if doc["status"] in ("succeeded", "failed", "cancelled"):
            if doc["status"] != "succeeded":
                raise RuntimeError(f"job {sub_id} {doc['status']}: {doc.get('error')}")
            return doc
        time.sleep(0.1)
    raise RuntimeError(f"job {sub_id} did not end within {timeout_s} s")


def measure(
    label: str,
    workers: int,
    split: bool,
    extra: dict[str, str],
    args: argparse.Namespace,
    body: bytes,
) -> Any:
    threshold = "1" if split else str(args.n * args.b + 1)
    with tempfile.TemporaryDirectory(prefix="uqeval-split-") as tmp:
        stack = ChaosStack(
            Path(tmp) / "stack",
            workers=workers,
            settings={
                "worker_concurrency": "1",
                "split_bootstrap_min_work": threshold,
                "heartbeat_interval_s": "2",
                "heartbeat_ttl_s": "10",
                **extra,
            },
        )
        stack.start()
        try:
            key = stack.submitter("split-bench")
            with httpx.Client(base_url=stack.base, timeout=120.0) as http:
                warm = npz_body(2000, 20, seed=1)
                for _ in range(workers):  # untimed: imports, caches of every worker
                    run_job(http, key, warm, args.timeout)
                runs = []
                for _ in range(args.repeats):
                    doc = run_job(http, key, body, args.timeout)
                    res = doc["result"]
                    runs.append(
                        {
                            "bootstrap_s": res["provenance"]["timings_s"]["bootstrap"],
                            "job_s": _ts(doc["finished_at"]) - _ts(doc["started_at"]),
                            "split": res["provenance"].get("bootstrap_split"),
                            "intervals": {k: v["interval"] for k, v in res["metrics"].items()},
                        }
                    )
                    print(f"{label}: bootstrap {runs[-1]['bootstrap_s']:.2f} s", flush=True)
        finally:
            left = stack.stop()
            if left:
                print(f"{label}: processes that had to be killed: {left}", flush=True)
    return runs


def report(results: dict[str, list[Any]], args: argparse.Namespace, minutes: float) -> str:
    base = statistics.median(r["bootstrap_s"] for r in results[CONFIGS[0][0]])
    reference = results[CONFIGS[0][0]][0]["intervals"]
    lines = [
        f"`python benchmarks/bootstrap_split.py --n {args.n} --b {args.b} --repeats "
        f"{args.repeats}` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {minutes:.1f} min; "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, so the "
        "figures are noisy). One Gaussian submission, N = "
        f"{args.n:,}, all regression metrics, B = {args.b}, percentile intervals; each "
        "configuration a stack of its own (solo-pool `uqeval worker` processes). Bootstrap "
        "time: the worker's own `timings_s.bootstrap` (for a split job: publishing the parts, "
        "computing its share, waiting for the others, combining); job: started → finished.",
        "",
        "| configuration | bootstrap (median) | job (median) | speed-up of the bootstrap | "
        "parts (who computed them: 0 = the job's process) | intervals bit-identical to "
        "unsplit |",
        "|---|---|---|---|---|---|",
    ]
    for label, _, _, _ in CONFIGS:
        runs = results[label]
        boot = statistics.median(r["bootstrap_s"] for r in runs)
        job = statistics.median(r["job_s"] for r in runs)
        split = runs[-1]["split"]
        parts = "—" if split is None else f"{len(split['parts'])}: {split['computed_by']}"
        same = all(r["intervals"] == reference for r in runs)
        lines.append(
            f"| {label} | {boot:.2f} s | {job:.2f} s | {base / boot:.2f}× | {parts} | "
            f"{'yes' if same else 'NO'} |"
        )
    lines += [
        "",
        "One bootstrap already keeps about 1.5 cores busy through uqcore's helper threads (the "
        "rank, binned and quantile evaluators beside the others, the next block's draw, "
        "adversarial group calibration's groups). A second worker computing parts beside it on "
        "the same cores competes for them and for the cache (the last row). With the default "
        "`UQEVAL_SPLIT_BOOTSTRAP_MIN_IDLE_CORES` = 1 a worker takes parts only while its machine "
        "has a free core for it, so on a machine as small as this one the job computes them "
        "itself (the row before), and the split pays where the other workers have cores of "
        "their own: other machines, or a machine with more cores than the bootstraps on it use.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--b", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    body = npz_body(args.n, args.b)
    results = {label: measure(label, w, s, x, args, body) for label, w, s, x in CONFIGS}
    text = report(results, args, (time.perf_counter() - t0) / 60)
    print(text)
    if not args.no_write:
        write_section("Bootstrap split across workers", text)


if __name__ == "__main__":
    main()
