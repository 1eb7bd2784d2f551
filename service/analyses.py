"""The analyses contract: what a submission asks to compute — metrics, their parameters,
bootstrap, stability, seed, estimators — as one typed model with its defaults.

The API parses a request's ``analyses`` into :class:`Analyses` (the OpenAPI component); a
benchmark builds its submissions' analyses with :meth:`Analyses.of_benchmark`; the store keeps
:meth:`Analyses.document` (JSON, hashed into the input hash) and reads it back with
:meth:`Analyses.from_document`; the worker receives the typed model and reads its fields. The
defaults are written here only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, JsonValue, PrivateAttr, field_validator

from service.models import MetricName, StrictModel, check_json_value
from uqcore import registry

__all__ = ["MAX_PARAMS_BYTES", "Analyses", "BootstrapOptions", "BootstrapUnit", "StabilityOptions"]

BootstrapUnit = Literal["row", "cluster"]

MAX_PARAMS_BYTES = 16 * 1024


def _params_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema of ``analyses.params``: for every metric name, its parameters with their
    domains (type, range, choices, default) as uqcore declares them. A name that exists in both
    tasks (``ece``, ``nll``) accepts either task's parameters; the service checks them against
    the submission's task."""
    properties: dict[str, Any] = {}
    for name in sorted(registry.names()):
        shapes = [
            {
                "type": "object",
                "title": f"{spec.task} {name}",
                "properties": {key: opt.schema() for key, opt in spec.options.items()},
                "additionalProperties": False,
            }
            for spec in registry.specs()
            if spec.name == name
        ]
        properties[name] = shapes[0] if len(shapes) == 1 else {"anyOf": shapes}
    schema["properties"] = properties


class BootstrapOptions(StrictModel):
    """Bootstrap confidence intervals for every metric (``n_resamples = 0``: none)."""

    n_resamples: int = Field(default=0, ge=0, le=100_000, description="B; 0 turns it off.")
    method: Literal["percentile", "bca"] = Field(
        default="percentile", description="Interval method: percentile or BCa."
    )
    level: float = Field(default=0.95, gt=0, lt=1, description="Confidence level.")

    # What is resampled: set by a benchmark (its ``bootstrap.unit``), never by a request (an
    # inline submission resamples rows); kept out of the API's schema. None: not set (the
    # stored document then has no "unit", as before the contract existed).
    _unit: BootstrapUnit | None = PrivateAttr(default=None)

    @property
    def unit(self) -> BootstrapUnit:
        """``"row"`` (resample rows) or ``"cluster"`` (resample whole groups)."""
        return self._unit or "row"


class StabilityOptions(StrictModel):
    """The test-set-size stability study (uqcore.stability.convergence)."""

    enabled: bool = False
    repeats: int = Field(default=100, ge=1, le=10_000, description="Subsamples per size.")


