"""The prediction models, one per kind, built from :data:`service.kinds.KIND_FIELDS`, and their
tagged union."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, create_model

from service.api.schemas.common import KINDS, BoolMatrix, Level, Matrix, StrictModel, Tensor, Vector
from service.kinds import (
    BOOL_FIELDS,
    CLASSIFICATION_KINDS,
    KIND_FIELDS,
    ONE_OF,
    field_rank,
    required_fields,
)

#: What each array field holds (documentation of the prediction models).
FIELD_DOCS: dict[str, str] = {
    "mean": "Predictive mean, N values.",
    "std": "Predictive standard deviation, N values, each > 0.",
    "loc": "Location, N values.",
    "scale": "Scale, N values, each > 0.",
    "df": "Degrees of freedom, N values, each > 0.",
    "weights": "Mixture weights, N×K, each >= 0, rows summing to 1.",
    "means": "Component means, N×K.",
    "stds": "Component standard deviations, N×K, each > 0.",
    "draws": "Predictive samples, N×S.",
    "levels": "Quantile levels, Q values in (0, 1), strictly increasing.",
    "values": "Predicted quantiles, N×Q, non-decreasing along each row.",
    "prediction": "Point prediction, N values.",
    "uncertainty": "Scalar uncertainty score, N values, each >= 0 (larger = less certain).",
    "probs": "Class probabilities, N×C, rows non-negative and summing to 1 (± 1e-4).",
    "logits": "Logits, N×C, finite (probabilities by softmax).",
    "member_probs": "Ensemble member probabilities, M×N×C (give this or member_logits).",
    "member_logits": "Ensemble member logits, M×N×C (give this or member_probs).",
    "alpha": "Dirichlet concentrations, N×C, each > 0.",
    "lower": "Lower bounds of the intervals, N finite values.",
    "upper": "Upper bounds of the intervals, N finite values, each >= lower (closed intervals).",
    "level": "Optional nominal coverage 1 − α in (0, 1) the intervals were made for; metrics "
    "that need a level use it instead of their level option.",
    "sets": "Prediction sets, N×C booleans (true/false, or 1/0): entry [i][c] says whether "
    "class c is in row i's set; a set may be empty or hold every class.",
}

#: What a field means in one kind, where that differs from :data:`FIELD_DOCS`.
KIND_FIELD_DOCS: dict[tuple[str, str], str] = {
    ("prediction_set", "probs"): "Optional class probabilities the sets were made from, N×C "
    "(the shape of sets), rows on the simplex (± 1e-4); with them the probability metrics "
    "(brier, ece, ...) apply too.",
}

EXAMPLE_ARRAYS: dict[str, Any] = {
    "mean": [0.1, 1.9, 3.2],
    "std": [0.5, 0.4, 0.6],
    "loc": [0.1, 1.9, 3.2],
    "scale": [0.4, 0.3, 0.5],
    "df": [5.0, 5.0, 5.0],
    "weights": [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]],
    "means": [[0.0, 0.2], [1.8, 2.0], [3.0, 3.4]],
    "stds": [[0.5, 0.5], [0.4, 0.4], [0.6, 0.6]],
    "draws": [[0.0, 0.2, 0.1], [1.8, 2.0, 2.1], [3.0, 3.4, 3.3]],
    "levels": [0.1, 0.5, 0.9],
    "values": [[-0.5, 0.1, 0.7], [1.4, 1.9, 2.4], [2.4, 3.2, 4.0]],
    "prediction": [0.1, 1.9, 3.2],
    "uncertainty": [0.5, 0.4, 0.6],
    "probs": [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
    "logits": [[2.0, 0.5, -1.0], [-1.0, 2.5, 0.0], [0.1, 0.2, 0.4]],
    "member_probs": [
        [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]],
        [[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.2, 0.3, 0.5]],
    ],
    "member_logits": [
        [[2.0, 0.5, -1.0], [-1.0, 2.5, 0.0], [0.1, 0.2, 0.4]],
        [[1.5, 0.5, -1.0], [-0.5, 2.0, 0.0], [0.0, 0.2, 0.6]],
    ],
    "alpha": [[7.0, 2.0, 1.0], [1.0, 8.0, 1.0], [3.0, 3.0, 4.0]],
    "lower": [-0.7, 1.3, 2.2],
    "upper": [0.9, 2.6, 4.1],
    "level": 0.9,
    "sets": [[True, True, False], [False, True, False], [True, True, True]],
}

#: The fields of an example prediction of each kind (the first of alternative fields; the
#: optional fields too, so that the catalogue lists what applies when they are sent).
EXAMPLE_FIELDS: dict[str, tuple[str, ...]] = {
    k: ONE_OF[k][:1] if k in ONE_OF else KIND_FIELDS[k] for k in KIND_FIELDS
}


def _camel(kind: str) -> str:
    return "".join(p.capitalize() for p in kind.split("_"))


def _doc(kind: str) -> str:
    optional = [f for f in KIND_FIELDS[kind] if f not in required_fields(kind)]
    a = "An" if kind[0] in "aeiou" else "A"
    if kind in ONE_OF or not optional:
        return f"{a} {kind} prediction: arrays {', '.join(KIND_FIELDS[kind])}."
    required = ", ".join(required_fields(kind))
    return f"{a} {kind} prediction: arrays {required}; optionally {', '.join(optional)}."


def _prediction_model(kind: str) -> type[StrictModel]:
    fields: dict[str, Any] = {"kind": (Literal[kind], Field(description="The prediction kind."))}
    required = required_fields(kind)
    for f in KIND_FIELDS[kind]:
        typ: Any = (Level, Vector, Matrix, Tensor)[field_rank(f)]
        if f in BOOL_FIELDS:
            typ = BoolMatrix
        doc = KIND_FIELD_DOCS.get((kind, f), FIELD_DOCS.get(f, f))
        if f in required:
            fields[f] = (typ, Field(description=doc))
        else:
            fields[f] = (typ | None, Field(default=None, description=doc))
    if kind in CLASSIFICATION_KINDS:
        fields["estimates"] = (
            dict[Annotated[str, Field(min_length=1, max_length=200)], Vector] | None,
            Field(
                default=None,
                description="Optional named uncertainty estimates, name -> N values "
                "(higher = more uncertain).",
            ),
        )
    example = {"kind": kind, **{f: EXAMPLE_ARRAYS[f] for f in EXAMPLE_FIELDS[kind]}}
    model: type[StrictModel] = create_model(
        f"{_camel(kind)}Prediction",
        __base__=StrictModel,
        __doc__=_doc(kind),
        **fields,
    )
    model.model_config["json_schema_extra"] = {"examples": [example]}
    model.model_rebuild(force=True)
    return model


PREDICTION_MODELS: dict[str, type[StrictModel]] = {k: _prediction_model(k) for k in KINDS}

# A tagged union of the kind models (the "kind" member selects the model).
_PredictionUnion: Any = PREDICTION_MODELS[KINDS[0]]
for _k in KINDS[1:]:
    _PredictionUnion = _PredictionUnion | PREDICTION_MODELS[_k]
Prediction = Annotated[_PredictionUnion, Field(discriminator="kind")]
