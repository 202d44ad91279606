"""The NCZarr wrappers a mount stacks over its store, as its options ask."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.presenting import PresentingStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.store.base import Store

if TYPE_CHECKING:
    from nczfs.config import MountConfig
    from nczfs.filesystem import Filesystem

log = logging.getLogger(__name__)


def nczarr_layer(store: Store, config: MountConfig) -> Store:
    """``store`` wrapped, innermost first: consolidated metadata kept in step with writes,
    ``-o present=`` (a view), then (outermost) metadata as its writer meant it, checked as
    ``-o validate=`` says."""
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
    """Objects the NCZarr layer rewrites on its own (consolidated metadata) are dropped from the
    filesystem's and the kernel's caches, so their new size shows at once."""
    while store is not None and not isinstance(store, ConsolidatingStore):
        store = getattr(store, "inner", None)  # type: ignore[assignment]
    if store is None:
        return

    def changed(key: str) -> None:
        node = fs.table.at(key)
        if node is None:
            return
        node.fetched = -1.0
        trio.lowlevel.spawn_system_task(_invalidate, node.ino)

    store.on_change = changed


async def _invalidate(ino: int) -> None:
    import pyfuse3

    try:
        await trio.to_thread.run_sync(pyfuse3.invalidate_inode, ino)
    except Exception as exc:  # noqa: BLE001 - a system task must not raise; the cache then expires by TTL
        log.debug("invalidate inode %d: %s", ino, exc)