class Analyses(StrictModel):
    """What to compute: metrics (names or ``"all"``), their parameters, bootstrap, stability."""

    # Frozen: one parsed model is shared by every read of the same stored document
    # (:meth:`from_json`), so nothing may change it after it is made.
    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={
            "examples": [
                {
                    "metrics": ["mae", "nll", "ause"],
                    "params": {"nmerci": {"alpha": 0.9}},
                    "bootstrap": {"n_resamples": 1000, "method": "percentile", "level": 0.95},
                    "stability": {"enabled": False, "repeats": 100},
                    "seed": 0,
                }
            ]
        },
    )

    # The list comes first in the union: client generators try the members in order.
    metrics: Annotated[list[MetricName], Field(min_length=1, max_length=200)] | Literal["all"] = (
        Field(
            default="all",
            description='Metric names from GET /v1/metrics, or "all" (every applicable metric).',
        )
    )
    params: dict[MetricName, dict[str, JsonValue]] = Field(
        default_factory=dict,
        description="Per-metric parameters overriding the defaults listed by GET /v1/metrics "
        "(each metric's options, their types, ranges and choices: the metric's entry below and "
        "its `options` in the catalogue); a value outside its domain is refused with 422.",
        json_schema_extra=_params_schema,
    )
    bootstrap: BootstrapOptions = Field(default_factory=BootstrapOptions)
    stability: StabilityOptions = Field(default_factory=StabilityOptions)
    curves: bool = Field(
        default=False,
        description="Also return the curves behind the metrics in the result's `curves`: every "
        "curve of uqcore.curves that applies to the prediction and the inputs sent (regression: "
        "calibration_curve, quantile_calibration_curve, pit_histogram, sparsification_curve, "
        "group_calibration, stratified with groups, interval_width; classification: "
        "reliability_diagram, risk_coverage_curve, roc_correctness, pr_correctness, and "
        "roc_ood, pr_ood with ood), as JSON (curve name -> its fields); without it `curves` is "
        "{}. A benchmark's submission carries curves only when the benchmark's setting "
        '`curves` is "coarse", and then on a coarse fixed grid (docs/hidden-targets.md).',
    )
    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="Seed of every random draw.")
    estimators: (
        Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(min_length=1)]
        | Literal["all"]
        | None
    ) = Field(
        default=None,
        description="Classification only: also evaluate every metric that takes an estimator "
        'for each of these uncertainty estimators ("all": every one the prediction provides, '
        "built-in aggregators then the submitted estimates); the result's by_estimator table.",
    )

    @field_validator("params")
    @classmethod
    def _params_json(cls, v: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return check_json_value(v, "analyses.params", MAX_PARAMS_BYTES)  # type: ignore[no-any-return]

    @field_validator("metrics")
    @classmethod
    def _unique(cls, v: Any) -> Any:
        if isinstance(v, list) and len(set(v)) != len(v):
            dup = next(m for i, m in enumerate(v) if m in v[:i])
            raise ValueError(f"metric {dup!r} is listed twice")
        return v

    _document: dict[str, Any] | None = PrivateAttr(default=None)

    def document(self) -> dict[str, Any]:
        """The JSON form kept with the submission (and hashed into its input hash): every field
        with its value, ``estimators`` only when set, ``curves`` only when true (a document
        stored before the field existed reads as false, and hashes as before),
        ``bootstrap.unit`` only when a benchmark set it. Made once per model (a submission's
        reads all answer it): do not change it."""
        if self._document is None:
            out = self.model_dump(mode="json")
            if self.estimators is None:
                out.pop("estimators")
            if not self.curves:
                out.pop("curves")
            if self.bootstrap._unit is not None:
                out["bootstrap"]["unit"] = self.bootstrap._unit
            self._document = out
        return self._document

    def __eq__(self, other: object) -> bool:
        # Equal when they store the same document (fields and the bootstrap's unit; the cached
        # document itself is no part of the value).
        if not isinstance(other, Analyses):
            return NotImplemented
        return self.document() == other.document()

    __hash__ = None  # type: ignore[assignment]  # holds dicts (params): not hashable

    @classmethod
    def from_json(cls, raw: str | bytes) -> Analyses:
        """The model of a stored document's JSON text; the same text gives the same (frozen)
        model without parsing it again — the polling reads of a submission stay as cheap as
        reading a dict."""
        return _from_json(raw if isinstance(raw, str) else raw.decode())

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> Analyses:
        """The model of a stored :meth:`document` (validated as a request is)."""
        data = dict(doc)
        boot = dict(data.get("bootstrap") or {})
        unit = boot.pop("unit", None)
        data["bootstrap"] = boot
        out = cls.model_validate(data)
        if unit is not None:
            if unit not in ("row", "cluster"):
                raise ValueError(f"bootstrap.unit must be 'row' or 'cluster'; found {unit!r}")
            out.bootstrap._unit = unit
        return out

    @classmethod
    def of_benchmark(
        cls,
        metrics: Iterable[str],
        *,
        params: Mapping[str, Any],
        bootstrap: Mapping[str, Any],
        seed: int,
        estimators: Iterable[str] | None = None,
        curves: bool = False,
    ) -> Analyses:
        """The analyses of a submission on a benchmark: its ``metrics`` with the benchmark's
        parameters of those metrics, its bootstrap (with its resampling unit) and seed,
        (classification) the metric × estimator table of ``estimators``, and ``curves`` when
        the benchmark gives coarse curves (the worker computes a benchmark submission's
        curves only on the coarse grid of :mod:`uqcore.coarse`); the rest default."""
        names = list(metrics)
        doc: dict[str, Any] = {
            "metrics": names,
            "params": {k: v for k, v in params.items() if k in names},
            "bootstrap": dict(bootstrap),
            "seed": seed,
        }
        chosen = list(estimators or [])
        if chosen:
            doc["estimators"] = chosen
        if curves:
            doc["curves"] = True
        return cls.from_document(doc)


@functools.lru_cache(maxsize=4096)
def _from_json(raw: str) -> Analyses:
    return Analyses.from_document(json.loads(raw))
