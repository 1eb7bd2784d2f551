"""uqcore's texts in the words of the API: each rule of service.rest_text on uqcore's own
messages, and a registry-wide sweep of real result documents (every prediction kind, metrics
"all", bootstrap, stability, degenerate inputs) in which no text is a Python keyword."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from service.analyses import Analyses
from service.kinds import CLASSIFICATION_KINDS, REGRESSION_KINDS
from service.rest_text import rest_document, rest_text
from tests.factories import make_classification, make_prediction
from uqcore import UQValidationError, registry
from uqcore import predictions as P
from uqcore.stability import bootstrap, convergence
from uqcore.stability.compare import MULTIPLE_COMPARISON_NOTE
from worker.backend import select_backend
from worker.evaluation import compute

#: A Python keyword argument or call advice in a text a client reads.
PYTHON = re.compile(r"\b[a-z_]+=(True|False|None|'|\"|\.\.\.|[0-9]|<)|\bpass [a-z_]+|\w\(\)")


def strings(doc: Any) -> Iterator[str]:
    """Every string value of a JSON document."""
    if isinstance(doc, dict):
        for v in doc.values():
            yield from strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from strings(v)
    elif isinstance(doc, str):
        yield doc


def python_words(doc: Any) -> list[str]:
    return [s for s in strings(doc) if PYTHON.search(s)]


# -- each rule, on uqcore's own messages ---------------------------------------------------


def test_a_missing_input_is_a_field_to_send() -> None:
    pred, _, _ = make_classification("probs", 10)
    why = registry.get("aleatoric_rank_corr", "classification").why_not(pred)
    assert why is not None and "pass soft_labels=..." in why  # uqcore's Python wording
    got = rest_text(why, task="classification", metric="aleatoric_rank_corr")
    assert got.endswith("(send `soft_labels` with the submission)"), got
    on_bench = rest_text(why, task="classification", origin="benchmark")
    assert "the benchmark holds no `soft_labels`" in on_bench
    assert not PYTHON.search(got) and not PYTHON.search(on_bench)


def test_bootstrap_method_names_the_request_field_of_each_origin() -> None:
    # constant targets: MdAE's bootstrap is biased, and uqcore advises BCa
    pred, _ = make_prediction("gaussian", 12)
    ci = bootstrap(pred, np.zeros(12), ["mdae"], n_resamples=50)
    advice = next(w for w in ci.warnings if "prefer" in w)
    assert "method='bca'" in advice
    assert rest_text(advice, task="regression").endswith(
        'prefer `analyses.bootstrap.method = "bca"`'
    )
    assert rest_text(advice, task="regression", origin="benchmark").endswith(
        'prefer the benchmark\'s `bootstrap.method = "bca"`'
    )
    assert rest_text(advice, task="regression", origin="comparison").endswith(
        'prefer `method = "bca"` (POST /v1/comparisons)'
    )


def test_options_become_analyses_params_in_json_form() -> None:
    # ece's binning options across each other: uqcore's check names them as keywords
    spec = registry.get("ece", "classification")
    with pytest.raises(UQValidationError) as caught:
        spec.resolve_params({"binning": "mass", "bins_closed": "left"})
    got = rest_text(str(caught.value), task="classification", metric="ece")
    assert '`analyses.params.ece.binning = "mass"`' in got, got
    assert '`analyses.params.ece.bins_closed = "left"`' in got
    # the metric is found in the text when the caller does not know it
    text = "nmerci is undefined: the normaliser is not positive (try variant='inlier')"
    assert rest_text(text, task="regression").endswith(
        '(try `analyses.params.nmerci.variant = "inlier"`)'
    )
    # booleans are JSON: true/false
    group = "draws without replacement (draw_with_replacement=True allows up to 2^53)"
    assert "`analyses.params.adversarial_group_calibration.draw_with_replacement = true`" in (
        rest_text(group, task="regression")
    )
    # "pass levels": set the option
    levels = "no pair of levels (p, 1 − p); pass levels"
    got = rest_text(levels, task="regression", metric="interval_score")
    assert got.endswith("set `analyses.params.interval_score.levels`")


def test_integer_weights_reason_names_the_options_and_the_weights() -> None:
    pred, _ = make_prediction("gaussian", 8)
    w = np.full(8, 0.5)
    why = registry.get("ause", "regression").why_not(
        pred, sample_weight=w, params={"error": "rmse"}
    )
    assert why is not None and "error='rmse'" in why
    got = rest_text(why, task="regression", metric="ause")
    assert '`analyses.params.ause.error = "rmse"`' in got and "sample_weight[0] = 0.5" in got
    assert not PYTHON.search(got)


def test_rank_note_and_stability_tolerance_say_what_the_api_offers() -> None:
    assert (
        "simultaneous=True" in MULTIPLE_COMPARISON_NOTE and "compare()" in MULTIPLE_COMPARISON_NOTE
    )
    got = rest_text(MULTIPLE_COMPARISON_NOTE, task="regression", origin="leaderboard")
    assert "POST /v1/comparisons" in got and not PYTHON.search(got), got
    assert got.startswith(MULTIPLE_COMPARISON_NOTE.split(" For simultaneous")[0])
    # a full-set value near 0: uqcore advises an absolute tolerance, which the API lacks
    y = np.linspace(-1, 1, 64)
    st = convergence(P.Gaussian(y.copy(), np.ones(64)), y, ["mae"], repeats=5)
    note = next(w for w in st["mae"]["warnings"] if "tolerance" in w)
    assert "tolerance_type='absolute'" in note
    got = rest_text(note, task="regression")
    assert "absolute scale from the subset quantiles" in got and not PYTHON.search(got)


def test_texts_without_keywords_are_unchanged_and_translation_is_idempotent() -> None:
    plain = "r2 is undefined: the targets are constant (zero variance)"
    assert rest_text(plain, task="regression") == plain
    once = rest_text("mdae bootstrap: x; prefer method='bca'", task="regression")
    assert rest_text(once, task="regression") == once


def test_rest_document_uses_the_metric_keys_as_context() -> None:
    doc = {
        "not_applicable": {"auroc_ood": "auroc_ood needs ood, which was not given (pass ood=...)"},
        "stability": {"results": {"nmerci": {"warnings": ["undefined (try variant='inlier')"]}}},
        "warnings": ["x"],
    }
    got = rest_document(doc, task="classification", origin="submission")
    assert got["not_applicable"]["auroc_ood"].endswith("(send `ood` with the submission)")
    reg = rest_document(doc, task="regression", origin="submission")
    assert reg["stability"]["results"]["nmerci"]["warnings"] == [
        'undefined (try `analyses.params.nmerci.variant = "inlier"`)'
    ]
    assert doc["warnings"] == ["x"] and "pass ood" in doc["not_applicable"]["auroc_ood"]


# -- registry-wide: real result documents --------------------------------------------------

BACKEND = select_backend("numpy")

ANALYSES = [
    {
        "metrics": "all",
        "bootstrap": {"n_resamples": 20},
        "stability": {"enabled": True, "repeats": 3},
    },
    {"metrics": "all", "bootstrap": {"n_resamples": 20, "method": "bca"}},
]


def _regression(kind: str, case: str) -> dict[str, np.ndarray]:
    n = {"plain": 30, "ties": 6, "constant": 12, "weights": 20, "perfect": 16}[case]
    pred, y = make_prediction(kind, n, seed=3, ties=case == "ties")
    arrays = {k: np.asarray(v) for k, v in pred.arrays().items()}
    if case == "constant":
        y = np.zeros(n)
    if case == "perfect" and "mean" in pred.capabilities:
        y = np.asarray(pred.mean(), dtype=np.float64)  # errors near 0: values near 0
    arrays["y"] = np.asarray(y, dtype=np.float64)
    if case == "weights":
        arrays["sample_weight"] = np.linspace(0.5, 2.5, n)
    return arrays


def _classification(kind: str, case: str) -> dict[str, np.ndarray]:
    n = {"plain": 30, "targets": 30, "ties": 8, "weights": 20}[case]
    pred, labels, targets = make_classification(kind, n, seed=4, ties=case == "ties")
    arrays = {k: np.asarray(v) for k, v in pred.arrays().items()}
    arrays.update({f"estimate:{k}": np.asarray(v) for k, v in pred.estimates.items()})
    arrays["labels"] = labels
    if case in ("targets", "weights"):
        arrays.update(targets)
    if case == "weights":
        arrays["sample_weight"] = np.linspace(0.5, 2.5, n)
    return arrays


def _cases() -> list[Any]:
    out = []
    for kind in REGRESSION_KINDS:
        for case in ("plain", "ties", "constant", "weights", "perfect"):
            out.append(pytest.param(kind, case, id=f"{kind}-{case}"))
    for kind in sorted(CLASSIFICATION_KINDS):
        for case in ("plain", "targets", "ties", "weights"):
            out.append(pytest.param(kind, case, id=f"{kind}-{case}"))
    return out


def _result(kind: str, arrays: dict[str, Any], analyses: dict[str, Any], **kw: Any) -> Any:
    return compute(
        kind,
        arrays,
        Analyses.from_document(analyses),
        backend=BACKEND,
        checkpoint=lambda p: None,
        **kw,
    )


@pytest.mark.parametrize(("kind", "case"), _cases())
def test_no_result_text_is_a_python_keyword(kind: str, case: str) -> None:
    classification = kind in CLASSIFICATION_KINDS
    arrays = _classification(kind, case) if classification else _regression(kind, case)
    extra = [{"metrics": "all", "estimators": "all"}] if classification else []
    runs = [(a, "submission") for a in [*ANALYSES, *extra]]
    if case == "plain":  # a benchmark's wording too
        runs.append((ANALYSES[0], "benchmark"))
    for analyses, origin in runs:
        doc = _result(kind, arrays, analyses, origin=origin)
        assert not python_words(doc), (analyses, origin, python_words(doc))


def test_specific_notes_name_the_field() -> None:
    # a probs submission without soft labels or OOD flags
    doc = _result("probs", _classification("probs", "plain"), {"metrics": "all"})
    na = doc["not_applicable"]
    assert na["aleatoric_rank_corr"].endswith("(send `soft_labels` with the submission)")
    assert na["auroc_ood"].endswith("(send `ood` with the submission)")
    # the same on a benchmark: its registration holds them
    doc = _result(
        "probs", _classification("probs", "plain"), {"metrics": "all"}, origin="benchmark"
    )
    assert "the benchmark holds no `soft_labels`" in doc["not_applicable"]["aleatoric_rank_corr"]
    # a biased percentile interval: the request's bootstrap method
    doc = _result(
        "gaussian",
        _regression("gaussian", "constant"),
        {"metrics": ["mdae"], "bootstrap": {"n_resamples": 50}},
    )
    assert any(w.endswith('prefer `analyses.bootstrap.method = "bca"`') for w in doc["warnings"])
    # fractional weights and an option that needs integer ones
    arrays = _regression("gaussian", "weights")
    doc = _result("gaussian", arrays, {"metrics": "all", "params": {"ause": {"error": "rmse"}}})
    assert '`analyses.params.ause.error = "rmse"`' in doc["not_applicable"]["ause"]
