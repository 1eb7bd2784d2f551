"""Service throughput at N = 10^4, all metrics: jobs per minute with 1 and 2 worker processes,
side by side in one run.

The throughput phase of ``benchmarks/service.py`` on its own: M jobs (N = 10^4 Gaussian,
``metrics: "all"``, NPZ bodies) posted back to back by one client while the workers drain the
queue, on a fresh ``uqeval serve --workers W`` (default settings), W = 1 and 2 alternated for
``--rounds`` rounds (each with a warm-up job per worker); and the same with the 28 metrics the
previous run's figures were set with (:data:`CONFIGS`). Jobs per minute from the first POST
to the last finish, and between the first and the last finish; the median of the rounds
against the previous run's figures (:data:`PREVIOUS`).

    python benchmarks/throughput.py                  # M = 200, 2 rounds (about 3 minutes)
    python benchmarks/throughput.py --jobs 40 --rounds 1
    python benchmarks/throughput.py --against 8cbc9fd  # also that commit, like for like
    python benchmarks/throughput.py --against 5d9c7a3 --against-all  # and with all metrics

The previous run's figures were measured on another machine. ``--against REV`` runs that
commit's code too (a temporary git worktree, its own ``serve``) with the same 28 metrics, 1 and
2 workers, alternated with the others in each round: the ratio of this tree to it on the same
machine in the same run (8cbc9fd is the commit whose run set :data:`PREVIOUS`).

Writes the "Service throughput" section of ``benchmarks/RESULTS.md`` (``--no-write``: print
only).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._results import write_section  # noqa: E402
from benchmarks.service import Stack, gaussian, loadavg, throughput  # noqa: E402
from benchmarks.service_ab import _cli_module, _commit  # noqa: E402

#: Jobs per minute of the previous run (RESULTS.md, "Service"), by worker processes.
PREVIOUS = {1: 2946.0, 2: 3775.0}
N = 10_000


#: The runs of a round: (worker processes, metrics). "previous" posts the metrics the previous
#: run's figures were set with (those "all" selects for a Gaussian but the ones added since,
#: :data:`benchmarks.floor.ADDED_LATER`), for a like-for-like comparison.
CONFIGS: tuple[tuple[int, str], ...] = ((1, "all"), (2, "all"), (1, "previous"), (2, "previous"))


def previous_metrics() -> list[str]:
    """The 28 metrics of the previous run's figures."""
    from benchmarks.bootstrap_speed import target_metrics

    return target_metrics()


#: The runs on the ``--against`` commit's code: the previous run's 28 metrics; with
#: ``--against-all`` also all metrics ("base-all", against this tree's "all").
BASE_CONFIGS: tuple[tuple[int, str], ...] = ((1, "base"), (2, "base"))
BASE_ALL_CONFIGS: tuple[tuple[int, str], ...] = ((1, "base-all"), (2, "base-all"))


def rounds(
    jobs: int, count: int, against: str | None = None, against_all: bool = False
) -> tuple[dict[tuple[int, str], list[dict[str, Any]]], str | None]:
    """The runs of every config, round by round; and the ``against`` commit (short hash)."""
    configs = CONFIGS + (BASE_CONFIGS if against else ())
    configs += BASE_ALL_CONFIGS if against and against_all else ()
    out: dict[tuple[int, str], list[dict[str, Any]]] = {c: [] for c in configs}
    previous = previous_metrics()
    chosen: dict[str, list[str] | str] = {
        "all": "all",
        "previous": previous,
        "base": previous,
        "base-all": "all",
    }
    with tempfile.TemporaryDirectory(prefix="uqeval-throughput-") as tmp:
        base_tree = Path(tmp) / "base"
        commit = None
        if against:
            subprocess.run(
                ["git", "worktree", "add", "--detach", "--quiet", str(base_tree), against],
                cwd=ROOT,
                check=True,
            )
            commit = _commit(base_tree)
        try:
            _run_rounds(jobs, count, configs, chosen, Path(tmp), base_tree, out)
        finally:
            if against:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False
                )
    return out, commit


