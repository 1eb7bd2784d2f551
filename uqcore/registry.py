"""The metric catalogue: one :class:`MetricSpec` per metric name, the single source of names.

A metric is registered with :func:`register`, which records what it needs, its direction,
bounds, default parameters (from the implementation's keyword-only arguments), its one-line
summary (the docstring's first line), its reference and whether its estimator is biased, and
returns the public function ``name(prediction, y, *, sample_weight=None, **options)``. The
API's catalogue, the worker, the docs and the registry-wide tests all read :func:`specs`;
nothing else lists metrics, and code that needs a fact about a metric asks its spec (e.g. the
lower-is-better sort key of comparisons and leaderboards, :meth:`MetricSpec.badness`).

Implementations have the signature ``impl(batch, *, option=default, ...)`` and return a float,
``None`` (undefined on this input; they warn with :class:`UndefinedMetricWarning`), or a dict
with a ``"value"`` entry (the scalar summary) and further JSON-serialisable details.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar

import array_api_compat
import numpy as np

from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError, first_bad
from uqcore.batch import make_batch
from uqcore.options import Option, options_of

__all__ = [
    "INVARIANCES",
    "NO_TERMS",
    "SCALING_LAWS",
    "IntegerWeights",
    "MetricSpec",
    "MetricValue",
    "ScalingLaw",
    "UndefinedMetricWarning",
    "get",
    "names",
    "register",
    "specs",
    "undefined",
    "undefined_message",
]

MetricValue = float | None | dict[str, Any]
Direction = Literal["lower", "higher", "target"]

#: How a regression metric's value θ changes when the targets and the prediction — its
#: locations, scales, quantiles, draws, point and uncertainty — are all multiplied by c > 0
#: (a change of units): :attr:`MetricSpec.scaling`.
ScalingLaw = Literal["invariant", "equivariant", "quadratic", "log"]

#: Each scaling law as a formula in θ = the value on the unscaled data.
SCALING_LAWS: Mapping[str, str] = MappingProxyType(
    {
        "invariant": "θ (unchanged)",
        "equivariant": "c·θ (in the units of y)",
        "quadratic": "c²·θ (in the units of y²)",
        "log": "θ + log c (a log score: the density scales by 1/c)",
    }
)

#: A float or an array of floats (:meth:`MetricSpec.badness` keeps the type).
Values = TypeVar("Values", float, np.ndarray[Any, Any])

#: Properties checked for every metric by the registry-wide tests; a metric that does not
#: have one by definition lists it in ``exempt`` with the reason.
INVARIANCES = (
    "order",  # permuting rows changes nothing
    "unit_weights",  # sample_weight=None equals sample_weight=ones
    "repeat_rows",  # an integer weight k equals k copies of the row
    "zero_weight",  # a zero weight equals dropping the row
    "scale_weights",  # multiplying all weights by c > 0 changes nothing
)


@dataclass(frozen=True)
class IntegerWeights:
    """A metric's need for integer sample weights (:attr:`MetricSpec.integer_weights`).

    ``why`` says why, in words that complete "needs integer sample weights (...)"; ``when``
    names the option values under which the need holds (empty: under every option), e.g.
    ``{"error": "rmse", "grid": "exact"}``.
    """

    why: str
    when: Mapping[str, Any] = field(default_factory=dict)

    def applies(self, params: Mapping[str, Any]) -> bool:
        """Whether the need holds under the (resolved) options ``params``."""
        return all(params.get(k) == v for k, v in self.when.items())


#: What a metric's ``mean_terms`` returns where the metric is undefined on the batch: not
#: per-row terms (shape (N,)), so resampling evaluates the metric itself, which says why.
NO_TERMS: np.ndarray[Any, Any] = np.zeros(0)


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined on this input; its value is reported as ``None``."""


def undefined(name: str, why: str) -> None:
    """Warn that metric ``name`` is undefined (``why``); implementations then return ``None``."""
    warnings.warn(undefined_message(name, why), UndefinedMetricWarning, stacklevel=3)


