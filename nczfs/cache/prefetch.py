"""Prefetch policies: what is fetched before a reader asks for it.

- :class:`Readahead`: a read that continues where the previous read of the object ended starts
  parallel fetches of the next ``readahead`` blocks (counted against the cache's bound; at most
  ``readahead`` prefetches run at once).
- :class:`Siblings`: objects read from their start one after another in one directory (zarr
  reading an array chunk by chunk) fetch the next ``siblings`` objects of that directory ahead,
  in natural name order (chunk ``2.10`` after ``2.9``), their first block each, at most
  ``SIBLING_PARALLEL`` at once, at most ``sibling_window`` bytes of them ahead of the reader and
  at most a quarter of the cache in flight; small ones in bursts (``SIBLING_BURST_BELOW``),
  each burst asked of the backend in one call where it can (:meth:`BlockFetcher.start_many`).
- :class:`MetadataAhead`: once a metadata object of a tree listed in one request
  (:mod:`.trees`) is read, the tree's other small metadata objects are fetched.

Where the defaults come from: docs/PERFORMANCE.md, "The cache's defaults".
"""

from __future__ import annotations

import collections
import functools
import re
from typing import Callable

import trio

from nczfs.toolbox import background
from nczfs.cache.blocks import BlockFetcher, Fetch, Ident
from nczfs.cache.bytecache import MiB
from nczfs.cache.metadata import MetadataCache
from nczfs.store.keys import join, parent_of
from nczfs.store.values import DirEntry

READAHEAD_BLOCKS = 4
#: sibling objects fetched ahead of a reader walking a directory (0: off)
SIBLINGS_AHEAD = 16
#: sibling fetches running at once (the rest of the backend's connections serve the readers)
SIBLING_PARALLEL = 8
#: bytes of sibling objects ahead of the reader, fetched or not: large chunks are fetched fewer
#: objects ahead (8 MiB chunks: 6), since memory fetched far ahead is memory freshly faulted in
SIBLING_WINDOW = 48 * MiB
#: sibling objects smaller than this are fetched in bursts, once half of those ahead are missing,
#: instead of one as each is read (a server spends less CPU on GETs that arrive together); larger
#: objects are fetched one as each is read
SIBLING_BURST_BELOW = 1 * MiB
#: objects up to this size, in a directory being walked, are looked up by fetching them
LOOKUP_BY_GET = 1024 * 1024
#: directories whose natural name order and walk position are remembered
MAX_WALKS = 1024
#: once a metadata object (``.zarray``, ``zarr.json``, ...) of a tree listed in one request is
#: read, the tree's other metadata objects up to this size are fetched ahead (its reader, netCDF-C
#: or zarr-python opening the dataset, reads them next), up to ``METADATA_AHEAD_BYTES`` in all
METADATA_AHEAD_SIZE = 64 * 1024
METADATA_AHEAD_BYTES = 16 * MiB


#: an object of a directory's walk order: its name, its entry, its first block and that block's
#: size (Siblings._first_block); the order: listing, names, positions, those (Siblings._order)
Sibling = tuple[str, DirEntry, tuple[Ident, int] | None]
Order = tuple[dict, list[str], dict[str, int], list[Sibling]]


