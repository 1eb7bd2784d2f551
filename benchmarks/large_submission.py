"""A very large submission end to end: a float32 Gaussian of N points (10^8 by default) from
the Python client to ``succeeded`` on a local ``uqeval serve`` stack.

The stack is started as a user starts it (:class:`benchmarks.service.Stack`: ``uqeval serve
--workers 1`` on loopback, default settings) and is fresh for the run, so the worker's peak
memory (``VmHWM`` in ``/proc``) is this job's. The batch (mean, std and y as float32, seeded;
``metrics: "all"``, no bootstrap) is sent by :class:`uqeval.Client` (``submit``: the client
chooses the body, or the resumable upload above its threshold), then waited for. Measured:

* upload: from ``submit`` until its answer (202), and the API processes' memory growth during
  it (the sum of their RSS sampled every 20 ms, minus the sum before; target < 256 MB);
* worker: the peak RSS of the worker process (``VmHWM``) over the whole job — read once the
  worker is idle again, after the plot curves that a large job keeps after its result —
  against 12 × 8 × N bytes (the target: uqcore's own need at 10^7), its peak when the result
  was written, and its idle RSS before the job;
* end to end: from ``submit`` until the client sees ``succeeded``, against uqcore's
  ``evaluate`` of the same arrays (memory-mapped .npy files, in a fresh process, after the
  stack has stopped) plus the upload time (target ≤ 1.5×); the worker's own timings (load,
  metrics) break it down, and that process's peak memory is uqcore's own share.

    python benchmarks/large_submission.py              # N = 10^8 (needs the blob store and
                                                       # the large-upload path)
    python benchmarks/large_submission.py --n 10**7    # a check at 10^7

Writes the "Large submission end to end" section of ``benchmarks/RESULTS.md`` (``--no-write``:
print only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._chaos import rss_bytes  # noqa: E402
from benchmarks._results import write_section  # noqa: E402
from benchmarks.service import Stack, _cpu_s  # noqa: E402

MB = 1 << 20


def points(text: str) -> int:
    """An integer that may be written as a power: ``10**7``."""
    if "**" in text:
        base, power = text.split("**", 1)
        return int(base) ** int(power)
    return int(float(text)) if "e" in text.lower() else int(text)


def gaussian32(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded float32 Gaussian batch, drawn in pieces (no float64 copy of N values)."""
    rng = np.random.default_rng(seed)
    out = {k: np.empty(n, dtype=np.float32) for k in ("mean", "std", "y")}
    step = 1 << 22
    for a in range(0, n, step):
        b = min(a + step, n)
        mean = rng.normal(size=b - a)
        std = rng.uniform(0.5, 1.5, size=b - a)
        out["mean"][a:b] = mean
        out["std"][a:b] = std
        out["y"][a:b] = mean + std * rng.normal(size=b - a)
    return out


def vm_hwm(pid: int) -> int:
    """The peak resident set size of one process (bytes; 0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    """The peak of the summed RSS of some processes, sampled every 20 ms."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.peak = 0
        self.stopped = threading.Event()

    def total(self) -> int:
        return sum(rss_bytes(p) for p in self.pids)

    def run(self) -> None:
        while not self.stopped.wait(0.02):
            self.peak = max(self.peak, self.total())

    def stop(self) -> int:
        self.stopped.set()
        self.join()
        return self.peak


def end_to_end(stack: Stack, arrays: dict[str, np.ndarray], timeout_s: float) -> dict[str, Any]:
    from uqeval import Client

    api = [p for p, role in stack.roles.items() if role == "api"]
    workers = [p for p, role in stack.roles.items() if role == "workers"]
    # the worker's process that runs the job: the solo pool computes in the worker itself
    worker = max(workers, key=rss_bytes)
    token = stack.key["Authorization"].split(" ", 1)[1]
    sampler = RssSampler(api)
    api_before = sampler.total()
    worker_idle = rss_bytes(worker)
    with Client(stack.base, token, timeout=max(600.0, timeout_s)) as client:
        t0 = time.perf_counter()
        sampler.start()
        try:
            sub = client.submit(arrays, kind="gaussian", metrics="all", model_name="large")
        finally:
            api_peak = sampler.stop()
        upload_s = time.perf_counter() - t0
        done = client.wait(sub.id, timeout=timeout_s, poll_interval=0.05)
        e2e_s = time.perf_counter() - t0
    if done.status != "succeeded":
        raise RuntimeError(f"the job ended {done.status}: {done.error}")
    at_result = vm_hwm(worker)
    # A large job keeps its plot curves after the result is written: the job's peak is
    # read once the worker has gone idle (its CPU time still for 3 s).
    curves_s = wait_idle(worker, timeout_s)
    timings = done.result.provenance.get("timings_s", {}) if done.result is not None else {}
    return {
        "upload_s": upload_s,
        "e2e_s": e2e_s,
        "api_growth": api_peak - api_before,
        "api_before": api_before,
        "worker_hwm": vm_hwm(worker),
        "worker_hwm_at_result": at_result,
        "curves_s": curves_s,
        "worker_idle": worker_idle,
        "timings": dict(timings),
    }


