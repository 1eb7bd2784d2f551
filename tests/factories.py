"""Seeded factories of test data: predictions and targets for every regression kind (numpy,
float64), classification batches, the request bodies of the service (JSON and NPZ), and the
store's submission records."""

from __future__ import annotations

import gzip
import io
import json
import uuid
from typing import Any

import numpy as np

from service.analyses import Analyses
from service.store import SubmissionRecord, now_iso
from uqcore import predictions as P

KINDS = (
    "gaussian",
    "laplace",
    "student_t",
    "mixture",
    "samples",
    "quantiles",
    "point_uncertainty",
    "isotonic_recalibrated",
    "interval",
)

#: The 19 levels used by Quantiles factories: 0.05, 0.10, ..., 0.95.
QUANTILE_LEVELS = np.round(np.linspace(0.05, 0.95, 19), 10)


def make_prediction(
    kind: str,
    n: int,
    seed: int = 0,
    *,
    ties: bool = False,
    n_draws: int = 16,
    n_components: int = 3,
) -> tuple[Any, np.ndarray]:
    """A random prediction of ``kind`` with N = ``n`` rows and targets drawn near it.

    With ``ties=True`` the uncertainties, errors and targets take few distinct values, so that
    rank-based metrics meet ties.
    """
    rng = np.random.default_rng(seed)
    mu = rng.normal(size=n)
    sd = rng.uniform(0.2, 2.0, size=n)
    y = mu + sd * rng.standard_t(5, size=n)
    if ties:
        sd = rng.choice([0.5, 1.0, 2.0], size=n)
        mu = rng.choice([-1.0, 0.0, 1.0], size=n)
        y = mu + rng.choice([-1.0, 0.0, 0.5, 2.0], size=n)
    if kind == "gaussian":
        return P.Gaussian(mean=mu, std=sd), y
    if kind == "laplace":
        return P.Laplace(loc=mu, scale=sd), y
    if kind == "student_t":
        return P.StudentT(loc=mu, scale=sd, df=rng.uniform(2.5, 10.0, size=n)), y
    if kind == "mixture":
        k = n_components
        w = rng.dirichlet(np.ones(k), size=n)
        means = mu[:, None] + rng.normal(scale=1.0, size=(n, k))
        stds = sd[:, None] * rng.uniform(0.5, 1.5, size=(n, k))
        return P.Mixture(weights=w, means=means, stds=stds), y
    if kind == "samples":
        draws = mu[:, None] + sd[:, None] * rng.normal(size=(n, n_draws))
        if ties:
            draws = np.round(draws)
        return P.Samples(draws=draws), y
    if kind == "quantiles":
        from scipy.stats import norm

        values = mu[:, None] + sd[:, None] * norm.ppf(QUANTILE_LEVELS)[None, :]
        return P.Quantiles(levels=QUANTILE_LEVELS, values=values), y
    if kind == "point_uncertainty":
        return P.PointUncertainty(prediction=mu, uncertainty=sd), y
    if kind == "interval":
        # asymmetric 90% intervals (as CQR gives), a few of zero width
        half = 1.645 * sd
        skew = rng.uniform(0.6, 1.4, size=n)
        lower, upper = mu - half * skew, mu + half / skew
        if n >= 5:
            lower[::5] = upper[::5] = mu[::5]
        if ties:
            lower, upper = np.round(lower), np.round(upper)
        return P.Interval(lower=lower, upper=upper, level=0.9), y
    if kind == "isotonic_recalibrated":
        from uqcore.regression.recalibration import fit_isotonic

        base = P.Gaussian(mean=mu, std=sd)
        # fit on an independent, deliberately over-confident set
        fit_rng = np.random.default_rng(seed + 1000)
        m = max(n, 20)
        fit_mu = fit_rng.normal(size=m)
        fit_y = fit_mu + 1.5 * fit_rng.normal(size=m)
        recal = fit_isotonic(P.Gaussian(mean=fit_mu, std=np.ones(m)), fit_y)
        return recal.apply(base), y
    raise ValueError(kind)


