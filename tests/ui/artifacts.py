"""Where the web UI's tests save their screenshots: ``$UQEVAL_ARTIFACTS/screenshots``, by
default ``test-artifacts/screenshots`` in the repository (ignored by git; CI uploads it)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def screenshot_dir(create: bool = True) -> Path:
    """The screenshot folder (made when ``create``)."""
    root = Path(os.environ.get("UQEVAL_ARTIFACTS") or ROOT / "test-artifacts")
    out = root / "screenshots"
    if create:
        out.mkdir(parents=True, exist_ok=True)
    return out


def taken_since(t0: float) -> list[Path]:
    """The screenshots written since ``t0`` (a time.time())."""
    folder = screenshot_dir(create=False)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.png") if p.stat().st_mtime >= t0)