def natural(name: str) -> tuple[str | int, ...]:
    """Sort key that puts ``2.9`` before ``2.10`` (zarr chunk keys in the order zarr reads them)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name)))


class Readahead:
    """Sequential reads of one object fetch the blocks after them ahead."""

    def __init__(self, fetcher: BlockFetcher, stats: collections.Counter[str], *, blocks: int, cache_size: int):
        self.fetcher = fetcher
        self.stats = stats
        self.blocks = blocks
        self.cache_size = cache_size
        #: where the last read of each object ended (block index), for sequential detection
        self._last_block: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._running = 0

    def forget(self, key: str) -> None:
        self._last_block.pop(key, None)

    def after_read(self, key: str, etag: str, first: int, last: int, full: bool) -> None:
        """Sequential reads (this read starts in or right after the block the last one ended in)
        fetch the next blocks ahead, in parallel, while the cache has room for them."""
        previous = self._last_block.pop(key, None)
        self._last_block[key] = last
        if len(self._last_block) > 4096:
            self._last_block.popitem(last=False)
        if not full or previous is None or not (previous <= first <= previous + 1) or self.blocks <= 0:
            return
        block_size = self.fetcher.block_size
        budget = min(self.blocks, (self.cache_size // 2) // block_size)
        known = self.fetcher.meta.version_entry(key, etag)  # expired or not: a slow read outlasts the TTL
        if known is not None:
            budget = min(budget, -(-known.info.size // block_size) - last - 1)  # type: ignore[union-attr]  # version_entry: info is set
        for i in range(last + 1, last + 1 + budget):
            ident = (key, etag, i)
            if self.fetcher.held(ident):
                continue
            if self._running >= self.blocks:
                break
            self.stats["cache.prefetches"] += 1
            self._running += 1
            self.fetcher.start(ident, done=self._done)

    def _done(self) -> None:
        self._running -= 1


class Siblings:
    """A reader walking a directory gets the next objects of its cached listing fetched ahead."""

    def __init__(self, fetcher: BlockFetcher, stats: collections.Counter[str], *, count: int, window: int,
                 cache_size: int):
        self.fetcher = fetcher
        self.meta: MetadataCache = fetcher.meta
        self.stats = stats
        self.count = count
        self.window = window
        self.cache_size = cache_size
        #: per directory: (listing it was built from, names in natural order, name -> position,
        #: in the same order each name, its entry and its first block with its size, :meth:`_first_block`)
        self._orders: collections.OrderedDict[str, Order] = collections.OrderedDict()
        #: per directory: position of the object last read from its start
        self.walks: dict[str, int] = {}
        #: sibling fetches in flight and their bytes
        self.fetches = 0
        self.bytes_ahead = 0

    def ahead(self, key: str) -> None:
        """``key`` is being read from its start: if the last object read so in its directory was
        a near neighbour (a walk, whatever order concurrent readers arrive in), fetch the first
        block of the next ``count`` objects of the cached listing that are not cached yet."""
        if self.count <= 0:
            return
        parent, _, name = key.rpartition("/")
        order = self._order(parent)
        if order is None:
            return
        entries, _, position, firsts = order
        here = position.get(name)
        if here is None or not self._walking(parent, here) or self.fetches >= SIBLING_PARALLEL:
            return
        window, largest, missing = self._missing(parent, entries, firsts[here + 1 : here + 1 + self.count])
        if largest < SIBLING_BURST_BELOW and 2 * len(missing) < window:
            return  # small objects: fetched in bursts, once half of those ahead are missing
        budget = self.cache_size // 4
        burst: dict[Ident, int] = {}
        for ident, size in missing:
            if self.fetches >= SIBLING_PARALLEL or self.bytes_ahead + size > budget:
                break
            self.stats["cache.sibling-prefetches"] += 1
            self.fetches += 1
            self.bytes_ahead += size
            if largest < SIBLING_BURST_BELOW:
                burst[ident] = size
            else:
                self.fetcher.start(ident, done=functools.partial(self._done, size))
        if burst:  # small objects: asked for in one backend call where it takes them so
            self.fetcher.start_many(list(burst), done=lambda ident: self._done(burst[ident]))

    def _done(self, size: int) -> None:
        self.fetches -= 1
        self.bytes_ahead -= size

    def _order(self, parent: str) -> Order | None:
        """``parent``'s cached listing (expired or not, where every fetch is pinned to its ETag),
        its names in natural order, their positions, and what a fetch ahead of each would get."""
        listing = self.meta.listings.get(parent)
        if listing is None or not (self.fetcher.inner.capabilities.checks_versions or self.meta.fresh(listing[0])):
            return None
        order = self._orders.get(parent)
        if order is None or order[0] is not listing[1] or len(order[1]) != len(listing[1]):
            names = sorted(listing[1], key=natural)
            order = (listing[1], names, {n: i for i, n in enumerate(names)},
                     [(n, listing[1][n], self._first_block(parent, n, listing[1][n])) for n in names])
            self._orders[parent] = order
            if len(self._orders) > MAX_WALKS:
                self._orders.popitem(last=False)
        return order

    def _walking(self, parent: str, here: int) -> bool:
        """The object at ``here`` is read from its start: was the last one so read a near neighbour?"""
        last = self.walks.get(parent)
        if len(self.walks) > MAX_WALKS:
            self.walks.clear()
        self.walks[parent] = here
        return last is not None and 0 < abs(here - last) <= self.count

    def _first_block(self, parent: str, name: str, e: DirEntry | None) -> tuple[Ident, int] | None:
        """The first block of the object ``e`` (named ``name``) of ``parent`` and its size; None
        for a directory, an empty object or one without an ETag to pin a fetch to."""
        if e is None or e.is_dir or e.info is None or not e.info.etag or not e.info.size:
            return None
        return (join(parent, name), e.info.etag, 0), min(e.info.size, self.fetcher.block_size)

    def _missing(self, parent: str, entries: dict[str, DirEntry], ahead_of: list[Sibling]
                 ) -> tuple[int, int, list[tuple[Ident, int]]]:
        """Of the objects ``ahead_of`` the reader (from the order, :meth:`_order`): how many fit the
        window, the largest of those, and those of them to fetch (first blocks, with their sizes).
        Run at every read of a walk: plain comparisons, what the order worked out reused unless
        the listing's entry changed since (the mount stored the object: a new ETag)."""
        held, delivered_before = self.fetcher.held, self.fetcher.bytes.delivered_before
        ahead = 0  # bytes of the objects ahead so far, fetched already or not
        window = largest = 0
        missing: list[tuple[Ident, int]] = []
        for name, entry, first in ahead_of:
            now = entries.get(name)
            if now is not entry:
                first = self._first_block(parent, name, now)
            if first is None:
                continue
            ident, size = first
            ahead += size
            if ahead > self.window and ahead > size:  # the next object, at least
                break
            window += 1
            if size > largest:
                largest = size
            # a walk read again (delivered before): the kernel has these pages; the few it dropped come alone
            if not held(ident) and not delivered_before(ident):
                missing.append(first)
        return window, largest, missing

    def confirming_fetch(self, key: str) -> trio.Event | None:
        """The end of a fetch of what an expired listing says ``key`` is, whose success would
        confirm it: one already running (fetched ahead), or, for a small object in a directory
        whose objects are being read one after another, one started now (the read that follows
        the lookup needs the bytes anyway; one GET instead of listing the directory again)."""
        listed = self.meta.listed(key)
        if listed is None or listed.is_dir or listed.info is None or not listed.info.etag:
            return None
        ident = (key, listed.info.etag, 0)
        fetch = self.fetcher.inflight.get(ident)
        if fetch is None and self._looked_up_by_get(ident, listed.info.size):
            self.stats["cache.lookups-by-get"] += 1
            fetch = self.fetcher.start(ident)
        return None if fetch is None else fetch.done

    def _looked_up_by_get(self, ident: Ident, size: int) -> bool:
        return (self.count > 0 and ident not in self.fetcher.bytes and self.fetcher.inner.capabilities.checks_versions
                and 0 < size <= min(self.fetcher.block_size, LOOKUP_BY_GET) and parent_of(ident[0]) in self.walks)


