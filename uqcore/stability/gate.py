"""Quality gates: is a candidate prediction worse than a reference beyond an allowance?

For each check (a metric entry ``m``, an allowance) the paired bootstrap of
:func:`~uqcore.stability.compare` answers a one-sided question:

- badness b(θ) is lower-is-better whatever the metric's direction (θ for "lower", −θ for
  "higher", |θ − best| for "target": :meth:`~uqcore.registry.MetricSpec.badness`);
- the degradation is D = b(θ_cand) − b(θ_ref), > 0 when the candidate is worse;
- the allowance δ is ``allowed`` (mode "absolute") or ``allowed · |θ_ref|`` ("relative");
- on the same resamples for both predictions, D*_b = b(θ*_cand,b) − b(θ*_ref,b), b = 1..B
  (the resamples where both are defined; B' of them);
- with α = 1 − confidence and j = ⌊α (B' + 1)⌋, the lower one-sided bound of D is the j-th
  smallest D*, L = D*_(j) (the (B' + 1)α order statistic of the percentile bootstrap), and
  the upper one H = D*_(B' + 1 − j): [L, H] is an equal-tailed interval at level 1 − 2α;
- the p-value of H0: D <= δ is p = (1 + #{D*_b <= δ}) / (B' + 1) (the +1 counts the
  observed sample among the resamples, so p >= 1 / (B' + 1) > 0);
- the check fails iff L > δ, which is the same event as p <= α (L = D*_(j) > δ ⟺
  #{D* <= δ} <= j − 1 ⟺ 1 + #{D* <= δ} <= α (B' + 1));
- with several checks and ``correction="holm"`` a check fails iff its Holm-adjusted p-value
  is <= α (family-wise error rate α over the checks); with one check, or ``"none"``, this is
  the bound rule above.

A check whose metric is undefined (on the full data or on every resample), or with too few
resamples for the confidence (j = 0), is an "error": it neither passes nor fails.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._validation import UQValidationError
from uqcore.stability._engine import scalar
from uqcore.stability.bootstrap import check_resamples
from uqcore.stability.compare import _paired_values, _setup
from uqcore.stability.weights import Scheme, Unit

__all__ = ["Decision", "degradation_decision", "holm", "quality_gate"]

Mode = Literal["absolute", "relative"]
Correction = Literal["holm", "none"]

# Rounding room when comparing a count with α(B' + 1), whose product is not exact in binary.
_EPS = 1e-9


@dataclass(frozen=True)
class Decision:
    """The one-sided bootstrap decision on a degradation (see the module docstring).

    ``low``/``high``: the one-sided bounds L and H at the confidence (None when j = 0);
    ``p_value``: of H0 D <= δ; ``fails``: L > δ; ``n_valid``: B'.
    """

    low: float | None
    high: float | None
    p_value: float | None
    fails: bool
    n_valid: int


def degradation_decision(d_star: Any, allowance: float, confidence: float) -> Decision:
    """Decide one check from the bootstrap degradations ``d_star`` (non-finite ones dropped).

    Fails iff the lower one-sided bound L = D*_(j), j = ⌊(1 − confidence)(B' + 1)⌋, exceeds
    ``allowance``; p = (1 + #{D* <= allowance}) / (B' + 1), and fails ⟺ p <= 1 − confidence.

    >>> d = np.arange(1.0, 20.0)            # B' = 19, α = 0.05: j = 1, L = 1.0, H = 19.0
    >>> r = degradation_decision(d, 0.5, 0.95)
    >>> r.low, r.high, r.p_value, r.fails
    (1.0, 19.0, 0.05, True)
    >>> degradation_decision(d, 1.0, 0.95).fails
    False
    """
    if not 0.0 < confidence < 1.0:
        raise UQValidationError(f"confidence must be in (0, 1), found {confidence!r}")
    d = np.asarray(d_star, dtype=float).ravel()
    d = np.sort(d[np.isfinite(d)])
    b = int(d.shape[0])
    if b == 0:
        return Decision(None, None, None, False, 0)
    alpha = 1.0 - confidence
    j = math.floor(alpha * (b + 1) + _EPS)
    below = int(np.searchsorted(d, allowance, side="right"))  # #{D* <= δ}
    p = (1 + below) / (b + 1)
    if j < 1:
        return Decision(None, None, p, False, b)
    low, high = float(d[j - 1]), float(d[b - j])
    return Decision(low, high, p, low > allowance, b)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p-values (None stays None and does not count in the family).

    The i-th smallest of m p-values becomes max over k <= i of min(1, (m − k + 1) p_(k)).

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    idx = [i for i, p in enumerate(p_values) if p is not None]
    m = len(idx)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: float(p_values[i] or 0.0))):
        adjusted = min(1.0, (m - rank) * float(p_values[i] or 0.0))
        running = max(running, adjusted)
        out[i] = round(running, 15)
    return out


def _entry_metric(name: str) -> str:
    return name.split("[", 1)[0]


def quality_gate(
    candidate: Any,
    reference: Any,
    y: Any,
    checks: Sequence[Mapping[str, Any]],
    *,
    confidence: float = 0.95,
    correction: Correction = "holm",
    n_resamples: int = 1000,
    seed: int = 0,
    scheme: Scheme = "multinomial",
    unit: Unit = "row",
    groups: Any = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample_weight: Any = None,
    block_size: int | None = None,
    estimators: Sequence[str] | None = None,
    progress: Callable[[float], None] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Gate ``candidate`` against ``reference`` on the same targets (module docstring).

    Parameters
    ----------
    checks : sequence of mappings
        Each ``{"name": entry, "allowed": float >= 0, "mode": "absolute" | "relative"}``;
        ``entry`` is a metric name, or ``"metric[estimator]"`` with ``estimators`` naming
        the estimator (as in :func:`~uqcore.stability.compare`).
    confidence : float
        Of the one-sided bound (α = 1 − confidence is the family-wise error rate with Holm).
    correction : "holm" or "none"
        Holm's step-down adjustment of the checks' p-values, or none.

    Other parameters are those of :func:`~uqcore.stability.compare` (same seed, same resamples).

    Returns
    -------
    dict
        ``passed`` (True, False, or None when no check failed but one is an error),
        ``reason``, ``checks`` (per check: candidate, reference, degradation, allowance, low,
        high, p_value, p_value_adjusted, passed, outcome "pass" | "fail" | "error", reason,
        n_valid, n_undefined), and the provenance (B, seed, confidence, correction, resampling).

    Examples
    --------
    >>> import numpy as np; from uqcore import predictions as P
    >>> y = np.random.default_rng(0).normal(size=300)
    >>> good, bad = P.Gaussian(np.zeros(300), np.ones(300)), P.Gaussian(np.ones(300), np.ones(300))
    >>> g = quality_gate(bad, good, y, [{"name": "mae", "allowed": 0.1, "mode": "absolute"}],
    ...                  n_resamples=200)
    >>> g["passed"], g["checks"][0]["outcome"]
    (False, 'fail')
    """
    if correction not in ("holm", "none"):
        raise UQValidationError(f"correction must be 'holm' or 'none', found {correction!r}")
    if not 0.0 < confidence < 1.0:
        raise UQValidationError(f"confidence must be in (0, 1), found {confidence!r}")
    if not checks:
        raise UQValidationError("checks must name at least one metric")
    b_count = check_resamples(n_resamples)
    names = [str(c["name"]) for c in checks]
    metrics = list(dict.fromkeys(_entry_metric(n) for n in names))
    engines, chosen, resampler, _ = _setup(
        [candidate, reference],
        y,
        metrics,
        params,
        sample_weight,
        scheme,
        unit,
        groups,
        kwargs,
        list(estimators) if estimators else None,
    )
    by_name = {c.name: c for c in chosen}
    for n in names:
        if n not in by_name:
            raise UQValidationError(
                f"check {n!r} is not computed; known entries: {', '.join(by_name)}"
            )
    full = [e.compute_full() for e in engines]
    boot = _paired_values(engines, resampler, seed, b_count, block_size, progress)
    alpha = 1.0 - confidence
    out_checks: list[dict[str, Any]] = []
    warnings_: list[str] = [*engines[0].full_notes, *engines[1].full_notes]
    for check, name in zip(checks, names, strict=True):
        c = by_name[name]
        allowed = float(check["allowed"])
        mode = str(check.get("mode", "absolute"))
        if not (math.isfinite(allowed) and allowed >= 0):
            raise UQValidationError(f"allowed must be a finite number >= 0; {name}: {allowed!r}")
        if mode not in ("absolute", "relative"):
            raise UQValidationError(f"mode must be 'absolute' or 'relative', found {mode!r}")
        vc, vr = scalar(full[0][name]), scalar(full[1][name])
        bc, br = boot[0][name], boot[1][name]
        ok = np.isfinite(bc) & np.isfinite(br)
        entry: dict[str, Any] = {
            "name": name,
            "mode": mode,
            "allowed": allowed,
            "allowance": None,
            "candidate": vc if math.isfinite(vc) else None,
            "reference": vr if math.isfinite(vr) else None,
            "degradation": None,
            "low": None,
            "high": None,
            "p_value": None,
            "p_value_adjusted": None,
            "passed": None,
            "outcome": "error",
            "reason": None,
            "direction": c.spec.direction,
            "n_valid": int(ok.sum()),
            "n_undefined": int((~ok).sum()),
        }
        out_checks.append(entry)
        if not (math.isfinite(vc) and math.isfinite(vr)):
            which = "candidate" if not math.isfinite(vc) else "reference"
            entry["reason"] = f"{name} is undefined for the {which} on the data"
            continue
        allowance = allowed if mode == "absolute" else allowed * abs(vr)
        entry["allowance"] = allowance
        entry["degradation"] = float(c.spec.badness(vc, c.params) - c.spec.badness(vr, c.params))
        d_star = c.spec.badness(bc[ok], c.params) - c.spec.badness(br[ok], c.params)
        decision = degradation_decision(d_star, allowance, confidence)
        entry["low"], entry["high"], entry["p_value"] = (
            decision.low,
            decision.high,
            decision.p_value,
        )
        if decision.n_valid == 0:
            entry["p_value"] = None
            entry["reason"] = f"{name} is undefined on every resample"
        elif decision.low is None:
            entry["p_value"] = None
            entry["reason"] = (
                f"{decision.n_valid} resamples are too few for confidence {confidence}: the "
                f"bound needs (1 − confidence)(B + 1) >= 1"
            )
        if entry["n_undefined"]:
            warnings_.append(
                f"{name}: undefined for the candidate or the reference on "
                f"{entry['n_undefined']} of {b_count} resamples (left out)"
            )
    raw = [e["p_value"] for e in out_checks]
    adjusted = holm(raw) if correction == "holm" else list(raw)
    for e, adj in zip(out_checks, adjusted, strict=True):
        if adj is None:
            continue
        e["p_value_adjusted"] = adj
        fails = adj <= alpha * (1 + _EPS)
        e["passed"] = not fails
        e["outcome"] = "fail" if fails else "pass"
        if fails:
            e["reason"] = (
                f"the degradation exceeds the allowance {e['allowance']:.6g} at confidence "
                f"{confidence} (adjusted p = {adj:.4g} <= {alpha:.4g})"
            )
        else:
            e["reason"] = (
                f"a degradation beyond the allowance {e['allowance']:.6g} is not shown at "
                f"confidence {confidence} (adjusted p = {adj:.4g} > {alpha:.4g})"
            )
    failed = [e["name"] for e in out_checks if e["outcome"] == "fail"]
    errors = [e["name"] for e in out_checks if e["outcome"] == "error"]
    passed: bool | None
    if failed:
        passed, reason = False, f"failed: {', '.join(failed)}"
    elif errors:
        passed, reason = None, f"undecided: {', '.join(errors)} could not be computed"
    else:
        passed, reason = True, "every check passed"
    return {
        "passed": passed,
        "reason": reason,
        "checks": out_checks,
        "n_resamples": b_count,
        "seed": seed,
        "confidence": confidence,
        "correction": correction,
        "n": resampler.n,
        "resampling": resampler.describe(),
        "warnings": warnings_,
    }
