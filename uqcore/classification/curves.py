"""The classification curves of :mod:`uqcore.curves`, registered on import."""

from __future__ import annotations
