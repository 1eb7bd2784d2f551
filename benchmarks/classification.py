"""Classification UQ at ImageNet scale: uqcore side by side with straightforward numpy and with
torch-uncertainty.

Run from the repository root:

    python benchmarks/classification.py                   # M = 10, N = 50,000, C = 1,000 (2 GB)
    python benchmarks/classification.py --quick           # smoke run, N = 2,000
    python benchmarks/classification.py --agreement-only  # the torch-uncertainty check alone
    python benchmarks/classification.py --against-sort    # only the part below (minutes)

Writes the "Classification UQ (uqcore)" section of ``benchmarks/RESULTS.md`` and, for the
metrics of prediction sets, CORP, the Brier terms, the skill scores, smooth ECE and
Spiegelhalter's test (each at N = 10^6 against one sort of N values and its peer, see
``benchmarks/_against_sort.py``), the section
"Classification: sets, decompositions, skill and calibration tests against one sort".

Peers. torch-uncertainty is not part of the project's install (its PyPI dependencies would
pull a torch of their own ahead of the CPU build the test script pins); install it by hand,
next to the torch already in the environment:

    pip install "torch-uncertainty==0.13.0" torchmetrics

Without it the benchmark runs the numpy comparison and says "not installed". torch runs on
one thread (``--torch-threads``; 0 keeps torch's default), as uqcore and numpy do, so that the
ratios compare the same resources on a machine shared with other jobs. Only its metric
classes are used: ``torch_uncertainty.metrics.classification`` is imported without running
the two package ``__init__`` files above it (they only re-export names, and import the
Lightning trainer and torchvision, which the metrics do not use; see
:func:`load_torch_uncertainty`).

What is timed, from the same arrays, in alternation, in one process (ratios of medians):

1. All quantities. uqcore: ``Ensemble(member_probs=p)`` (validation of the M×N×C float32
   array) and ``evaluate(ens, labels, metrics="all", estimators="all", ood=ood,
   soft_labels=soft)``: every aggregator, every classification metric, and every metric that
   takes an estimator once per estimator (13 aggregators and one user-supplied score).
   Straightforward numpy: each aggregator as one numpy expression over the whole float32
   array, the rank metrics with scikit-learn (``roc_auc_score``, ``average_precision_score``,
   ``roc_curve``) and ``scipy.stats.spearmanr``, the selective curves with one ``argsort`` per
   metric, the binned calibration errors with a loop over bins (and classes).
2. The quantities torch-uncertainty computes too (``COMMON_*`` below; the table
   ``PEER_CALLS`` names the torch-uncertainty call of each and how the definitions relate),
   end to end from the M×N×C input, on each of the three sides: uqcore's ``Ensemble`` and
   ``evaluate``; torch-uncertainty's metric objects on torch tensors sharing the numpy input's
   memory, laid out as its routines lay out an ensemble (N×M×C views); numpy as in 1. Each
   step is timed too, which gives the per-quantity table (uqcore's per-quantity times come
   from one ``metric(...)`` call each on an ensemble whose aggregator pass is done).

torch-uncertainty's selective metrics (AURC, AUGRC, coverage at risk, risk at coverage) rank
by the top-class probability only, so they are compared for ``one_minus_max_prob_bma``; the
OOD and correctness metrics take any score and are compared for the four aggregators both
compute and the user-supplied score.

Agreement. Before timing, a small seeded float64 problem (M = 5, N = 3,000, C = 10) is given
to both libraries: where the definitions agree the values must match to 1e-6, where they
differ by a documented convention the converted value must match to 1e-6, and the gap where
they differ by design is reported. The run exits with status 1 if a check fails.

Peak memory: ``tracemalloc`` (numpy reports its buffers to it) as the peak of new allocations
during the timed call, the inputs excluded; and in a fresh subprocess as the rise of the
resident set size during the call (peak RSS ``VmHWM`` reset just before it, so building the
inputs does not count) — the only measure for torch, whose allocator ``tracemalloc`` does not
see.

Passes over the input are counted, not inferred: the benchmark wraps the two functions that
read the M×N×C array (``_check_simplex`` for validation, ``Ensemble.member_chunks`` for the
aggregators and the BMA) and counts complete traversals.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.machinery
import importlib.metadata
import importlib.util
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
from uqcore import evaluate, metric
from uqcore import predictions as P

SECTION = "Classification UQ (uqcore)"
AGAINST_SORT = "Classification: sets, decompositions, skill and calibration tests against one sort"
FULL = (10, 50_000, 1_000)
QUICK = (10, 2_000, 1_000)
N_BINS = 15
TU_VERSION = "0.13.0"
TU_INSTALL = f'pip install "torch-uncertainty=={TU_VERSION}" torchmetrics'
TOL = 1e-6

# The quantities both libraries compute. Aggregators (per-sample estimates from the members):
COMMON_AGGREGATORS = (
    "one_minus_max_prob_bma",
    "entropy_bma",
    "expected_entropy",
    "mutual_information",
)
# Estimators for the metrics that take one (torch-uncertainty's take any score):
COMMON_ESTIMATORS = (*COMMON_AGGREGATORS, "my_score")
# Metrics of the BMA; the selective ones rank by its top-class probability:
COMMON_BMA_METRICS = (
    "accuracy",
    "top5_accuracy",
    "nll",
    "brier",
    "ece",
    "mce",
    "ece_adaptive",
    "ece_l2",
    "ece_classwise",
    "aurc",
    "augrc",
    "coverage_at_accuracy",
    "risk_at_coverage",
)
COMMON_RANK_METRICS = (
    "auroc_ood",
    "aupr_ood",
    "fpr_at_95tpr",
    "auroc_correctness",
    "aupr_error",
)
# torch-uncertainty's "l2" calibration error is the plug-in estimate; ours is debiased unless
# asked otherwise.
OURS_OPTIONS: dict[str, dict[str, Any]] = {"ece_l2": {"debias": False}}

# uqcore quantity -> (the torch-uncertainty call, how the two definitions relate).
PEER_CALLS: dict[str, tuple[str, str]] = {
    "one_minus_max_prob_bma": (
        "`VariationRatio(probabilistic=True, reduction=None)` on the members",
        "same: 1 − (1/M) Σ_m p_m[argmax p̄] = 1 − max p̄",
    ),
    "entropy_bma": (
        "`Entropy(reduction=None)` on p̄ (N×C)",
        "same: −Σ_c p̄_c log p̄_c",
    ),
    "expected_entropy": (
        "`Entropy(reduction=None)` on the members (N×M×C)",
        "same: (1/M) Σ_m H(p_m) — their `Entropy` of a 3-D input is the expected entropy, "
        "not the entropy of p̄ (their OOD criterion `entropy` is this one too)",
    ),
    "mutual_information": (
        "`MutualInformation(reduction=None)` (N×M×C)",
        "same quantity; theirs H(p̄) − (1/M) Σ_m H(p_m) clamped at 0, ours the KL form "
        "(1/M) Σ_m Σ_c p_mc (log p_mc − log p̄_c) (exactly 0 for M = 1)",
    ),
    "accuracy": ('torchmetrics `MulticlassAccuracy(average="micro")` (their routine\'s)', "same"),
    "top5_accuracy": (
        'torchmetrics `MulticlassAccuracy(top_k=5, average="micro")`',
        "same without ties at the 5th place (theirs: `topk`; ours counts ties for the label)",
    ),
    "nll": ("`CategoricalNLL()`", "same (natural log); p̄_y = 0: inf there, null + warning here"),
    "brier": (
        "`BrierScore(num_classes=C)`",
        "same: Σ_c (p̄_c − 1{c = y})², summed over classes, mean over samples",
    ),
    "ece": (
        f'`CalibrationError(task="multiclass", num_bins={N_BINS})`',
        "**binning differs at the edges**: theirs (torchmetrics) [e_b, e_b+1) with a "
        "confidence of exactly 1 alone in an extra bin, on float32 confidences; ours "
        "(e_b, e_b+1] with 0 in the first bin. Same value when no confidence lies on an edge. "
        "(Their default is 10 bins; 15 passed here, ours and mucsanyi2024's default). "
        'Theirs by name: `bins_closed="left"`',
    ),
    "mce": (
        f'`CalibrationError(..., num_bins={N_BINS}, norm="max")`',
        "as `ece` (the largest \\|acc − conf\\| over the bins)",
    ),
    "ece_adaptive": (
        f'`AdaptiveCalibrationError(task="multiclass", num_bins={N_BINS})`',
        "**equal-mass bins differ**: theirs `tensor_split` of the sorted confidences (the "
        "first N mod B bins one row larger; tied confidences may be split); ours row → "
        "⌊B · rank / N⌋, ties kept together. Same when B divides N and there are no ties. "
        '(Their default is 10 bins; 15 passed here). Theirs by name: `ties="split"`',
    ),
    "ece_l2": (
        f'`CalibrationError(..., num_bins={N_BINS}, norm="l2")`',
        "**ours is debiased by default** (Kumar et al. 2019), theirs the plug-in root mean "
        "square: compared with ours at `debias=False`; binning as `ece`",
    ),
    "ece_classwise": (
        f"`ClasswiseCalibrationError(num_classes=C, num_bins={N_BINS})`",
        "same: mean over classes of the ECE of p̄_c against 1{y = c}; binning as `ece`",
    ),
    "aurc": (
        "`AURC()`",
        "**conventions differ**: theirs the trapezoid over (k/N, risk_k), k = 1..N, divided "
        "by 1 − 1/N; ours (default) the mean of risk_k (Geifman et al.). Theirs = ours with "
        '`convention="trapezoid"` × N/(N − 1) when no confidences tie; the gap is O(1/N). '
        'Theirs by name: `convention="trapezoid_rows"`',
    ),
    "augrc": (
        "`AUGRC()`",
        "**conventions differ**: theirs the trapezoid over (k/N, E_k/N), k = 1..N (no point at "
        "0), divided by 1 − 1/N; ours the exact curve from (0, 0). Theirs = (ours − "
        "e₁/(2N²)) · N/(N − 1), e₁ the error of the most confident row. "
        'Theirs by name: `convention="trapezoid_rows"`',
    ),
    "coverage_at_accuracy": (
        "`CovAtxRisk(risk_threshold=0.05)`",
        "same (largest coverage with risk ≤ 0.05) when no confidences tie; NaN there where "
        "ours is 0 (never reached)",
    ),
    "risk_at_coverage": (
        "`RiskAtxCov(cov_threshold=0.8)`",
        "same when 0.8 N is an integer and no tie straddles the cut (theirs takes ⌈0.8 N⌉ "
        "rows, ours interpolates a straddling tied block)",
    ),
    "auroc_ood": (
        "torchmetrics `BinaryAUROC()` (their routine's)",
        "same, tie-aware; theirs maps scores outside [0, 1] through a sigmoid first "
        "(monotone, but float32 can merge close scores)",
    ),
    "aupr_ood": ("torchmetrics `BinaryAveragePrecision()`", "same (step-wise average precision)"),
    "fpr_at_95tpr": (
        "`FPR95(pos_label=1)`",
        "same: FPR at the first distinct threshold where TPR ≥ 0.95",
    ),
    "auroc_correctness": ("torchmetrics `BinaryAUROC()` on the errors", "same, as `auroc_ood`"),
    "aupr_error": ("torchmetrics `BinaryAveragePrecision()` on the errors", "same"),
}

NOT_IN_PEER = (
    "`one_minus_expected_max_prob`, the dual-BMA and Bregman aggregators, "
    "`mean_variance_probs`, `margin`, `dempster_shafer`; `auac`, `eaurc`, `raulc`; the "
    "aleatoric metrics (soft labels) and `disentanglement_rank_corr`; selective metrics for "
    "any ranking but the top-class probability"
)
PEER_ONLY = (
    "`Disagreement`, `VariationRatio(probabilistic=False)`, `SmoothCalibrationError`, "
    "`GroupingLoss`, the conformal `CoverageRate`/`SetSize` and the SCOD selective metrics"
)


# -- inputs ----------------------------------------------------------------------------------------
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


class Steps:
    """Wall time and value of each named step of one run (times of a repeated name add up)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.values: dict[str, Any] = {}

    def __call__(self, name: str, fn: Callable[[], Any], key: str | None = None) -> Any:
        t0 = time.perf_counter()
        value = fn()
        self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0
        self.values[key or name] = value
        return value


