"""The curves behind the metrics, by name: what a plot draws and what a result's ``curves``
holds.

Each curve has a registered :class:`CurveSpec`: the task, the prediction capabilities and the
extra inputs (``groups``, ``ood``) it needs, and the function computing it, which returns a
small frozen dataclass (:class:`~uqcore.regression.calibration.CalibrationCurve`,
:class:`~uqcore.classification.calibration.ReliabilityDiagram`, ...). :func:`curves` computes
every curve that applies to a prediction (or those named); :func:`curve_to_json` and
:func:`curve_from_json` convert a curve to the JSON of a result document and back, so a plot
can be drawn from a curve object, a :class:`~uqcore.Report` or a service result alike.

The regression curves are registered by :mod:`uqcore.regression.curves`, the classification
ones by :mod:`uqcore.classification.curves`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError

__all__ = [
    "CURVES",
    "CurveSpec",
    "curve_from_json",
    "curve_names",
    "curve_to_json",
    "curves",
    "register_curve",
]

#: "any": a curve of both tasks (its ``needs_any`` then names what each task's predictions give).
Task = Literal["regression", "classification", "any"]


@dataclass(frozen=True)
class CurveSpec:
    """A registered curve.

    Attributes
    ----------
    name : str
        Its key in :attr:`uqcore.Report.curves` and in a result document's ``curves``.
    task : {"regression", "classification", "any"}
    needs : frozenset of str
        Prediction capabilities needed (any one of ``needs_any`` besides, when given).
    inputs : frozenset of str
        Extra inputs needed besides the targets: ``"groups"`` and/or ``"ood"``.
    compute : callable
        ``compute(prediction, y, *, sample_weight, groups, ood, seed)`` -> the curve object.
    type : type
        The curve's frozen dataclass, for :func:`curve_from_json`.
    needs_any : frozenset of str
        At least one of these capabilities (empty: no such condition).
    description : str
        One line: what it shows.
    integer_weights : bool
        It applies only to integer (frequency) sample weights: it draws rows at random, a
        row of weight k being k rows.
    late : bool
        Computed after the other curves of a :func:`curves` call: it reads a metric's result
        that :func:`uqcore.evaluate` may still be computing in a helper thread when it
        computes its curves (the curve then waits for that result instead of computing it
        again), so the others are computed meanwhile.
    """

    name: str
    task: Task
    needs: frozenset[str]
    inputs: frozenset[str]
    compute: Callable[..., Any]
    type: type
    needs_any: frozenset[str] = frozenset()
    description: str = ""
    integer_weights: bool = False
    late: bool = False

    def why_not(
        self,
        prediction: Any,
        available: frozenset[str] = frozenset(),
        sample_weight: Any = None,
    ) -> str | None:
        """Why the curve does not apply to ``prediction`` given the extra inputs
        ``available`` and the weights (None when it applies)."""
        task = str(getattr(prediction, "task", "regression"))
        if self.task not in (task, "any"):
            return f"{self.name} is a {self.task} curve; the prediction is {task}"
        caps = set(getattr(prediction, "capabilities", ()))
        kind = getattr(prediction, "kind", type(prediction).__name__)
        missing = sorted(self.needs - caps)
        if missing:
            return f"{self.name} needs {', '.join(missing)}, which a {kind} prediction lacks"
        if self.needs_any and not (self.needs_any & caps):
            return (
                f"{self.name} needs one of {', '.join(sorted(self.needs_any))}, which a "
                f"{kind} prediction lacks"
            )
        absent = sorted(self.inputs - available)
        if absent:
            return f"{self.name} needs {' and '.join(absent)}"
        if self.integer_weights and sample_weight is not None:
            w = np.asarray(to_numpy(sample_weight), dtype=np.float64)
            if not bool(np.all(w == np.round(w))):
                return (
                    f"{self.name} needs integer (frequency) sample weights: it draws groups "
                    "of rows, a row of weight k being k rows"
                )
        return None


CURVES: dict[str, CurveSpec] = {}


def register_curve(spec: CurveSpec) -> CurveSpec:
    """Add ``spec`` to :data:`CURVES` (a name is registered once)."""
    if spec.name in CURVES:
        raise ValueError(f"curve {spec.name!r} is registered twice")
    CURVES[spec.name] = spec
    return spec


def curve_names(task: str | None = None) -> list[str]:
    """The registered curve names (of ``task`` when given), in registration order."""
    return [n for n, s in CURVES.items() if task is None or s.task in (task, "any")]


def curves(
    prediction: Any,
    y: Any,
    names: str | Sequence[str] = "all",
    *,
    sample_weight: Any = None,
    groups: Any = None,
    ood: Any = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Compute curves: name -> curve object.

    ``names="all"`` computes every registered curve that applies to the prediction and the
    inputs given (``groups``, ``ood``) and skips the others; an explicit name that is unknown
    or does not apply raises :class:`~uqcore.UQValidationError`. ``seed`` fixes the random
    draws of the curves that draw (adversarial group calibration).
    """
    available = frozenset(k for k, v in (("groups", groups), ("ood", ood)) if v is not None)
    if isinstance(names, str):
        if names != "all":
            raise UQValidationError(
                f"names must be 'all' or a list of curve names, found {names!r}",
                argument="names",
                value=names,
            )
        chosen = [
            s for s in CURVES.values() if s.why_not(prediction, available, sample_weight) is None
        ]
    else:
        chosen = []
        for name in dict.fromkeys(names):
            spec = CURVES.get(name)
            if spec is None:
                raise UQValidationError(
                    f"unknown curve {name!r}; known: {', '.join(CURVES)}",
                    argument="names",
                    value=name,
                )
            reason = spec.why_not(prediction, available, sample_weight)
            if reason is not None:
                raise UQValidationError(reason, argument="names", value=name)
            chosen.append(spec)
    found = {
        s.name: s.compute(
            prediction, y, sample_weight=sample_weight, groups=groups, ood=ood, seed=seed
        )
        for s in sorted(chosen, key=lambda s: s.late)  # stable: the late ones last
    }
    return {s.name: found[s.name] for s in chosen}


