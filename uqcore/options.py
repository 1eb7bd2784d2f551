"""The domain of every metric option: type, range and choices, read from the implementation.

A metric's options are the keyword-only arguments of its implementation (see
:func:`uqcore.registry.register`). Their annotations say what values they take:

- ``bool``, ``int``, ``float``, ``str`` and ``None``, and unions of them;
- ``Literal["a", "b"]``: one of these values (and nothing else unless the union also holds
  ``str``);
- ``Sequence[float]``: a non-empty list of numbers;
- ``Annotated[T, Range(...)]``: a number (or each number of a list) in a range, and
  ``Annotated[Sequence[float], MaxItems(k)]``: at most k numbers.

:func:`options_of` turns the annotations into one :class:`Option` per argument. Each option
checks a value (:meth:`Option.check`, called by ``MetricSpec.resolve_params`` before any
implementation runs, so a bad value fails the same way in ``uqcore.evaluate``, the stability
engine and the service's request validation) and describes itself as JSON Schema
(:meth:`Option.schema`, published by the catalogue endpoint and the OpenAPI document).
Options that size memory (bin counts, draws, list lengths) carry an upper bound.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import numpy as np

from uqcore._backend import to_numpy
from uqcore._validation import UQValidationError

__all__ = [
    "MAX_BINS",
    "MAX_COVERAGE",
    "MAX_DRAWS",
    "MAX_GRID",
    "MAX_LEVELS",
    "Bins",
    "Coverage",
    "CoverageLevels",
    "CurveLevels",
    "Draws",
    "Increasing",
    "MaxItems",
    "OpenLevels",
    "OpenUnit",
    "Option",
    "Range",
    "Seed",
    "Unit",
    "options_of",
]

#: Largest bin count of a binned metric: a tally of this many bins per resample is small next
#: to the data; a billion bins on three rows is a request to exhaust a worker's memory.
MAX_BINS = 10_000
#: Largest count of random draws or trials an option may ask for.
MAX_DRAWS = 10_000
#: Largest number of levels in a list of levels.
MAX_LEVELS = 10_000
#: Largest number of steps of a sparsification grid.
MAX_GRID = 1_000_000

JsonType = Literal["boolean", "integer", "number", "string", "array", "null"]


@dataclass(frozen=True)
class Range:
    """Bounds of a numeric option, or of each number of a list option.

    >>> Range(0, 1, lo_open=True, hi_open=True).text()
    'in (0, 1)'
    >>> Range(1, 100).text(), Range(lo=0).text()
    ('in [1, 100]', '>= 0')
    """

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False

    def contains(self, x: float) -> bool:
        if self.lo is not None and (x <= self.lo if self.lo_open else x < self.lo):
            return False
        return not (self.hi is not None and (x >= self.hi if self.hi_open else x > self.hi))

    def contains_all(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """:meth:`contains` of each value of ``x`` (a boolean array)."""
        ok = np.ones(x.shape, dtype=bool)
        if self.lo is not None:
            ok &= x > self.lo if self.lo_open else x >= self.lo
        if self.hi is not None:
            ok &= x < self.hi if self.hi_open else x <= self.hi
        return ok

    def text(self) -> str:
        if self.lo is not None and self.hi is not None:
            left = "(" if self.lo_open else "["
            right = ")" if self.hi_open else "]"
            return f"in {left}{_num(self.lo)}, {_num(self.hi)}{right}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {_num(self.hi)}"
        return "finite"

    def schema(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.lo is not None:
            out["exclusiveMinimum" if self.lo_open else "minimum"] = self.lo
        if self.hi is not None:
            out["exclusiveMaximum" if self.hi_open else "maximum"] = self.hi
        return out


@dataclass(frozen=True)
class MaxItems:
    """Upper bound on the length of a list option."""

    n: int


@dataclass(frozen=True)
class Increasing:
    """The numbers of a list option must be strictly increasing."""


# -- the domains that several metrics share ------------------------------------------------------
#: A bin count.
Bins = Annotated[int, Range(1, MAX_BINS)]
#: A count of random draws, trials or groups.
Draws = Annotated[int, Range(1, MAX_DRAWS)]
#: A seed of numpy.random.default_rng.
Seed = Annotated[int, Range(0, 2**63 - 1)]
#: A probability strictly between 0 and 1 (a level, a quantile, a coverage).
OpenUnit = Annotated[float, Range(0, 1, lo_open=True, hi_open=True)]
#: A probability in [0, 1].
Unit = Annotated[float, Range(0, 1)]
#: Levels strictly inside (0, 1) (central-interval or quantile levels of a score).
OpenLevels = Annotated[
    Sequence[float], Range(0, 1, lo_open=True, hi_open=True), MaxItems(MAX_LEVELS)
]
#: The largest central coverage c whose interval's upper quantile level 0.5 + c/2 is below 1
#: in double precision (1 − 2⁻⁵²).
MAX_COVERAGE = 1.0 - 2.0**-52
#: A central coverage c in (0, 1): the interval between the quantile levels 0.5 ± c/2.
Coverage = Annotated[float, Range(0, MAX_COVERAGE, lo_open=True)]
#: Central coverages (the intervals of an interval score, coverage or width).
CoverageLevels = Annotated[
    Sequence[float], Range(0, MAX_COVERAGE, lo_open=True), MaxItems(MAX_LEVELS)
]
#: Strictly increasing levels in [0, 1] (the grid of a calibration curve).
CurveLevels = Annotated[Sequence[float], Range(0, 1), MaxItems(MAX_LEVELS), Increasing()]


@dataclass(frozen=True)
class Option:
    """The domain of one option of one metric.

    ``types`` are JSON types; ``choices`` the allowed strings (and ``None``) of a ``Literal``,
    exclusive unless ``"string"`` is also a type; ``range`` bounds the numbers (of a list, each
    item); ``max_items`` bounds a list's length.
    """

    metric: str
    name: str
    default: Any
    types: frozenset[JsonType]
    choices: tuple[Any, ...] = ()
    range: Range | None = None
    max_items: int | None = None
    increasing: bool = False

    def describe(self) -> str:
        """What the option accepts, in words (the error messages use it)."""
        parts = []
        r = f" {self.range.text()}" if self.range is not None else ""
        if "boolean" in self.types:
            parts.append("true or false")
        if "integer" in self.types and "number" not in self.types:
            parts.append(f"an integer{r}")
        if "number" in self.types:
            parts.append(f"a number{r}")
        if "array" in self.types:
            most = f", at most {self.max_items}" if self.max_items is not None else ""
            order = ", strictly increasing" if self.increasing else ""
            each = r.replace(" in", " each in")
            parts.append(f"a non-empty list of numbers{each}{order}{most}")
        if "string" in self.types:
            parts.append("a string")
        named = [repr(c) for c in self.choices if c is not None]
        if named:
            parts.append(("one of " if len(named) > 1 else "") + ", ".join(named))
        if "null" in self.types:
            parts.append("null")
        return " or ".join(parts)

    def check(self, value: Any) -> Any:
        """``value`` if the option accepts it (a NumPy scalar becomes its Python value), else
        :class:`UQValidationError` naming the option, the metric, what the option accepts and
        the value found (for a list, its first bad item).

        >>> from uqcore import registry
        >>> registry.get("check_score").options["levels"].check([0.5, 1.2])
        Traceback (most recent call last):
        ...
        uqcore._validation.UQValidationError: metric 'check_score': levels must be a non-empty list of numbers each in (0, 1), at most 10000 or null; levels[1] = 1.2
        """
        if isinstance(value, np.generic):
            value = value.item()
        integral = isinstance(value, float) and math.isfinite(value) and value.is_integer()
        if integral and "integer" in self.types and "number" not in self.types:
            value = int(value)  # JSON Schema counts 3.0 as an integer: so do we
        found = self._refusal(value)
        if found is None:
            return value
        raise UQValidationError(
            f"metric {self.metric!r}: {self.name} must be {self.describe()}; {found}",
            argument=self.name,
            value=value,
        )

    def _refusal(self, value: Any) -> str | None:
        """``None`` if the option accepts ``value``, else what was found, for the message."""
        plain = f"found {value!r}"
        if value is None:
            return None if "null" in self.types else plain
        if isinstance(value, bool):
            return None if "boolean" in self.types else plain
        if isinstance(value, (int, float)):
            numeric = "number" in self.types or ("integer" in self.types and isinstance(value, int))
            return None if numeric and self._in_range(value) else plain
        if isinstance(value, str):
            return None if value in self.choices or "string" in self.types else plain
        if "array" in self.types:
            if isinstance(value, (list, tuple, np.ndarray)):
                return self._list_refusal(value)
            if hasattr(value, "__array_namespace__") or type(value).__name__ == "Tensor":
                return self._list_refusal(to_numpy(value))  # an array of another backend
        return f"found {type(value).__name__} {value!r}"

    def _list_refusal(self, value: Any) -> str | None:
        # one vectorised pass: a per-row option holds N numbers
        if isinstance(value, np.ndarray):
            if value.ndim != 1 or value.dtype.kind not in "iuf":
                return f"found an array of shape {value.shape} and dtype {value.dtype}"
            arr = value.astype(np.float64, copy=False)
        else:
            items = list(value)
            for j, x in enumerate(items):
                if not isinstance(x, (int, float)) or isinstance(x, bool):
                    return f"{self.name}[{j}] = {x!r}"
            arr = np.asarray(items, dtype=np.float64)
        if arr.shape[0] == 0:
            return "found an empty list"
        if self.max_items is not None and arr.shape[0] > self.max_items:
            return f"found {arr.shape[0]} items"
        ok = np.isfinite(arr)
        if self.range is not None:
            ok &= self.range.contains_all(arr)
        if not bool(np.all(ok)):
            j = int(np.argmin(ok))
            return f"{self.name}[{j}] = {_item(value, j)!r}"
        if self.increasing and arr.shape[0] > 1:
            up = arr[1:] > arr[:-1]
            if not bool(np.all(up)):
                j = int(np.argmin(up)) + 1
                b, a = _item(value, j), _item(value, j - 1)
                return f"{self.name}[{j}] = {b!r} <= {self.name}[{j - 1}] = {a!r}"
        return None

    def _in_range(self, x: float) -> bool:
        if not math.isfinite(x):
            return False
        return self.range is None or self.range.contains(x)

    def schema(self) -> dict[str, Any]:
        """The option as JSON Schema (with its default)."""
        alternatives: list[dict[str, Any]] = []
        bounds = self.range.schema() if self.range is not None else {}
        if "boolean" in self.types:
            alternatives.append({"type": "boolean"})
        if "integer" in self.types and "number" not in self.types:
            alternatives.append({"type": "integer", **bounds})
        if "number" in self.types:
            alternatives.append({"type": "number", **bounds})
        if "array" in self.types:
            arr: dict[str, Any] = {
                "type": "array",
                "items": {"type": "number", **bounds},
                "minItems": 1,
            }
            if self.max_items is not None:
                arr["maxItems"] = self.max_items
            if self.increasing:
                arr["description"] = "strictly increasing"
            alternatives.append(arr)
        named = [c for c in self.choices if c is not None]
        if "string" in self.types:
            alternatives.append({"type": "string"})
        elif named:
            alternatives.append({"type": "string", "enum": named})
        if "null" in self.types:
            alternatives.append({"type": "null"})
        out = alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}
        return {**out, "default": _json_default(self.default)}


def _item(values: Any, j: int) -> Any:
    """Item ``j`` of a list or array, as a Python value (for messages)."""
    x = values[j]
    return x.item() if isinstance(x, np.generic) else x


def _json_default(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _num(x: float) -> str:
    if x == MAX_COVERAGE:
        return "1 - 2**-52"
    if isinstance(x, int) or (float(x).is_integer() and abs(x) < 1e15):
        return str(int(x))
    return repr(float(x))


def options_of(
    metric: str, impl: Callable[..., Any], defaults: Mapping[str, Any]
) -> dict[str, Option]:
    """One :class:`Option` per keyword option of ``impl`` (its annotations read as above).

    Raises ``RuntimeError`` at registration when an annotation is not understood or a default
    is outside its own domain.
    """
    hints = typing.get_type_hints(impl, include_extras=True)
    out = {}
    for name, default in defaults.items():
        if name not in hints:
            raise RuntimeError(f"metric {metric!r}: option {name!r} has no annotation")
        option = _option(metric, name, default, hints[name])
        try:
            option.check(default)
        except UQValidationError as exc:
            raise RuntimeError(f"metric {metric!r}: default outside its domain: {exc}") from None
        out[name] = option
    return out


def _option(metric: str, name: str, default: Any, annotation: Any) -> Option:
    found: set[JsonType] = set()
    choices: list[Any] = []
    ranges: list[Range] = []
    max_items: list[int] = []
    flags: set[str] = set()
    _read(annotation, found, choices, ranges, max_items, flags, f"{metric}.{name}")
    ranges = list(dict.fromkeys(ranges))
    if len(ranges) > 1 or len(max_items) > 1:
        raise RuntimeError(f"metric {metric!r}: option {name!r} has more than one Range/MaxItems")
    if None in choices:
        found.add("null")
    return Option(
        metric=metric,
        name=name,
        default=default,
        types=frozenset(found),
        choices=tuple(choices),
        range=ranges[0] if ranges else None,
        max_items=max_items[0] if max_items else None,
        increasing="increasing" in flags,
    )


_SCALARS: dict[Any, JsonType] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    type(None): "null",
}


def _read(
    annotation: Any,
    found: set[JsonType],
    choices: list[Any],
    ranges: list[Range],
    max_items: list[int],
    flags: set[str],
    where: str,
) -> None:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = get_args(annotation)
        for m in meta:
            if isinstance(m, Range):
                ranges.append(m)
            elif isinstance(m, MaxItems):
                max_items.append(m.n)
            elif isinstance(m, Increasing):
                flags.add("increasing")
        _read(base, found, choices, ranges, max_items, flags, where)
    elif origin is typing.Union or origin is types.UnionType:
        for member in get_args(annotation):
            _read(member, found, choices, ranges, max_items, flags, where)
    elif origin is Literal:
        choices.extend(get_args(annotation))
    elif annotation in _SCALARS:
        found.add(_SCALARS[annotation])
    elif origin in (Sequence, list, tuple) or annotation is np.ndarray or origin is np.ndarray:
        found.add("array")
    else:
        raise RuntimeError(f"option {where}: annotation {annotation!r} is not understood")
