"""docs/metrics.md is generated from the registry and must not drift from it."""

from __future__ import annotations

from pathlib import Path

from uqcore.catalogue import catalogue_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_committed_catalogue_matches_registry() -> None:
    assert DOC.read_text() == catalogue_markdown(), (
        "docs/metrics.md is out of date: run `python -m uqcore.catalogue`"
    )


def test_every_peer_convention_names_options_the_registry_accepts() -> None:
    from uqcore import registry
    from uqcore.peers import PEER_CONVENTIONS

    for c in PEER_CONVENTIONS:
        spec = registry.get(c.metric, c.task)
        assert spec.task == c.task, c
        resolved = spec.resolve_params(c.options)
        assert any(resolved[k] != v for k, v in spec.defaults.items()), c  # not the default
