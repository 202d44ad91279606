"""The cache between the store backends and the NCZarr layer (see :mod:`nczfs.cache.store`)."""

from nczfs.cache.store import (
    BYTE_CACHED_BACKENDS,
    CachingStore,
    cached,
    default_cache_size,
    physical_memory,
)

__all__ = ["BYTE_CACHED_BACKENDS", "CachingStore", "cached", "default_cache_size", "physical_memory"]
