"""uqcore's messages in the words of the REST API: the one place where they are translated.

uqcore speaks to Python callers: a metric that needs soft labels says ``(pass
soft_labels=...)``, a shifted bootstrap interval ``prefer method='bca'``, an option
``try variant='inlier'``. A client of the API sets request fields instead, so every note,
not-applicable reason and error text that reaches an answer (result documents, comparison and
leaderboard rank documents, failed jobs, 422s) goes through :func:`rest_text`, which names the
field to set given where the text is read (:data:`Origin`):

- an input of the submission (``soft_labels``, ``ood``, ``sample_weight``, ``groups``): "send
  `soft_labels` with the submission" (on a benchmark: "the benchmark holds no `soft_labels`");
- a metric option ``opt=value``: `analyses.params.<metric>.<opt> = <JSON value>` (on a
  benchmark: the benchmark's `params.<metric>.<opt>`), the metric found from the context or
  the text;
- the bootstrap interval method: `analyses.bootstrap.method` (a benchmark's
  `bootstrap.method`; a comparison's `method`);
- options the API does not offer (the stability study's tolerance, simultaneous rank
  intervals): what to do instead.

uqcore's own messages stay as they are for Python users.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from uqcore import registry
from uqcore.registry import did_you_mean

__all__ = ["INPUTS", "Origin", "did_you_mean", "rest_document", "rest_text"]

#: Where a text is read: a submission's own analyses (inline targets), a submission on a
#: benchmark (the benchmark sets its analyses), a comparison, a leaderboard's rank document.
Origin = Literal["submission", "benchmark", "comparison", "leaderboard"]

#: Arrays a request sends beside the prediction that uqcore takes as keyword arguments.
INPUTS = frozenset({"soft_labels", "ood", "sample_weight", "groups"})

# A Python keyword argument in a message: name=value (a quoted string, a bool, None, ..., a
# number, or a placeholder such as <int>).
_VALUE = r"'[^']*'|\"[^\"]*\"|True|False|None|\.\.\.|<[a-z]+>|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
_KEYWORD = re.compile(rf"(?<![\w.`])([a-z_][a-z0-9_]*)=({_VALUE})")
_PASS_INPUT = re.compile(r"\(pass ([a-z_]+)=\.\.\.\)")
_PASS_OPTION = re.compile(r"\bpass ([a-z_]+)\b")
_NUMERIC_OPTION = re.compile(r"\bgive a numeric ([a-z_]+)\b")
_BOOTSTRAP_METHOD = re.compile(r"(?<![\w.`])method=('bca'|'percentile')")
_WORD = re.compile(r"[a-z][a-z0-9_]*")

# uqcore.stability.compare.MULTIPLE_COMPARISON_NOTE's advice: the API has no simultaneous
# intervals, and its pairwise comparison is a route.
_SIMULTANEOUS = re.compile(
    r"For simultaneous intervals use simultaneous=True \(.*?\); for a decision between two "
    r"given models use compare\(\), whose p-value is for that one pre-chosen pair\.",
    re.S,
)
_SIMULTANEOUS_REST = (
    "The API offers no simultaneous intervals; for a decision between two given models use "
    "POST /v1/comparisons, whose p-value is for that one pre-chosen pair (and whose "
    "p_value_adjusted accounts for every pair it compares)."
)
# uqcore.stability.convergence: the API's stability study uses the relative tolerance.
_TOLERANCE = re.compile(r"use tolerance_type='absolute'")
_TOLERANCE_REST = (
    "judge it on an absolute scale from the subset quantiles (`quantiles`) instead; the "
    "minimum reliable size here uses a relative tolerance of 10%"
)


def _json(value: str) -> str:
    """A Python literal of a message as JSON (``'bca'`` -> ``"bca"``, True -> true)."""
    if value.startswith(("'", '"')):
        return json.dumps(value[1:-1])
    if value.startswith("<"):
        return {"<int>": "an integer", "<float>": "a number"}.get(value, value[1:-1])
    return {"True": "true", "False": "false", "None": "null", "...": "…"}.get(value, value)


@functools.lru_cache(maxsize=8)
def _options(task: str) -> dict[str, frozenset[str]]:
    """Metric name -> its option names, for the metrics of ``task``."""
    return {s.name: frozenset(s.options) for s in registry.specs(task)}


def _metric_of(
    option: str, task: str, metric: str | None, text: str, metrics: Sequence[str]
) -> str | None:
    """The metric whose ``option`` a message means: the context's, else the first metric
    named in the text, else the one asked metric that has it, else the one metric of the task
    that has it; None when that is ambiguous."""
    options = _options(task)
    if metric is not None and option in options.get(metric.split("[")[0], ()):
        return metric.split("[")[0]
    for word in _WORD.findall(text):
        if option in options.get(word, ()):
            return str(word)
    pool: Iterable[str]
    for pool in (metrics, options):
        having = [m for m in pool if option in options.get(m, ())]
        if len(having) == 1:
            return having[0]
    return None


def _param(option: str, metric: str | None, origin: Origin, value: str | None = None) -> str:
    """The field of metric option ``option`` (= ``value``, as JSON), as a client sets it."""
    name = metric or "<metric>"
    path = f"analyses.params.{name}.{option}"
    if origin != "submission":
        path = f"params.{name}.{option}"
    if value is None:
        field = f"`{path}`"
    elif value.startswith("<"):  # a placeholder: "`path` = an integer"
        field = f"`{path}` = {_json(value)}"
    else:
        field = f"`{path} = {_json(value)}`"
    return field if origin == "submission" else f"the benchmark's {field}"


def _bootstrap_method(value: str, origin: Origin) -> str:
    if origin == "submission":
        return f"`analyses.bootstrap.method = {_json(value)}`"
    if origin == "comparison":
        return f"`method = {_json(value)}` (POST /v1/comparisons)"
    return f"the benchmark's `bootstrap.method = {_json(value)}`"


def _input(name: str, origin: Origin) -> str:
    if origin == "submission":
        return f"send `{name}` with the submission"
    return f"the benchmark holds no `{name}`; it is given when the benchmark is registered"


def rest_text(
    message: str,
    *,
    task: str,
    origin: Origin = "submission",
    metric: str | None = None,
    metrics: Iterable[str] = (),
) -> str:
    """``message`` (a uqcore text) with every Python keyword argument replaced by the request
    field a client sets; ``metric`` is the metric the text is about (when the caller knows
    it), ``metrics`` those the request asked for (to find the metric of an option the text
    does not place)."""
    asked = [] if isinstance(metrics, str) else list(metrics)
    out = _SIMULTANEOUS.sub(_SIMULTANEOUS_REST, message)
    out = out.replace("use compare()", "use POST /v1/comparisons")
    out = _TOLERANCE.sub(_TOLERANCE_REST, out)
    out = _PASS_INPUT.sub(
        lambda m: f"({_input(m[1], origin)})" if m[1] in INPUTS else m[0],
        out,
    )
    out = _BOOTSTRAP_METHOD.sub(lambda m: _bootstrap_method(m[1], origin), out)

    def option_phrase(m: re.Match[str], verb: str, tail: str = "") -> str:
        which = _metric_of(m[1], task, metric, message, asked)
        if which is None and not any(m[1] in o for o in _options(task).values()):
            return m[0]  # not an option: leave the words alone
        return f"{verb} {_param(m[1], which, origin)}{tail}"

    out = _PASS_OPTION.sub(lambda m: option_phrase(m, "set"), out)
    out = _NUMERIC_OPTION.sub(lambda m: option_phrase(m, "set", " to a number"), out)

    def keyword(m: re.Match[str]) -> str:
        name, value = m[1], m[2]
        if name in INPUTS:
            return f"`{name}`"
        which = _metric_of(name, task, metric, message, asked)
        if which is None and not any(name in o for o in _options(task).values()):
            return f"`{name} = {_json(value)}`"
        return _param(name, which, origin, value)

    return _KEYWORD.sub(keyword, out)


#: Values that hold no text to translate (the leaves of most of a document).
_LEAVES = (float, int, bool, type(None))


def rest_document(
    doc: Any,
    *,
    task: str,
    origin: Origin,
    metrics: Iterable[str] = (),
    _metric: str | None = None,
) -> Any:
    """A copy of a result, comparison or rank document with its texts in REST words: every
    string of a ``warnings`` list, every reason of ``not_applicable`` and the
    ``multiple_comparison_note`` (:func:`rest_text`). Under a key that names a metric (an
    entry of ``metrics``, ``not_applicable``, a stability or comparison entry) that metric is
    the texts' context. One walk of the document (numbers returned as they are: a worker's
    result has hundreds of them)."""
    asked = list(metrics)
    names = _options(task)

    def text(s: str, metric: str | None) -> str:
        return rest_text(s, task=task, origin=origin, metric=metric, metrics=asked)

    def metric_of(key: str) -> str | None:
        name = key.split("[")[0]
        return name if name in names else None

    def walk(node: Any, metric: str | None) -> Any:
        if type(node) in _LEAVES:
            return node
        if type(node) is dict or isinstance(node, Mapping):
            out: dict[str, Any] = {}
            for key, value in node.items():
                if key == "warnings" and isinstance(value, list):
                    out[key] = [text(v, metric) if isinstance(v, str) else v for v in value]
                elif key == "not_applicable" and isinstance(value, Mapping):
                    out[key] = {
                        k: text(v, metric_of(k)) if isinstance(v, str) else v
                        for k, v in value.items()
                    }
                elif key == "multiple_comparison_note" and isinstance(value, str):
                    out[key] = text(value, metric)
                elif key == "curves":  # numbers only, possibly N of them
                    out[key] = value
                else:
                    out[key] = walk(value, metric_of(str(key)) or metric)
            return out
        if isinstance(node, list):
            if not node or not isinstance(node[0], (Mapping, list)):
                return node  # a list of numbers (a path, quantiles): nothing to translate
            return [walk(v, metric) for v in node]
        return node

    return walk(doc, _metric)
