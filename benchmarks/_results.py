"""Writes one section of benchmarks/RESULTS.md, leaving the other sections as they are."""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TITLE = "# Benchmark results\n\nEach section is written by the script it names; ratios are measured in one run.\n"


def write_section(name: str, body: str) -> None:
    """Replace (or append) the ``## name`` section of RESULTS.md with ``body``."""
    text = RESULTS.read_text() if RESULTS.exists() else TITLE
    block = f"## {name}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text).rstrip() + "\n"
    else:
        text = text.rstrip() + "\n\n" + block
    RESULTS.write_text(text)
