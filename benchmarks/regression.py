"""Regression metrics: uqcore side by side with Uncertainty Toolbox and with the numpy floor.

Run from the repository root (the ``bench`` extra installs the peer):

    python benchmarks/regression.py            # about 6 minutes on 2 busy cores
    python benchmarks/regression.py --quick    # smoke run, about 2 minutes (smaller N)
    python benchmarks/regression.py --full     # adds the peer's slow runs at N = 10^6
                                               # (get_all_metrics, adversarial group
                                               # calibration): about 18 minutes
    python benchmarks/regression.py --against-sort   # only the part below (a few minutes)
    python benchmarks/regression.py --student-t      # only the Student-t section (~2 minutes)

Writes the "Regression metrics (uqcore)" section of ``benchmarks/RESULTS.md`` and, for the
metrics of conformal intervals, score decompositions and skill scores (each against one sort
of N values and its peer, see ``benchmarks/_against_sort.py``), the section
"Regression: intervals, decompositions and skill against one sort", and the section
"Regression: Student-t predictions" (one df shared by every row against a df per row, and
against scipy and scoringrules).

Method. Every comparison is measured in the same run, on the same arrays, and reported as a
ratio: absolute times on a shared machine are noise, ratios much less so. Paired quantities
(uqcore and its peer or floor, ``evaluate`` and two argsorts) are timed in alternation, each
repetition after one warm-up call, and the median of each is taken. Peak memory is measured
twice at the largest N: with ``tracemalloc`` (numpy reports its buffers to it) as the peak of
new allocations during ``evaluate``, the inputs excluded; and in a fresh subprocess as the rise
of the resident set size during ``evaluate``, its peak RSS minus the RSS after building the
inputs (peak RSS ``VmHWM`` reset just before the call; this one includes the interpreter's own
allocations and allocator slack).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.special as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uqcore
from benchmarks._results import write_section
from uqcore import evaluate, metric, registry
from uqcore import predictions as P

SECTION = "Regression metrics (uqcore)"
AGAINST_SORT = "Regression: intervals, decompositions and skill against one sort"
STUDENT_T = "Regression: Student-t predictions"


# -- inputs, timing, memory ------------------------------------------------------------------------
def gaussian_batch(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mean, std and targets of a Gaussian batch (targets 0.7-1.3 × over/under-dispersed).

    Built in place so that building it never holds more than the three arrays and one more.
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.5, 2.0, size=n)
    y = rng.normal(size=n)
    y *= rng.uniform(0.7, 1.3, size=n)
    y *= sd
    y += mu
    return mu, sd, y


def quiet(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()

    return run


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def medians(fns: dict[str, Callable[[], Any]], repeats: dict[str, int]) -> dict[str, float]:
    """Median wall time of each function; the functions are timed in alternation.

    Each function gets one warm-up call when it is repeated (``repeats[name] > 1``); the
    repetitions are interleaved so that load from other processes falls on all of them alike.
    """
    for name, fn in fns.items():
        if repeats[name] > 1:
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(max(repeats.values())):
        for name, fn in fns.items():
            if r < repeats[name]:
                times[name].append(timed(fn))
    return {name: statistics.median(ts) for name, ts in times.items()}


def tracemalloc_peak(fn: Callable[[], Any]) -> int:
    """Peak of new traced allocations during ``fn()`` (bytes)."""
    gc.collect()
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


def traced_evaluate(n: int, names: list[str]) -> int:
    """tracemalloc peak of one ``evaluate`` on a fresh Gaussian batch (inputs built before)."""
    mu, sd, y = gaussian_batch(n, seed=2)
    pred = P.Gaussian(mu, sd)
    return tracemalloc_peak(quiet(lambda: evaluate(pred, y, metrics=names)))


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child_peak(n: int) -> None:
    """In a fresh process: RSS rise of one ``evaluate`` (all but group calibration), as JSON.

    The peak RSS (``VmHWM``) is reset just before the call (``/proc/self/clear_refs``), so what
    building the inputs allocated, or the parent process before ``exec``, does not count.
    """
    mu, sd, y = gaussian_batch(n, seed=2)
    pred = P.Gaussian(mu, sd)
    names = regression_metric_names(pred, exclude=("adversarial_group_calibration",))
    quiet(lambda: evaluate(pred, y, metrics=names[:1]))()  # imports and lazy set-up
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS") * 1024
    quiet(lambda: evaluate(pred, y, metrics=names))()
    peak = _status_kib("VmHWM") * 1024
    print(json.dumps({"rss_before": before, "peak_rss": peak}))


def fmt_s(t: float) -> str:
    if t >= 1:
        return f"{t:.2f} s"
    if t >= 1e-3:
        return f"{t * 1e3:.1f} ms"
    return f"{t * 1e6:.0f} µs"


def p10(n: int) -> str:
    k = round(math.log10(n))
    return f"10^{k}" if 10**k == n else str(n)


def regression_metric_names(pred: Any, exclude: tuple[str, ...] = ()) -> list[str]:
    return [
        s.name
        for s in registry.specs("regression")
        if s.why_not(pred) is None and s.name not in exclude
    ]


class Targets:
    """The issue's speed and memory targets, checked as the sections are measured."""

    def __init__(self) -> None:
        self.rows: list[str] = []

    def add(self, what: str, target: str, measured: str, met: bool | None) -> None:
        verdict = {True: "met", False: "**not met**", None: "not measured in this run"}[met]
        self.rows.append(f"| {what} | {target} | {measured} | {verdict} |")

    def lines(self) -> list[str]:
        return [
            "### Targets",
            "",
            "| quantity | target | measured here | verdict |",
            "|---|---|---|---|",
            *self.rows,
        ]