def rank_key(metric_name: str, estimator: str) -> str:
    return f"{metric_name}[{estimator}]"


# -- uqcore ----------------------------------------------------------------------------------------
def ours(x: Inputs) -> Any:
    ens = P.Ensemble(member_probs=x.members, estimates={"my_score": x.score})
    return evaluate(ens, x.labels, metrics="all", estimators="all", ood=x.ood, soft_labels=x.soft)


def ours_common(x: Inputs) -> tuple[Any, Any]:
    """The common quantities the way a user asks uqcore for them: two ``evaluate`` calls."""
    ens = P.Ensemble(member_probs=x.members, estimates={"my_score": x.score})
    bma = evaluate(ens, x.labels, list(COMMON_BMA_METRICS), params=OURS_OPTIONS)
    ranks = evaluate(
        ens, x.labels, list(COMMON_RANK_METRICS), estimators=list(COMMON_ESTIMATORS), ood=x.ood
    )
    return bma, ranks


def ours_steps(x: Inputs) -> Steps:
    """Each common quantity alone: one ``metric(...)`` call each (after the aggregator pass)."""
    s = Steps()

    def input_pass() -> Any:
        ens = P.Ensemble(member_probs=x.members, estimates={"my_score": x.score})
        ens.probs()  # the one pass: the BMA and every aggregator
        return ens

    ens = s("input", input_pass)
    for name in COMMON_AGGREGATORS:
        s.values[name] = ens.estimate(name)
    for name in COMMON_BMA_METRICS:
        opts = OURS_OPTIONS.get(name, {})
        s(name, lambda name=name, opts=opts: metric(name, ens, x.labels, **opts))
    for name in COMMON_RANK_METRICS:
        ood = x.ood if name.endswith("_ood") or name.startswith("fpr") else None
        for est in COMMON_ESTIMATORS:
            s(
                name,
                lambda name=name, est=est, ood=ood: metric(
                    name, ens, x.labels, ood=ood, estimator=est
                ),
                key=rank_key(name, est),
            )
    # for the value comparison only (not timed): AURC in the other convention, and the error
    # of the most confident row (torch-uncertainty's AUGRC leaves out half of it)
    s.values["aurc:trapezoid"] = metric("aurc", ens, x.labels, convention="trapezoid")
    probs = ens.probs()
    top = int(np.argmax(probs.max(axis=1)))
    s.values["e1"] = float(probs[top].argmax() != x.labels[top])
    return s


