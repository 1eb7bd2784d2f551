"""The array backend of a worker: numpy, CuPy or torch, chosen once when the worker starts.

``auto`` (the default) takes CuPy when it is installed and sees a CUDA device, else torch when
CUDA is available to it, else numpy. uqcore computes in the namespace of its inputs, so the
worker only moves the stored (numpy) arrays to the backend's device before evaluating.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Backend", "select_backend"]


@dataclass(frozen=True)
class Backend:
    """A chosen backend: its name, its device ("cpu", "cuda:0") and whether it is a GPU."""

    name: str
    device: str
    gpu: bool

    def asarray(self, a: np.ndarray[Any, Any]) -> Any:
        """``a`` on this backend's device (numpy: unchanged)."""
        if self.name == "cupy":
            import cupy

            return cupy.asarray(a)
        if self.name == "torch":
            import torch

            return torch.as_tensor(a, device=self.device)
        return a


def _cupy() -> Backend | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            return Backend("cupy", f"cuda:{cupy.cuda.Device().id}", True)
    except Exception:  # not installed, no driver, no device: all mean "no GPU"
        return None
    return None


def _torch(require_cuda: bool) -> Backend | None:
    with contextlib.suppress(ImportError):
        import torch

        if torch.cuda.is_available():
            return Backend("torch", "cuda:0", True)
        if not require_cuda:
            return Backend("torch", "cpu", False)
    return None


def select_backend(setting: str) -> Backend:
    """The backend for ``setting`` ("auto", "numpy", "torch" or "cupy").

    Raises RuntimeError when an explicitly requested backend is unavailable (CuPy without a
    CUDA device, torch not installed).
    """
    if setting == "numpy":
        return Backend("numpy", "cpu", False)
    if setting == "cupy":
        found = _cupy()
        if found is None:
            raise RuntimeError("UQEVAL_BACKEND=cupy but CuPy is not installed or sees no GPU")
        return found
    if setting == "torch":
        found = _torch(require_cuda=False)
        if found is None:
            raise RuntimeError("UQEVAL_BACKEND=torch but torch is not installed")
        return found
    if setting != "auto":
        raise RuntimeError(f"UQEVAL_BACKEND must be auto, numpy, torch or cupy; found {setting!r}")
    return _cupy() or _torch(require_cuda=True) or Backend("numpy", "cpu", False)