def _run_rounds(
    jobs: int,
    count: int,
    configs: tuple[tuple[int, str], ...],
    chosen: dict[str, list[str] | str],
    tmp: Path,
    base_tree: Path,
    out: dict[tuple[int, str], list[dict[str, Any]]],
) -> None:
    index = 0
    for r in range(count):
        # the base commit's runs first in even rounds, last in odd ones (drift of the shared
        # machine's load falls on both alike)
        order = configs if r % 2 == 0 else configs[::-1]
        for workers, which in order:
            if which.startswith("base"):
                stack = Stack(
                    workers, tmp, index=index, root=base_tree, module=_cli_module(base_tree)
                )
            else:
                stack = Stack(workers, tmp, index=index)
            index += 1
            print(
                f"round {r + 1}: {workers} worker(s), metrics {which} (load {loadavg()})",
                flush=True,
            )
            with stack:
                got = throughput(stack, jobs, N, chosen[which])
            out[(workers, which)].append(got)
            print(
                f"  {got['per_min']:.0f} jobs/min, {got['succeeded']}/{jobs} succeeded",
                flush=True,
            )


def report(
    res: dict[tuple[int, str], list[dict[str, Any]]],
    args: argparse.Namespace,
    minutes: float,
    commit: str | None = None,
) -> str:
    lines = [
        f"`python benchmarks/throughput.py --jobs {args.jobs} --rounds {args.rounds}"
        f"{f' --against {args.against}' if args.against else ''}"
        f"{' --against-all' if args.against and args.against_all else ''}` "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {minutes:.1f} min; {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work, load at the end {loadavg()}). "
        f"{args.jobs} jobs of N = {N:,} (Gaussian, NPZ) posted back to back by one client to a "
        "fresh `uqeval serve --workers W`, each job with all metrics (the target's setting) "
        f"or with the {len(previous_metrics())} metrics the previous run's figures were set "
        "with; the four runs alternated in each round. Median of the rounds. Every job also "
        "computes and keeps the curves of its plots (a submission outside a benchmark).",
        "",
        "| worker processes | metrics | jobs/min (first POST → last finish) | jobs/min (first → "
        "last finish) | previous run | ratio to previous | posting the jobs took | CPU ms per "
        "job: workers / API / Redis | succeeded | rounds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (workers, which), runs in res.items():
        if which.startswith("base"):
            continue
        per_min = statistics.median(r["per_min"] for r in runs)
        steady = statistics.median(r["steady_per_min"] for r in runs)
        ok = sum(r["succeeded"] for r in runs)
        each = ", ".join(f"{r['per_min']:.0f}" for r in runs)
        label = "all" if which == "all" else f"the previous run's {len(previous_metrics())}"
        posting = statistics.median(r["posting"] for r in runs)
        cpu = " / ".join(
            f"{1e3 * statistics.median(r['cpu'].get(role, 0.0) for r in runs) / args.jobs:.1f}"
            for role in ("workers", "api", "redis")
        )
        lines.append(
            f"| {workers} | {label} | {per_min:.0f} | {steady:.0f} | {PREVIOUS[workers]:.0f} | "
            f"{per_min / PREVIOUS[workers]:.2f}× | {posting:.2f} s | {cpu} | "
            f"{ok}/{args.jobs * len(runs)} | {each} |"
        )
    two = statistics.median(r["per_min"] for r in res[(2, "all")])
    one = statistics.median(r["per_min"] for r in res[(1, "all")])
    lines += ["", f"2 workers / 1 worker (all metrics): {two / one:.2f}×."]
    if commit:
        lines += [
            "",
            f"Like for like on this machine: the same {len(previous_metrics())} metrics posted "
            f"to the code of {commit} (the commit whose run set the previous figures), in a "
            "git worktree with a `serve` of its own, alternated with the runs above in each "
            "round. Its jobs put two curves (calibration, sparsification) in the result; "
            "this tree's keep every curve of the plots apart, and store the arrays in the blob "
            "store instead of Redis.",
            "",
            f"| worker processes | {commit}: jobs/min | this tree: jobs/min | ratio | rounds "
            f"({commit}) |",
            "|---|---|---|---|---|",
        ]
        for workers, _ in BASE_CONFIGS:
            base = statistics.median(r["per_min"] for r in res[(workers, "base")])
            ours = statistics.median(r["per_min"] for r in res[(workers, "previous")])
            each = ", ".join(f"{r['per_min']:.0f}" for r in res[(workers, "base")])
            lines.append(f"| {workers} | {base:.0f} | {ours:.0f} | {ours / base:.2f}× | {each} |")
        if (1, "base-all") in res:
            lines += [
                "",
                f"The same with all metrics (`--against-all`): {commit}'s code against this "
                "tree, each job keeping its curves, CPU per job of the workers and the API.",
                "",
                f"| worker processes | {commit}: jobs/min | this tree: jobs/min | ratio "
                f"| CPU ms per job, workers / API: {commit} | this tree |",
                "|---|---|---|---|---|---|",
            ]
            for workers, _ in BASE_ALL_CONFIGS:
                runs_b, runs_o = res[(workers, "base-all")], res[(workers, "all")]
                base = statistics.median(r["per_min"] for r in runs_b)
                ours = statistics.median(r["per_min"] for r in runs_o)
                cpu_b, cpu_o = (
                    " / ".join(
                        f"{1e3 * statistics.median(r['cpu'].get(role, 0.0) for r in runs) / args.jobs:.1f}"
                        for role in ("workers", "api")
                    )
                    for runs in (runs_b, runs_o)
                )
                lines.append(
                    f"| {workers} | {base:.0f} | {ours:.0f} | {ours / base:.2f}× | {cpu_b} "
                    f"| {cpu_o} |"
                )
    metrics_s, curves_s, count = in_process()
    per_job = 60.0 / one
    lines += [
        "",
        f"In this run, in-process (medians of 15): `uqcore.evaluate` of the {count} metrics a "
        f"job computes takes {metrics_s * 1e3:.1f} ms, {curves_s * 1e3:.1f} ms with the curves "
        f"a job outside a benchmark computes and keeps for its plots, against {per_job * 1e3:.1f} "
        "ms per job with one worker (the rest: the API receiving, checking and storing the "
        "upload, the queue, the worker loading the arrays, packing its curves and storing the "
        "result, on the same two cores). About 6 ms of the metrics' CPU time is adversarial "
        "group calibration's random groups (9 group sizes × 100 draws of 100 category counts, "
        "the draws of numpy's multivariate hypergeometric sampler from a compiled kernel, the "
        "same at any N), which `evaluate` draws without the GIL in a helper thread beside the "
        'other metrics (wall time above; docs/performance.md, "What a small batch shares").',
    ]
    return "\n".join(lines)


def in_process() -> tuple[float, float, int]:
    """(seconds of ``evaluate`` of all metrics, the same with curves, the metric count) on
    batches of the benchmark's size and law, medians of 15. Each call gets a batch of its own,
    as each job does: the adversarial group calibration keeps its last results by their inputs
    (:func:`uqcore.regression.group_calibration.group_scores`), so a batch evaluated twice
    would not draw its groups again."""
    import warnings

    import uqcore
    from uqcore import predictions as P

    seeds = iter(range(1, 100))

    def timed(curves: bool) -> float:
        ts = []
        for _ in range(15):
            a = gaussian(N, seed=next(seeds))
            pred = P.Gaussian(mean=a["mean"], std=a["std"])
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                uqcore.evaluate(pred, a["y"], "all", curves=curves)
            ts.append(time.perf_counter() - t)
        return statistics.median(ts)

    a = gaussian(N, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        count = len(uqcore.evaluate(P.Gaussian(mean=a["mean"], std=a["std"]), a["y"], "all"))
    return timed(False), timed(True), count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--against",
        metavar="REV",
        help="also run this commit's code with the previous run's metrics (like for like)",
    )
    parser.add_argument(
        "--against-all",
        action="store_true",
        help="with --against: that commit's code with all metrics too",
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    res, commit = rounds(args.jobs, args.rounds, args.against, args.against_all)
    text = report(res, args, (time.perf_counter() - t0) / 60, commit)
    print(text)
    if not args.no_write:
        write_section("Service throughput", text)


if __name__ == "__main__":
    main()