def emit(lines: list[str], line: str) -> None:
    lines.append(line)
    print(line, flush=True)


# -- 1. the numbers of get_all_metrics ----------------------------------------------------------------
def bench_get_all_metrics(peer_sizes: list[int], our_sizes: list[int], tg: Targets) -> list[str]:
    import uncertainty_toolbox as uct

    from uqcore.compat import uncertainty_toolbox_metrics

    lines = [
        "### The numbers of Uncertainty Toolbox's `get_all_metrics` (Gaussian batches)",
        "",
        "uqcore: `uqcore.compat.uncertainty_toolbox_metrics` (same metrics, same grid, same group "
        "sizes, trials and draws for both adversarial group calibrations). Peer: "
        "`uct.get_all_metrics(..., verbose=False)`. Medians of 3 alternated runs (1 for the peer "
        "from N = 10^5, where one run takes tens of seconds).",
        "",
        "| N | Uncertainty Toolbox | uqcore | speed-up |",
        "|---:|---:|---:|---:|",
    ]
    speedup = None
    for n in our_sizes:
        mu, sd, y = gaussian_batch(n)
        pred = P.Gaussian(mu, sd)

        def ours(pred: Any = pred, y: Any = y) -> Any:
            return uncertainty_toolbox_metrics(pred, y, seed=0)

        def peer(mu: Any = mu, sd: Any = sd, y: Any = y) -> Any:
            return uct.get_all_metrics(mu, sd, y, verbose=False)

        if n in peer_sizes:
            reps_peer = 3 if n <= 10**4 else 1
            t = medians({"peer": quiet(peer), "ours": quiet(ours)}, {"peer": reps_peer, "ours": 3})
            ratio = t["peer"] / t["ours"]
            if n == 10**6:
                speedup = ratio
            emit(
                lines,
                f"| {p10(n)} | {fmt_s(t['peer'])} | {fmt_s(t['ours'])} | {ratio:.0f}× |",
            )
        else:
            t = medians({"ours": quiet(ours)}, {"ours": 3})
            label = "not run (≈ 285 s; `--full` runs it)" if n == 10**6 else "not run in `--quick`"
            emit(lines, f"| {p10(n)} | {label} | {fmt_s(t['ours'])} | — |")
    tg.add(
        "`get_all_metrics` numbers at N = 10^6",
        "≥ 100× faster than the peer",
        "—" if speedup is None else f"{speedup:.0f}×",
        None if speedup is None else speedup >= 100,
    )
    return lines