# -- the straightforward computation ---------------------------------------------------------------
def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    return -np.sum(p * np.log(p + 1e-12), axis=axis)


def _naive_mi(p: np.ndarray, pbar: np.ndarray) -> np.ndarray:
    return np.sum(p * (np.log(p + 1e-12) - np.log(pbar + 1e-12)), axis=2).mean(axis=0)


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


_EDGES = np.linspace(0, 1, N_BINS + 1)


def _outcome(pbar: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Top-label confidence and correctness (1.0 / 0.0) of the BMA."""
    return pbar.max(axis=1), (pbar.argmax(axis=1) == y).astype(float)


def _naive_ece_l2(conf: np.ndarray, correct: np.ndarray) -> float:
    return float(
        np.sqrt(
            sum(
                b.mean() * (correct[b].mean() - conf[b].mean()) ** 2
                for lo, hi in itertools.pairwise(_EDGES)
                if (b := (conf > lo) & (conf <= hi)).any()
            )
        )
    )


# Each metric of the BMA from p̄, the labels, and p̄'s top-label confidence and correctness.
NaiveBma = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], float]
NAIVE_BMA: dict[str, NaiveBma] = {
    "accuracy": lambda pbar, y, conf, correct: float(correct.mean()),
    "top5_accuracy": lambda pbar, y, conf, correct: float(
        np.mean(np.any(np.argsort(-pbar, axis=1)[:, :5] == y[:, None], axis=1))
    ),
    "nll": lambda pbar, y, conf, correct: float(-np.mean(np.log(pbar[np.arange(y.size), y]))),
    "brier": lambda pbar, y, conf, correct: float(
        np.mean(np.sum((pbar - np.eye(pbar.shape[1])[y]) ** 2, axis=1))
    ),
    "ece": lambda pbar, y, conf, correct: _ece(conf, correct, _EDGES)[0],
    "mce": lambda pbar, y, conf, correct: _ece(conf, correct, _EDGES)[1],
    "ece_adaptive": lambda pbar, y, conf, correct: _ece(conf, correct, np.quantile(conf, _EDGES))[
        0
    ],
    "ece_l2": lambda pbar, y, conf, correct: _naive_ece_l2(conf, correct),
    "ece_classwise": lambda pbar, y, conf, correct: float(
        np.mean([_ece(pbar[:, k], (y == k).astype(float), _EDGES)[0] for k in range(pbar.shape[1])])
    ),
    "aurc": lambda pbar, y, conf, correct: _aurc(1 - conf, 1 - correct),
    "augrc": lambda pbar, y, conf, correct: float(
        np.mean(np.cumsum((1 - correct)[np.argsort(1 - conf, kind="stable")]) / y.size)
    ),
    "coverage_at_accuracy": lambda pbar, y, conf, correct: _naive_coverage(conf, correct),
    "risk_at_coverage": lambda pbar, y, conf, correct: float(
        _risk_coverage(1 - conf, 1 - correct)[1][int(0.8 * y.size) - 1]
    ),
}


# The metrics that need p̄'s top-label confidence, predicted class or errors.
NEEDS_OUTCOME = frozenset(
    {
        "accuracy",
        "ece",
        "mce",
        "ece_adaptive",
        "ece_l2",
        "aurc",
        "augrc",
        "coverage_at_accuracy",
        "risk_at_coverage",
        "auroc_correctness",
        "aupr_error",
    }
)


def _naive_coverage(conf: np.ndarray, correct: np.ndarray) -> float:
    cov, risk = _risk_coverage(1 - conf, 1 - correct)
    return float(cov[1 - risk >= 0.95].max(initial=0.0))


def _fpr95(flags: np.ndarray, u: np.ndarray) -> float:
    fpr, tpr, _ = roc_curve(flags, u)
    return float(fpr[np.searchsorted(tpr, 0.95)])


# Each metric of an estimate u, given the OOD flags and the errors of the BMA.
NAIVE_RANK: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], float]] = {
    "auroc_ood": lambda u, ood, err: float(roc_auc_score(ood, u)),
    "aupr_ood": lambda u, ood, err: float(average_precision_score(ood, u)),
    "fpr_at_95tpr": lambda u, ood, err: _fpr95(ood, u),
    "auroc_correctness": lambda u, ood, err: float(roc_auc_score(err, u)),
    "aupr_error": lambda u, ood, err: float(average_precision_score(err, u)),
}


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


def naive_common(x: Inputs) -> Steps:
    """The common quantities the straightforward way, each step timed."""
    s = Steps()
    p, y = x.members, x.labels
    pbar = s("bma", lambda: p.mean(axis=0))
    s("one_minus_max_prob_bma", lambda: 1 - pbar.max(axis=1))
    s("entropy_bma", lambda: _entropy(pbar))
    s("expected_entropy", lambda: _entropy(p).mean(axis=0))
    s("mutual_information", lambda: _naive_mi(p, pbar))
    s.values["my_score"] = x.score
    # the confidence and correctness of p̄, once (the per-quantity table adds this step to
    # each metric that needs them, see NEEDS_OUTCOME)
    conf, correct = s("outcome", lambda: _outcome(pbar, y))
    for name, fn in NAIVE_BMA.items():
        s(name, lambda fn=fn: fn(pbar, y, conf, correct))
    err = 1.0 - correct
    for name, fn in NAIVE_RANK.items():
        for est in COMMON_ESTIMATORS:
            u = s.values[est]
            s(name, lambda fn=fn, u=u: fn(u, x.ood, err), key=rank_key(name, est))
    return s


# -- torch-uncertainty -----------------------------------------------------------------------------
class TorchUncertainty:
    """torch-uncertainty's classification metrics and the torchmetrics classes its
    ``ClassificationRoutine`` uses for accuracy, AUROC and AUPR."""

    def __init__(self, tu: Any) -> None:
        import torch
        import torchmetrics
        from torchmetrics.classification import (
            BinaryAUROC,
            BinaryAveragePrecision,
            MulticlassAccuracy,
        )

        self.tu = tu
        self.torch = torch
        self.BinaryAUROC = BinaryAUROC
        self.BinaryAveragePrecision = BinaryAveragePrecision
        self.MulticlassAccuracy = MulticlassAccuracy
        self.version = importlib.metadata.version("torch_uncertainty")
        self.versions = (
            f"{self.version} (torch {torch.__version__}, torchmetrics {torchmetrics.__version__})"
        )

    @staticmethod
    def value(m: Any, *args: Any) -> Any:
        """``update`` then ``compute`` of a torchmetrics ``Metric``, as a float or an array."""
        m.update(*args)
        out = m.compute()
        return float(out) if out.numel() == 1 else out.double().numpy()

    def bma_metrics(self, c: int) -> dict[str, Callable[[Any, Any], Any]]:
        """Each common metric of the BMA: (probs N×C, labels) -> value."""
        tu, v = self.tu, self.value

        def calib(**kw: Any) -> Callable[[Any, Any], Any]:
            return lambda p, y: v(
                tu.CalibrationError(task="multiclass", num_bins=N_BINS, num_classes=c, **kw), p, y
            )

        return {
            "accuracy": lambda p, y: v(
                self.MulticlassAccuracy(num_classes=c, average="micro"), p, y
            ),
            "top5_accuracy": lambda p, y: v(
                self.MulticlassAccuracy(num_classes=c, average="micro", top_k=5), p, y
            ),
            "nll": lambda p, y: v(tu.CategoricalNLL(), p, y),
            "brier": lambda p, y: v(tu.BrierScore(num_classes=c), p, y),
            "ece": calib(),
            "mce": calib(norm="max"),
            "ece_adaptive": lambda p, y: v(
                tu.AdaptiveCalibrationError(task="multiclass", num_bins=N_BINS, num_classes=c),
                p,
                y,
            ),
            "ece_l2": calib(norm="l2"),
            "ece_classwise": lambda p, y: v(
                tu.ClasswiseCalibrationError(num_classes=c, num_bins=N_BINS), p, y
            ),
            "aurc": lambda p, y: v(tu.AURC(), p, y),
            "augrc": lambda p, y: v(tu.AUGRC(), p, y),
            "coverage_at_accuracy": lambda p, y: v(tu.CovAtxRisk(risk_threshold=0.05), p, y),
            "risk_at_coverage": lambda p, y: v(tu.RiskAtxCov(cov_threshold=0.8), p, y),
        }

    def rank_metrics(self) -> dict[str, Callable[[Any, Any, Any], Any]]:
        """Each common metric of a score: (u, OOD flags 0/1, errors 0/1) -> value."""
        v = self.value
        return {
            "auroc_ood": lambda u, ood, err: v(self.BinaryAUROC(), u, ood),
            "aupr_ood": lambda u, ood, err: v(self.BinaryAveragePrecision(), u, ood),
            "fpr_at_95tpr": lambda u, ood, err: v(self.tu.FPR95(pos_label=1), u, ood),
            "auroc_correctness": lambda u, ood, err: v(self.BinaryAUROC(), u, err),
            "aupr_error": lambda u, ood, err: v(self.BinaryAveragePrecision(), u, err),
        }

    def aggregators(self) -> dict[str, Callable[[Any, Any], Any]]:
        """Each common aggregator: (members M×N×C, BMA N×C) -> per-sample values."""
        tu, v = self.tu, self.value
        # torch-uncertainty's routines hold an ensemble as N×M×C ("(m b) c -> b m c"): a view
        # of the M×N×C array, as here; only VariationRatio takes M×N×C itself.
        return {
            "one_minus_max_prob_bma": lambda t, bma: v(
                tu.VariationRatio(probabilistic=True, reduction=None), t
            ),
            "entropy_bma": lambda t, bma: v(tu.Entropy(reduction=None), bma),
            "expected_entropy": lambda t, bma: v(tu.Entropy(reduction=None), t.permute(1, 0, 2)),
            "mutual_information": lambda t, bma: v(
                tu.MutualInformation(reduction=None), t.permute(1, 0, 2)
            ),
        }

    def common(self, x: Inputs) -> Steps:
        """The common quantities with torch-uncertainty, from tensors sharing x's memory."""
        torch = self.torch
        s = Steps()
        t = torch.from_numpy(x.members)
        y = torch.from_numpy(x.labels)
        ood = torch.from_numpy(x.ood.astype(np.int64))
        bma = s("bma", lambda: t.mean(dim=0))
        est: dict[str, Any] = {}
        for name, fn in self.aggregators().items():
            s(name, lambda fn=fn: fn(t, bma))
            est[name] = torch.from_numpy(np.asarray(s.values[name]))
        est["my_score"] = torch.from_numpy(x.score)
        s.values["my_score"] = x.score
        for name, fn in self.bma_metrics(x.members.shape[2]).items():
            s(name, lambda fn=fn: fn(bma, y))
        # the errors of the BMA, once (added to each correctness metric per quantity)
        err = s("errors", lambda: (bma.argmax(dim=1) != y).long())
        for name, fn in self.rank_metrics().items():
            for e in COMMON_ESTIMATORS:
                s(name, lambda fn=fn, e=e: fn(est[e], ood, err), key=rank_key(name, e))
        return s


def load_torch_uncertainty() -> tuple[TorchUncertainty | None, str]:
    """torch-uncertainty's metrics, or ``None`` and why not.

    ``import torch_uncertainty`` runs the package ``__init__``, which imports the Lightning
    trainer and CLI and, through them, torchvision (and ``torch_uncertainty.metrics`` imports
    the regression metrics, which import the same utilities). The classification metrics need
    none of it: torch, torchmetrics, einops, matplotlib and seaborn. Where that import fails —
    Lightning not installed, or a torchvision wheel built against another torch build (PyPI's
    torchvision next to a CPU torch: "operator torchvision::nms does not exist") — empty
    package modules with the right ``__path__`` stand in for the two ``__init__`` files above
    ``torch_uncertainty.metrics.classification``, which only re-export names; the metric
    classes themselves are imported and run unchanged.
    """
    try:
        import torch  # noqa: F401
        import torchmetrics  # noqa: F401
    except ImportError as exc:
        return None, f"not installed ({exc.name} missing; `{TU_INSTALL}`)"
    spec = importlib.util.find_spec("torch_uncertainty")
    if spec is None or not spec.submodule_search_locations:
        return None, f"not installed (`{TU_INSTALL}`)"
    how = "as `torch_uncertainty.metrics.classification`"
    if "torch_uncertainty" not in sys.modules:
        root = Path(next(iter(spec.submodule_search_locations)))
        for name, path in (
            ("torch_uncertainty", root),
            ("torch_uncertainty.metrics", root / "metrics"),
        ):
            stand_in = importlib.util.module_from_spec(
                importlib.machinery.ModuleSpec(name, None, is_package=True)
            )
            stand_in.__path__ = [str(path)]
            sys.modules[name] = stand_in
        how += (
            " without running the `torch_uncertainty` and `torch_uncertainty.metrics` "
            "`__init__` files"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tu = importlib.import_module("torch_uncertainty.metrics.classification")
    except ImportError as exc:
        return None, f"not importable ({exc}; `{TU_INSTALL}`)"
    return TorchUncertainty(tu), how


# -- agreement with torch-uncertainty on a small float64 problem -----------------------------------
Small = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _small_problem(n: int, seed: int = 0) -> Small:
    """Member probabilities (5×n×10, float64), labels, OOD flags and a score."""
    m, c = 5, 10
    rng = np.random.default_rng(seed)
    base = 2.0 * rng.standard_normal((n, c))
    z = base + rng.standard_normal((m, n, c))
    p = np.exp(z - z.max(axis=2, keepdims=True))
    p /= p.sum(axis=2, keepdims=True)
    # labels drawn from the BMA: calibrated on average, so bins err on both sides
    pbar = p.mean(axis=0)
    y = (rng.random(n)[:, None] > np.cumsum(pbar, axis=1)).sum(axis=1).clip(0, c - 1)
    return p, y, rng.random(n) < 0.2, rng.random(n)


def agreement(peer: TorchUncertainty) -> list[tuple[str, str, float, bool | None]]:
    """Rows (quantity, how compared, |uqcore − torch-uncertainty|, passed or None).

    float64 inputs on both sides (torch-uncertainty computes calibration errors on float32
    confidences whatever the input). ``passed`` is None for the rows that only show the size
    of a definitional difference.
    """
    torch = peer.torch
    rows: list[tuple[str, str, float, bool | None]] = []

    def row(name: str, how: str, gap: float, checked: bool = True) -> None:
        rows.append((name, how, gap, (gap <= TOL) if checked else None))

    p, y, ood, score = _small_problem(3_000)
    n = y.size
    ens = P.Ensemble(member_probs=p, estimates={"my_score": score})
    t = torch.from_numpy(p)
    bma = t.mean(dim=0)
    yt = torch.from_numpy(y)
    for name, fn in peer.aggregators().items():
        gap = float(np.max(np.abs(ens.estimate(name) - fn(t, bma))))
        row(name, "same definition (max over samples)", gap)
    theirs = {name: fn(bma, yt) for name, fn in peer.bma_metrics(p.shape[2]).items()}
    for name, value in theirs.items():
        if name in ("aurc", "augrc"):
            continue
        ours_value = metric(name, ens, y, **OURS_OPTIONS.get(name, {}))
        how = "same definition"
        if name == "ece_l2":
            how = "ours with `debias=False`"
        elif name in ("ece", "mce", "ece_adaptive", "ece_classwise"):
            how = "same bins here (no confidence on an edge; B divides N)"
        row(name, how, abs(ours_value - value))
    conf = ens.probs().max(axis=1)
    e1 = float(ens.probs()[np.argmax(conf)].argmax() != y[np.argmax(conf)])
    trap = metric("aurc", ens, y, convention="trapezoid")
    row(
        "aurc",
        'ours `convention="trapezoid"` × N/(N − 1)',
        abs(trap * n / (n - 1) - theirs["aurc"]),
    )
    augrc = metric("augrc", ens, y)
    row(
        "augrc",
        "(ours − e₁/(2N²)) · N/(N − 1)",
        abs((augrc - e1 / (2 * n * n)) * n / (n - 1) - theirs["augrc"]),
    )
    err = torch.from_numpy((ens.probs().argmax(axis=1) != y).astype(np.int64))
    oodt = torch.from_numpy(ood.astype(np.int64))
    for name, fn in peer.rank_metrics().items():
        flags = ood if name.endswith("_ood") or name.startswith("fpr") else None
        gap = max(
            abs(
                metric(name, ens, y, ood=flags, estimator=est)
                - fn(torch.from_numpy(ens.estimate(est)), oodt, err)
            )
            for est in COMMON_ESTIMATORS
        )
        row(name, f"same definition (max over the {len(COMMON_ESTIMATORS)} estimators)", gap)

    # where the definitions differ: the size of the difference on the same data
    row(
        "aurc",
        "ours as defined (mean of risk_k)",
        abs(metric("aurc", ens, y) - theirs["aurc"]),
        False,
    )
    row("augrc", "ours as defined (exact from (0, 0))", abs(augrc - theirs["augrc"]), False)
    row(
        "ece_l2",
        "ours as defined (debiased)",
        abs(metric("ece_l2", ens, y) - theirs["ece_l2"]),
        False,
    )
    p1, y1, _, _ = _small_problem(3_005)
    ens1 = P.Ensemble(member_probs=p1)
    b1 = torch.from_numpy(p1).mean(dim=0)
    gap = abs(
        metric("ece_adaptive", ens1, y1)
        - peer.bma_metrics(p1.shape[2])["ece_adaptive"](b1, torch.from_numpy(y1))
    )
    row("ece_adaptive", "N = 3,005: 15 does not divide N (bins of other sizes)", gap, False)
    # confidences of exactly 1 (one-hot members): torchmetrics puts them in a bin of their own
    p2 = p.copy()
    p2[:, :60] = 0.0
    p2[:, np.arange(60), (y[:60] + (np.arange(60) % 3 == 0)) % p.shape[2]] = 1.0
    b2 = torch.from_numpy(p2).mean(dim=0)
    gap = abs(
        metric("mce", P.Ensemble(member_probs=p2), y) - peer.bma_metrics(p2.shape[2])["mce"](b2, yt)
    )
    row("mce", "60 rows of confidence exactly 1, 20 of them wrong", gap, False)
    return rows


# -- timing, memory, passes ------------------------------------------------------------------------
def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any) -> Any:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args)

    return run


