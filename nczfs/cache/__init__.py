"""The cache between the store backends and the NCZarr layer: :class:`CachingStore`
(:mod:`nczfs.cache.store`) composes the metadata cache, the in-memory and disk block tiers,
block fetching and the prefetch policies, one module each. It knows no backend and no
NCZarr: :mod:`nczfs.daemon.stack` builds it for a mount."""

from nczfs.cache.store import CachingStore

__all__ = ["CachingStore"]
