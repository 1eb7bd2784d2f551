"""The store's Lua scripts: read from the ``lua/`` files of this package and put together.

Each file opens with a header of ``--`` comment lines, ended by a blank line: its purpose, and
the ``KEYS:`` and ``ARGV:`` it reads (positions and meaning), and for a script the ``USES:``
line naming the fragments (files whose name starts with ``_``: shared local functions) that go
before its own code. Redis gets the code of the fragments and the script, without the headers.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["fragments", "header", "names", "source", "uses"]

#: The folder of the ``.lua`` files, inside this package.
LUA = "lua"

#: The fields a header may hold (``-- NAME: text``, continued on lines ``--   text``).
FIELDS = ("KEYS", "ARGV", "USES", "Returns")


def _files() -> dict[str, str]:
    folder = resources.files(__package__).joinpath(LUA)
    return {
        entry.name.removesuffix(".lua"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".lua")
    }


@functools.cache
def _parsed() -> dict[str, tuple[dict[str, str], str]]:
    out: dict[str, tuple[dict[str, str], str]] = {}
    for name, text in _files().items():
        head, sep, code = text.partition("\n\n")
        lines = head.splitlines()
        if not sep or not all(line.startswith("--") for line in lines):
            raise ValueError(f"{LUA}/{name}.lua: no header of '--' lines ended by a blank line")
        fields: dict[str, str] = {}
        field = ""
        for line in lines:
            text_of_line = line.removeprefix("--").strip()
            label, colon, rest = text_of_line.partition(":")
            if colon and label in FIELDS:
                field = label
                fields[field] = rest.strip()
            elif field and line.startswith("--   "):  # a field's continuation line
                fields[field] += " " + text_of_line
            else:
                field = ""
        out[name] = (fields, code)
    return out


def names() -> list[str]:
    """The scripts (every file but the fragments), sorted."""
    return sorted(name for name in _parsed() if not name.startswith("_"))


def fragments() -> list[str]:
    """The fragments (files whose name starts with ``_``), sorted."""
    return sorted(name for name in _parsed() if name.startswith("_"))


def header(name: str) -> dict[str, str]:
    """The header fields of the file ``lua/{name}.lua`` (see :data:`FIELDS`)."""
    return _parsed()[name][0]


def uses(name: str) -> list[str]:
    """The fragments script ``name`` is put together with, in order."""
    return header(name).get("USES", "").split()


@functools.cache
def source(name: str) -> str:
    """The code Redis runs for script ``name``: its fragments (``USES:``), then its own code,
    each part after a newline."""
    if name.startswith("_"):
        raise KeyError(f"{name} is a fragment, not a script")
    parsed = _parsed()
    return "".join("\n" + parsed[part][1] for part in [*uses(name), name])
