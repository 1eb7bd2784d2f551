"""The metric glossary of the web UI: every metric of uqcore's registry with its definition,
formula, reference, direction and bounds, a "when to use" line per family, and the pitfalls
that the papers behind the metrics report (cited; the paper notes are in the design folder).

The entries are generated from :func:`uqcore.registry.specs`, so a metric added to uqcore
appears here without a change; only :data:`WHEN_TO_USE` and :data:`PITFALLS` are written by
hand.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass

from uqcore import registry

#: The arrow of a direction: lower is better, higher is better, or closest to the best value.
ARROWS = {"lower": "↓", "higher": "↑", "target": "◎"}
DIRECTION_WORDS = {
    "lower": "lower is better",
    "higher": "higher is better",
    "target": "closest to the best value is best",
}

#: What each family measures and when to look at it, by task.
WHEN_TO_USE: dict[tuple[str, str], str] = {
    ("regression", "accuracy"): "The point prediction alone (no uncertainty): report it beside "
    "the uncertainty metrics so that a better uncertainty is not mistaken for a better model.",
    ("regression", "calibration"): "Whether the predicted distributions' quantiles and intervals "
    "hold the stated share of targets; needs a predicted distribution. The most stable and "
    "interpretable family at small N (xiong2024 §V-A, §V-D), but it does not say how wrong the "
    "predictions can be.",
    ("regression", "ranking"): "Whether the uncertainty orders the errors (which predictions to "
    "trust, loss prediction); works with any uncertainty score, not only distributions "
    "(xiong2024 §V-D). Prefer AUSE to Spearman (xiong2024 §V-E).",
    ("regression", "scoring"): "Proper scoring rules and interval scores: calibration and "
    "sharpness at once, for comparing full predictive distributions.",
    ("regression", "intervals"): "Prediction intervals (e.g. conformal or CQR): marginal "
    "coverage is not enough, so check it per width stratum (size_stratified_coverage), the "
    "independence of width and coverage (hsic_width_coverage) and a binomial test of the "
    "coverage against the nominal level (coverage_pvalue).",
    ("regression", "skill"): "A score relative to climatology (the evaluated targets' own "
    "distribution): 1 − S/S_ref, comparable across datasets; 0 is no better than climatology.",
    ("classification", "sets"): "Prediction sets (conformal classification): coverage together "
    "with set size, and coverage per class and per set size, since marginal coverage can hide "
    "classes or sizes that are never covered.",
    ("classification", "skill"): "The Brier and log scores relative to the class frequencies: "
    "1 − S/S_ref, comparable across datasets with other base rates.",
    ("classification", "quality"): "The predictive distribution as a whole (accuracy, proper "
    "scores): the baseline against which the uncertainty's benefit is judged.",
    ("classification", "calibration"): "Whether the confidence matches the accuracy; binned "
    "estimators, so compare them at the same N and binning (see the pitfalls).",
    ("classification", "correctness"): "Whether the uncertainty flags the model's own errors "
    "(mucsanyi2024 §3.4).",
    ("classification", "selective"): "Abstention: the accuracy or risk when only the most "
    "certain predictions are kept (mucsanyi2024 §3.5).",
    ("classification", "out_of_distribution"): "Whether the uncertainty is higher on "
    "out-of-distribution inputs (epistemic uncertainty; mucsanyi2024 §3.2); needs OOD flags.",
    ("classification", "aleatoric"): "Whether the uncertainty follows the annotators' "
    "disagreement (aleatoric uncertainty; mucsanyi2024 §3.3); needs soft labels.",
    ("classification", "disentanglement"): "Whether an aleatoric and an epistemic estimate are "
    "unrelated, as a disentangled pair should be (mucsanyi2024 §3.1); 0 is best.",
}


@dataclass(frozen=True)
class Pitfall:
    """A known failure of a metric, as a paper states it."""

    title: str
    text: str
    cite: str


_SPEARMAN = Pitfall(
    "Drifts toward 0 as N grows",
    "“Spearman correlation has a large value with small test set sizes and gradually converges "
    "to zero as the test set size grows”: points with similar predicted uncertainty but very "
    "different errors counteract the correlation, less so when samples are sparse. The authors "
    "“discourage the usage of Spearman’s Rank Correlation for evaluating uncertainties and "
    "recommend replacing it with AUSE”. Compare values only at equal N.",
    "xiong2024 §V-A, abstract",
)
_AUSE = Pitfall(
    "Depends on the error scale; no reference frame",
    "AUSE is the area between the model's and the oracle's sparsification curves divided by "
    "the model's own full-set error MAE(S) (eq. 4), so it measures the ordering of this "
    "model's errors, not the distribution: the true distribution need not score 0, a small "
    "bend of the prediction more than doubled it (0.60 vs 1.39), and an ensemble that missed a "
    "mode scored better than the ground truth. “There is no clear upper bound for AUSE”; "
    "“NLL and AUSE can only tell us which model is better at UQ but cannot tell us how good "
    "it is.”",
    "xiong2024 eq. 4, §V-B, §V-C",
)
_NLL = Pitfall(
    "Multimodal truth; unbounded; needs many points",
    "NLL “fails when the ground truth distribution is multimodal but the training target is "
    "unimodal”, and “requires largest amount of test samples to be stable” of the metrics "
    "studied; it has no reference frame for its magnitude (densities can exceed 1). Sparsification-"
    "style metrics cannot judge the uncertainty independently of the predicted values either; "
    "n-MeRCI was proposed for that (moukari2019 §I, §III).",
    "xiong2024 §V-C, §V-D; moukari2019",
)
_BINNED = Pitfall(
    "Binning bias",
    "A binned calibration error estimates |acc − conf| per bin from a finite sample: even a "
    "perfectly calibrated model scores above 0, by an amount that grows with the number of bins "
    "and shrinks with N (for the quantile calibration error the mean at size N is about "
    "Σ_j p_j(1 − p_j)/N, docs/stability.md), and its bootstrap percentile intervals may be "
    "shifted. “It is advantageous to collect one large test set compared to aggregating many "
    "smaller test sets.” Compare values at the same N and binning, or use the debiased ece_l2 "
    "(Kumar et al. 2019).",
    "xiong2024 §V-A; Kumar et al. 2019",
)

#: Pitfalls by (task, metric name).
PITFALLS: dict[tuple[str, str], tuple[Pitfall, ...]] = {
    ("regression", "spearman"): (_SPEARMAN,),
    ("regression", "pearson"): (_SPEARMAN,),
    ("regression", "ause"): (_AUSE,),
    ("regression", "aurg"): (_AUSE,),
    ("regression", "nll"): (_NLL,),
    ("classification", "nll"): (_NLL,),
    ("regression", "calibration_error"): (_BINNED,),
    ("regression", "ece"): (_BINNED,),
    ("classification", "ece"): (_BINNED,),
    ("classification", "ace"): (_BINNED,),
    ("classification", "mce"): (_BINNED,),
    ("classification", "ece_adaptive"): (_BINNED,),
    ("classification", "ece_classwise"): (_BINNED,),
    ("regression", "ence"): (_BINNED,),
    ("regression", "uce"): (_BINNED,),
}


@dataclass(frozen=True)
class Entry:
    """One metric of the glossary."""

    name: str
    task: str
    family: str
    summary: str
    formula: str
    reference: str
    direction: str
    arrow: str
    bounds: str
    best: str
    needs: tuple[str, ...]
    pitfalls: tuple[Pitfall, ...]

    @property
    def anchor(self) -> str:
        """The id of the metric's entry on the glossary page."""
        return f"{self.task}-{self.name}"

    @property
    def hover(self) -> str:
        """The one-line definition shown on hover (a title attribute)."""
        return f"{self.summary} ({DIRECTION_WORDS.get(self.direction, self.direction)})"


