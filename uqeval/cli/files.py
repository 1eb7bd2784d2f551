"""Reading a prediction file (NPZ, Parquet or CSV) into arrays named as in the API.

NPZ members are taken by name (``mean``, ``std``, ``y``, ``estimate:<name>``, ...). A table
(Parquet or CSV) holds one row per sample: a column named as a field is taken as it is, a
matrix field (``probs``, ``draws``, ``values``, ...) is gathered from the columns
``<field>_0, <field>_1, ...`` (or a prefix given with ``--prefix FIELD=PREFIX``; a Parquet list
column also works), and the mapping flags rename the rest. Nothing here talks to a server: the
same arrays feed ``uqeval submit`` and the local ``uqeval evaluate``.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from service.kinds import (
    BOOL_FIELDS as PREDICTION_BOOL_FIELDS,
)
from service.kinds import (
    CLASSIFICATION_TARGETS,
    ESTIMATE_PREFIX,
    KIND_FIELDS,
    MATRIX_FIELDS,
    SCALAR_FIELDS,
    target_field,
)
from uqeval.errors import BadRequest

#: Arrays that travel beside the prediction fields.
EXTRA_FIELDS = ("y", "labels", "sample_weight", "groups", *CLASSIFICATION_TARGETS)
PREDICTION_FIELDS = frozenset(f for fields in KIND_FIELDS.values() for f in fields)
KNOWN_FIELDS = PREDICTION_FIELDS | frozenset(EXTRA_FIELDS)
#: Fields that a table can give as several columns (one per class, draw, level, component).
TABLE_MATRIX_FIELDS = (MATRIX_FIELDS | {"soft_labels"}) - {"levels"}
INTEGER_FIELDS = frozenset({"labels", "groups"})
#: Fields whose CSV cells are true/false (or 1/0, yes/no); numbers of ``ood`` are read as
#: "not 0", those of a prediction field (``sets``) are sent as they are, for the server to
#: check that each is 0 or 1.
BOOL_FIELDS = frozenset({"ood"}) | PREDICTION_BOOL_FIELDS

NPZ_SUFFIXES = (".npz",)
PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv", ".tsv", ".txt")
PARQUET_HINT = "reading Parquet needs pyarrow: pip install 'uq-eval[parquet]'"


@dataclass
class ColumnMap:
    """How the columns (or members) of a file map to the API's fields."""

    #: field -> column (``--col FIELD=COLUMN``)
    col: dict[str, str] = field(default_factory=dict)
    #: the fields of the table's columns, in order (``--columns mean,std``; ``-`` skips one)
    columns: list[str] | None = None
    #: matrix field -> prefix of its columns (``--prefix probs=p_``, ``--prob-prefix p_``)
    prefixes: dict[str, str] = field(default_factory=dict)
    y_col: str | None = None
    labels_col: str | None = None
    #: the quantile levels of a ``quantiles`` table (``--levels 0.1,0.5,0.9``)
    levels: list[float] | None = None


def parse_pairs(items: Sequence[str], flag: str) -> dict[str, str]:
    """``["mean=mu", "std=sigma"]`` -> ``{"mean": "mu", "std": "sigma"}``."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise BadRequest(f"{flag} takes FIELD=COLUMN; found {item!r}")
        out[name.strip()] = value.strip()
    return out


def split_list(text: str | None) -> list[str] | None:
    """``"mae, crps"`` -> ``["mae", "crps"]``; None or blank -> None."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    items = [t for t in items if t]
    return items or None


# --------------------------------------------------------------------------------------------
# files -> raw columns or members
# --------------------------------------------------------------------------------------------