# -- 2. per metric against the peer and against the numpy floor ---------------------------------------
def bench_per_metric(n: int, agc_n: int, tg: Targets) -> list[str]:
    import uncertainty_toolbox as uct

    mu, sd, y = gaussian_batch(n, seed=1)
    pred = P.Gaussian(mu, sd)
    lines = [
        f"### Per metric at N = {p10(n)}",
        "",
        "Each row: uqcore's `metric(name, prediction, y)` (validation of `y` and the registry "
        "included) and the other side, timed in alternation; uqcore median of 5 runs, the peer's "
        "of 1 run at N = 10^6 (3 below), the floor's of 5. The floor is one direct numpy "
        "expression of the same formula on the same arrays.",
        "",
        "| metric | uqcore | compared with | its time | ratio (them / uqcore) | target |",
        "|---|---:|---|---:|---:|---|",
    ]

    def row(
        name: str,
        ours: Callable[[], Any],
        label: str,
        theirs: Callable[[], Any],
        reps: int,
        target: float,
        at: int,
        floor: bool = False,
    ) -> None:
        t = medians({"ours": quiet(ours), "them": quiet(theirs)}, {"ours": 5, "them": reps})
        ratio = t["them"] / t["ours"]
        if floor:
            want = f"uqcore ≤ {target}× floor"
            ok = t["ours"] / t["them"] <= target
            measured = f"uqcore = {t['ours'] / t['them']:.2f}× floor"
        else:
            want = f"≥ {target:.0f}×"
            ok = ratio >= target
            measured = f"{ratio:.0f}×"
        emit(
            lines,
            f"| `{name}`{'' if at == n else f' (N = {p10(at)})'} | {fmt_s(t['ours'])} | {label} "
            f"| {fmt_s(t['them'])} | {ratio:.2f}× | {want} |",
        )
        what = f"`{name}` at N = {p10(at)}" + (" vs numpy floor" if floor else " vs peer")
        tg.add(what, want, measured, ok)

    peer_reps = 1 if n >= 10**6 else 3
    ut = {"compat": "uncertainty_toolbox"}
    row(
        "ece",
        lambda: metric("ece", pred, y, **ut),
        "UT `mean_absolute_calibration_error`",
        lambda: uct.mean_absolute_calibration_error(mu, sd, y),
        peer_reps,
        200,
        n,
    )
    row(
        "rmsce",
        lambda: metric("rmsce", pred, y, **ut),
        "UT `root_mean_squared_calibration_error`",
        lambda: uct.root_mean_squared_calibration_error(mu, sd, y),
        peer_reps,
        200,
        n,
    )
    row(
        "check_score",
        lambda: metric("check_score", pred, y),
        "UT `check_score`",
        lambda: uct.check_score(mu, sd, y),
        peer_reps,
        50,
        n,
    )
    row(
        "interval_score",
        lambda: metric("interval_score", pred, y),
        "UT `interval_score`",
        lambda: uct.interval_score(mu, sd, y),
        peer_reps,
        50,
        n,
    )
    m = min(n, agc_n)
    mu2, sd2, y2 = mu[:m], sd[:m], y[:m]
    pred2 = P.Gaussian(mu2, sd2)
    row(
        "adversarial_group_calibration",
        lambda: metric("adversarial_group_calibration", pred2, y2, seed=0, **ut),
        "UT `adversarial_group_calibration` (`mean_abs`)",
        lambda: uct.adversarial_group_calibration(
            mu2, sd2, y2, cali_type="mean_abs", verbose=False
        ),
        1,
        100,
        m,
    )

    c_norm = 0.5 * math.log(2 * math.pi)

    def floor_nll() -> float:
        z = (y - mu) / sd
        return float(np.mean(0.5 * z * z + np.log(sd)) + c_norm)

    def floor_crps() -> float:
        z = (y - mu) / sd
        return float(
            np.mean(
                sd
                * (
                    z * (2 * sps.ndtr(z) - 1)
                    + 2 * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
                    - 1 / math.sqrt(math.pi)
                )
            )
        )

    floors = {
        "mae": lambda: float(np.mean(np.abs(y - mu))),
        "rmse": lambda: float(np.sqrt(np.mean((y - mu) ** 2))),
        "nll": floor_nll,
        "crps": floor_crps,
        "sharpness": lambda: float(np.sqrt(np.mean(sd**2))),
    }
    for name, fn in floors.items():
        row(
            name,
            lambda name=name: metric(name, pred, y),
            "numpy expression of the formula (floor)",
            fn,
            5,
            1.5,
            n,
            floor=True,
        )
    return lines