def scale_prediction(pred: Any, c: float) -> Any:
    """The same prediction in other units: every location, scale, quantile, draw, point and
    uncertainty multiplied by ``c`` > 0 (mixture weights, quantile levels, Student-t df and an
    isotonic recalibration map, which acts on probabilities, unchanged)."""
    kind = pred.kind
    if kind == "isotonic_recalibrated":
        return type(pred)(scale_prediction(pred.base, c), pred.mapping)
    a = pred.arrays()
    if kind == "gaussian":
        return P.Gaussian(mean=a["mean"] * c, std=a["std"] * c)
    if kind == "laplace":
        return P.Laplace(loc=a["loc"] * c, scale=a["scale"] * c)
    if kind == "student_t":
        return P.StudentT(loc=a["loc"] * c, scale=a["scale"] * c, df=a["df"])
    if kind == "mixture":
        return P.Mixture(weights=a["weights"], means=a["means"] * c, stds=a["stds"] * c)
    if kind == "samples":
        return P.Samples(draws=a["draws"] * c)
    if kind == "quantiles":
        return P.Quantiles(levels=a["levels"], values=a["values"] * c)
    if kind == "point_uncertainty":
        return P.PointUncertainty(prediction=a["prediction"] * c, uncertainty=a["uncertainty"] * c)
    if kind == "interval":
        return P.Interval(lower=a["lower"] * c, upper=a["upper"] * c, level=pred.level)
    raise ValueError(kind)


def to_backend(pred: Any, y: np.ndarray, xp: Any) -> tuple[Any, Any]:
    """The same prediction and targets as arrays of namespace ``xp``."""
    if getattr(pred, "kind", "") == "isotonic_recalibrated":
        base, yb = to_backend(pred.base, y, xp)
        return type(pred)(base, pred.mapping), yb
    arrays = {k: xp.asarray(v) for k, v in ((k, np.asarray(v)) for k, v in pred.arrays().items())}
    if getattr(xp, "__name__", "").startswith("torch"):
        import torch

        arrays = {k: torch.from_numpy(np.asarray(v)) for k, v in pred.arrays().items()}
        yb = torch.from_numpy(np.asarray(y))
    else:
        yb = xp.asarray(y)
    if getattr(pred, "kind", "") == "interval":
        return type(pred)(**arrays, level=pred.level), yb
    return type(pred)(**arrays), yb


#: Classification kinds of the registry-wide tests ("ensemble_logits": an Ensemble from logits).
CLASSIFICATION_KINDS = (
    "probs",
    "logits",
    "ensemble",
    "ensemble_logits",
    "dirichlet",
    "prediction_set",
    "prediction_set_probs",
)


def make_classification(
    kind: str,
    n: int,
    seed: int = 0,
    *,
    n_classes: int = 6,
    n_members: int = 4,
    ties: bool = False,
) -> tuple[Any, np.ndarray, dict[str, np.ndarray]]:
    """A random classification prediction of ``kind`` with N = ``n`` rows, labels drawn from
    its predictive distribution, and the optional targets ``{"ood": ..., "soft_labels": ...}``.

    Every prediction carries a user-supplied estimate ``"score"``. With ``ties=True`` the
    probabilities take few distinct values, so that confidences and estimates meet ties.
    """
    rng = np.random.default_rng(seed)
    c, m = n_classes, n_members
    logits = rng.normal(scale=2.0, size=(m, n, c))
    if ties:
        # few distinct rows: members and samples repeat a handful of logit patterns
        patterns = rng.choice([0.0, 1.0, 3.0], size=(5, c))
        logits = patterns[rng.integers(0, 5, size=(m, n))]
    member = np.exp(logits - logits.max(axis=-1, keepdims=True))
    member /= member.sum(axis=-1, keepdims=True)
    probs = member.mean(axis=0)
    cum = probs.cumsum(axis=1)
    y = np.minimum((rng.random(n)[:, None] > cum).sum(axis=1), c - 1)
    score = rng.choice([0.0, 1.0, 2.0], size=n) if ties else rng.normal(size=n)
    est = {"score": score}
    # soft labels: ambiguous (a Dirichlet draw) for about 60% of the rows, one-hot otherwise
    soft = rng.dirichlet(np.full(c, 0.3), size=n)
    one_hot = rng.random(n) >= 0.6
    soft[one_hot] = np.eye(c)[y[one_hot]]
    targets = {"ood": rng.random(n) < 0.4, "soft_labels": soft}
    if kind == "probs":
        return P.Probs(probs, estimates=est), y, targets
    if kind == "logits":
        return P.Logits(logits[0], estimates=est), y, targets
    if kind == "ensemble":
        return P.Ensemble(member_probs=member, estimates=est), y, targets
    if kind == "ensemble_logits":
        return P.Ensemble(member_logits=logits, estimates=est), y, targets
    if kind == "dirichlet":
        alpha = np.exp(logits[0] / 2.0) + (0.0 if not ties else 1.0)
        return P.Dirichlet(alpha, estimates=est), y, targets
    if kind in ("prediction_set", "prediction_set_probs"):
        # APS-like sets: the classes of highest probability up to a random mass, so that set
        # sizes vary from empty (mass 0) to all classes
        mass = rng.choice([0.0, 0.5, 0.8, 0.95, 1.0], size=n)
        order = np.argsort(-probs, axis=1, kind="stable")
        before = np.take_along_axis(probs, order, axis=1).cumsum(axis=1) - np.take_along_axis(
            probs, order, axis=1
        )
        sets = np.zeros((n, c), dtype=bool)
        np.put_along_axis(sets, order, before < mass[:, None], axis=1)
        if kind == "prediction_set":
            return P.PredictionSet(sets), y, targets
        return P.PredictionSet(sets, probs=probs, estimates=est), y, targets
    raise ValueError(kind)


