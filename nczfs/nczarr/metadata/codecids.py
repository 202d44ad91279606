"""The codec ids numcodecs knows, which metadata checks accept (numcodecs is slow to import)."""

from __future__ import annotations

import functools
from importlib.metadata import entry_points


@functools.cache
def numcodecs_ids() -> frozenset[str]:
    """Codec ids numcodecs knows, built in or registered by installed packages (looked up once)."""
    from numcodecs.registry import codec_registry

    return frozenset(codec_registry) | {e.name for e in entry_points(group="numcodecs.codecs")}


def codecs_known() -> bool:
    """Has :func:`numcodecs_ids` run (its first call imports numcodecs: 0.1-0.2 s)?"""
    return numcodecs_ids.cache_info().currsize > 0