def wait_idle(pid: int, timeout_s: float, quiet_s: float = 3.0) -> float:
    """Seconds until process ``pid`` has used under 0.1 s of CPU in ``quiet_s`` seconds
    (bounded by ``timeout_s``)."""
    t0 = time.perf_counter()
    last = _cpu_s(pid)
    while time.perf_counter() - t0 < timeout_s:
        time.sleep(quiet_s)
        now = _cpu_s(pid)
        if now - last < 0.1:
            return time.perf_counter() - t0 - quiet_s
        last = now
    raise RuntimeError(f"the worker was still busy {timeout_s:.0f} s after the result")


#: uqcore's evaluate in a fresh process on the arrays memory-mapped from .npy files (as the
#: blob store hands them to the worker): its time and its peak memory above its start.
IN_PROCESS = """
import json, sys, time
import numpy as np
import uqcore
from uqcore import predictions as P

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0

a = {k: np.load(f"{sys.argv[1]}/{k}.npy", mmap_mode="r") for k in ("mean", "std", "y")}
before = status("VmRSS:")
t0 = time.perf_counter()
uqcore.evaluate(P.Gaussian(a["mean"], a["std"]), a["y"], "all")
took = time.perf_counter() - t0
print(json.dumps({"evaluate_s": took, "growth": status("VmHWM:") - before, "before": before}))
"""


def in_process(arrays: dict[str, np.ndarray], tmp: Path) -> dict[str, Any]:
    for name, a in arrays.items():
        np.save(tmp / f"{name}.npy", a)
    out = subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(tmp)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def report(
    n: int, res: dict[str, Any], own: dict[str, Any], minutes: float, flags: str = ""
) -> str:
    budget = 12 * 8 * n
    evaluate_s = float(own["evaluate_s"])
    bound = evaluate_s + res["upload_s"]
    t = res["timings"]
    verdict = {True: "met", False: "NOT met"}
    rows = [
        (
            "API memory growth during the upload",
            f"{res['api_growth'] / MB:.0f} MB (API at {res['api_before'] / MB:.0f} MB before)",
            "< 256 MB",
            verdict[res["api_growth"] < 256 * MB],
        ),
        (
            "worker peak RSS (VmHWM), the whole job (its plot curves, kept after the result "
            f"for large N, took {res['curves_s']:.0f} s more)",
            f"{res['worker_hwm'] / MB:.0f} MB (idle {res['worker_idle'] / MB:.0f} MB; at the "
            f"result {res['worker_hwm_at_result'] / MB:.0f} MB); "
            f"{res['worker_hwm'] / budget:.2f} × 12·8·N",
            f"≤ 12 × 8 × N = {budget / MB:.0f} MB",
            verdict[res["worker_hwm"] <= budget],
        ),
        (
            "uqcore.evaluate in a fresh process, same arrays (memory-mapped .npy)",
            f"peak {own['growth'] / MB:.0f} MB above its start ({own['before'] / MB:.0f} MB); "
            f"{own['growth'] / budget:.2f} × 12·8·N",
            "(uqcore's own share of the worker's peak)",
            "",
        ),
        (
            "end to end (submit → succeeded)",
            f"{res['e2e_s']:.1f} s = {res['e2e_s'] / bound:.2f} × (evaluate {evaluate_s:.1f} s "
            f"+ upload {res['upload_s']:.1f} s)",
            "≤ 1.5 ×",
            verdict[res["e2e_s"] <= 1.5 * bound],
        ),
    ]
    lines = [
        f"`python benchmarks/large_submission.py --n {n}{flags}` "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {minutes:.1f} min; {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work). A float32 Gaussian of N = {n:,} "
        f'points (mean, std, y: {3 * 4 * n / MB:.0f} MB), `metrics: "all"`, no bootstrap, '
        "from `uqeval.Client.submit` to `succeeded` on a fresh `uqeval serve --workers 1`. "
        f"The worker's own timings: load {t.get('load', float('nan')):.2f} s, metrics "
        f"{t.get('metrics', float('nan')):.2f} s, total {t.get('total', float('nan')):.2f} s.",
        "",
        "| measure | found | target | |",
        "|---|---|---|---|",
        *(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=points, default=10**8, help="points (e.g. 10**7)")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--budget-gib",
        type=float,
        default=None,
        help="UQEVAL_JOB_MEMORY_BUDGET_BYTES of the stack in GiB (default: the machine's rule; "
        "the API's estimate is conservative and refuses 10^8 points under half of 24 GiB)",
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    arrays = gaussian32(args.n)
    extra = {}
    if args.budget_gib is not None:
        extra["UQEVAL_JOB_MEMORY_BUDGET_BYTES"] = str(int(args.budget_gib * 2**30))
    with tempfile.TemporaryDirectory(prefix="uqeval-large-") as tmp:
        stack = Stack(workers=1, tmp=Path(tmp), settings_env=extra)
        stack.start()
        try:
            res = end_to_end(stack, arrays, args.timeout)
        finally:
            stack.stop()
        if stack.survivors:
            print(f"processes that outlived the stack: {stack.survivors}", flush=True)
        own = in_process(arrays, Path(tmp))
    flags = "" if args.budget_gib is None else f" --budget-gib {args.budget_gib:g}"
    text = report(args.n, res, own, (time.perf_counter() - t0) / 60, flags)
    print(text)
    if not args.no_write:
        write_section("Large submission end to end", text)


if __name__ == "__main__":
    main()
