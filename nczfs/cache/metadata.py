"""Metadata cache: what ``entry``, ``stat`` and ``list_dir`` said, missing names included, reused for a TTL.

A listing answers lookups of its children, a missing directory answers lookups below it; after
``list_after_misses`` lookups in one directory miss the cache, the directory is listed once
instead of being asked name by name (zarr opening chunk after chunk); a directory met among
several in its parent's listing is listed with its parent's whole tree (:mod:`.trees`).
The mount's own writes update the parent's cached listing and drop every other cached fact
they could change. A result that arrives after a write touched its key (a request racing a
write) is not kept: :meth:`MetadataCache.begin` and :meth:`MetadataCache.end` bracket every
backend request.
"""

from __future__ import annotations

import collections
from typing import Any, Awaitable, Callable, TypeVar

import trio

from nczfs.cache.trees import LIST_PAGE, TreeListings
from nczfs.toolbox.errors import KeyNotFound, Stale
from nczfs.toolbox.singleflight import SingleFlight
from nczfs.store.capabilities import hides
from nczfs.store.keys import join, parent_of
from nczfs.store.values import DirEntry, ObjectInfo
from nczfs.store import optional


#: lookups missing the cache in one directory before it is listed whole instead
LIST_AFTER_MISSES = 8
#: for this many TTLs after such a listing, a miss in that directory lists it again at once if
#: the listing was one page (``LIST_PAGE`` names: as cheap as one lookup); a larger directory
#: waits for ``list_after_misses`` misses again, so that one name looked up again and again past
#: the TTL does not cost a paginated listing (10,000 names: 10 LISTs) each time
HOT_TTLS = 10
#: metadata facts kept at most (expired ones are purged first when full)
MAX_META = 500_000
#: object versions whose size is remembered after what was cached about their key moved on
#: (a newer version seen, the TTL over), or where nothing is kept (TTL 0): a handle still reads
#: that version, block by block, and a block shorter than its size says is refused
MAX_VERSION_SIZES = 16384

#: "nothing cached about this key" (None is a cached answer: the key is missing)
MISSING = object()
T = TypeVar("T")


