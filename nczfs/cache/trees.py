"""Tree listings: a directory met among several in its parent's listing is listed with its whole tree.

A dataset's arrays are read one after another by netCDF-C, a tree is walked by ``ls -R``,
``find``, ``cp -r``: where a directory without a fresh listing is one of at least
``TREE_MIN_SUBDIRS`` directories in its parent's listing (fresh or not), the parent's whole tree
is listed in one request (S3: ListObjectsV2 without a delimiter), if it holds at most
``tree_keys`` keys; every directory in it gets its listing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

import trio

from nczfs.toolbox.errors import NczfsError
from nczfs.store.capabilities import ListsTrees
from nczfs.store.keys import parent_of
from nczfs.store.values import DirEntry

if TYPE_CHECKING:
    from nczfs.cache.metadata import MetadataCache

log = logging.getLogger(__name__)

#: names one LIST request answers
LIST_PAGE = 1000
#: a directory met without a listing, whose parent lists it among at least this many directories
#: (a dataset's arrays and groups), is listed together with its parent's whole tree in one
#: request (S3: ListObjectsV2 without a delimiter), if that tree holds at most ``tree_keys`` keys
TREE_MIN_SUBDIRS = 2
TREE_KEYS = LIST_PAGE
#: seconds a tree found larger than that (or unlistable) is not asked for again
TREE_RETRY_AFTER = 60.0

Listing = tuple[float, dict[str, DirEntry]]


class TreeListings:
    """Lists trees of at most ``limit`` keys (0: never) into ``meta``'s listings."""

    def __init__(self, meta: MetadataCache, limit: int):
        self.meta = meta
        self.limit = limit
        #: hears of every tree listed and kept: (its top, its listings)
        self.on_tree: Callable[[str, dict[str, list[DirEntry]]], None] = lambda top, trees: None
        #: directories whose tree is being listed, and until when one is not listed again
        self._running: dict[str, trio.Event] = {}
        self._not_before: dict[str, float] = {}

    async def listed(self, prefix: str) -> bool:
        """``prefix`` has no fresh listing: list its parent's tree if that is worth one request.
        True if ``prefix`` now has a fresh listing."""
        candidate = self._candidate(prefix)
        if candidate is None:
            return False
        top, known = candidate
        running = self._running.get(top)
        if running is not None:
            self.meta.stats["meta.coalesced"] += 1
            await running.wait()
            return self.meta.fresh_listing(prefix) is not None
        if sum(1 for e in known[1].values() if e.is_dir) < TREE_MIN_SUBDIRS:
            self._not_tree(top, max(known[0], self.meta.clock() + self.meta.ttl))
            return False
        trees, keep = await self._list(top)
        if trees is None:
            self._not_tree(top, self.meta.clock() + TREE_RETRY_AFTER)
            return False
        self.meta.stats["meta.tree-listings"] += 1
        if not keep:
            return False
        self._keep(top, trees)
        return prefix in trees

    def _candidate(self, prefix: str) -> tuple[str, Listing] | None:
        """``prefix``'s parent and its listing (fresh or not), where that listing shows ``prefix``
        as a directory and its tree may be listed now."""
        if not prefix or self.limit <= 0 or self.meta.ttl <= 0:
            return None
        top = parent_of(prefix)
        if self._not_before.get(top, 0.0) > self.meta.clock():
            return None
        known = self.meta.listings.get(top)
        me = None if known is None else known[1].get(prefix.rpartition("/")[2])
        if me is None or not me.is_dir:
            return None
        return top, known  # type: ignore[return-value]  # me is not None: neither is known

    async def _tree(self, top: str) -> dict[str, list[DirEntry]] | None:
        """The store's listing of ``top``'s tree (None: too large, or the store lists no trees)."""
        inner = self.meta.inner
        return await inner.list_tree(top, self.limit) if isinstance(inner, ListsTrees) else None

    async def _list(self, top: str) -> tuple[dict[str, list[DirEntry]] | None, bool]:
        """``top``'s tree (None: too large, or not listable) and whether it may be kept."""
        self._running[top] = done = trio.Event()
        try:
            return await self.meta.ask(top, self._tree(top))
        except NczfsError as exc:  # the names are then asked one by one, as before
            log.debug("%r: tree not listed: %s", top, exc)
            return None, False
        finally:
            del self._running[top]
            done.set()

    def _keep(self, top: str, trees: dict[str, list[DirEntry]]) -> None:
        self.meta.room()
        expires = self.meta.clock() + self.meta.ttl
        for folder, entries in trees.items():
            self.meta.listings[folder] = (expires, {e.name: e for e in entries})
        self.on_tree(top, trees)

    def _not_tree(self, top: str, until: float) -> None:
        if len(self._not_before) > 10_000:
            self._not_before.clear()
        self._not_before[top] = until
