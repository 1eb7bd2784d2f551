"""The README's runnable examples: the code block after a ``<!-- readme-example: NAME -->``
marker, for the tests that run them against a live server (so the README never rots)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The address the README's examples use; the tests put the live server's in its place.
README_URL = "http://127.0.0.1:8000"


def readme_block(name: str) -> str:
    """The fenced code block right after ``<!-- readme-example: name -->`` in README.md."""
    marker = f"<!-- readme-example: {name} -->"
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.count(marker) == 1, f"README.md must hold {marker!r} once"
    found = re.search(re.escape(marker) + r"\s*```[a-z]*\n(.*?)\n```", text, re.DOTALL)
    assert found, f"no code block after {marker!r} in README.md"
    return found.group(1)
