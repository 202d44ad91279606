"""The cache between the store backends and the NCZarr layer: :class:`CachingStore`
(:mod:`nczfs.cache.store`) composes the metadata cache, the in-memory and disk block tiers,
block fetching and the prefetch policies, one module each."""

from nczfs.cache.memory import default_cache_size, physical_memory
from nczfs.cache.store import BYTE_CACHED_BACKENDS, CachingStore, cached

__all__ = ["BYTE_CACHED_BACKENDS", "CachingStore", "cached", "default_cache_size", "physical_memory"]