class MetadataCache:
    """Entries and listings of ``inner`` for ``ttl`` seconds; counts go to ``stats``."""

    def __init__(self, inner, stats: collections.Counter[str], *, ttl: float, clock: Callable[[], float],
                 list_after_misses: int, tree_keys: int):
        self.inner = inner
        self.stats = stats
        self.ttl = ttl
        self.clock = clock
        self.entries: dict[str, tuple[float, DirEntry | None]] = {}
        self.listings: dict[str, tuple[float, dict[str, DirEntry]]] = {}
        #: (key, ETag) -> size of versions seen (one version has one size), oldest first
        self._version_sizes: dict[tuple[str, str], int] = {}
        #: bumped by every write; a result is kept only if no write touched its key since it was asked
        self._epoch = 0
        self._touched: dict[str, int] = {}
        self._subtree_epoch = 0
        self._asking = 0
        #: lookups that missed the cache, by directory, and listings in flight
        self.list_after_misses = list_after_misses
        self._dir_misses: dict[str, int] = {}
        #: directories listed because of misses, until when a miss lists them again straight away
        self._hot_dirs: dict[str, float] = {}
        self._listing_now: dict[str, trio.Event] = {}
        #: entry and stat requests in flight, by (kind, key): misses of one key share one request
        self._asking_now: SingleFlight[tuple[str, str], tuple[Any, bool]] = SingleFlight(lambda k: repr(k[1]))
        self.trees = TreeListings(self, tree_keys)
        #: the end of a fetch whose success confirms what an expired listing says of a key (the
        #: prefetcher's)
        self.confirming: Callable[[str], trio.Event | None] = lambda key: None

    # ------------------------------------------------------------------ what is cached

    def fresh(self, expires: float) -> bool:
        return self.clock() < expires

    def fresh_listing(self, prefix: str) -> dict[str, DirEntry] | None:
        """``prefix``'s cached listing (name -> entry) if it has not expired."""
        hit = self.listings.get(prefix)
        return hit[1] if hit is not None and self.fresh(hit[0]) else None

    def cached_entry(self, key: str) -> object:
        """A cached answer for ``key`` (a DirEntry or None = missing), or MISSING."""
        hit = self.entries.get(key)
        if hit is not None and self.fresh(hit[0]):
            return hit[1]
        parent, _, name = key.rpartition("/")
        listing = self.fresh_listing(parent)
        if listing is not None and (name in listing or not hides(self.inner, key)):
            return listing.get(name)
        while parent:  # below a missing name nothing exists
            hit = self.entries.get(parent)
            if hit is not None and hit[1] is None and self.fresh(hit[0]):
                return None
            parent = parent_of(parent)
        return MISSING

    def listed(self, key: str) -> DirEntry | None:
        """What the parent's cached listing, fresh or expired, says of ``key``."""
        parent, _, name = key.rpartition("/")
        listing = self.listings.get(parent)
        return None if listing is None else listing[1].get(name)

    def version_entry(self, key: str, etag: str) -> DirEntry | None:
        """What is known of ``key``'s version ``etag``: its cached entry or its parent's listed
        one, fresh or expired (one version has one size), or None."""
        known = self.entries.get(key)
        for e in (known[1] if known is not None else None, self.listed(key)):
            if isinstance(e, DirEntry) and e.info is not None and e.info.etag == etag:
                return e
        return None

    def length(self, key: str, etag: str, start: int, end: int) -> int | None:
        """How many bytes of [start, end) version ``etag`` of ``key`` holds, if its size is known:
        from what is cached about the key, or, once that moved on to a newer version while a
        handle still reads this one, from the sizes of versions seen."""
        e = self.version_entry(key, etag)
        size: int | None
        if e is not None and e.info is not None:
            size = e.info.size
            self.remember_size(key, etag, size)
        elif (size := self._version_sizes.get((key, etag))) is None:
            return None
        return max(0, min(end, size) - start)

    # ------------------------------------------------------------------ keeping answers

    def begin(self) -> int:
        """A backend request about to run: writes from now on are remembered until it ends."""
        self._asking += 1
        return self._epoch

    def end(self, key: str, asked_at: int) -> bool:
        """The request begun at ``asked_at`` ended: may what it said of ``key`` be kept (no write
        touched ``key`` meanwhile)?"""
        self._asking -= 1
        keep = self.ttl > 0 and self._subtree_epoch <= asked_at and self._touched.get(key, -1) <= asked_at
        if self._asking == 0:
            self._touched.clear()
        return keep

    async def ask(self, key: str, call: Awaitable[T]) -> tuple[T, bool]:
        """Ask the backend; the answer may be kept if no write touched ``key`` meanwhile."""
        self.stats["meta.misses"] += 1
        asked_at = self.begin()
        keep = False
        try:
            out = await call
        except (KeyNotFound, Stale):
            raise
        except BaseException:
            self.stats["errors"] += 1
            raise
        finally:
            keep = self.end(key, asked_at)
        return out, keep

    async def _ask_once(self, kind: str, key: str, call: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """:meth:`ask` ``call()`` about ``key``, unless the same request (``kind``) is in flight:
        then its answer (the kernel looks one directory up again from every path walk through
        it at once, once its TTL is over). An answer that may not be kept (a write touched the
        key meanwhile) is not shared: a caller that waited for it asks again."""
        if self.ttl <= 0:
            return await self.ask(key, call())
        while True:
            joined = (kind, key) in self._asking_now
            if joined:
                self.stats["meta.coalesced"] += 1
            answer, keep = await self._asking_now.run((kind, key), lambda: self.ask(key, call()))
            if keep or not joined:
                return answer, keep

    def confirm(self, key: str, etag: str) -> None:
        """A GET pinned to ``etag`` (If-Match) just succeeded: what is known of that version of
        ``key`` is as current as a fresh HEAD would be, so it answers lookups for another TTL."""
        e = self.version_entry(key, etag)
        if e is not None and not e.is_dir:
            self.keep(key, e)
            self._confirm_directories_above(key)

    def _confirm_directories_above(self, key: str) -> None:
        """An object of ``key`` was just there, so were the directories above it (on S3 a
        directory is there while a key is below it): those the cache knows as directories
        answer lookups for another TTL. A reader's path walks (the kernel asks again for each
        directory of a path once its TTL is over, from every reader thread at once) cost no
        LIST while its reads succeed."""
        parent = parent_of(key)
        while parent:
            known = self.entries.get(parent)
            e = known[1] if known is not None else self.listed(parent)
            if not isinstance(e, DirEntry) or not e.is_dir:
                return
            self.keep(parent, e)
            parent = parent_of(parent)

    def room(self) -> None:
        if len(self.entries) + len(self.listings) < MAX_META:
            return
        now = self.clock()
        self.entries = {k: v for k, v in self.entries.items() if v[0] > now}
        self.listings = {k: v for k, v in self.listings.items() if v[0] > now}
        if len(self.entries) + len(self.listings) >= MAX_META:
            self.entries.clear()
            self.listings.clear()

    def keep(self, key: str, entry: DirEntry | None) -> None:
        self.room()
        self.entries[key] = (self.clock() + self.ttl, entry)
        self.seen(key, entry)

    def seen(self, key: str, entry: DirEntry | None) -> None:
        """The backend described ``entry`` of ``key``: the size of its version is remembered for
        the reads pinned to it, also where the answer is not kept (TTL 0, a write raced it)."""
        if entry is not None and entry.info is not None and entry.info.etag and not entry.is_dir:
            self.remember_size(key, entry.info.etag, entry.info.size)

    def remember_size(self, key: str, etag: str, size: int) -> None:
        sizes = self._version_sizes
        sizes.pop((key, etag), None)
        sizes[(key, etag)] = size
        if len(sizes) > MAX_VERSION_SIZES:
            del sizes[next(iter(sizes))]

    # ------------------------------------------------------------------ lookups

    async def lookup(self, key: str) -> object:
        """A cached answer for ``key``; after repeated misses in one directory, that directory's
        listing is fetched once (paginated LIST: 1,000 names a request) and answers them all."""
        if self.ttl <= 0:  # nothing is kept (a local directory): every answer is the store's
            return MISSING
        hit = self.cached_entry(key)
        if hit is MISSING:
            fetched = self.confirming(key)
            if fetched is not None:  # its success confirms the listed entry
                await fetched.wait()
                hit = self.cached_entry(key)
        if hit is not MISSING or self.list_after_misses <= 0:
            return hit
        parent = parent_of(key)
        if await self.trees.listed(parent):
            return self.cached_entry(key)
        if not self._list_now(parent):
            return MISSING
        if len(self._hot_dirs) > 10_000:
            self._hot_dirs.clear()
        # still being walked when this listing expires: list it again at once
        self._hot_dirs[parent] = self.clock() + HOT_TTLS * self.ttl
        try:
            await self.list_dir(parent)
        except KeyNotFound:
            return MISSING
        return self.cached_entry(key)

    def _list_now(self, parent: str) -> bool:
        """A lookup in ``parent`` missed the cache: list ``parent`` now (being listed already,
        listed recently because of misses and small, or enough misses counted)?"""
        listing = self.listings.get(parent)
        hot = self._hot_dirs.get(parent, 0.0) > self.clock() and (listing is None or len(listing[1]) <= LIST_PAGE)
        if parent in self._listing_now or hot:
            return True
        misses = self._dir_misses.get(parent, 0) + 1
        if misses < self.list_after_misses:
            if len(self._dir_misses) > 10_000:
                self._dir_misses.clear()
            self._dir_misses[parent] = misses
            return False
        self._dir_misses.pop(parent, None)
        return True

    async def entry(self, key: str) -> DirEntry | None:
        hit = await self.lookup(key)
        if hit is not MISSING:
            self.stats["meta.hits"] += 1
            return hit  # type: ignore[return-value]  # not MISSING: an entry or None
        found, keep = await self._ask_once("entry", key, lambda: self.inner.entry(key))
        (self.keep if keep else self.seen)(key, found)
        return found

    async def stat(self, key: str) -> ObjectInfo:
        hit = await self.lookup(key)
        if hit is None or (isinstance(hit, DirEntry) and hit.is_dir):
            self.stats["meta.hits"] += 1
            raise KeyNotFound(key)
        if isinstance(hit, DirEntry) and hit.info is not None:
            self.stats["meta.hits"] += 1
            return hit.info
        info, keep = await self._ask_once("stat", key, lambda: self.inner.stat(key))
        (self.keep if keep else self.seen)(key, DirEntry(key.rpartition("/")[2], False, info))
        return info

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        if self.fresh_listing(prefix) is not None or await self.trees.listed(prefix):
            listing = self.listings[prefix][1]
            self.stats["meta.hits"] += 1
            return [listing[n] for n in sorted(listing)]
        running = self._listing_now.get(prefix)
        if running is not None:  # one listing of a directory at a time; the others wait for it
            self.stats["meta.coalesced"] += 1
            await running.wait()
            return await self.list_dir(prefix)
        self._listing_now[prefix] = done = trio.Event()
        try:
            entries, keep = await self.ask(prefix, self.inner.list_dir(prefix))
        finally:
            del self._listing_now[prefix]
            done.set()
        if keep:
            self.room()
            self.listings[prefix] = (self.clock() + self.ttl, {e.name: e for e in entries})
            for e in entries:  # where keys need no tree (S3), an object "n" beside "n/x" lists as a folder
                if e.is_dir:
                    self.entries.pop(join(prefix, e.name), None)
        return entries

    async def dir_exists(self, prefix: str) -> bool:
        if prefix:
            hit = self.cached_entry(prefix)
            if hit is None or (isinstance(hit, DirEntry) and hit.is_dir):
                self.stats["meta.hits"] += 1
                return hit is not None
        return await optional.dir_exists(self.inner, prefix)

    # ------------------------------------------------------------------ invalidation

    def touch(self, key: str) -> None:
        """``key`` changed through the mount: forget what was cached about it and its ancestors."""
        self._epoch += 1
        if self._asking:
            self._touched[key] = self._epoch
        self.entries.pop(key, None)
        self.listings.pop(key, None)
        parent = parent_of(key)
        while True:
            if self._asking:
                self._touched[parent] = self._epoch
            self.entries.pop(parent, None)
            if parent == "":
                break
            parent = parent_of(parent)

    def stored(self, key: str, info: ObjectInfo | None) -> None:
        """An object was stored (info) or deleted (None), and touched: the parent listing follows;
        higher ones are dropped."""
        parent, _, name = key.rpartition("/")
        listing = self.listings.get(parent)
        if listing is not None:
            if info is not None:
                old = listing[1].get(name)
                if old is None or not old.is_dir:
                    listing[1][name] = DirEntry(name, False, info)
            elif name in listing[1] and not listing[1][name].is_dir:
                del listing[1][name]
        # a new key may create directories above it, a deletion may end them
        self._drop_listings_above(parent)
        if info is not None:
            if self.ttl > 0:
                self.entries[key] = (self.clock() + self.ttl, DirEntry(name, False, info))
            self.seen(key, DirEntry(name, False, info))

    def touch_subtree(self, prefix: str) -> None:
        """Directory ``prefix`` changed through the mount: forget everything cached below it too."""
        self._epoch += 1
        self._subtree_epoch = self._epoch
        start = prefix + "/"
        for table in (self.entries, self.listings):
            for k in [k for k in table if k == prefix or k.startswith(start)]:
                del table[k]
        self.touch(prefix)
        self._drop_listings_above(prefix)

    def _drop_listings_above(self, prefix: str) -> None:
        above = prefix
        while above:
            above = parent_of(above)
            self.listings.pop(above, None)

    def drop_listing_of(self, key: str) -> None:
        self.listings.pop(parent_of(key), None)