def _file_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in NPZ_SUFFIXES:
        return "npz"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in CSV_SUFFIXES:
        return "csv"
    raise BadRequest(
        f"{path.name}: unknown file type {suffix or '(none)'!r}; expected .npz, .parquet or .csv",
        field="file",
    )


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise BadRequest(f"{path}: no such file", field="file")


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The members of an NPZ archive (no pickles); a ``request`` member is left out (the
    command's flags say what to compute)."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files if name != "request"}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise BadRequest(f"{path.name}: not a readable NPZ archive ({exc})", field="file") from None


def read_parquet(path: Path) -> dict[str, np.ndarray]:
    """The columns of a Parquet file; a list column becomes a matrix (one list per row)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise BadRequest(PARQUET_HINT, field="file") from None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise BadRequest(
            f"{path.name}: not a readable Parquet file ({exc})", field="file"
        ) from None
    out: dict[str, np.ndarray] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if column.null_count:
            row = next(i for i, v in enumerate(column.is_null().to_pylist()) if v)
            raise BadRequest(f"{path.name}: column {name!r} is empty at row {row}", field=name)
        if pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type):
            rows = column.to_pylist()
            widths = {len(r) for r in rows}
            if len(widths) > 1:
                raise BadRequest(
                    f"{path.name}: list column {name!r} has rows of different lengths "
                    f"{sorted(widths)[:5]}",
                    field=name,
                )
            out[name] = np.asarray(rows)
        else:
            out[name] = column.to_numpy()
    return out


def read_csv(path: Path) -> dict[str, np.ndarray]:
    """The columns of a CSV file with a header row, as strings (converted per field later).
    ``.tsv`` files, or files whose header has tabs and no commas, are tab-separated."""
    text = path.read_text(encoding="utf-8-sig")
    first = text.split("\n", 1)[0]
    delimiter = (
        "\t" if path.suffix.lower() == ".tsv" or ("\t" in first and "," not in first) else ","
    )
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if not rows:
        raise BadRequest(f"{path.name}: the file is empty", field="file")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        dup = next(h for i, h in enumerate(header) if h in header[:i])
        raise BadRequest(f"{path.name}: column {dup!r} appears twice in the header", field=dup)
    body = rows[1:]
    if not body:
        raise BadRequest(f"{path.name}: the header has no rows below it", field="file")
    for i, r in enumerate(body):
        if len(r) != len(header):
            raise BadRequest(
                f"{path.name}: row {i} has {len(r)} cells; the header has {len(header)}",
                field="file",
                index=i,
            )
    return {h: np.array([r[j].strip() for r in body]) for j, h in enumerate(header)}


# --------------------------------------------------------------------------------------------
# raw columns -> typed fields
# --------------------------------------------------------------------------------------------


def _convert(name: str, values: np.ndarray, source: str) -> np.ndarray:
    """A column (strings from CSV, or numbers) as the dtype its field takes: integers for
    labels and groups, booleans for ood flags, else numbers (float32 kept)."""
    base = name.split(":", 1)[0] if name.startswith(ESTIMATE_PREFIX) else name
    if values.dtype.kind in "US":
        bad = np.flatnonzero(np.char.str_len(values.astype(str)) == 0)
        if bad.size:
            raise BadRequest(
                f"{source} {name!r} is empty at row {int(bad[0])}", field=name, index=int(bad[0])
            )
        if base in BOOL_FIELDS:
            lowered = np.char.lower(values.astype(str))
            ok = np.isin(lowered, ["true", "false", "1", "0", "yes", "no"])
            if not ok.all():
                i = int(np.flatnonzero(~ok)[0])
                raise BadRequest(
                    f"{source} {name!r} must hold true/false (or 1/0); found {values[i]!r} at "
                    f"row {i}",
                    field=name,
                    index=i,
                )
            return np.isin(lowered, ["true", "1", "yes"])
        try:
            numbers = values.astype(np.float64)
        except ValueError:
            i = next(j for j, v in enumerate(values) if not _is_number(str(v)))
            raise BadRequest(
                f"{source} {name!r} must hold numbers; found {str(values[i])!r} at row {i}",
                field=name,
                index=i,
            ) from None
        values = numbers
    if base in INTEGER_FIELDS and values.dtype.kind == "f":
        frac = np.flatnonzero(values != np.round(values))
        if frac.size:
            i = int(frac[0])
            raise BadRequest(
                f"{source} {name!r} must hold integers; found {values[i]!r} at row {i}",
                field=name,
                index=i,
            )
        return values.astype(np.int64)
    if base == "ood" and values.dtype.kind in "iuf":
        return np.asarray(values != 0)
    return values


def _scalar(name: str, values: np.ndarray, source: str) -> np.ndarray:
    """A field of one number (an interval's ``level``) given as a column: every row must hold
    the same value, which becomes a 0-d array."""
    if values.ndim == 0:
        return values
    flat = values.reshape(-1)
    differ = np.flatnonzero(flat != flat[0])
    if flat.size == 0 or differ.size:
        i = int(differ[0]) if differ.size else 0
        raise BadRequest(
            f"{source} {name!r} is one number for the whole file: every row must hold the same "
            f"value; row {i} differs from row 0",
            field=name,
            index=i,
        )
    return np.asarray(flat[0])


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_SUFFIX = re.compile(r"^(?:\[(\d+)\]|[_.]?(\d+))$")


def _gather(table: Mapping[str, np.ndarray], prefix: str) -> list[str]:
    """The columns ``<prefix><i>`` (also ``<prefix>[i]``), ordered by i; for an explicit
    prefix whose suffixes are not all numbers, the columns in file order."""
    numbered: list[tuple[int, str]] = []
    for name in table:
        if name.startswith(prefix):
            m = _SUFFIX.match(name[len(prefix) :])
            if m:
                numbered.append((int(m.group(1) or m.group(2)), name))
    return [name for _, name in sorted(numbered)]


def from_table(table: Mapping[str, np.ndarray], mapping: ColumnMap, source: str) -> dict[str, Any]:
    """The API's named arrays from a table's columns (or an archive's members), following the
    mapping flags; columns that map to no field are left out."""
    cols = dict(table)
    out: dict[str, Any] = {}
    used: set[str] = set()

    def take(fieldname: str, column: str, flag: str) -> None:
        if column not in cols:
            raise BadRequest(
                f"{flag}: {source} has no column {column!r}; its columns are "
                f"{', '.join(map(repr, list(cols)[:30]))}",
                field=fieldname,
            )
        if fieldname in out:
            raise BadRequest(f"field {fieldname!r} is mapped twice", field=fieldname)
        out[fieldname] = _convert(fieldname, np.asarray(cols[column]), f"{source} column")
        used.add(column)

    if mapping.columns is not None:
        names = list(cols)
        if len(mapping.columns) > len(names):
            raise BadRequest(
                f"--columns names {len(mapping.columns)} columns; {source} has {len(names)}",
                field="columns",
            )
        for fieldname, column in zip(mapping.columns, names, strict=False):
            if fieldname not in ("", "-"):
                take(fieldname, column, "--columns")
    for fieldname, column in mapping.col.items():
        take(fieldname, column, "--col")
    if mapping.y_col is not None:
        take("y", mapping.y_col, "--y-col")
    if mapping.labels_col is not None:
        take("labels", mapping.labels_col, "--labels-col")
    for fieldname, prefix in mapping.prefixes.items():
        members = _gather(cols, prefix)
        if not members:
            raise BadRequest(
                f"--prefix {fieldname}={prefix}: {source} has no column named {prefix}0, "
                f"{prefix}1, ...",
                field=fieldname,
            )
        if fieldname in out:
            raise BadRequest(f"field {fieldname!r} is mapped twice", field=fieldname)
        out[fieldname] = np.stack(
            [_convert(fieldname, np.asarray(cols[c]), f"{source} column") for c in members], axis=1
        )
        used.update(members)
    # What is named as the API names it.
    for column, values in cols.items():
        if column in used or column in out:
            continue
        if column in KNOWN_FIELDS or column.startswith(ESTIMATE_PREFIX):
            out[column] = _convert(column, np.asarray(values), f"{source} column")
            used.add(column)
    for fieldname in sorted(TABLE_MATRIX_FIELDS - set(out)):
        members = [c for c in _gather(cols, fieldname) if c not in used]
        if members:
            out[fieldname] = np.stack(
                [_convert(fieldname, np.asarray(cols[c]), f"{source} column") for c in members],
                axis=1,
            )
            used.update(members)
    if mapping.levels is not None:
        out["levels"] = np.asarray(mapping.levels, dtype=np.float64)
    for name in SCALAR_FIELDS & set(out):
        out[name] = _scalar(name, np.asarray(out[name]), f"{source} column")
    if not PREDICTION_FIELDS & set(out):
        raise BadRequest(
            f"{source} holds no prediction field: its columns are "
            f"{', '.join(map(repr, list(cols)[:30]))}; name them as the API does (mean, std, "
            "probs_0, ...) or map them with --col FIELD=COLUMN, --columns, --prefix",
            field="file",
        )
    return out


def read_prediction(path: Path, mapping: ColumnMap | None = None) -> dict[str, Any]:
    """The named arrays of a prediction file (NPZ, Parquet or CSV)."""
    mapping = mapping or ColumnMap()
    _check_file(path)
    kind = _file_kind(path)
    if kind == "npz":
        members = read_npz(path)
        if mapping == ColumnMap():
            return dict(members)
        return from_table(members, mapping, f"{path.name}")
    table = read_parquet(path) if kind == "parquet" else read_csv(path)
    return from_table(table, mapping, path.name)


def read_targets(path: Path, name: str) -> np.ndarray:
    """Targets from a file: ``.npy``; ``.npz`` (its ``y``/``labels`` member, or its only one);
    ``.csv``/``.txt`` (one column, with or without a header)."""
    _check_file(path)
    suffix = path.suffix.lower()
    flag = f"--{name.replace('_', '-')}"
    try:
        if suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False))
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                for member in (name, "y", "labels"):
                    if member in npz.files:
                        return np.asarray(npz[member])
                if len(npz.files) == 1:
                    return np.asarray(npz[npz.files[0]])
                raise BadRequest(
                    f"{flag} {path.name}: which member? it holds {npz.files}", field=name
                )
        if suffix in CSV_SUFFIXES:
            table = read_csv(path)
            if len(table) != 1:
                raise BadRequest(
                    f"{flag} {path.name}: expected one column; found {list(table)}", field=name
                )
            ((header, values),) = table.items()
            if _is_number(header):  # no header: the first row is data
                values = np.concatenate([[header], values])
            return np.asarray(_convert(name, values, f"{path.name} column"))
        if suffix in PARQUET_SUFFIXES:
            table = read_parquet(path)
            if len(table) != 1 and name not in table:
                raise BadRequest(
                    f"{flag} {path.name}: expected one column or {name!r}; found {list(table)}",
                    field=name,
                )
            return np.asarray(table.get(name, next(iter(table.values()))))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise BadRequest(f"{flag} {path.name}: not readable ({exc})", field=name) from None
    raise BadRequest(
        f"{flag} {path.name}: expected a .npy, .npz, .csv or .parquet file", field=name
    )


def add_targets(arrays: dict[str, Any], kind: str, targets: np.ndarray | None) -> None:
    """Put ``--targets`` under the kind's target name (``y``, or ``labels`` for
    classification); a file that also holds targets is an error (which one is meant?)."""
    if targets is None:
        return
    name = target_field(kind)
    other = "y" if name == "labels" else "labels"
    if name in arrays or other in arrays:
        raise BadRequest(
            f"--targets given, and the file also holds {name if name in arrays else other!r}",
            field=name,
        )
    if name == "labels":
        targets = _convert("labels", np.asarray(targets), "--targets")
    arrays[name] = targets