# -- 3. all metrics: growth with N, ratio to two argsorts, peak memory ---------------------------------
def bench_all_metrics(sizes: list[int], tg: Targets) -> list[str]:
    lines = [
        "### All applicable regression metrics of a Gaussian batch, as N grows",
        "",
        "One `evaluate(prediction, y, metrics=names)` call with every regression metric that "
        "applies to a Gaussian except `adversarial_group_calibration` (its cost is its draws: "
        "see the per-metric table), against two float64 `numpy.argsort` calls on N values (what "
        "AUSE and Spearman must pay). Medians of alternated runs (5, or 3 from N = 10^6). "
        "O(N log N) growth shows as a flat `evaluate` / (N log2 N) column.",
        "",
    ]
    table = [
        "| N | `evaluate` | two argsorts | ratio (target < 3 at 10^7) | `evaluate` / (N log2 N) "
        '| slowest metrics in `evaluate` (`Report.meta["timings_s"]`, last run) |',
        "|---:|---:|---:|---:|---:|---|",
    ]
    names: list[str] = []
    ratio_top = None
    for n in sizes:
        mu, sd, y = gaussian_batch(n, seed=2)
        pred = P.Gaussian(mu, sd)
        names = regression_metric_names(pred, exclude=("adversarial_group_calibration",))

        last: dict[str, Any] = {}

        def run(pred: Any = pred, y: Any = y, names: list[str] = names, last: Any = last) -> Any:
            last["report"] = evaluate(pred, y, metrics=names)

        def sorts(mu: Any = mu, y: Any = y) -> Any:
            return np.argsort(y), np.argsort(mu)

        reps = 5 if n < 10**6 else 3
        t = medians({"eval": quiet(run), "sort": sorts}, {"eval": reps, "sort": reps})
        ratio = t["eval"] / t["sort"]
        ratio_top = ratio
        per = t["eval"] / (n * math.log2(n)) * 1e9
        shares = sorted(last["report"].meta["timings_s"].items(), key=lambda kv: -kv[1])[:4]
        slowest = ", ".join(f"`{k}` {fmt_s(v)}" for k, v in shares)
        table.append(
            f"| {p10(n)} | {fmt_s(t['eval'])} | {fmt_s(t['sort'])} | {ratio:.2f} | {per:.1f} ns "
            f"| {slowest} |"
        )
        print(table[-1], flush=True)
    lines += [f"{len(names)} metrics: {', '.join(f'`{m}`' for m in names)}.", "", *table, ""]
    top = sizes[-1]
    tg.add(
        f"`evaluate` (all but group calibration) at N = {p10(top)}",
        "< 3 × two argsorts" + ("" if top == 10**7 else " (at 10^7)"),
        f"{ratio_top:.2f} ×",
        (ratio_top or math.inf) < 3 if top == 10**7 else None,
    )

    # peak memory at the largest N
    traced = traced_evaluate(top, names)
    gc.collect()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child-peak", str(top)],
        capture_output=True,
        text=True,
        check=True,
    )
    rss = json.loads(proc.stdout.strip().splitlines()[-1])
    rise = rss["peak_rss"] - rss["rss_before"]
    unit = 8 * top
    lines += [
        f"Peak memory of that `evaluate` call at N = {p10(top)} (inputs: 3 × 8 × N bytes, not "
        "counted; target < 12 × 8 × N bytes):",
        "",
        "| how | peak | in units of 8 × N bytes |",
        "|---|---:|---:|",
        f"| `tracemalloc`: peak of new allocations during the call | {traced / 2**20:.0f} MiB "
        f"| {traced / unit:.1f} |",
        "| fresh process: peak RSS during the call (`VmHWM`, reset before it) − RSS before it "
        f"| {rise / 2**20:.0f} MiB | {rise / unit:.1f} |",
    ]
    for line in lines[-2:]:
        print(line, flush=True)
    worst = max(traced, rise) / unit
    tg.add(
        f"peak memory of `evaluate` at N = {p10(top)}",
        "< 12 × 8 × N bytes" + ("" if top == 10**7 else " (at 10^7)"),
        f"{traced / unit:.1f} (tracemalloc), {rise / unit:.1f} (RSS rise) × 8 × N",
        worst < 12 if top == 10**7 else None,
    )
    return lines


