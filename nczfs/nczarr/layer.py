"""The NCZarr wrappers a mount stacks over its store, as its options ask."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfiles import NcFilesStore, decoded_cache_bytes, root_name
from nczfs.nczarr.presenting import PresentingStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.store.base import Store

if TYPE_CHECKING:
    from nczfs.config import MountConfig
    from nczfs.filesystem import Filesystem

log = logging.getLogger(__name__)


def nczarr_layer(store: Store, config: MountConfig) -> Store:
    """``store`` wrapped, innermost first: every dataset shown as .nc files too (``-o nc_files``),
    consolidated metadata kept in step with writes,
    ``-o present=`` (a view), then (outermost) metadata as its writer meant it, checked as
    ``-o validate=`` says."""
    if config.nc_files:
        store = NcFilesStore(store, config.metadata_ttl, root_name(config.source),
                             decoded_cache_bytes(config.cache_size))
    if not config.read_only:
        store = ConsolidatingStore(store)
    if config.present != "as-stored":
        from nczfs.cache import default_cache_size

        cache = default_cache_size() if config.cache_size is None else config.cache_size
        # recoded chunks: a quarter of what --cache-size gives stored blocks
        store = PresentingStore(store, config.present, config.metadata_ttl, config.transcode,
                                recoded_cache_bytes=max(16 * 1024 * 1024, cache // 4))
    if not config.read_only:
        store = ValidatingStore(store, config.validate)
    return store


def watch_changes(store: Store, fs: Filesystem) -> None:
    """Objects the NCZarr layer changes on its own (consolidated metadata, the .nc files of a
    dataset written to) are dropped from the filesystem's and the kernel's caches, so their new
    size shows at once."""
    def changed(key: str) -> None:
        node = fs.table.at(key)
        if node is None:
            return
        node.fetched = -1.0
        trio.lowlevel.spawn_system_task(_invalidate, node.ino)

    while store is not None:
        if isinstance(store, (ConsolidatingStore, NcFilesStore)):
            store.on_change = changed
        store = getattr(store, "inner", None)  # type: ignore[assignment]


async def _invalidate(ino: int) -> None:
    import pyfuse3

    try:
        await trio.to_thread.run_sync(pyfuse3.invalidate_inode, ino)
    except Exception as exc:  # noqa: BLE001 - a system task must not raise; the cache then expires by TTL
        log.debug("invalidate inode %d: %s", ino, exc)