def _number(x: float | None, missing: str) -> str:
    if x is None:
        return missing
    return f"{x:g}"


def _formula(spec: registry.MetricSpec) -> str:
    """The docstring's paragraph after the summary (where the formula and conventions are),
    up to its first example or its first 600 characters."""
    doc = inspect.cleandoc(spec.impl.__doc__ or "")
    parts = [p.strip() for p in doc.split("\n\n") if p.strip()]
    for part in parts[1:]:
        if part.startswith(">>>"):
            break
        text = " ".join(line.strip() for line in part.splitlines())
        text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")
        return text if len(text) <= 600 else text[:597].rsplit(" ", 1)[0] + " …"
    return ""


@functools.cache
def entries() -> tuple[Entry, ...]:
    """Every metric of the registry, by task, family and name."""
    out = []
    for spec in registry.specs():
        low, high = spec.bounds
        out.append(
            Entry(
                name=spec.name,
                task=spec.task,
                family=spec.family,
                summary=spec.summary,
                formula=_formula(spec),
                reference=spec.reference,
                direction=spec.direction,
                arrow=ARROWS.get(spec.direction, ""),
                bounds=f"[{_number(low, '−∞')}, {_number(high, '∞')}]",
                best=_number(spec.best, "—"),
                needs=tuple(sorted(spec.needs)),
                pitfalls=PITFALLS.get((spec.task, spec.name), ()),
            )
        )
    return tuple(sorted(out, key=lambda e: (e.task != "regression", e.task, e.family, e.name)))


@functools.cache
def by_name() -> dict[tuple[str, str], Entry]:
    """The entries by (task, name)."""
    return {(e.task, e.name): e for e in entries()}


def lookup(task: str, board: str) -> Entry | None:
    """The entry of a board's metric (``metric`` or ``metric[estimator]``) on ``task``."""
    return by_name().get((task, board.split("[", 1)[0]))


def families() -> list[tuple[str, str, str, list[Entry]]]:
    """(task, family, when to use, entries) in page order."""
    groups: dict[tuple[str, str], list[Entry]] = {}
    for e in entries():
        groups.setdefault((e.task, e.family), []).append(e)
    return [(t, f, WHEN_TO_USE.get((t, f), ""), es) for (t, f), es in groups.items()]