# -- 4. Samples: O(S log S) per row ------------------------------------------------------------------
def bench_samples(n_total: int, tg: Targets) -> list[str]:
    lines = [
        f'### Samples: CRPS (`estimator="nrg"`) as S grows, N·S = {n_total} values fixed',
        "",
        "Each call sorts the draws (the sorted draws are cached on a prediction, so the cache is "
        "dropped before each run) and then makes one O(S) pass per row. Medians of 5 runs.",
        "",
        "| S | N | time | time / (N·S) | time / (N·S·log2 S), relative to S = 8 |",
        "|---:|---:|---:|---:|---:|",
    ]
    base = None
    rng = np.random.default_rng(4)
    rel = []
    for s in (8, 64, 512, 4096):
        n = n_total // s
        pred = P.Samples(rng.normal(size=(n, s)))
        y = rng.normal(size=n)

        def run(pred: Any = pred, y: Any = y) -> Any:
            pred.__dict__.pop("sorted_draws", None)
            return metric("crps", pred, y)

        t = medians({"crps": run}, {"crps": 5})["crps"]
        per = t / (n * s * math.log2(s))
        base = base or per
        rel.append(per / base)
        emit(
            lines,
            f"| {s} | {n} | {fmt_s(t)} | {t / (n * s) * 1e9:.1f} ns | {per / base:.2f} |",
        )
    tg.add(
        "Samples CRPS cost per row",
        "O(S log S)",
        "time / (N·S·log2 S) from S = 8 to 4096: " + ", ".join(f"{r:.2f}" for r in rel),
        max(rel) <= 1.5,
    )
    return lines


# -- Student-t -------------------------------------------------------------------------------------
class _PerRowDf(P.StudentT):
    """A Student-t prediction that never takes the shared-df paths: every quantile is its row's
    own ``stdtrit`` and every density its row's own Γ ratio, as when the rows' df differ."""

    def _shared_df(self) -> Any:
        return None

    def _standard_ppf(self, lv: Any) -> Any:
        return None


