"""The store stack a mount serves, built from its :class:`~nczfs.config.mountconfig.MountConfig`.

:func:`build` makes ``nczarr_layer(cached(ThreadedStore(backend), config), config)``: the backend, its calls on
worker threads (:mod:`nczfs.store.threads`), the cache (:mod:`nczfs.cache`), the NCZarr layer
(:mod:`nczfs.nczarr.layer`). The cache knows neither backends nor NCZarr; what it needs of
them (whether the store is remote, what names a source, which keys are metadata) is chosen here,
as is how a backend that finds another program's change only after staging the mount's own (zip)
merges consolidated metadata both changed (:func:`~nczfs.nczarr.consolidating.merge_consolidated`).
"""

from __future__ import annotations

import json

from nczfs.cache import CachingStore
from nczfs.cache.disk import DiskCache
from nczfs.cache.localahead import AHEAD_FRESH, SmallFilesAhead
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.consolidating import is_consolidated, merge_consolidated
from nczfs.nczarr.layer import Notify, nczarr_layer
from nczfs.nczarr.metadata.validate import is_metadata_key
from nczfs.store.base import Store, SyncStore
from nczfs.store.capabilities import MergesBothChanged
from nczfs.store.optional import ReadsSmallFiles, offers
from nczfs.store.registry import backend_of
from nczfs.store.threads import ThreadedStore


def build(backend: SyncStore, config, notify: Notify | None = None) -> Store:
    """The whole stack over ``backend``, as a mount (and ``nczfs.open_view``) serves it;
    ``notify`` hears of objects the NCZarr layer changes on its own (a mount: the kernel)."""
    decoding.set_threads(config.decode_threads)
    if not config.read_only and isinstance(backend, MergesBothChanged):  # the consolidating layer's copies
        backend.merge_with(merge_consolidated, is_consolidated)
    return nczarr_layer(cached(ThreadedStore(backend), config), config, notify=notify, identity=source_identity(config))


def cached(store, config) -> CachingStore:
    """The mount's cache over ``store``, as ``config`` (cache_size, metadata_ttl, ...) and the
    store's capabilities (its default TTL, whether it is remote) ask. Object bytes are kept in
    memory (and in --cache-dir) for remote stores only: a local directory or archive is already in
    the kernel's page cache; a local directory's small files are read ahead of a reader walking
    them (:mod:`nczfs.cache.localahead`), for at most the metadata TTL."""
    capabilities = store.capabilities
    remote = capabilities.remote
    fresh = min(AHEAD_FRESH, config.effective_metadata_ttl(capabilities))
    if not remote and offers(store, ReadsSmallFiles) and fresh > 0:  # a local directory's small files
        store = SmallFilesAhead(store, fresh=fresh)
    return CachingStore(
        store,
        cache_size=config.cache_size,
        # a local directory answers at once and its attributes change as it is used (link
        # counts, times): it is asked every time the filesystem's own TTL is over
        ttl=0 if capabilities.live_meta else config.effective_metadata_ttl(capabilities),
        cache_bytes=remote,
        disk=DiskCache(config.cache_dir, config.cache_dir_size, source_identity(config))
        if config.cache_dir and remote else None,
        siblings=config.prefetch_siblings,
        tree_keys=config.list_tree_keys,
        kernel_keeps_reads=not config.direct_io,
        is_metadata=is_metadata_key,
    )


def source_identity(config) -> str:
    """What tells the mount's source apart from any other sharing a cache directory."""
    src = config.source
    endpoint, region, profile = backend_of(config).identity(config.opening())
    return json.dumps([src.backend, src.location, endpoint, region, profile])
