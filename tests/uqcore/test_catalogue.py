"""docs/metrics.md is generated from the registry and must not drift from it."""

from __future__ import annotations

from pathlib import Path

from uqcore.catalogue import catalogue_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_committed_catalogue_matches_registry() -> None:
    assert DOC.read_text() == catalogue_markdown(), (
        "docs/metrics.md is out of date: run `python -m uqcore.catalogue`"
    )
