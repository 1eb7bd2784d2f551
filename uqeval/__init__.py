"""What users run: the ``uqeval`` command line and the Python client (:class:`Client`,
:class:`AsyncClient`).

The top floor of the project: the command line starts and talks to the service's processes, so
it may import ``service`` and ``worker``; nothing below imports it. The client imports only
numpy, httpx, uqcore and ``service.kinds`` (no server dependency): the names below are loaded
on first use, so ``import uqeval`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uqeval import errors, models
    from uqeval.aclient import AsyncClient
    from uqeval.client import Client

__all__ = ["AsyncClient", "Client", "errors", "models"]

_LAZY = {
    "Client": ("uqeval.client", "Client"),
    "AsyncClient": ("uqeval.aclient", "AsyncClient"),
    "errors": ("uqeval.errors", None),
    "models": ("uqeval.models", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'uqeval' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