def _student_t_rows(n: int, df: float, rng: np.random.Generator) -> list[str]:
    """The Student-t section's rows at one N."""
    import scoringrules as sr
    from scipy import stats

    lines: list[str] = []
    loc = rng.normal(size=n)
    scale = rng.uniform(0.5, 2.0, size=n)
    y = loc + scale * rng.standard_t(df, size=n)
    shared = P.StudentT(loc, scale, df)
    per_row = _PerRowDf(loc, scale, df)
    reps = 5 if n < 10**6 else 3
    cases: list[tuple[str, Any, str, Any]] = [
        (
            "`interval(0.9)`",
            lambda p: np.stack(p.interval(0.9)),
            "`scipy.stats.t.interval`",
            lambda: np.stack(stats.t.interval(0.9, df, loc=loc, scale=scale)),
        ),
        (
            "`nll`",
            lambda p: metric("nll", p, y),
            "−mean `scipy.stats.t.logpdf`",
            lambda: -float(np.mean(stats.t.logpdf(y, df, loc=loc, scale=scale))),
        ),
        (
            "`crps`",
            lambda p: metric("crps", p, y),
            "mean scoringrules `crps_t`",
            lambda: float(np.mean(sr.crps_t(y, df, loc, scale))),
        ),
    ]
    for label, ours, peer_name, peer in cases:
        fns = {
            "one": quiet(lambda ours=ours: ours(shared)),
            "rows": quiet(lambda ours=ours: ours(per_row)),
            "peer": quiet(peer),
        }
        t = medians(fns, dict.fromkeys(fns, reps))
        a, b, c = (np.asarray(fns[k](), dtype=np.float64) for k in ("one", "rows", "peer"))
        scale_ = float(np.max(np.abs(a))) or 1.0
        d_rows = float(np.max(np.abs(a - b))) / scale_
        d_peer = float(np.max(np.abs(a - c))) / scale_
        emit(
            lines,
            f"| {p10(n)} | {label} | {fmt_s(t['one'])} | {fmt_s(t['rows'])} | "
            f"{t['rows'] / t['one']:.1f}× | {peer_name} | {fmt_s(t['peer'])} | "
            f"{t['peer'] / t['one']:.1f}× | {d_rows:.1e}, {d_peer:.1e} |",
        )
    names = regression_metric_names(shared, ("adversarial_group_calibration",))
    g = P.Gaussian(loc, scale * math.sqrt(df / (df - 2.0)))
    fns = {
        "one": quiet(lambda names=names: evaluate(shared, y, metrics=names)),
        "rows": quiet(lambda names=names: evaluate(per_row, y, metrics=names)),
        "gauss": quiet(lambda names=names: evaluate(g, y, metrics=names)),
    }
    t = medians(fns, dict.fromkeys(fns, reps))
    emit(
        lines,
        f"| {p10(n)} | `evaluate`, the {len(names)} metrics (no group calibration) | "
        f"{fmt_s(t['one'])} | {fmt_s(t['rows'])} | {t['rows'] / t['one']:.1f}× | the same "
        f"metrics of a Gaussian (same N) | {fmt_s(t['gauss'])} | "
        f"{t['gauss'] / t['one']:.2f}× | |",
    )
    return lines


