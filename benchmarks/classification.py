"""Classification UQ at ImageNet scale: uqcore side by side with straightforward numpy.

Run from the repository root:

    python benchmarks/classification.py            # M = 10, N = 50,000, C = 1,000 (2 GB)
    python benchmarks/classification.py --quick    # smoke run, N = 2,000

Writes the "Classification UQ (uqcore)" section of ``benchmarks/RESULTS.md``.

What is timed. uqcore: ``Ensemble(member_probs=p)`` (validation of the M×N×C float32 array)
followed by ``evaluate(ens, labels, metrics="all", estimators="all", ood=ood,
soft_labels=soft)``: every aggregator, every classification metric, and every metric that
takes an estimator once per estimator (13 aggregators and one user-supplied score). The
straightforward side computes the same quantities as a user writes them today: each
aggregator as one numpy expression over the whole float32 array, the rank metrics with
scikit-learn (``roc_auc_score``, ``average_precision_score``, ``roc_curve``) and
``scipy.stats.spearmanr``, the selective curves with one ``argsort`` per metric, the binned
calibration errors with a loop over bins (and classes). Both run on the same arrays, in
alternation, in one process; the ratio of their medians is reported.

Peak memory, two ways: ``tracemalloc`` (numpy reports its buffers to it) as the peak of new
allocations during the timed call, the inputs excluded; and, for uqcore, in a fresh
subprocess as the rise of the resident set size during the call (peak RSS ``VmHWM`` reset
just before it, so building the inputs does not count).

Passes over the input are counted, not inferred: the benchmark wraps the two functions that
read the M×N×C array (``_check_simplex`` for validation, ``Ensemble.member_chunks`` for the
aggregators and the BMA) and counts complete traversals.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.stats
import sklearn
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uqcore
import uqcore.predictions.classification as pc
from benchmarks._results import write_section
from uqcore import evaluate
from uqcore import predictions as P

SECTION = "Classification UQ (uqcore)"
FULL = (10, 50_000, 1_000)
QUICK = (10, 2_000, 1_000)


# -- inputs ------------------------------------------------------------------------------------
class Inputs:
    """An ensemble of M members over N samples and C classes (float32), with labels (about
    70 % of the BMA's predictions right), 20 % OOD rows (flatter members that disagree more),
    soft labels (a tempered softmax of the shared logits) and one user-supplied score."""

    def __init__(self, m: int, n: int, c: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        base = rng.standard_normal((n, c), dtype=np.float32)
        base *= 2.5
        self.ood = rng.random(n) < 0.2
        spread = np.where(self.ood, 1.5, 0.5).astype(np.float32)[:, None]
        self.members = np.empty((m, n, c), dtype=np.float32)
        step = 2_000
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            for k in range(m):
                z = rng.standard_normal((hi - lo, c), dtype=np.float32)
                z *= spread[lo:hi]
                z += base[lo:hi]
                z -= z.max(axis=1, keepdims=True)
                np.exp(z, out=z)
                z /= z.sum(axis=1, keepdims=True)
                self.members[k, lo:hi] = z
        self.labels = np.argmax(base, axis=1)
        flip = rng.random(n) < 0.3
        self.labels[flip] = rng.integers(0, c, size=int(flip.sum()))
        soft = base * np.float32(0.6)
        soft -= soft.max(axis=1, keepdims=True)
        np.exp(soft, out=soft)
        soft[soft < 1e-3] = 0.0  # many classes without votes, some rows one-hot
        soft /= soft.sum(axis=1, keepdims=True)
        self.soft = soft
        self.score = rng.random(n)

    @property
    def nbytes(self) -> int:
        return int(self.members.nbytes)


def ours(x: Inputs) -> Any:
    ens = P.Ensemble(member_probs=x.members, estimates={"my_score": x.score})
    return evaluate(ens, x.labels, metrics="all", estimators="all", ood=x.ood, soft_labels=x.soft)


# -- the straightforward computation ------------------------------------------------------------
def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    return -np.sum(p * np.log(p + 1e-12), axis=axis)


def naive_aggregators(p: np.ndarray, score: np.ndarray) -> dict[str, np.ndarray]:
    """Each aggregator as one expression over the whole array, as in most evaluation code."""
    pbar = p.mean(axis=0)
    top2 = np.sort(pbar, axis=1)[:, -2:]
    log_p = np.log(p + 1e-12)
    g = log_p.mean(axis=0)
    dual = np.exp(g - g.max(axis=1, keepdims=True))
    dual /= dual.sum(axis=1, keepdims=True)
    out = {
        "one_minus_max_prob_bma": 1 - pbar.max(axis=1),
        "one_minus_expected_max_prob": 1 - p.max(axis=2).mean(axis=0),
        "entropy_bma": _entropy(pbar),
        "expected_entropy": _entropy(p).mean(axis=0),
        "mutual_information": np.sum(p * (log_p - np.log(pbar + 1e-12)), axis=2).mean(axis=0),
        "one_minus_max_prob_dual_bma": 1 - dual.max(axis=1),
        "entropy_dual_bma": _entropy(dual),
        "expected_divergence": np.sum(dual * (np.log(dual + 1e-12) - log_p), axis=2).mean(0),
        "bregman_total": -np.sum(dual * log_p, axis=2).mean(axis=0),
        "mean_variance_probs": p.var(axis=0).mean(axis=1),
        "margin": 1 - (top2[:, 1] - top2[:, 0]),
        "my_score": score,
    }
    return out


def _risk_coverage(u: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(u, kind="stable")
    k = np.arange(1, u.size + 1)
    return k / u.size, np.cumsum(err[order]) / k


def _aurc(u: np.ndarray, err: np.ndarray) -> float:
    return float(np.mean(_risk_coverage(u, err)[1]))


def _ece(conf: np.ndarray, correct: np.ndarray, edges: np.ndarray) -> tuple[float, float]:
    ece = mce = 0.0
    for lo, hi in itertools.pairwise(edges):
        in_bin = (conf > lo) & (conf <= hi) if lo > 0 else (conf >= lo) & (conf <= hi)
        if in_bin.any():
            gap = abs(correct[in_bin].mean() - conf[in_bin].mean())
            ece += in_bin.mean() * gap
            mce = max(mce, gap)
    return ece, mce


def naive(x: Inputs) -> dict[str, Any]:
    """All quantities of :func:`ours`, computed the straightforward way."""
    p, y, n = x.members, x.labels, x.labels.size
    est = naive_aggregators(p, x.score)
    pbar = p.mean(axis=0)
    pred = pbar.argmax(axis=1)
    correct = (pred == y).astype(float)
    err = 1 - correct
    conf = pbar.max(axis=1)
    onehot = np.eye(p.shape[2])[y]
    res: dict[str, Any] = {
        "accuracy": correct.mean(),
        "top5_accuracy": np.mean(np.any(np.argsort(-pbar, axis=1)[:, :5] == y[:, None], axis=1)),
        "nll": -np.mean(np.log(pbar[np.arange(n), y])),
        "brier": np.mean(np.sum((pbar - onehot) ** 2, axis=1)),
    }
    edges = np.linspace(0, 1, 16)
    res["ece"], res["mce"] = _ece(conf, correct, edges)
    res["ece_adaptive"] = _ece(conf, correct, np.quantile(conf, edges))[0]
    res["ece_classwise"] = np.mean(
        [_ece(pbar[:, k], (y == k).astype(float), edges)[0] for k in range(p.shape[2])]
    )
    res["ece_l2"] = np.sqrt(
        sum(
            b.mean() * (correct[b].mean() - conf[b].mean()) ** 2
            for lo, hi in itertools.pairwise(edges)
            if (b := (conf > lo) & (conf <= hi)).any()
        )
    )
    soft_h = _entropy(x.soft.astype(float))
    res["disentanglement_rank_corr"] = scipy.stats.spearmanr(
        est["expected_entropy"], est["mutual_information"]
    )[0]
    for name, u in est.items():
        fpr, tpr, _ = roc_curve(x.ood, u)
        aurc = _aurc(u, err)
        best = _aurc(err, err)
        cov, risk = _risk_coverage(u, err)
        gen = np.cumsum(err[np.argsort(u, kind="stable")]) / n
        res[name] = {
            "auroc_correctness": roc_auc_score(err, u),
            "aupr_error": average_precision_score(err, u),
            "auroc_ood": roc_auc_score(x.ood, u),
            "aupr_ood": average_precision_score(x.ood, u),
            "fpr_at_95tpr": fpr[np.searchsorted(tpr, 0.95)],
            "aurc": aurc,
            "auac": 1 - _aurc(u, err),
            "eaurc": _aurc(u, err) - best,
            "raulc": (1 - _aurc(u, err) - correct.mean()) / (1 - best - correct.mean()),
            "augrc": float(np.mean(gen)),
            "coverage_at_accuracy": cov[1 - risk >= 0.95].max(initial=0.0),
            "risk_at_coverage": risk[int(0.8 * n) - 1],
            "aleatoric_rank_corr": scipy.stats.spearmanr(u, soft_h)[0],
            "auroc_aleatoric": roc_auc_score(soft_h > 0, u),
        }
    return res


# -- timing, memory, passes -------------------------------------------------------------------------
def quiet(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn()

    return run


def timings(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Wall times of each function over ``repeats`` runs, timed in alternation."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
            print(f"  {name}: {times[name][-1]:.2f} s", flush=True)
    return times


def tracemalloc_peak(fn: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


class PassCounter:
    """Counts complete traversals of the M×N×C input by validation and by member_chunks."""

    def __init__(self) -> None:
        self.validation = 0
        self.chunks = 0

    def __enter__(self) -> PassCounter:
        self._check = pc._check_simplex
        self._chunks = pc.Ensemble.member_chunks
        check, chunks = self._check, self._chunks

        def counted_check(arr: Any, name: str) -> float:
            if arr.ndim == 3:
                self.validation += 1
            return check(arr, name)

        def counted_chunks(ens: Any) -> Iterator[Any]:
            for item in chunks(ens):
                yield item
                if item[1] == ens.n:
                    self.chunks += 1

        pc._check_simplex = counted_check
        pc.Ensemble.member_chunks = counted_chunks  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        pc._check_simplex = self._check
        pc.Ensemble.member_chunks = self._chunks  # type: ignore[method-assign]


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child_peak(m: int, n: int, c: int) -> None:
    """In a fresh process: RSS rise of ``ours`` on fresh inputs, as JSON."""
    x = Inputs(m, n, c, seed=1)
    small = Inputs(2, 50, 10, seed=2)
    quiet(lambda: ours(small))()  # imports and lazy set-up
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS") * 1024
    quiet(lambda: ours(x))()
    print(json.dumps({"rss_before": before, "peak_rss": _status_kib("VmHWM") * 1024}))


def compare_values(report: Any, ref: dict[str, Any]) -> float:
    """Largest |uqcore − straightforward| over the estimator table (a sanity check that both
    sides computed the same quantities; binning and tie conventions differ slightly)."""
    worst = 0.0
    for metric_name, row in report.by_estimator.items():
        for est, value in row.items():
            other = ref.get(est, {}).get(metric_name)
            if value is not None and other is not None and np.isfinite(other):
                worst = max(worst, abs(float(value) - float(other)))
    return worst


def spread(ts: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in ts) + " s"


def fmt_bytes(b: float) -> str:
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, N = 2,000")
    parser.add_argument("--repeats", type=int, default=2, help="alternated runs of each side")
    parser.add_argument("--child-peak", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_peak:
        child_peak(*args.child_peak)
        return
    m, n, c = QUICK if args.quick else FULL
    load0 = os.getloadavg()
    start = time.perf_counter()
    print(f"building inputs M = {m}, N = {n}, C = {c}", flush=True)
    x = Inputs(m, n, c)
    size = x.nbytes

    with PassCounter() as passes:
        report = quiet(lambda: ours(x))()
    n_est = len(report.meta["estimators"])
    n_metrics = len(report)
    n_table = sum(len(row) for row in report.by_estimator.values())
    ref = quiet(lambda: naive(x))()
    gap = compare_values(report, ref)

    runs = timings(
        {"uqcore": quiet(lambda: ours(x)), "numpy": quiet(lambda: naive(x))}, args.repeats
    )
    t = {name: statistics.median(ts) for name, ts in runs.items()}
    ratio = t["numpy"] / t["uqcore"]
    traced_ours = tracemalloc_peak(quiet(lambda: ours(x)))
    traced_naive = tracemalloc_peak(quiet(lambda: naive(x)))
    gc.collect()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child-peak", str(m), str(n), str(c)],
        capture_output=True,
        text=True,
        check=True,
    )
    rss = json.loads(proc.stdout.strip().splitlines()[-1])
    rise = rss["peak_rss"] - rss["rss_before"]
    load1 = os.getloadavg()

    total_passes = passes.validation + passes.chunks
    flag = " --quick" if args.quick else ""
    full_note = (
        "" if not args.quick else " (targets are stated for the full size; --quick is a smoke run)"
    )
    verdict = {True: "met", False: "**not met**"}
    lines = [
        f"Run: `python benchmarks/classification.py{flag}` on {time.strftime('%Y-%m-%d')}, "
        f"{(time.perf_counter() - start) / 60:.1f} min. Machine: {machine()}, "
        f"{platform.system()} {platform.machine()}; Python {platform.python_version()}, "
        f"numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__}, "
        f"uqcore {uqcore.__version__}.",
        "",
        "The machine was shared with other jobs (1-minute load average "
        f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end): absolute times are noisy; the "
        f"ratio is of medians of {args.repeats} alternated runs of each side in this one run.",
        "",
        f"Input: M = {m} members, N = {n:,} samples, C = {c:,} classes, float32 member "
        f"probabilities ({fmt_bytes(size)}); labels, OOD flags (20 %), soft labels (N×C "
        "float32) and one user-supplied score. One call computes "
        f"{n_metrics} metrics and the metric × estimator table ({n_table} entries: "
        f"{len(report.by_estimator)} metrics × {n_est} estimators){full_note}.",
        "",
        "### Targets",
        "",
        "| quantity | target | measured here | verdict |",
        "|---|---|---|---|",
        f"| passes over the M×N×C input | ≤ 2 per aggregator family | {total_passes} in all "
        f"({passes.validation} validation + {passes.chunks} aggregator pass, every family in "
        f"it) | {verdict[passes.chunks <= 1 and total_passes <= 2]} |",
        f"| peak extra memory (`tracemalloc`) | < 1 × input ({fmt_bytes(size)}) "
        f"| {fmt_bytes(traced_ours)} = {traced_ours / size:.2f} × input "
        f"| {verdict[traced_ours < size]} |",
        f"| peak extra memory (RSS rise, fresh process) | < 1 × input "
        f"| {fmt_bytes(rise)} = {rise / size:.2f} × input | {verdict[rise < size]} |",
        f"| speed vs straightforward numpy | ≥ 5 × | {ratio:.1f} × | {verdict[ratio >= 5]} |",
        "",
        "### Side by side",
        "",
        "| | wall time (median) | the runs, in order | peak extra memory (`tracemalloc`) |",
        "|---|---:|---|---:|",
        f'| uqcore: `Ensemble(...)` + `evaluate(..., metrics="all", estimators="all")` '
        f"| {t['uqcore']:.2f} s | {spread(runs['uqcore'])} | {fmt_bytes(traced_ours)} |",
        f"| straightforward numpy + scikit-learn + scipy | {t['numpy']:.2f} s "
        f"| {spread(runs['numpy'])} | {fmt_bytes(traced_naive)} |",
        "",
        "The straightforward side computes in float32 on the float32 input (faster than float64, "
        "and what such code does); uqcore computes in float64. torch-uncertainty is not in the "
        "`bench` extra and is not measured here.",
        "",
        f"Largest |uqcore − straightforward| over the estimator table: {gap:.2g} (the "
        "straightforward side adds 1e-12 inside logs and breaks ties by position; uqcore is "
        "exact with ties).",
        "",
        "### Passes: the arithmetic",
        "",
        f"The input is M·N·C = {m * n * c:,} float32 values ({fmt_bytes(size)}). uqcore reads "
        f"it {total_passes} times ({fmt_bytes(total_passes * size)} in all) and never "
        "allocates anything of its size:",
        "",
        "1. validation (`Ensemble(...)`): per chunk of rows, the minimum and the float64 row "
        "sums (a NaN or ±inf fails one of the two; only a failing chunk is checked element by "
        "element, to name the first bad value) — 1 read. The minimum is kept: when it is a "
        "normal positive number the aggregator pass takes its logarithm without a clamp.",
        "2. the aggregator pass (`member_chunks`, chunks of about 2^18 values copied to float64 "
        "into one reused buffer): per element one logarithm L = log max(p, tiny) and a few "
        "multiply-adds give Σ_c pL (expected entropy), Σ_c p(L − log p̄) (mutual information), "
        "Σ_m (p − p̄)² (variance of probabilities), Σ_m L (dual BMA: entropy, 1 − max, "
        "expected divergence, Bregman total) and Σ_m p (the BMA p̄, cached for every metric: "
        "entropy, 1 − max, margin, accuracy, NLL, Brier, calibration). All families "
        "(IT, Bregman, variance, max-probability) come from this one read.",
        "",
        "The straightforward code reads the array (or a temporary of its size) once per "
        "expression: mean, log, entropy of members, KL to the BMA, KL from the dual BMA, "
        "cross-entropy, variance (2 reads), max — about 12 reads of M×N×C values "
        f"(≈ {fmt_bytes(12 * size)}) plus writes of several M×N×C temporaries, which is "
        "also why its peak memory is several times the input.",
        "",
        'Per-metric wall time inside `evaluate` (`Report.meta["timings_s"]`, first run; the '
        "aggregator pass is charged to the first metric that needs an estimate):",
        "",
        "| metric | time |",
        "|---|---:|",
        *[
            f"| `{k}` | {v:.3f} s |"
            for k, v in sorted(report.meta["timings_s"].items(), key=lambda kv: -kv[1])[:6]
        ],
    ]
    for line in lines:
        print(line)
    write_section(SECTION, "\n".join(lines))


if __name__ == "__main__":
    main()