#: Types returned as they are by :func:`_plain` (checked by identity first: a curve holds
#: thousands of plain numbers, and the ABC checks below cost more than the conversion).
_AS_IS = frozenset({float, int, str, bool, type(None)})


def _plain(value: Any) -> Any:
    """numpy (or any namespace's) arrays and scalars as Python lists and numbers."""
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is list or kind is tuple:
        if _AS_IS.issuperset(map(type, value)):
            return list(value)
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a curve in a Display
        return curve_to_json(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, bool)) or value is None:
        return value
    if isinstance(value, (int, float, np.generic)):
        return value.item() if isinstance(value, np.generic) else value
    return to_numpy(value).tolist()


def curve_to_json(curve: Any) -> dict[str, Any]:
    """The JSON form of a curve object (its fields; arrays as lists). NaN and inf are kept as
    floats here: a service result passes this through :func:`uqcore.report.json_safe`."""
    if dataclasses.is_dataclass(curve) and not isinstance(curve, type):
        return {f.name: _plain(getattr(curve, f.name)) for f in dataclasses.fields(curve)}
    if isinstance(curve, Mapping):
        return {str(k): _plain(v) for k, v in curve.items()}
    raise TypeError(f"not a curve: {type(curve).__name__}")


def curve_from_json(name: str, data: Mapping[str, Any]) -> Any:
    """The curve object ``name`` from its JSON form (lists stay lists or become tuples as the
    dataclass declares; ``None`` stands for a value that was not finite)."""
    spec = CURVES.get(name)
    if spec is None:
        raise UQValidationError(f"unknown curve {name!r}; known: {', '.join(CURVES)}")
    if not (dataclasses.is_dataclass(spec.type)):
        return dict(data)
    fields = {f.name for f in dataclasses.fields(spec.type)}
    unknown = sorted(set(data) - fields)
    if unknown:
        raise UQValidationError(f"{name}: unknown field(s) {', '.join(unknown)}")
    kw = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    return spec.type(**kw)


# Registration, on import of this module.
from uqcore.classification import curves as _classification_curves  # noqa: E402, F401
from uqcore.regression import curves as _regression_curves  # noqa: E402, F401


def _corp(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> Any:
    from uqcore.score_curves import corp_reliability

    return corp_reliability(prediction, y, sample_weight=sample_weight)


def _murphy(prediction: Any, y: Any, *, sample_weight: Any = None, **_: Any) -> Any:
    from uqcore.score_curves import murphy_diagram

    return murphy_diagram(prediction, y, sample_weight=sample_weight)


def _register_score_curves() -> None:
    from uqcore.score_curves import CorpReliability, MurphyDiagram

    register_curve(
        CurveSpec(
            "corp_reliability",
            "any",
            frozenset(),
            frozenset(),
            _corp,
            CorpReliability,
            needs_any=frozenset({"point", "probs"}),
            description="CORP reliability diagram: the isotonic recalibration of the outcome "
            "on the forecast (mean or top-label confidence), with MCB, DSC and UNC",
        )
    )
    register_curve(
        CurveSpec(
            "murphy_diagram",
            "regression",
            frozenset({"point"}),
            frozenset(),
            _murphy,
            MurphyDiagram,
            description="Murphy diagram: mean elementary scores of the mean against the "
            "threshold θ",
        )
    )


_register_score_curves()
