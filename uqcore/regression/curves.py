"""The regression curves of :mod:`uqcore.curves`, registered on import."""

from __future__ import annotations