class MetadataAhead:
    """Reading one metadata object of a tree listed in one request fetches the tree's others."""

    def __init__(self, fetcher: BlockFetcher, stats: collections.Counter[str], is_metadata: Callable[[str], bool],
                 *, enabled: bool, cache_size: int):
        self.fetcher = fetcher
        self.stats = stats
        self.is_metadata = is_metadata
        self.enabled = enabled
        self.cache_size = cache_size
        #: per tree listed in one request: its metadata objects not fetched ahead yet
        self._trees: dict[str, list[tuple[str, str, int]]] = {}

    def remember(self, top: str, trees: dict[str, list[DirEntry]]) -> None:
        """The tree below ``top`` was listed in one request: note its small metadata objects."""
        metadata = [(join(folder, e.name), e.info.etag, e.info.size)
                    for folder, entries in trees.items() for e in entries
                    if self.is_metadata(e.name) and e.info is not None and e.info.etag
                    and 0 < e.info.size <= METADATA_AHEAD_SIZE]
        if metadata:
            if len(self._trees) > MAX_WALKS:
                self._trees.clear()
            self._trees[top] = sorted(metadata)

    def ahead(self, key: str) -> None:
        """``key`` is being read from its start: if it is a metadata object in a tree listed in one
        request (a dataset being opened), fetch that tree's other small metadata objects in the
        background, at most ``SIBLING_PARALLEL`` at once, each pinned to its listed ETag. Once a
        tree listing."""
        if not self.is_metadata(key) or not self.enabled or not self.fetcher.inner.capabilities.checks_versions or not self._trees:
            return
        top = parent_of(key)
        while top not in self._trees:
            if not top:
                return
            top = parent_of(top)
        budget = min(METADATA_AHEAD_BYTES, self.cache_size // 16)
        todo = []
        for k, etag, size in self._trees.pop(top):
            budget -= size
            if budget < 0:
                break
            if k != key and not self.fetcher.held((k, etag, 0)):
                todo.append((k, etag, 0))
        if todo:
            background.start_soon(self._fetch, todo, name=f"nczfs metadata of {top!r}")

    async def _fetch(self, idents: list[Ident]) -> None:
        """Fetch ``idents`` (first blocks) not cached or in flight yet, at most ``SIBLING_PARALLEL`` at once."""
        running = trio.Semaphore(SIBLING_PARALLEL)

        async def fetched(fetch: Fetch) -> None:
            try:
                await fetch.done.wait()
            finally:
                running.release()

        async with trio.open_nursery() as nursery:
            for ident in idents:
                await running.acquire()
                if self.fetcher.held(ident):
                    running.release()
                    continue
                self.stats["cache.metadata-prefetches"] += 1
                nursery.start_soon(fetched, self.fetcher.start(ident))
