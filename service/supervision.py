"""The supervisor's state file: which children of ``uqeval serve`` are up or being restarted.

``uqeval serve`` supervises its children (the managed Redis, each worker, the API) and writes
their state to a small JSON file in its data directory (:data:`STATE_FILE_NAME`), whose path it
gives its children in ``UQEVAL_SUPERVISOR_STATE_FILE`` (the setting
``supervisor_state_file``). ``GET /readyz`` reads it to name the children being restarted. A
file, not a Redis key: Redis may be the child that is down, and every API process (with
``--api-workers``) reads the same file without talking to the supervisor. The file is
replaced atomically (write, then rename), so a reader sees the old or the new state, never
half of one; it is removed when the supervisor stops.

Format (version 1)::

    {"version": 1, "pid": 1234, "updated": 1718000000.0,
     "children": [{"name": "redis", "role": "redis", "state": "up", "pid": 1235,
                   "restarts": 0, "last_exit": null}, ...]}

``state`` is ``starting`` (first start), ``up``, or ``restarting`` (died; waiting for its
backoff, or started again and not yet ready); ``role`` is ``redis``, ``worker`` or ``api``.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "STATE_FILE_NAME",
    "ChildState",
    "Role",
    "State",
    "SupervisorState",
    "read_state",
    "write_state",
]

#: The state file's name in the data directory of ``uqeval serve``.
STATE_FILE_NAME = "supervisor-state.json"

Role = Literal["redis", "worker", "api"]
State = Literal["starting", "up", "restarting"]


@dataclass(frozen=True)
class ChildState:
    """One supervised child as the state file records it."""

    name: str
    role: Role
    state: State
    pid: int | None = None
    restarts: int = 0
    last_exit: str | None = None


@dataclass(frozen=True)
class SupervisorState:
    """The children of one supervisor."""

    children: tuple[ChildState, ...]

    @property
    def restarting(self) -> list[str]:
        """Names of the children being restarted, in the supervisor's order."""
        return [c.name for c in self.children if c.state == "restarting"]

    def all_down(self, role: Role) -> bool:
        """True when the supervisor runs children of ``role`` and every one is restarting."""
        mine = [c for c in self.children if c.role == role]
        return bool(mine) and all(c.state == "restarting" for c in mine)


def write_state(path: Path, children: Sequence[ChildState]) -> None:
    """Replace the state file at ``path`` atomically."""
    doc: dict[str, Any] = {
        "version": 1,
        "pid": os.getpid(),
        "updated": time.time(),
        "children": [asdict(c) for c in children],
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)


def read_state(path: Path | None) -> SupervisorState | None:
    """The state at ``path``; None without a path, a file, or a readable version-1 document
    (an API that runs without a supervisor)."""
    if path is None:
        return None
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        doc = json.loads(path.read_text())
        if doc.get("version") != 1:
            return None
        return SupervisorState(
            children=tuple(
                ChildState(
                    name=str(c["name"]),
                    role=c["role"],
                    state=c["state"],
                    pid=c.get("pid"),
                    restarts=int(c.get("restarts", 0)),
                    last_exit=c.get("last_exit"),
                )
                for c in doc["children"]
            )
        )
    return None