# Large intermediate results a run returns that the report does not need.
_BULKY = ("input", "bma", "outcome", "errors")


def timings(
    fns: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Wall times and results of each function over ``repeats`` runs, timed in alternation."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, list[Any]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            if isinstance(out, Steps):
                for key in _BULKY:
                    out.values.pop(key, None)
            results[name].append(out)
            del out
            print(f"  {name}: {times[name][-1]:.2f} s", flush=True)
    return times, results


def step_medians(runs: list[Steps]) -> dict[str, float]:
    return {key: statistics.median(r.times[key] for r in runs) for key in runs[0].times}


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


def child_peak(side: str, m: int, n: int, c: int, torch_threads: int) -> None:
    """In a fresh process: RSS rise of one side on fresh inputs, as JSON.

    ``all``: uqcore, every quantity; ``common``: uqcore, the quantities torch-uncertainty
    computes too; ``tu``: torch-uncertainty, the same quantities.
    """
    if side == "tu":
        peer, how = load_torch_uncertainty()
        if peer is None:
            raise SystemExit(how)
        if torch_threads > 0:
            peer.torch.set_num_threads(torch_threads)
        fn: Callable[[Inputs], Any] = peer.common
    else:
        fn = ours if side == "all" else ours_common
    x = Inputs(m, n, c, seed=1)
    small = Inputs(2, 50, 10, seed=2)
    quiet(fn)(small)  # imports and lazy set-up
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS") * 1024
    quiet(fn)(x)
    print(json.dumps({"rss_before": before, "peak_rss": _status_kib("VmHWM") * 1024}))


def rss_rise(side: str, m: int, n: int, c: int, torch_threads: int) -> int:
    proc = subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--torch-threads",
            str(torch_threads),
            "--child-peak",
            side,
            str(m),
            str(n),
            str(c),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rss = json.loads(proc.stdout.strip().splitlines()[-1])
    return int(rss["peak_rss"] - rss["rss_before"])


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


def fmt_gap(g: float | None) -> str:
    if g is None or not np.isfinite(g):
        return "—" if g is None else str(g)
    return "0" if g == 0 else f"{g:.1e}"


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


def agreement_lines(rows: list[tuple[str, str, float, bool | None]]) -> list[str]:
    verdict = {
        True: f"≤ {TOL:g}: agrees",
        False: f"**> {TOL:g}: FAILS**",
        None: "differs by definition",
    }
    return [
        "| quantity | compared as | \\|uqcore − torch-uncertainty\\| | |",
        "|---|---|---:|---|",
        *[f"| `{q}` | {how} | {fmt_gap(gap)} | {verdict[ok]} |" for q, how, gap, ok in rows],
    ]


def run_agreement(peer: TorchUncertainty) -> list[tuple[str, str, float, bool | None]]:
    rows: list[tuple[str, str, float, bool | None]] = quiet(agreement)(peer)
    return rows


# -- the report ------------------------------------------------------------------------------------
def _ratio(peer_time: float | None, ours_time: float) -> str:
    return "—" if peer_time is None else f"{peer_time / ours_time:.1f}×"


def _secs(t: float | None) -> str:
    if t is None:
        return "—"
    return f"{t:.2f} s" if t >= 1 else f"{t * 1e3:.1f} ms"


def per_quantity_lines(
    so: dict[str, float],
    st: dict[str, float] | None,
    sn: dict[str, float],
    vo: dict[str, Any],
    vt: dict[str, Any] | None,
    n: int,
) -> list[str]:
    """The per-quantity table: uqcore, torch-uncertainty and numpy times, ratios, value gaps."""

    def gap(key: str) -> float | None:
        if vt is None or vo.get(key) is None or vt.get(key) is None:
            return None
        return float(np.max(np.abs(np.asarray(vo[key], dtype=float) - np.asarray(vt[key]))))

    def line(label: str, call: str, t_o: float, t_t: float | None, t_n: float, g: str) -> str:
        return (
            f"| {label} | {call} | {_secs(t_o)} | {_secs(t_t)} | {_secs(t_n)} "
            f"| {_ratio(t_t, t_o)} | {_ratio(t_n, t_o)} | {g} |"
        )

    tu = st is not None
    out = [
        "| quantity (uqcore) | torch-uncertainty | uqcore | torch-unc. | numpy "
        "| torch-unc. ÷ uqcore | numpy ÷ uqcore | \\|uqcore − torch-unc.\\| |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    group_t = st["bma"] + sum(st[a] for a in COMMON_AGGREGATORS) if st else None
    group_n = sn["bma"] + sum(sn[a] for a in COMMON_AGGREGATORS)
    out.append(
        line(
            "**p̄ and the 4 aggregators, from the M×N×C input**",
            "`members.mean(0)` and the four calls below",
            so["input"],
            group_t,
            group_n,
            "",
        )
    )
    for a in COMMON_AGGREGATORS:
        # from the input: p̄'s time is added where that side's aggregator starts from p̄
        t_t = st[a] + (st["bma"] if a == "entropy_bma" else 0.0) if st else None
        t_n = sn[a] + (sn["bma"] if a != "expected_entropy" else 0.0)
        out.append(
            line(
                f"`{a}` (uqcore: the whole pass)",
                PEER_CALLS[a][0],
                so["input"],
                t_t,
                t_n,
                fmt_gap(gap(a)) + ("" if vt is None else " (max over N)"),
            )
        )
    for name in COMMON_BMA_METRICS:
        g = fmt_gap(gap(name))
        if vt is not None and name == "aurc":
            conv = abs(vo["aurc:trapezoid"] * n / (n - 1) - vt["aurc"])
            g += f" ({fmt_gap(conv)} converted)"
        if vt is not None and name == "augrc":
            conv = abs((vo["augrc"] - vo["e1"] / (2 * n * n)) * n / (n - 1) - vt["augrc"])
            g += f" ({fmt_gap(conv)} converted)"
        if vt is not None and name == "coverage_at_accuracy" and not np.isfinite(vt[name]):
            g = f"ours {vo[name]:.3g}, theirs NaN"
        label = f"`{name}`" + (" (`debias=False`)" if name == "ece_l2" else "")
        t_n = sn[name] + (sn["outcome"] if name in NEEDS_OUTCOME else 0.0)
        out.append(line(label, PEER_CALLS[name][0], so[name], st[name] if st else None, t_n, g))
    for name in COMMON_RANK_METRICS:
        gaps = [gap(rank_key(name, e)) for e in COMMON_ESTIMATORS]
        g = "—" if not tu or None in gaps else fmt_gap(max(x for x in gaps if x is not None))
        out.append(
            line(
                f"`{name}` × {len(COMMON_ESTIMATORS)} estimators",
                PEER_CALLS[name][0],
                so[name],
                st[name] + (st["errors"] if name in NEEDS_OUTCOME else 0.0) if st else None,
                sn[name] + (sn["outcome"] if name in NEEDS_OUTCOME else 0.0),
                g,
            )
        )
    return out


def bench_against_sort(quick: bool) -> None:
    """The metrics of prediction sets, decompositions, skill scores and calibration tests at
    N = 10^6, each against one sort (``benchmarks/_against_sort.py``): their own section."""
    from benchmarks import _against_sort

    n = 10**5 if quick else 10**6
    body = _against_sort.section(
        _against_sort.classification_cases(n),
        n,
        3,
        "python benchmarks/classification.py --against-sort" + (" --quick" if quick else ""),
        machine(),
    )
    write_section(AGAINST_SORT, body)


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Classification UQ at ImageNet scale: uqcore side by side with "
        "straightforward numpy and with torch-uncertainty; writes its section of "
        "benchmarks/RESULTS.md."
    )
    parser.add_argument("--quick", action="store_true", help="smoke run, N = 2,000")
    parser.add_argument("--repeats", type=int, default=2, help="alternated runs of each side")
    parser.add_argument(
        "--agreement-only",
        action="store_true",
        help="only the agreement check with torch-uncertainty (seconds); prints, writes nothing",
    )
    parser.add_argument(
        "--without-torch-uncertainty",
        action="store_true",
        help="leave torch-uncertainty out even where it is installed",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch's threads for torch-uncertainty (0: torch's default); 1 by default, as "
        "uqcore and numpy use, so that the ratios compare the same resources",
    )
    parser.add_argument(
        "--against-sort",
        action="store_true",
        help="only the prediction-set, decomposition, skill and calibration-test metrics "
        "against one sort (a few minutes)",
    )
    parser.add_argument("--child-peak", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_peak:
        side, *dims = args.child_peak
        child_peak(side, *map(int, dims), args.torch_threads)
        return
    if args.without_torch_uncertainty:
        peer, how = None, "left out (`--without-torch-uncertainty`)"
    else:
        peer, how = load_torch_uncertainty()
    if peer is not None and args.torch_threads > 0:
        peer.torch.set_num_threads(args.torch_threads)
    agree = run_agreement(peer) if peer is not None else None
    failed = agree is not None and any(ok is False for *_, ok in agree)
    if args.agreement_only:
        if agree is None:
            print(f"torch-uncertainty: {how}")
            return
        print("\n".join(agreement_lines(agree)))
        sys.exit(1 if failed else 0)

    bench_against_sort(args.quick)
    if args.against_sort:
        return
    m, n, c = QUICK if args.quick else FULL
    load0 = os.getloadavg()
    start = time.perf_counter()
    print(f"building inputs M = {m}, N = {n}, C = {c}", flush=True)
    x = Inputs(m, n, c)
    size = x.nbytes

    with PassCounter() as passes:
        report = quiet(ours)(x)
    n_est = len(report.meta["estimators"])
    n_metrics = len(report)
    n_table = sum(len(row) for row in report.by_estimator.values())
    ref = quiet(naive)(x)
    gap = compare_values(report, ref)
    del ref
    warm = Inputs(2, 200, 50, seed=3)
    quiet(naive_common)(warm)
    quiet(ours_steps)(warm)
    fns: dict[str, Callable[[], Any]] = {
        "uqcore": lambda: quiet(ours)(x),
        "numpy": lambda: quiet(naive)(x),
        "uqcore common": lambda: quiet(ours_common)(x),
        "numpy common": lambda: quiet(naive_common)(x),
        "uqcore per quantity": lambda: quiet(ours_steps)(x),
    }
    if peer is not None:
        quiet(peer.common)(warm)  # imports, lazy set-up
        fns["torch-uncertainty common"] = lambda: quiet(peer.common)(x)
    runs, results = timings(fns, args.repeats)
    t = {name: statistics.median(ts) for name, ts in runs.items()}
    ratio = t["numpy"] / t["uqcore"]
    ratio_np_common = t["numpy common"] / t["uqcore common"]
    so = step_medians(results["uqcore per quantity"])
    sn = step_medians(results["numpy common"])
    vo = results["uqcore per quantity"][0].values
    st = vt = None
    ratio_tu = ratio_tu_wo = tu_classwise = None
    if peer is not None:
        tu_runs = results["torch-uncertainty common"]
        st = step_medians(tu_runs)
        vt = tu_runs[0].values
        ratio_tu = t["torch-uncertainty common"] / t["uqcore common"]
        # the same end to end without the class-wise ECE (a Python loop over C in theirs)
        tu_wo = statistics.median(
            total - r.times["ece_classwise"]
            for total, r in zip(runs["torch-uncertainty common"], tu_runs, strict=True)
        )
        ours_wo = statistics.median(
            total - r[0].meta["timings_s"]["ece_classwise"]
            for total, r in zip(runs["uqcore common"], results["uqcore common"], strict=True)
        )
        ratio_tu_wo = tu_wo / ours_wo
        tu_classwise = st["ece_classwise"]
    del results
    traced_ours = tracemalloc_peak(lambda: quiet(ours)(x))
    traced_naive = tracemalloc_peak(lambda: quiet(naive)(x))
    traced_ours_common = tracemalloc_peak(lambda: quiet(ours_common)(x))
    traced_naive_common = tracemalloc_peak(lambda: quiet(naive_common)(x))
    gc.collect()
    rise = rss_rise("all", m, n, c, args.torch_threads)
    rise_common = rss_rise("common", m, n, c, args.torch_threads)
    rise_tu = rss_rise("tu", m, n, c, args.torch_threads) if peer is not None else None
    load1 = os.getloadavg()

    total_passes = passes.validation + passes.chunks
    flag = " --quick" if args.quick else ""
    full_note = (
        "" if not args.quick else " (targets are stated for the full size; --quick is a smoke run)"
    )
    verdict = {True: "met", False: "**not met**"}
    n_common = (
        len(COMMON_AGGREGATORS)
        + len(COMMON_BMA_METRICS)
        + len(COMMON_RANK_METRICS) * len(COMMON_ESTIMATORS)
    )
    if peer is not None:
        import torch

        tu_line = (
            f"torch-uncertainty {peer.versions}, imported {how}; torch on "
            f"{torch.get_num_threads()} thread(s) (`--torch-threads {args.torch_threads}`; "
            "uqcore and numpy use one: the ratios compare the same resources, and torch's "
            "second thread only waits for the CPU while other jobs share it)."
        )
    else:
        tu_line = f"torch-uncertainty: {how}; its columns are empty."
    lines = [
        f"Run: `python benchmarks/classification.py{flag}` on {time.strftime('%Y-%m-%d')}, "
        f"{(time.perf_counter() - start) / 60:.1f} min. Machine: {machine()}, "
        f"{platform.system()} {platform.machine()}; Python {platform.python_version()}, "
        f"numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__}, "
        f"uqcore {uqcore.__version__}. {tu_line}",
        "",
        "torch-uncertainty is not part of the project's install; to include it, next to the "
        f"torch already installed: `{TU_INSTALL}`.",
        "",
        "The machine was shared with other jobs (1-minute load average "
        f"{load0[0]:.1f} at the start, {load1[0]:.1f} at the end): absolute times are noisy; the "
        f"ratios are of medians of {args.repeats} alternated runs of each side in this one run.",
        "",
        f"Input: M = {m} members, N = {n:,} samples, C = {c:,} classes, float32 member "
        f"probabilities ({fmt_bytes(size)}); labels, OOD flags (20 %), soft labels (N×C "
        "float32) and one user-supplied score. One call computes "
        f"{n_metrics} metrics and the metric × estimator table ({n_table} entries: "
        f"{len(report.by_estimator)} metrics × {n_est} estimators){full_note}. "
        f"torch-uncertainty computes {n_common} of these quantities "
        f"({len(COMMON_AGGREGATORS)} aggregators, {len(COMMON_BMA_METRICS)} metrics of the "
        f"BMA, {len(COMMON_RANK_METRICS)} rank metrics × {len(COMMON_ESTIMATORS)} estimators).",
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
        f"| speed vs straightforward numpy, all quantities | ≥ 5 × | {ratio:.1f} × "
        f"| {verdict[ratio >= 5]} |",
        (
            f"| speed vs torch-uncertainty, the {n_common} quantities both compute | ≥ 5 × "
            f"| {ratio_tu:.1f} × ({ratio_tu_wo:.1f} × without class-wise ECE) "
            f"| {verdict[ratio_tu >= 5]}"
            + ("" if ratio_tu_wo >= 5 else "; **not met** without class-wise ECE")
            + " |"
            if ratio_tu is not None and ratio_tu_wo is not None
            else f"| speed vs torch-uncertainty | ≥ 5 × | not measured: {how} | — |"
        ),
        "",
        "### Side by side, end to end",
        "",
        "| | wall time (median) | the runs, in order | peak extra memory (`tracemalloc`) "
        "| RSS rise (fresh process) |",
        "|---|---:|---|---:|---:|",
        f'| uqcore, all quantities: `Ensemble(...)` + `evaluate(..., metrics="all", '
        f'estimators="all")` | {t["uqcore"]:.2f} s | {spread(runs["uqcore"])} '
        f"| {fmt_bytes(traced_ours)} | {fmt_bytes(rise)} |",
        f"| straightforward numpy + scikit-learn + scipy, all quantities | {t['numpy']:.2f} s "
        f"| {spread(runs['numpy'])} | {fmt_bytes(traced_naive)} | — |",
        f"| uqcore, the common quantities: `Ensemble(...)` + two `evaluate` calls "
        f"| {t['uqcore common']:.2f} s | {spread(runs['uqcore common'])} "
        f"| {fmt_bytes(traced_ours_common)} | {fmt_bytes(rise_common)} |",
        (
            f"| torch-uncertainty, the common quantities "
            f"| {t['torch-uncertainty common']:.2f} s "
            f"| {spread(runs['torch-uncertainty common'])} | not seen (torch's allocator) "
            f"| {fmt_bytes(rise_tu or 0)} |"
            if peer is not None
            else f"| torch-uncertainty | {how} | | | |"
        ),
        f"| straightforward numpy, the common quantities | {t['numpy common']:.2f} s "
        f"| {spread(runs['numpy common'])} | {fmt_bytes(traced_naive_common)} | — |",
        "",
        f"On the common quantities uqcore is {ratio_np_common:.1f} × faster than numpy"
        + (
            f" and {ratio_tu:.1f} × faster than torch-uncertainty; torch-uncertainty's "
            f"class-wise ECE alone takes {tu_classwise:.1f} s (a Python loop over the "
            f"{c:,} classes, each a torchmetrics binary calibration error over N values)."
            if ratio_tu is not None and tu_classwise is not None
            else "."
        ),
        "",
        "The straightforward side and torch-uncertainty compute in float32 on the float32 "
        "input (faster than float64, and what such code does); uqcore computes in float64.",
        "",
        f"Largest |uqcore − straightforward| over the estimator table: {gap:.2g} (the "
        "straightforward side adds 1e-12 inside logs and breaks ties by position; uqcore is "
        "exact with ties).",
        "",
        "### Per quantity",
        "",
        "Each quantity alone on each side, median of the runs above. Aggregators are timed "
        "from the M×N×C input: uqcore's one pass gives p̄ and all 13 aggregators at once, so "
        "its time is the same on each of those rows and the row's ratio compares a peer's "
        "one aggregator with uqcore's whole pass. Metrics are timed given p̄ and the "
        "estimates: for uqcore one `metric(...)` call each on an ensemble whose pass is done "
        "(each call finds p̄'s confidence and predicted class itself, about 40 ms on the N×C "
        "float64 p̄, and sorts its estimator anew; `evaluate` shares both across metrics), "
        "for torch-uncertainty one metric object's `update` + `compute`, for numpy the "
        "expression. What a metric needs from p̄ (confidence, predicted class, errors) is "
        "counted once in each row that needs it on the peers, once per call on uqcore (so "
        "five times in the correctness rows). Ratios above 1 mean uqcore is faster. The last column is the gap between the two "
        "libraries' values on this input (torch-uncertainty in float32); for AURC and AUGRC "
        "also after converting ours to their convention (definitions below).",
        "",
        *per_quantity_lines(so, st, sn, vo, vt, n),
        "",
        "### Which torch-uncertainty call is which uqcore quantity",
        "",
        "| uqcore | torch-uncertainty | definitions |",
        "|---|---|---|",
        *[f"| `{q}` | {call} | {rel} |" for q, (call, rel) in PEER_CALLS.items()],
        "",
        f"Only in uqcore: {NOT_IN_PEER}. Only in torch-uncertainty: {PEER_ONLY}.",
        "",
        "### Agreement with torch-uncertainty",
        "",
        "A seeded float64 problem (M = 5, N = 3,000, C = 10, labels drawn from p̄, 20 % OOD "
        "flags, a random score) given to both; checked to "
        f"{TOL:g} where the definitions agree or after converting a documented convention, "
        "and the size of the difference shown where they differ by design.",
        "",
        *(agreement_lines(agree) if agree is not None else [f"Not run: torch-uncertainty {how}."]),
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
        "also why its peak memory is several times the input. torch-uncertainty reads it "
        "once per aggregator object (its `Entropy` and `MutualInformation` of the members "
        "also write an M×N×C temporary of `entr(p)`) plus once for p̄.",
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
    if failed:
        print("agreement with torch-uncertainty FAILED (see the table above)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
