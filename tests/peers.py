"""Imports of peer libraries that cannot be imported plainly in the test environment.

torch-uncertainty's package ``__init__`` imports torchvision (for its plotting helpers), and a
torchvision wheel is built against one exact torch binary: next to the CPU build of torch that
the test command installs, torchvision's compiled operators do not load. The metrics themselves
use torch and torchmetrics only, so the metrics module is imported with a stand-in for
torchvision that is never called.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


class _Stand(types.ModuleType):
    """A module whose every attribute is another stand-in (nothing of it is ever called)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stand(f"{self.__name__}.{name}")


class _StandFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _Stand(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def torch_uncertainty_metrics() -> Any:
    """The module ``torch_uncertainty.metrics`` (skips the test when it is not installed)."""
    pytest.importorskip("torch")
    pytest.importorskip("torchmetrics")
    pytest.importorskip("lightning")
    if importlib.util.find_spec("torch_uncertainty") is None:
        pytest.skip("torch-uncertainty is not installed")
    if "torch_uncertainty.metrics" not in sys.modules:
        try:
            importlib.import_module("torchvision")
        except Exception:
            for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
                del sys.modules[name]
            sys.meta_path.insert(0, _StandFinder())
    return importlib.import_module("torch_uncertainty.metrics")


@contextmanager
def torch_uncertainty_float64() -> Iterator[Any]:
    """``torch_uncertainty.metrics`` with torch's default float type float64 meanwhile: its
    metrics build running sums and grids (``torch.tensor(0.0)``, ``arange(1, N + 1) / N``) in
    the default type, and the comparisons are to float64 precision."""
    mod = torch_uncertainty_metrics()
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield mod
    finally:
        torch.set_default_dtype(old)