#: Classification kinds given by unbounded numbers (logits, concentrations), which
#: :func:`scale_classification` multiplies.
SCALABLE_CLASSIFICATION_KINDS = ("logits", "ensemble_logits", "dirichlet")


def scale_classification(pred: Any, c: float) -> Any:
    """The prediction with its logits (or Dirichlet concentrations) multiplied by ``c`` > 0;
    the user-supplied estimates are kept. Softmax of logits × c tends to one-hot (c → ∞) or
    uniform (c → 0); the Dirichlet mean α/α_0 does not change."""
    est = dict(pred.estimates)
    a = pred.arrays()
    if pred.kind == "logits":
        return P.Logits(a["logits"] * c, estimates=est)
    if pred.kind == "ensemble" and "member_logits" in a:
        return P.Ensemble(member_logits=a["member_logits"] * c, estimates=est)
    if pred.kind == "dirichlet":
        return P.Dirichlet(a["alpha"] * c, estimates=est)
    raise ValueError(f"{pred.kind} predictions have no unbounded numbers to scale")


# --- request bodies of the service ----------------------------------------------------------


def gaussian_arrays(n: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded Gaussian batch: mean, std and targets drawn from the predictive law."""
    rng = np.random.default_rng(seed)
    mean = rng.normal(size=n)
    std = rng.uniform(0.5, 1.5, size=n)
    y = mean + std * rng.normal(size=n)
    return {"mean": mean, "std": std, "y": y}


def gaussian_json(n: int = 64, seed: int = 0, **fields: Any) -> dict[str, Any]:
    """A JSON submission body of a Gaussian batch (``fields`` override/add top-level members)."""
    a = gaussian_arrays(n, seed)
    body: dict[str, Any] = {
        "model_name": "test-model",
        "metadata": {"seed": seed},
        "prediction": {"kind": "gaussian", "mean": a["mean"].tolist(), "std": a["std"].tolist()},
        "y": a["y"].tolist(),
        "analyses": {"metrics": ["mae", "nll", "crps"]},
    }
    body.update(fields)
    return body


def applicable_curves(kind: str, arrays: dict[str, Any]) -> set[str]:
    """The :mod:`uqcore.curves` names that apply to a submission of ``kind`` with ``arrays``
    (its prediction fields, targets and extra inputs), by each curve's own rule."""
    from service.kinds import KIND_FIELDS, build_prediction
    from uqcore.curves import CURVES

    pred = build_prediction(
        kind, {f: np.asarray(arrays[f]) for f in KIND_FIELDS[kind] if f in arrays}
    )
    available = frozenset(k for k in ("groups", "ood") if k in arrays)
    return {n for n, s in CURVES.items() if s.why_not(pred, available) is None}


def npz_bytes(request: dict[str, Any] | None, compressed: bool = False, **arrays: Any) -> bytes:
    """An NPZ body: ``arrays`` as members plus ``request`` (JSON) when given."""
    buf = io.BytesIO()
    members = dict(arrays)
    if request is not None:
        members["request"] = np.array(json.dumps(request))
    (np.savez_compressed if compressed else np.savez)(buf, **members)
    return buf.getvalue()


def gaussian_npz(n: int = 64, seed: int = 0, **request: Any) -> bytes:
    a = gaussian_arrays(n, seed)
    req = {"kind": "gaussian", "model_name": "npz-model", "analyses": {"metrics": ["mae"]}}
    req.update(request)
    return npz_bytes(req, **a)


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=1)


# --- store records ------------------------------------------------------------------------------


def submission_record(**fields: Any) -> SubmissionRecord:
    """A queued Gaussian submission record (fresh id, owner ``key_a``, N = 4, default analyses);
    ``fields`` override any of its fields."""
    base: dict[str, Any] = {
        "id": "sub_" + uuid.uuid4().hex,
        "owner": "key_a",
        "status": "queued",
        "progress": 0.0,
        "created_at": now_iso(),
        "started_at": None,
        "finished_at": None,
        "attempts": 0,
        "error": None,
        "model_name": "m",
        "metadata": {},
        "kind": "gaussian",
        "n": 4,
        "queue": "cpu",
        "input_hash": "0" * 64,
        "analyses": Analyses(),
    }
    return SubmissionRecord(**{**base, **fields})