def bench_student_t(sizes: list[int], df: float = 4.0) -> str:
    """The section on Student-t predictions whose rows share one df."""
    import scoringrules as sr

    start = time.perf_counter()
    load0 = os.getloadavg()
    lines = [
        f"Run: `python benchmarks/regression.py --student-t` on {time.strftime('%Y-%m-%d')}. "
        f"Machine: {machine()}, {platform.system()} {platform.machine()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"scoringrules {getattr(sr, '__version__', '?')}.",
        "",
        f"A Student-t batch (loc, scale, df = {df:g} for every row, given as a scalar) and the "
        "same batch with the shared-df paths switched off (each row's own `stdtrit` per level "
        "and its own Γ ratio: the cost whenever the rows' df differ), side by side with the "
        "peers' functions on the same arrays: `scipy.stats.t` and scoringrules' `crps_t`. "
        "Medians of 5 alternated runs (3 at N = 10^6 and above) after one warm-up each; "
        "`agrees` is the largest relative difference of the values (interval bounds, the mean "
        "score) from the shared-df path's.",
        "",
        "| N | quantity | one df | df per row | ratio | peer | peer's time | ratio (peer / "
        "one df) | agrees (per row, peer) |",
        "|---:|---|---:|---:|---:|---|---:|---:|---|",
    ]
    rng = np.random.default_rng(6)
    for n in sizes:
        lines += _student_t_rows(n, df, rng)
    load1 = os.getloadavg()
    lines += [
        "",
        f"{(time.perf_counter() - start) / 60:.1f} min; 1-minute load average {load0[0]:.1f} "
        f"at the start, {load1[0]:.1f} at the end (a shared machine: the ratios, measured in "
        "one run, are what to read).",
    ]
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------------
def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def bench_against_sort(quick: bool, full: bool) -> None:
    from benchmarks import _against_sort

    n = 10**5 if quick else 10**6
    flags = " --quick" if quick else " --full" if full else ""
    body = _against_sort.section(
        _against_sort.regression_cases(n, full=full),
        n,
        3,
        f"python benchmarks/regression.py --against-sort{flags}",
        machine(),
    )
    write_section(AGAINST_SORT, body)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smoke run with smaller N (~2 min)")
    mode.add_argument(
        "--full", action="store_true", help="also the peer's slow runs at N = 10^6 (~12 min more)"
    )
    parser.add_argument(
        "--against-sort",
        action="store_true",
        help="only the intervals, decompositions and skill scores against one sort",
    )
    parser.add_argument(
        "--student-t",
        action="store_true",
        help="only the Student-t section (one df against a df per row, and the peers)",
    )
    parser.add_argument("--child-peak", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_peak:
        child_peak(args.child_peak)
        return
    if args.student_t:
        sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
        write_section(STUDENT_T, bench_student_t(sizes))
        return
    bench_against_sort(args.quick, args.full)
    if args.against_sort:
        return

    import uncertainty_toolbox

    if args.quick:
        peer_sizes, our_sizes = [10**3, 10**4], [10**3, 10**4, 10**5]
        per_metric_n, agc_n, max_n, samples_total = 10**5, 10**4, 10**6, 2**19
    else:
        peer_sizes = [10**3, 10**4, 10**5] + ([10**6] if args.full else [])
        our_sizes = [10**3, 10**4, 10**5, 10**6]
        per_metric_n, agc_n, max_n = 10**6, 10**6 if args.full else 10**5, 10**7
        samples_total = 2**22
    flag = " --quick" if args.quick else " --full" if args.full else ""
    load0 = os.getloadavg()
    start = time.perf_counter()
    tg = Targets()
    body: list[str] = []
    body += [*bench_get_all_metrics(peer_sizes, our_sizes, tg), ""]
    body += [*bench_per_metric(per_metric_n, agc_n, tg), ""]
    body += [*bench_all_metrics([10**k for k in range(3, round(math.log10(max_n)) + 1)], tg), ""]
    body += [*bench_samples(samples_total, tg), ""]
    load1 = os.getloadavg()
    header = [
        f"Run: `python benchmarks/regression.py{flag}` on {time.strftime('%Y-%m-%d')}, "
        f"{(time.perf_counter() - start) / 60:.1f} min. Machine: {machine()}, "
        f"{platform.system()} {platform.machine()}; Python {platform.python_version()}, "
        f"numpy {np.__version__}, scipy {scipy.__version__}, uqcore {uqcore.__version__}, "
        f"uncertainty-toolbox {getattr(uncertainty_toolbox, '__version__', '0.1.1')}.",
        "",
        "The machine was shared: other processes used the CPU during the run (1-minute load "
        f"average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end). Absolute times are "
        "therefore noisy; every ratio below is measured in this run, from medians of "
        "alternated repetitions.",
        "",
    ]
    write_section(SECTION, "\n".join([*header, *tg.lines(), "", *body]))


if __name__ == "__main__":
    main()