def undefined_message(name: str, why: str) -> str:
    """The text of :func:`undefined`'s warning (the stability engine reports the same text).

    >>> undefined_message("r2", "the targets are constant")
    'r2 is undefined: the targets are constant'
    """
    return f"{name} is undefined: {why}"


@dataclass(frozen=True)
class MetricSpec:
    """Everything the catalogue knows about one metric."""

    name: str
    impl: Callable[..., MetricValue] = field(repr=False)
    task: str
    family: str
    needs: frozenset[str]
    direction: Direction
    bounds: tuple[float | None, float | None]
    best: float | None
    defaults: Mapping[str, Any]
    summary: str
    reference: str
    exempt: Mapping[str, str]
    structured: bool
    mean_terms: Callable[..., Any] | None = field(default=None, repr=False)
    finalize: Callable[[float], float] | None = field(default=None, repr=False)
    #: The estimator has a known finite-sample bias (binned or rank-based): its bootstrap
    #: percentile intervals may be shifted and under-cover at small N (xiong2024 §V-A); the
    #: stability results say so.
    biased: bool = False
    #: The domain of each option (type, range, choices), read from the implementation's
    #: annotations (:mod:`uqcore.options`); :meth:`resolve_params` checks values against it.
    options: Mapping[str, Option] = field(default_factory=dict, repr=False)
    #: Checks that span several options (e.g. ``coverage``'s ``level`` must be one of its
    #: ``levels``): called with the resolved options, raises :class:`UQValidationError`.
    check_options: Callable[[Mapping[str, Any]], None] | None = field(default=None, repr=False)
    #: Options that may be given one value per row (a sequence of length N that belongs to the
    #: rows, e.g. ``nll``'s per-row kernel bandwidth): resampling takes them with the rows.
    row_options: frozenset[str] = frozenset()
    #: ``None`` when any valid sample weights do (finite, >= 0, not all 0); otherwise the
    #: metric counts whole rows (e.g. it draws groups of rows, a row of weight k being k rows)
    #: and applies only to integer weights, under the options that :class:`IntegerWeights`
    #: names. :meth:`why_not` checks it when given the weights: ``evaluate(metrics="all")``
    #: then lists the metric as not applicable instead of failing.
    integer_weights: IntegerWeights | None = None
    #: How the value changes when y and the prediction are multiplied by c > 0
    #: (:data:`SCALING_LAWS`), under the default options (the docstring says which options
    #: change it, e.g. ``ause`` with ``normalize=False`` is equivariant); ``None`` where the
    #: data have no such scale (classification: probabilities). The registry-wide tests
    #: check it at 1e±300 for every metric and prediction kind; values of any magnitude are
    #: computed without overflow or underflow (:mod:`uqcore._scaling`).
    scaling: ScalingLaw | None = None
    #: ``start(batch, **options)``, when given: does what needs the batch (validation, the
    #: shared arrays it reads) and returns the callable that finishes the metric, whose
    #: remaining work (N-independent, without the GIL) may run meanwhile in a helper thread
    #: (:mod:`uqcore._background`); ``evaluate`` calls it in the metric's turn and the
    #: callable after the other metrics. The value is ``impl``'s, which stays the one path of
    #: a single call.
    start: Callable[..., Callable[[], MetricValue]] | None = field(default=None, repr=False)

    def why_not(
        self,
        prediction: Any,
        targets: frozenset[str] = frozenset(),
        sample_weight: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> str | None:
        """``None`` if the metric applies to ``prediction``, else the reason it does not.

        ``targets`` names the optional targets given with the batch (classification: ``"ood"``,
        ``"soft_labels"``); a metric that needs one that is missing does not apply.
        ``sample_weight`` (optional; any array or sequence) and the metric's options ``params``
        (optional; the defaults fill in the rest) decide :attr:`integer_weights`: a metric
        that needs integer weights does not apply to weights with a fractional entry.
        """
        if sample_weight is None:
            # a function of the prediction's task, kind and capabilities and the targets:
            # remembered per spec (evaluate asks it of every metric on every call)
            key = (
                getattr(prediction, "task", "regression"),
                getattr(prediction, "kind", None),
                getattr(prediction, "capabilities", None),
                targets,
            )
            memo = self._why_not_memo
            try:
                if key not in memo:
                    memo[key] = self._why_not(prediction, targets)
                return memo[key]
            except TypeError:  # a part that cannot be hashed (not a uqcore prediction)
                return self._why_not(prediction, targets)
        reason = self._why_not(prediction, targets)
        if reason is None and self.integer_weights is not None:
            return self._why_not_weights(sample_weight, params)
        return reason

    @functools.cached_property
    def _why_not_memo(self) -> dict[tuple[Any, ...], str | None]:
        return {}

    def _why_not(self, prediction: Any, targets: frozenset[str]) -> str | None:
        """:meth:`why_not` but for the weights."""
        task = str(getattr(prediction, "task", "regression"))
        if task != self.task:
            return (
                f"{self.name} is a {self.task} metric and a {prediction.kind} prediction is a "
                f"{task} prediction"
            )
        absent = sorted(self.needs & _TARGETS - targets)
        if absent:
            return (
                f"{self.name} needs {', '.join(absent)}, which was not given (pass {absent[0]}=...)"
            )
        missing = sorted(self.needs - _TARGETS - prediction.capabilities)
        if missing:
            return (
                f"{self.name} needs {', '.join(missing)}, which a {prediction.kind} prediction "
                "does not provide"
            )
        return None

    def _why_not_weights(self, sample_weight: Any, params: Mapping[str, Any] | None) -> str | None:
        rule = self.integer_weights
        assert rule is not None
        if not rule.applies({**self.defaults, **(params or {})}):
            return None
        w = sample_weight
        if not array_api_compat.is_array_api_obj(w):
            try:
                w = np.asarray(w, dtype=np.float64)
            except (TypeError, ValueError):
                return None  # not numbers: the weights' own validation says so
        xp = array_api_compat.array_namespace(w)
        idx = first_bad(w == xp.floor(w))
        if idx is None:
            return None
        where = ""
        if rule.when:
            where = " with " + ", ".join(f"{k}={v!r}" for k, v in rule.when.items())
        value = float(to_numpy(w)[idx])
        return (
            f"{self.name}{where} needs integer sample weights ({rule.why}); "
            f"sample_weight[{idx[0]}] = {value:.6g}"
        )

    def resolve_params(
        self, params: Mapping[str, Any] | None, n: int | None = None
    ) -> dict[str, Any]:
        """Defaults updated with ``params``, each value checked against its option's domain
        (:attr:`options`); an unknown name or a value outside the domain raises
        :class:`UQValidationError` (``argument`` names the option). With ``n`` (the batch's
        rows), an option given per row (:attr:`row_options`) must have one value per row.

        >>> get("pit").resolve_params({"n_bins": 20})
        {'n_bins': 20, 'p_value': 'auto'}
        >>> get("pit").resolve_params({"n_bins": 0})
        Traceback (most recent call last):
        ...
        uqcore._validation.UQValidationError: metric 'pit': n_bins must be an integer in [1, 10000]; found 0
        """
        if not params and (n is None or not self.row_options):
            return dict(self._checked_defaults)
        params = dict(params or {})
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            allowed = ", ".join(sorted(self.defaults)) or "none"
            raise UQValidationError(
                f"unknown parameter(s) {', '.join(map(repr, unknown))} for metric {self.name!r}; "
                f"allowed: {allowed}",
                argument=unknown[0],
            )
        checked = {key: self.options[key].check(value) for key, value in params.items()}
        resolved = {**self.defaults, **checked}
        if self.check_options is not None:
            self.check_options(resolved)
        for key in self.row_options if n is not None else ():
            value = resolved[key]
            if isinstance(value, (list, tuple, np.ndarray)) and len(value) != n:
                raise UQValidationError(
                    f"metric {self.name!r}: {key} given per row must have one value per row: "
                    f"{n} rows, found {len(value)} values",
                    argument=key,
                )
        return resolved

    @functools.cached_property
    def _checked_defaults(self) -> dict[str, Any]:
        """The defaults, passed through :attr:`check_options` once (``evaluate`` resolves
        every metric's options on every call, nearly always to the defaults)."""
        resolved = dict(self.defaults)
        if self.check_options is not None:
            self.check_options(resolved)
        return resolved

    def reported_params(
        self, resolved: dict[str, Any], given: Any, to_json: Callable[..., Any]
    ) -> dict[str, Any]:
        """``resolved`` (the options of one call, from :meth:`resolve_params`) as a report
        lists them: ``to_json(value, where, notes)`` (the report's ``json_safe``) converts
        numpy values to Python ones. Where no options were ``given`` they are the defaults,
        converted once per process and copied for each report (lists included: a caller may
        change its report's)."""
        if given:
            out: dict[str, Any] = to_json(resolved, self.name, [])
            return out
        memo = self._reported_memo
        if not memo:
            memo.append(_json_shape(to_json(self._checked_defaults, self.name, [])))
        defaults, shape = memo[0]
        if shape == "flat":  # numbers and strings only: a copy of the dict is a fresh one
            return dict(defaults)
        if shape == "lists":
            return {k: list(v) if type(v) is list else v for k, v in defaults.items()}
        fresh: dict[str, Any] = _fresh(defaults)
        return fresh

    @functools.cached_property
    def _reported_memo(self) -> list[tuple[dict[str, Any], str]]:
        return []

    def target(self, params: Mapping[str, Any] | None = None) -> float:
        """The best value of a "target" metric under ``params``.

        The registry's ``best`` is for the default options. When it equals the default of a
        numeric option (e.g. ``coverage``: best 0.95 = the default ``level``), the best value
        follows that option when it is changed.

        >>> spec = get("coverage")
        >>> spec.target(), spec.target({"level": 0.8})
        (0.95, 0.8)
        """
        if self.best is None:
            raise UQValidationError(
                f"metric {self.name!r} has direction 'target' but no best value to compare with"
            )
        params = params or {}
        for key, default in self.defaults.items():
            if (
                isinstance(default, float)
                and default == self.best
                and isinstance(params.get(key), (int, float))
            ):
                return float(params[key])
        return float(self.best)

    def badness(self, value: Values, params: Mapping[str, Any] | None = None) -> Values:
        """``value`` as a sort key where lower is better, whatever the metric's direction:
        θ for "lower", −θ for "higher", |θ − target| for "target" (the best value under
        ``params``, :meth:`target`). Elementwise on an array of values.

        >>> get("mae").badness(0.5), get("r2").badness(0.5)
        (0.5, -0.5)
        >>> get("coverage").badness(0.75), get("coverage").badness(0.75, {"level": 0.5})
        (0.19999999999999996, 0.25)
        """
        if self.direction == "lower":
            return value
        if self.direction == "higher":
            return -value
        return abs(value - self.target(params))

    def describe(self) -> dict[str, Any]:
        """A JSON-serialisable description (for the catalogue endpoint and docs)."""
        return {
            "name": self.name,
            "task": self.task,
            "family": self.family,
            "needs": sorted(self.needs),
            "direction": self.direction,
            "bounds": list(self.bounds),
            "best": self.best,
            "defaults": dict(self.defaults),
            "options": {key: option.schema() for key, option in self.options.items()},
            "summary": self.summary,
            "reference": self.reference,
            "structured": self.structured,
        }


_REGISTRY: dict[tuple[str, str], MetricSpec] = {}

#: Needs that are optional targets of a batch rather than capabilities of a prediction.
_TARGETS = frozenset({"ood", "soft_labels"})


def register(
    name: str,
    *,
    family: str,
    needs: Iterable[str],
    direction: Direction,
    reference: str,
    bounds: tuple[float | None, float | None] = (None, None),
    best: float | None = None,
    task: str = "regression",
    exempt: Mapping[str, str] | None = None,
    structured: bool = False,
    mean_terms: Callable[..., Any] | None = None,
    finalize: Callable[[float], float] | None = None,
    biased: bool = False,
    check_options: Callable[[Mapping[str, Any]], None] | None = None,
    row_options: Iterable[str] = (),
    integer_weights: IntegerWeights | None = None,
    scaling: ScalingLaw | None = None,
    start: Callable[..., Callable[[], MetricValue]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``impl(batch, *, options...)`` under ``name`` and return its public function.

    ``mean_terms(batch, **options)``, when given, returns per-row terms t_i (shape (N,)) such that
    the metric equals ``finalize(Σ w_i t_i / Σ w_i)`` (``finalize`` defaults to the identity),
    or :data:`NO_TERMS` where the metric is undefined on the batch.
    Resampling uses it to compute a whole block of resamples as one matrix product; a test
    checks that it agrees with ``impl`` for every metric that declares it. ``biased`` marks an
    estimator with a known finite-sample bias (:attr:`MetricSpec.biased`); ``integer_weights``
    a metric that applies only to integer sample weights (:attr:`MetricSpec.integer_weights`);
    ``scaling`` how the value changes with the units of the data (:attr:`MetricSpec.scaling`,
    required for regression metrics); ``row_options`` names the options that may be given per
    row (:attr:`MetricSpec.row_options`); ``start`` lets ``evaluate`` finish the metric after
    the others (:attr:`MetricSpec.start`).

    Each option's domain is read from its annotation (:mod:`uqcore.options`);
    ``check_options(resolved)`` checks what spans several options.
    """

    def decorate(impl: Callable[..., Any]) -> Callable[..., Any]:
        if (task, name) in _REGISTRY:
            raise RuntimeError(f"{task} metric {name!r} is registered twice")
        sig = inspect.signature(impl)
        params = list(sig.parameters.values())
        defaults = {
            p.name: p.default
            for p in params[1:]
            if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty
        }
        bad = [p.name for p in params[1:] if p.name not in defaults]
        if bad:
            raise RuntimeError(
                f"metric {name!r}: options must be keyword-only with defaults: {bad}"
            )
        for key in exempt or {}:
            if key not in INVARIANCES:
                raise RuntimeError(f"metric {name!r}: unknown invariance {key!r}")
        per_row = frozenset(row_options)
        if not per_row <= set(defaults):
            raise RuntimeError(f"metric {name!r}: row_options must name options: {per_row}")
        if (scaling is None) != (task != "regression") or (
            scaling is not None and scaling not in SCALING_LAWS
        ):
            raise RuntimeError(
                f"metric {name!r}: scaling must be one of {sorted(SCALING_LAWS)} for a "
                f"regression metric and None otherwise, found {scaling!r}"
            )
        for key in integer_weights.when if integer_weights else {}:
            if key not in defaults:
                raise RuntimeError(f"metric {name!r}: integer_weights names unknown option {key!r}")
        doc = inspect.getdoc(impl) or ""
        spec = MetricSpec(
            name=name,
            impl=impl,
            task=task,
            family=family,
            needs=frozenset(needs),
            direction=direction,
            bounds=bounds,
            best=best,
            defaults=MappingProxyType(defaults),
            summary=doc.splitlines()[0] if doc else name,
            reference=reference,
            exempt=MappingProxyType(dict(exempt or {})),
            structured=structured,
            mean_terms=mean_terms,
            finalize=finalize,
            biased=biased,
            options=MappingProxyType(options_of(name, impl, defaults)),
            check_options=check_options,
            row_options=per_row,
            integer_weights=integer_weights,
            scaling=scaling,
            start=start,
        )
        _REGISTRY[(task, name)] = spec

        @functools.wraps(impl)
        def public(prediction: Any, y: Any, *, sample_weight: Any = None, **options: Any) -> Any:
            targets = {k: options.pop(k) for k in ("ood", "soft_labels") if k in options}
            batch = make_batch(prediction, y, sample_weight, **targets)
            return call(spec, batch, options)

        public_params = [
            inspect.Parameter("prediction", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("y", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            inspect.Parameter("sample_weight", inspect.Parameter.KEYWORD_ONLY, default=None),
            *params[1:],
        ]
        public.__signature__ = sig.replace(parameters=public_params)  # type: ignore[attr-defined]
        public.spec = spec  # type: ignore[attr-defined]
        return public

    return decorate


def call(spec: MetricSpec, batch: Any, options: Mapping[str, Any] | None = None) -> MetricValue:
    """Run ``spec`` on ``batch``: check applicability and options, then the implementation."""
    targets: frozenset[str] = getattr(batch, "targets", frozenset())
    reason = spec.why_not(batch.prediction, targets, batch.weights, options)
    if reason is not None:
        raise UQValidationError(reason)
    return spec.impl(batch, **spec.resolve_params(options, batch.n))


def get(name: str, task: str | None = None) -> MetricSpec:
    """The spec of metric ``name``; unknown names raise :class:`UQValidationError`.

    Names are unique within a task; ``"ece"`` and ``"nll"`` exist for regression and for
    classification, and ``task`` chooses between them. Without ``task`` (or when ``task`` has
    no such metric) the regression metric is preferred, then the one task that has the name;
    :meth:`MetricSpec.why_not` then reports a task that does not match the prediction.
    """
    _ensure_loaded()
    if task is not None and (task, name) in _REGISTRY:
        return _REGISTRY[(task, name)]
    if ("regression", name) in _REGISTRY:
        return _REGISTRY[("regression", name)]
    found = [s for (_, n), s in _REGISTRY.items() if n == name]
    if found:
        return found[0]
    raise UQValidationError(unknown_metric_message(name, task), argument="metrics", value=name)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` did you mean 'crps'?`` for the candidates closest to ``name`` (difflib's ratio of at
    least 0.6, at most three), or ``""`` when none is close.

    >>> did_you_mean("crsp", ["crps", "mae", "nll"])
    " did you mean 'crps'?"
    """
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return " did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_metric_message(name: str, task: str | None = None) -> str:
    """Why ``name`` is no metric: the closest names and the metrics of ``task`` (of every
    task without one).

    >>> unknown_metric_message("crsp", "regression").split(" known")[0]
    "unknown metric 'crsp'; did you mean 'crps'?"
    """
    known = names(task) if task in ("regression", "classification") else sorted(names())
    which = f"{task} metrics" if task in ("regression", "classification") else "metrics"
    return f"unknown metric {name!r};{did_you_mean(name, known)} known {which}: {', '.join(known)}"


def specs(task: str | None = None) -> list[MetricSpec]:
    """All registered specs (of one task), sorted by family then name."""
    _ensure_loaded()
    out = [s for s in _REGISTRY.values() if task is None or s.task == task]
    return sorted(out, key=lambda s: (s.task, s.family, s.name))


def names(task: str | None = None) -> list[str]:
    """All registered metric names (of one task; without a task each name once)."""
    return list(dict.fromkeys(s.name for s in specs(task)))


#: Set once the metric modules are imported (:func:`_ensure_loaded`).
_LOADED: list[bool] = []


def _ensure_loaded() -> None:
    # Importing the metric modules registers them; the import is idempotent. The flag spares
    # the two import statements on every lookup (evaluate looks up each metric it computes).
    if _LOADED:
        return
    import uqcore.classification
    import uqcore.regression  # noqa: F401

    _LOADED.append(True)


def _json_shape(out: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``out`` (options as JSON) and what it holds: ``"flat"`` (no list or dict), ``"lists"``
    (lists of numbers and strings) or ``"nested"``."""
    shape = "flat"
    for v in out.values():
        if type(v) is dict or (type(v) is list and any(type(x) in (list, dict) for x in v)):
            return out, "nested"
        if type(v) is list:
            shape = "lists"
    return out, shape


def _fresh(value: Any) -> Any:
    """A copy of the JSON value ``value`` (dicts and lists copied all the way down)."""
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if type(value) is list:
        return [_fresh(v) for v in value]
    return value
