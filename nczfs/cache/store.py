"""CachingStore: a bounded in-memory cache of object bytes and a TTL cache of metadata.

It sits right over the backend (``CachingStore(ThreadedStore(backend))``, below the NCZarr
layer), so every write the mount makes, its own consolidated-metadata rewrites included,
passes through it and updates or drops what it cached.

Bytes. Objects are read in blocks of ``block_size`` bytes (an object no larger than a block is
one block: zarr chunks are fetched whole with one GET, however the kernel splits the reads).
Blocks are cached under ``(key, etag, block)``, so a changed object (new ETag) is never served
from an old entry; the cache holds at most ``cache_size`` bytes (least recently used go first).
Concurrent reads of one block wait for a single backend request. A read that continues where
the previous read of the object ended starts parallel fetches of the next ``readahead`` blocks
(counted against the same bound; at most ``readahead`` prefetches run at once).
Objects read from their start one after another in one directory (zarr reading an array chunk
by chunk) fetch the next ``siblings`` objects of that directory ahead, in natural name order
(chunk ``2.10`` after ``2.9``), their first block each, at most ``SIBLING_PARALLEL`` at once,
at most ``sibling_window`` bytes of them ahead of the reader and at most a quarter of the cache
in flight; small ones in bursts (``SIBLING_BURST_BELOW``). What the mount stores (an object
of one block) is kept for reading back, but only the most recent, like blocks the kernel holds
(see :class:`ByteCache`).

Metadata. ``entry``/``stat``/``list_dir`` results, missing names included, are reused for
``ttl`` seconds; a listing answers lookups of its children, a missing directory answers
lookups below it; after ``list_after_misses`` lookups in one directory miss the cache, the
directory is listed once instead of being asked name by name (zarr opening chunk after chunk).
The mount's own writes update the parent's cached listing and drop every
other cached fact they could change. A result that arrives after a write touched its key
(a request racing a write) is not kept.

Concurrency: everything runs on the trio thread (no locks); fetches run as trio system tasks
so that a cancelled reader never strands the readers waiting for the same block.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import time
from dataclasses import dataclass, field
from typing import Awaitable, BinaryIO, Callable, TypeVar

import trio

from nczfs.cache.disk import DiskCache, source_identity
from nczfs.errors import BackendError, KeyNotFound, NczfsError, Stale
from nczfs.nczarr.validate import METADATA_NAMES
from nczfs.store.base import ByteRange, DirEntry, ObjectInfo, Staged, Upload, join, parent_of
from nczfs.store.wrapper import WrapperStore

log = logging.getLogger(__name__)

MiB = 1024 * 1024
BLOCK_SIZE = 8 * MiB
READAHEAD_BLOCKS = 4
#: lookups missing the cache in one directory before it is listed whole instead
LIST_AFTER_MISSES = 8
#: for this many TTLs after such a listing, a miss in that directory lists it again at once if
#: the listing was one page (``LIST_PAGE`` names: as cheap as one lookup); a larger directory
#: waits for ``list_after_misses`` misses again, so that one name looked up again and again past
#: the TTL does not cost a paginated listing (10,000 names: 10 LISTs) each time
HOT_TTLS = 10
LIST_PAGE = 1000
#: a directory met without a listing, whose parent lists it among at least this many directories
#: (a dataset's arrays and groups), is listed together with its parent's whole tree in one
#: request (S3: ListObjectsV2 without a delimiter), if that tree holds at most ``tree_keys`` keys
TREE_MIN_SUBDIRS = 2
TREE_KEYS = LIST_PAGE
#: seconds a tree found larger than that (or unlistable) is not asked for again
TREE_RETRY_AFTER = 60.0
#: once a metadata object (``.zarray``, ``zarr.json``, ...) of a tree listed in one request is
#: read, the tree's other metadata objects up to this size are fetched ahead (its reader, netCDF-C
#: or zarr-python opening the dataset, reads them next), up to ``METADATA_AHEAD_BYTES`` in all
METADATA_AHEAD_SIZE = 64 * 1024
METADATA_AHEAD_BYTES = 16 * MiB
#: metadata facts kept at most (expired ones are purged first when full)
MAX_META = 500_000
#: delivered blocks remembered after they were dropped (see ByteCache.refetch_part)
MAX_DROPPED = 65536
#: object versions whose size is remembered after what was cached about their key moved on
#: (a newer version seen, the TTL over): a handle still reads the old one, block by block
MAX_VERSION_SIZES = 16384
#: seconds a block's failed fetch answers the reads that ask for the block again: the kernel
#: reads once more, at once, what its read-ahead could not get, and that read would pay another
#: round of the store's attempts (S3 on a stalled server: 3 of 60 s)
FAILED_FOR = 1.0
#: sibling objects fetched ahead of a reader walking a directory (0: off)
SIBLINGS_AHEAD = 16
#: sibling fetches running at once (the rest of the backend's connections serve the readers)
SIBLING_PARALLEL = 8
#: bytes of sibling objects ahead of the reader, fetched or not: large chunks are fetched fewer
#: objects ahead (8 MiB chunks: 6), since memory fetched far ahead is memory freshly faulted in
#: (a 512 MiB zarr read, lab A/B of 9 pairs: median 2.29 s -> 2.04 s, daemon page faults
#: 55,000-70,000 -> 40,000-50,000, with 16 objects of 8 MiB ahead against 6)
SIBLING_WINDOW = 48 * MiB
#: sibling objects smaller than this are fetched in bursts, once half of those ahead are missing,
#: instead of one as each is read: SeaweedFS spends ~1.5 ms of CPU on a GET that arrives alone and
#: ~0.8 ms on one of 4-16 at once (lab, 2,000 GETs of 4 KiB); 10,000 chunks of 4 KiB read with
#: zarr, 6 pairs: SeaweedFS CPU median 12.8 s -> 10.8 s, wall 21.2 s -> 19.9 s. Larger objects
#: are fetched one as each is read (a 512 MiB read in bursts of 3 chunks measured slower)
SIBLING_BURST_BELOW = 1 * MiB
#: objects up to this size, in a directory being walked, are looked up by fetching them
LOOKUP_BY_GET = 1024 * 1024
#: directories whose natural name order and walk position are remembered
MAX_WALKS = 1024

_MISSING = object()
T = TypeVar("T")


def _natural(name: str) -> tuple[str | int, ...]:
    """Sort key that puts ``2.9`` before ``2.10`` (zarr chunk keys in the order zarr reads them)."""
    return tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", name)))


def physical_memory() -> int:
    """The machine's RAM in bytes (0: unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def default_cache_size() -> int:
    """An eighth of the machine's RAM, between 64 MiB and 1 GiB."""
    ram = physical_memory() or 8 * 1024 * MiB
    return max(64 * MiB, min(1024 * MiB, ram // 8))


class ByteCache:
    """Blocks by ``(key, etag, index)``, least recently used evicted; never holds more than ``limit`` bytes.

    A block whose every byte has been read (``served``) is *delivered*: the kernel's page cache
    holds it now, so the cache keeps at most ``delivered_limit`` bytes of such blocks (oldest
    go first). A big object streamed through the mount then turns over a small set of buffers
    instead of filling the whole cache with fresh memory, whose first touch costs more CPU
    than the copy itself. A delivered block that is asked for again counts as undelivered.
    """

    def __init__(self, limit: int, delivered_limit: int):
        self.limit = limit
        self.used = 0
        self.delivered_limit = delivered_limit
        self._items: collections.OrderedDict[tuple[str, str, int], bytes] = collections.OrderedDict()
        self._by_key: dict[str, set[tuple[str, str, int]]] = {}
        #: bytes served so far of blocks not yet delivered, and the delivered blocks, oldest first
        self._served: dict[tuple[str, str, int], int] = {}
        self._delivered: collections.OrderedDict[tuple[str, str, int], None] = collections.OrderedDict()
        self.delivered_used = 0
        #: blocks asked for again after their delivery: kept like blocks never read whole
        self._again: set[tuple[str, str, int]] = set()
        #: delivered blocks dropped for the bound, most recent last
        self._dropped: collections.OrderedDict[tuple[str, str, int], None] = collections.OrderedDict()
        #: blocks the mount stored and nobody read since, oldest first (bound: ``delivered_limit``)
        self._written: collections.OrderedDict[tuple[str, str, int], None] = collections.OrderedDict()
        self.written_used = 0

    def get(self, ident: tuple[str, str, int]) -> bytes | None:
        data = self._items.get(ident)
        if data is not None:
            self._items.move_to_end(ident)
            if ident in self._written:  # read back: an ordinary block from now on
                del self._written[ident]
                self.written_used -= len(data)
            if ident in self._delivered:  # wanted again: the kernel did not keep it
                del self._delivered[ident]
                self.delivered_used -= len(data)
                self._again.add(ident)
        return data

    def served(self, ident: tuple[str, str, int], count: int) -> None:
        """``count`` bytes of the block were handed to a reader."""
        data = self._items.get(ident)
        if data is None or ident in self._delivered or ident in self._again:
            return
        done = self._served.get(ident, 0) + count
        if done < len(data):
            self._served[ident] = done
            return
        self._served.pop(ident, None)
        self._delivered[ident] = None
        self.delivered_used += len(data)
        while self.delivered_used > self.delivered_limit:
            oldest = next(iter(self._delivered))
            self._remove(oldest)
            self._dropped[oldest] = None
            if len(self._dropped) > MAX_DROPPED:
                self._dropped.popitem(last=False)

    def refetch_part(self, ident: tuple[str, str, int]) -> bool:
        """Should a read of a part of this block fetch only that part? Yes, once, for a block
        dropped after its delivery: the kernel lost a few of its pages (reclaim picks pages, not
        files); asked again, the whole block is fetched and kept."""
        if ident in self._dropped:
            del self._dropped[ident]
            return True
        return False

    def __contains__(self, ident: tuple[str, str, int]) -> bool:
        return ident in self._items

    def delivered_before(self, ident: tuple[str, str, int]) -> bool:
        """Was the block read whole by the kernel, then dropped here? (Its pages are in the
        kernel's page cache unless it reclaimed them.)"""
        return ident in self._dropped

    def put(self, ident: tuple[str, str, int], data: bytes, written: bool = False) -> None:
        """Keep ``data``; ``written``: bytes the mount stored, kept like delivered blocks (at most
        ``delivered_limit`` bytes of them, the most recent) until they are read."""
        if len(data) > self.limit:
            return
        self._remove(ident)
        self._dropped.pop(ident, None)
        while self.used + len(data) > self.limit:
            self._remove(next(iter(self._items)))
        self._items[ident] = data
        self._by_key.setdefault(ident[0], set()).add(ident)
        self.used += len(data)
        if written:
            self._written[ident] = None
            self.written_used += len(data)
            while self.written_used > self.delivered_limit:
                self._remove(next(iter(self._written)))

    def _remove(self, ident: tuple[str, str, int]) -> None:
        data = self._items.pop(ident, None)
        if data is None:
            return
        self.used -= len(data)
        self._served.pop(ident, None)
        self._again.discard(ident)
        if ident in self._delivered:
            del self._delivered[ident]
            self.delivered_used -= len(data)
        if ident in self._written:
            del self._written[ident]
            self.written_used -= len(data)
        idents = self._by_key.get(ident[0])
        if idents is not None:
            idents.discard(ident)
            if not idents:
                del self._by_key[ident[0]]

    def drop(self, key: str) -> None:
        for ident in list(self._by_key.get(key, ())):
            self._remove(ident)

    def drop_under(self, prefix: str) -> None:
        start = prefix + "/" if prefix else ""
        for key in [k for k in self._by_key if k == prefix or k.startswith(start)]:
            self.drop(key)


@dataclass
class _Fetch:
    """One backend request in flight; every reader of the block waits for it."""

    done: trio.Event = field(default_factory=trio.Event)
    data: bytes = b""
    exc: BaseException | None = None

    async def wait(self) -> bytes:
        await self.done.wait()
        if self.exc is not None:
            raise self.exc
        return self.data


class CachingStore(WrapperStore):
    def __init__(
        self,
        inner,
        *,
        cache_size: int | None = None,
        ttl: float = 1.0,
        cache_bytes: bool = True,
        block_size: int = BLOCK_SIZE,
        readahead: int = READAHEAD_BLOCKS,
        siblings: int = SIBLINGS_AHEAD,
        sibling_window: int = SIBLING_WINDOW,
        list_after_misses: int = LIST_AFTER_MISSES,
        tree_keys: int = TREE_KEYS,
        clock: Callable[[], float] = time.monotonic,
        disk: DiskCache | None = None,
        kernel_keeps_reads: bool = True,
    ):
        super().__init__(inner)
        #: blocks kept on local disk across mounts (--cache-dir), consulted before the backend
        self.disk = disk
        self.cache_size = default_cache_size() if cache_size is None else cache_size
        self.ttl = ttl
        self.block_size = max(1, min(block_size, self.cache_size)) if self.cache_size else block_size
        self.cache_bytes = cache_bytes and self.cache_size > 0
        self.readahead = readahead
        self.siblings = siblings
        self.sibling_window = sibling_window
        self.clock = clock
        #: delivered blocks (see ByteCache) kept: a sixteenth of the cache, at least two blocks;
        #: all of them when the kernel keeps no pages (direct I/O), like any other block
        delivered = max(self.cache_size // 16, 2 * self.block_size) if kernel_keeps_reads else self.cache_size
        self.bytes = ByteCache(self.cache_size, delivered)
        self._inflight: dict[tuple[str, str, int], _Fetch] = {}
        #: fetches that failed, and until when they answer (FAILED_FOR)
        self._failed: dict[tuple[str, str, int], tuple[_Fetch, float]] = {}
        #: (key, ETag) -> size of versions seen (one version has one size), oldest first
        self._version_sizes: dict[tuple[str, str], int] = {}
        self._prefetching = 0
        #: sibling fetches in flight and their bytes
        self._sibling_fetches = 0
        self._sibling_bytes = 0
        #: per directory: (listing it was built from, names in natural order, name -> position)
        self._orders: collections.OrderedDict[str, tuple[dict, list[str], dict[str, int]]] = collections.OrderedDict()
        #: per directory: position of the object last read from its start
        self._walks: dict[str, int] = {}
        #: where the last read of each object ended (block index), for sequential detection
        self._last_block: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._entries: dict[str, tuple[float, DirEntry | None]] = {}
        self._listings: dict[str, tuple[float, dict[str, DirEntry]]] = {}
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
        #: trees listed in one request (see TREE_MIN_SUBDIRS): at most this many keys, 0: never;
        #: directories whose tree is being listed, and until when one is not listed again
        self.tree_keys = tree_keys
        self._tree_now: dict[str, trio.Event] = {}
        self._no_tree: dict[str, float] = {}
        #: per tree listed in one request: its metadata objects not fetched ahead yet
        self._tree_metadata: dict[str, list[tuple[str, str, int]]] = {}
        self.stats: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------------ counters

    def counters(self) -> dict[str, int]:
        out = dict(self.inner.counters())
        out.update(self.stats)
        out["cache.bytes-held"] = self.bytes.used
        out["cache.bytes-held-delivered"] = self.bytes.delivered_used
        out["cache.bytes-held-written"] = self.bytes.written_used
        out["cache.bytes-limit"] = self.cache_size
        if self.disk is not None:
            out.update(self.disk.counters())
        return out

    # ------------------------------------------------------------------ metadata

    def _fresh(self, expires: float) -> bool:
        return self.clock() < expires

    def _fresh_listing(self, prefix: str) -> dict[str, DirEntry] | None:
        """``prefix``'s cached listing (name -> entry) if it has not expired."""
        hit = self._listings.get(prefix)
        return hit[1] if hit is not None and self._fresh(hit[0]) else None

    def _cached_entry(self, key: str) -> object:
        """A cached answer for ``key`` (a DirEntry or None = missing), or _MISSING."""
        hit = self._entries.get(key)
        if hit is not None and self._fresh(hit[0]):
            return hit[1]
        parent, _, name = key.rpartition("/")
        listing = self._fresh_listing(parent)
        if listing is not None and (name in listing or not self.inner.hides(key)):
            return listing.get(name)
        while parent:  # below a missing name nothing exists
            hit = self._entries.get(parent)
            if hit is not None and hit[1] is None and self._fresh(hit[0]):
                return None
            parent = parent_of(parent)
        return _MISSING

    def _begin(self) -> int:
        """A backend request about to run: writes from now on are remembered until it ends."""
        self._asking += 1
        return self._epoch

    def _end(self, key: str, asked_at: int) -> bool:
        """The request begun at ``asked_at`` ended: may what it said of ``key`` be kept (no write
        touched ``key`` meanwhile)?"""
        self._asking -= 1
        keep = self.ttl > 0 and self._subtree_epoch <= asked_at and self._touched.get(key, -1) <= asked_at
        if self._asking == 0:
            self._touched.clear()
        return keep

    async def _ask(self, key: str, call: Awaitable[T]) -> tuple[T, bool]:
        """Ask the backend; the answer may be kept if no write touched ``key`` meanwhile."""
        self.stats["meta.misses"] += 1
        asked_at = self._begin()
        keep = False
        try:
            out = await call
        except (KeyNotFound, Stale):
            raise
        except BaseException:
            self.stats["errors"] += 1
            raise
        finally:
            keep = self._end(key, asked_at)
        return out, keep

    def _listed(self, key: str) -> DirEntry | None:
        """What the parent's cached listing, fresh or expired, says of ``key``."""
        parent, _, name = key.rpartition("/")
        listing = self._listings.get(parent)
        return None if listing is None else listing[1].get(name)

    def _confirm(self, key: str, etag: str) -> None:
        """A GET pinned to ``etag`` (If-Match) just succeeded: what is known of that version of
        ``key`` is as current as a fresh HEAD would be, so it answers lookups for another TTL."""
        e = self._version_entry(key, etag)
        if e is not None and not e.is_dir:
            self._keep(key, e)

    def _version_entry(self, key: str, etag: str) -> DirEntry | None:
        """What is known of ``key``'s version ``etag``: its cached entry or its parent's listed
        one, fresh or expired (one version has one size), or None."""
        known = self._entries.get(key)
        for e in (known[1] if known is not None else None, self._listed(key)):
            if isinstance(e, DirEntry) and e.info is not None and e.info.etag == etag:
                return e
        return None

    def _room(self) -> None:
        if len(self._entries) + len(self._listings) < MAX_META:
            return
        now = self.clock()
        self._entries = {k: v for k, v in self._entries.items() if v[0] > now}
        self._listings = {k: v for k, v in self._listings.items() if v[0] > now}
        if len(self._entries) + len(self._listings) >= MAX_META:
            self._entries.clear()
            self._listings.clear()

    def _keep(self, key: str, entry: DirEntry | None) -> None:
        self._room()
        self._entries[key] = (self.clock() + self.ttl, entry)
        if entry is not None and entry.info is not None and entry.info.etag and not entry.is_dir:
            self._remember_size(key, entry.info.etag, entry.info.size)

    def _remember_size(self, key: str, etag: str, size: int) -> None:
        sizes = self._version_sizes
        sizes.pop((key, etag), None)
        sizes[(key, etag)] = size
        if len(sizes) > MAX_VERSION_SIZES:
            del sizes[next(iter(sizes))]

    async def _lookup(self, key: str) -> object:
        """A cached answer for ``key``; after repeated misses in one directory, that directory's
        listing is fetched once (paginated LIST: 1,000 names a request) and answers them all."""
        hit = self._cached_entry(key)
        if hit is _MISSING and self.ttl > 0:
            fetch = self._confirming_fetch(key)
            if fetch is not None:  # its success confirms the listed entry
                await fetch.done.wait()
                hit = self._cached_entry(key)
        if hit is not _MISSING or self.ttl <= 0 or self.list_after_misses <= 0:
            return hit
        parent = parent_of(key)
        if await self._tree_listed(parent):
            return self._cached_entry(key)
        listing = self._listings.get(parent)
        hot = self._hot_dirs.get(parent, 0.0) > self.clock() and (listing is None or len(listing[1]) <= LIST_PAGE)
        if parent not in self._listing_now and not hot:
            misses = self._dir_misses.get(parent, 0) + 1
            if misses < self.list_after_misses:
                if len(self._dir_misses) > 10_000:
                    self._dir_misses.clear()
                self._dir_misses[parent] = misses
                return _MISSING
            self._dir_misses.pop(parent, None)
        if len(self._hot_dirs) > 10_000:
            self._hot_dirs.clear()
        # still being walked when this listing expires: list it again at once
        self._hot_dirs[parent] = self.clock() + HOT_TTLS * self.ttl
        try:
            await self.list_dir(parent)
        except KeyNotFound:
            return _MISSING
        return self._cached_entry(key)

    async def _tree_listed(self, prefix: str) -> bool:
        """``prefix`` has no fresh listing: where its parent's listing (fresh or not) shows it
        among several directories (a dataset's arrays, read one after another by netCDF-C, or a
        tree walked by ``ls -R``, ``find``, ``cp -r``), list the parent's whole tree in one
        request, if it holds at most ``tree_keys`` keys: every directory in it gets its listing.
        True if ``prefix`` now has a fresh listing."""
        if not prefix or self.tree_keys <= 0 or self.ttl <= 0:
            return False
        top = parent_of(prefix)
        if self._no_tree.get(top, 0.0) > self.clock():
            return False
        known = self._listings.get(top)
        me = None if known is None else known[1].get(prefix.rpartition("/")[2])
        if me is None or not me.is_dir:
            return False
        running = self._tree_now.get(top)
        if running is not None:
            self.stats["meta.coalesced"] += 1
            await running.wait()
            return self._fresh_listing(prefix) is not None
        if sum(1 for e in known[1].values() if e.is_dir) < TREE_MIN_SUBDIRS:  # type: ignore[union-attr]
            self._not_tree(top, max(known[0], self.clock() + self.ttl))  # type: ignore[index]
            return False
        self._tree_now[top] = done = trio.Event()
        try:
            trees, keep = await self._ask(top, self.inner.list_tree(top, self.tree_keys))
        except NczfsError as exc:  # the names are then asked one by one, as before
            log.debug("%r: tree not listed: %s", top, exc)
            trees, keep = None, False
        finally:
            del self._tree_now[top]
            done.set()
        if trees is None:
            self._not_tree(top, self.clock() + TREE_RETRY_AFTER)
            return False
        self.stats["meta.tree-listings"] += 1
        if not keep:
            return False
        self._room()
        expires = self.clock() + self.ttl
        metadata = []
        for folder, entries in trees.items():
            self._listings[folder] = (expires, {e.name: e for e in entries})
            metadata.extend((join(folder, e.name), e.info.etag, e.info.size) for e in entries
                            if e.name in METADATA_NAMES and e.info is not None and e.info.etag
                            and 0 < e.info.size <= METADATA_AHEAD_SIZE)
        if metadata:
            if len(self._tree_metadata) > MAX_WALKS:
                self._tree_metadata.clear()
            self._tree_metadata[top] = sorted(metadata)
        return prefix in trees

    def _not_tree(self, top: str, until: float) -> None:
        if len(self._no_tree) > 10_000:
            self._no_tree.clear()
        self._no_tree[top] = until

    def _confirming_fetch(self, key: str) -> _Fetch | None:
        """A fetch of what an expired listing says ``key`` is, whose success would confirm it:
        one already running (fetched ahead), or, for a small object in a directory whose
        objects are being read one after another, one started now (the read that follows
        the lookup needs the bytes anyway; one GET instead of listing the directory again)."""
        listed = self._listed(key)
        if listed is None or listed.is_dir or listed.info is None or not listed.info.etag:
            return None
        ident = (key, listed.info.etag, 0)
        fetch = self._inflight.get(ident)
        if (fetch is None and self.cache_bytes and self.siblings > 0 and ident not in self.bytes and self.inner.checks_versions
                and 0 < listed.info.size <= min(self.block_size, LOOKUP_BY_GET) and parent_of(key) in self._walks):
            self.stats["cache.lookups-by-get"] += 1
            fetch = self._start(ident)
        return fetch

    async def entry(self, key: str) -> DirEntry | None:
        hit = await self._lookup(key)
        if hit is not _MISSING:
            self.stats["meta.hits"] += 1
            return hit  # type: ignore[return-value]
        found, keep = await self._ask(key, self.inner.entry(key))
        if keep:
            self._keep(key, found)
        return found

    async def stat(self, key: str) -> ObjectInfo:
        hit = await self._lookup(key)
        if hit is None or (isinstance(hit, DirEntry) and hit.is_dir):
            self.stats["meta.hits"] += 1
            raise KeyNotFound(key)
        if isinstance(hit, DirEntry) and hit.info is not None:
            self.stats["meta.hits"] += 1
            return hit.info
        info, keep = await self._ask(key, self.inner.stat(key))
        if keep:
            self._keep(key, DirEntry(key.rpartition("/")[2], False, info))
        return info

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        if self._fresh_listing(prefix) is not None or await self._tree_listed(prefix):
            listing = self._listings[prefix][1]
            self.stats["meta.hits"] += 1
            return [listing[n] for n in sorted(listing)]
        running = self._listing_now.get(prefix)
        if running is not None:  # one listing of a directory at a time; the others wait for it
            self.stats["meta.coalesced"] += 1
            await running.wait()
            return await self.list_dir(prefix)
        self._listing_now[prefix] = done = trio.Event()
        try:
            entries, keep = await self._ask(prefix, self.inner.list_dir(prefix))
        finally:
            del self._listing_now[prefix]
            done.set()
        if keep:
            self._room()
            self._listings[prefix] = (self.clock() + self.ttl, {e.name: e for e in entries})
        return entries

    async def dir_exists(self, prefix: str) -> bool:
        if prefix:
            hit = self._cached_entry(prefix)
            if hit is None or (isinstance(hit, DirEntry) and hit.is_dir):
                self.stats["meta.hits"] += 1
                return hit is not None
        return await self.inner.dir_exists(prefix)

    # ------------------------------------------------------------------ invalidation

    def _touch(self, key: str) -> None:
        """``key`` changed through the mount: forget what was cached about it and its ancestors."""
        self._epoch += 1
        if self._asking:
            self._touched[key] = self._epoch
        self.bytes.drop(key)
        self._last_block.pop(key, None)
        self._entries.pop(key, None)
        self._listings.pop(key, None)
        parent = parent_of(key)
        while True:
            if self._asking:
                self._touched[parent] = self._epoch
            self._entries.pop(parent, None)
            if parent == "":
                break
            parent = parent_of(parent)

    def _changed_elsewhere(self, key: str) -> None:
        """``key`` was found changed in the store (a version read is gone): forget what was cached
        about it, its parent's listing included, which holds the old version's size and ETag."""
        self._touch(key)  # an answer about it or its parent still on its way is not kept either
        self._listings.pop(parent_of(key), None)

    def _written(self, key: str, info: ObjectInfo | None) -> None:
        """An object was stored (info) or deleted (None): the parent listing follows; higher ones are dropped."""
        self._touch(key)
        parent, _, name = key.rpartition("/")
        listing = self._listings.get(parent)
        if listing is not None:
            if info is not None:
                old = listing[1].get(name)
                if old is None or not old.is_dir:
                    listing[1][name] = DirEntry(name, False, info)
            elif name in listing[1] and not listing[1][name].is_dir:
                del listing[1][name]
        # a new key may create directories above it, a deletion may end them
        above = parent
        while above:
            above = parent_of(above)
            self._listings.pop(above, None)
        if info is not None and self.ttl > 0:
            self._entries[key] = (self.clock() + self.ttl, DirEntry(name, False, info))

    def _touch_subtree(self, prefix: str) -> None:
        self._epoch += 1
        self._subtree_epoch = self._epoch
        start = prefix + "/"
        self.bytes.drop_under(prefix)
        for table in (self._entries, self._listings):
            for k in [k for k in table if k == prefix or k.startswith(start)]:
                del table[k]
        self._touch(prefix)
        above = prefix
        while above:
            above = parent_of(above)
            self._listings.pop(above, None)

    async def _store(self, key: str, call: Awaitable[ObjectInfo]) -> ObjectInfo:
        """Run a write of ``key``; whatever happens, nothing cached before it is trusted after it."""
        self._touch(key)
        try:
            info = await call
        except BaseException as exc:
            self._touch(key)
            if isinstance(exc, Exception) and not isinstance(exc, (KeyNotFound, Stale)):
                self.stats["errors"] += 1  # a write that failed, as a read that did
            raise
        self._written(key, info)
        return info

    def _keep_written(self, key: str, info: ObjectInfo, data: bytes | bytearray | memoryview) -> None:
        """What the mount just stored (a one-block object) is read back from memory while it is
        among the most recent writes (:meth:`ByteCache.put` with ``written``)."""
        if self.cache_bytes and len(data) <= self.block_size and info.etag:
            self.bytes.put((key, info.etag, 0), bytes(data), written=True)

    async def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        info = await self._store(key, self.inner.set(key, data))
        self._keep_written(key, info, data)
        return info

    async def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        return await self._store(key, self.inner.set_file(key, f, size))

    async def stage(self, key: str, data: bytes) -> Staged | None:
        staged = await self.inner.stage(key, data)
        if staged is None:
            return None

        kept = data if self.cache_bytes and len(data) <= self.block_size else None  # not the bytes of a big one

        async def commit() -> ObjectInfo:
            info = await self._store(key, staged.commit())  # type: ignore[arg-type]
            if kept is not None:
                self._keep_written(key, info, kept)
            return info

        return Staged(key, commit, staged.abort)

    async def open_upload(self, key: str) -> Upload | None:
        upload = await self.inner.open_upload(key)
        if upload is None:
            return None

        async def complete(size: int) -> ObjectInfo:
            return await self._store(key, upload.complete(size))  # type: ignore[arg-type]

        return Upload(key, upload.part_size, upload.send, complete, upload.abort)

    async def delete(self, key: str) -> None:
        self._touch(key)
        try:
            await self.inner.delete(key)
        finally:
            self._written(key, None)

    async def copy(self, src: str, dst: str) -> ObjectInfo:
        return await self._store(dst, self.inner.copy(src, dst))

    async def rename(self, src: str, dst: str) -> None:
        self._touch(src)
        self._touch(dst)
        try:
            await self.inner.rename(src, dst)
        finally:
            self._written(src, None)
            self._touch(dst)
            self._drop_listing_of(dst)

    def _drop_listing_of(self, key: str) -> None:
        self._listings.pop(parent_of(key), None)

    async def rename_dir(self, src: str, dst: str) -> None:
        self._touch_subtree(src)
        self._touch_subtree(dst)
        try:
            await self.inner.rename_dir(src, dst)
        finally:
            self._touch_subtree(src)
            self._touch_subtree(dst)

    async def _changing_dir(self, prefix: str, call: Awaitable[None]) -> None:
        """Run a change of directory ``prefix``; whatever happens, nothing cached below it is trusted after it."""
        try:
            await call
        finally:
            self._touch_subtree(prefix)

    async def mkdir(self, prefix: str) -> None:
        await self._changing_dir(prefix, self.inner.mkdir(prefix))

    async def rmdir(self, prefix: str) -> None:
        await self._changing_dir(prefix, self.inner.rmdir(prefix))

    async def forget_dir(self, prefix: str) -> None:
        await self._changing_dir(prefix, self.inner.forget_dir(prefix))

    # ------------------------------------------------------------------ bytes

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        if not self.cache_bytes:
            return await self.inner.get(key, rng)
        info = await self.stat(key)
        try:
            return await self._read(key, rng, info.etag)
        except Stale:  # changed since the cached stat: read the current version
            self._changed_elsewhere(key)
            return await self._read(key, rng, (await self.stat(key)).etag)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        if not self.cache_bytes:
            return await self.inner.get_version(key, rng, etag)
        if not etag:
            return await self.get(key, rng)
        try:
            return await self._read(key, rng, etag)
        except Stale:  # the object changed: what is cached about it is out of date too
            self._changed_elsewhere(key)
            raise

    async def _read(self, key: str, rng: ByteRange | None, etag: str) -> bytes | memoryview:
        """``rng`` of the object at ``etag``; a part of a block is a (read-only) view of it, not a copy."""
        if not etag:
            return await self.inner.get(key, rng)
        start = rng.start if rng is not None else 0
        end = rng.end if rng is not None else None
        if end is not None and end <= start:
            return await self.inner.get_version(key, rng, etag)
        b = self.block_size
        first = start // b
        ident = (key, etag, first)
        if (end is not None and (end - 1) // b == first and ident not in self.bytes and ident not in self._inflight
                and self.bytes.refetch_part(ident)):
            data = self._as_long_as_its_version(key, etag, start, self._length(key, etag, start, end),
                                                await self.inner.get_version(key, rng, etag))
            self.stats["cache.part-refetches"] += 1
            self.stats["cache.bytes-fetched"] += len(data)
            self.stats["cache.bytes-served"] += len(data)
            return data
        if end is not None:
            blocks = await self._blocks(key, etag, range(first, (end - 1) // b + 1))
        else:  # to the end: blocks until a short one
            blocks, i = [], first
            while True:
                got = (await self._blocks(key, etag, range(i, i + 1)))[0]
                blocks.append(got)
                if len(got) < b:
                    break
                i += 1
        self._after_read(key, etag, first, first + len(blocks) - 1, len(blocks[-1]) == b)
        if end is not None:  # a ranged read: a reader's (the kernel's), so count what it got
            for i, got in enumerate(blocks, first):
                self.bytes.served((key, etag, i), max(0, min(end, i * b + len(got)) - max(start, i * b)))
        data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
        lo = start - first * b
        hi = None if end is None else end - first * b
        # a view, not a copy: the FUSE adapter copies it into its reply
        out = memoryview(data)[lo:hi] if (lo or (hi is not None and hi < len(data))) else bytes(data)
        self.stats["cache.bytes-served"] += len(out)  # to readers, from blocks cached or just fetched
        return out

    async def _blocks(self, key: str, etag: str, indexes: range) -> list[bytes]:
        fetches: list[bytes | _Fetch] = []
        for i in indexes:
            ident = (key, etag, i)
            data = self.bytes.get(ident)
            if data is not None:
                self.stats["cache.hits"] += 1
                fetches.append(data)
                continue
            fetch = self._inflight.get(ident)
            if fetch is not None:
                self.stats["cache.coalesced"] += 1
            elif (fetch := self._just_failed(ident)) is not None:
                self.stats["cache.failures-repeated"] += 1
            else:
                self.stats["cache.misses"] += 1
                fetch = self._start(ident)
            fetches.append(fetch)
        if indexes.start == 0:
            self._siblings_ahead(key)
            if key.rpartition("/")[2] in METADATA_NAMES:
                self._metadata_ahead(key)
        out = []
        for f in fetches:
            out.append(await f.wait() if isinstance(f, _Fetch) else f)
        return out

    def _length(self, key: str, etag: str, start: int, end: int) -> int | None:
        """How many bytes of [start, end) version ``etag`` of ``key`` holds, if its size is known:
        from what is cached about the key, or, once that moved on to a newer version while a
        handle still reads this one, from the sizes of versions seen."""
        e = self._version_entry(key, etag)
        if e is not None and e.info is not None:
            size = e.info.size
            self._remember_size(key, etag, size)
        elif (size := self._version_sizes.get((key, etag))) is None:
            return None
        return max(0, min(end, size) - start)

    def _as_long_as_its_version(self, key: str, etag: str, start: int, want: int | None, data: bytes) -> bytes:
        """``data``, the backend's answer for bytes from ``start`` of that version, if it is as long
        as the version's size says (``want``, from :meth:`_length`; None: unknown). A server or
        proxy may answer a GET pinned to a version with fewer bytes and a self-consistent
        Content-Range: kept, that block would read as the file's end, here and, through the disk
        cache, after every remount. It is Stale instead (the reader gets the new version, or ESTALE)."""
        if want is not None and len(data) != want:
            raise Stale(f"{key!r}: {want} bytes from {start} of version {etag} came as {len(data)} bytes: "
                        "the object is changing")
        return data

    def _just_failed(self, ident: tuple[str, str, int]) -> _Fetch | None:
        """The fetch of this block that failed less than FAILED_FOR seconds ago, if any."""
        failed = self._failed.get(ident)
        if failed is not None and self.clock() < failed[1]:
            return failed[0]
        return None

    def _remember_failure(self, ident: tuple[str, str, int], fetch: _Fetch) -> None:
        now = self.clock()
        while self._failed:  # oldest first: they are kept in the order they failed
            oldest = next(iter(self._failed))
            if self._failed[oldest][1] > now:
                break
            del self._failed[oldest]
        self._failed.pop(ident, None)
        self._failed[ident] = (fetch, now + FAILED_FOR)

    def _start(self, ident: tuple[str, str, int], prefetch: bool = False, sibling: int = 0) -> _Fetch:
        """Fetch a block in a system task; ``prefetch``: sequential readahead, ``sibling``: the
        expected bytes of a sibling object fetched ahead."""
        fetch = self._inflight[ident] = _Fetch()
        if prefetch:
            self._prefetching += 1
        if sibling:
            self._sibling_fetches += 1
            self._sibling_bytes += sibling
        trio.lowlevel.spawn_system_task(self._fetch, ident, fetch, prefetch, sibling, name=f"nczfs fetch {ident[0]}")
        return fetch

    async def _fetch(self, ident: tuple[str, str, int], fetch: _Fetch, prefetch: bool, sibling: int = 0) -> None:
        key, etag, i = ident
        b = self.block_size
        asked_at = self._begin()
        confirmed = False  # by the backend (a disk cache hit says nothing of the current version)
        try:
            length = self._length(key, etag, i * b, (i + 1) * b)
            data = await self.disk.get(key, etag, b, i, length) if self.disk is not None else None
            if data is None:
                data = await self.inner.get_version(key, ByteRange(i * b, (i + 1) * b), etag)
                data = self._as_long_as_its_version(key, etag, i * b, length, data)
                confirmed = True
                self.stats["cache.bytes-fetched"] += len(data)
                if self.disk is not None:
                    self.disk.put_soon(key, etag, b, i, data)  # in the background
            fetch.data = data
        except BaseException as exc:
            failed = not isinstance(exc, (KeyNotFound, Stale))  # not an answer of the store's
            if failed:
                self.stats["errors"] += 1
            if not isinstance(exc, Exception):  # cancelled (unmount): the waiters get an error of their own
                fetch.exc = BackendError(f"{key!r}: read cancelled")
                raise
            fetch.exc = exc
            if failed:
                self._remember_failure(ident, fetch)
        else:
            if self._inflight.get(ident) is fetch:
                self.bytes.put(ident, fetch.data)
        finally:
            if self._end(key, asked_at) and confirmed and self.inner.checks_versions:
                self._confirm(key, etag)
            if self._inflight.get(ident) is fetch:
                del self._inflight[ident]
            if prefetch:
                self._prefetching -= 1
            if sibling:
                self._sibling_fetches -= 1
                self._sibling_bytes -= sibling
            fetch.done.set()

    def _after_read(self, key: str, etag: str, first: int, last: int, full: bool) -> None:
        """Sequential reads (this read starts in or right after the block the last one ended in)
        fetch the next blocks ahead, in parallel, while the cache has room for them."""
        previous = self._last_block.pop(key, None)
        self._last_block[key] = last
        if len(self._last_block) > 4096:
            self._last_block.popitem(last=False)
        if not full or previous is None or not (previous <= first <= previous + 1) or self.readahead <= 0:
            return
        budget = min(self.readahead, (self.cache_size // 2) // self.block_size)
        known = self._version_entry(key, etag)  # expired or not: a slow read outlasts the TTL
        if known is not None:
            budget = min(budget, -(-known.info.size // self.block_size) - last - 1)  # not past the end
        for i in range(last + 1, last + 1 + budget):
            ident = (key, etag, i)
            if ident in self.bytes or ident in self._inflight:
                continue
            if self._prefetching >= self.readahead:
                break
            self.stats["cache.prefetches"] += 1
            self._start(ident, prefetch=True)

    def _siblings_ahead(self, key: str) -> None:
        """``key`` is being read from its start: if the last object read so in its directory was
        a near neighbour (a walk, whatever order concurrent readers arrive in), fetch the first
        block of the next ``siblings`` objects of the cached listing that are not cached yet."""
        if self.siblings <= 0 or not self.cache_bytes:
            return
        parent, _, name = key.rpartition("/")
        listing = self._listings.get(parent)  # expired or not, where every fetch is pinned to its ETag
        if listing is None or not (self.inner.checks_versions or self._fresh(listing[0])):
            return
        order = self._orders.get(parent)
        if order is None or order[0] is not listing[1] or len(order[1]) != len(listing[1]):
            names = sorted(listing[1], key=_natural)
            order = (listing[1], names, {n: i for i, n in enumerate(names)})
            self._orders[parent] = order
            if len(self._orders) > MAX_WALKS:
                self._orders.popitem(last=False)
        entries, names, position = order
        here = position.get(name)
        if here is None:
            return
        last = self._walks.get(parent)
        if len(self._walks) > MAX_WALKS:
            self._walks.clear()
        self._walks[parent] = here
        if last is None or not 0 < abs(here - last) <= self.siblings:
            return
        if self._sibling_fetches >= SIBLING_PARALLEL:
            return
        budget = self.cache_size // 4
        ahead = 0  # bytes of the objects ahead so far, fetched already or not
        window = largest = 0  # objects ahead that fit the window, the largest of them
        missing: list[tuple[tuple[str, str, int], int]] = []
        for n in names[here + 1 : here + 1 + self.siblings]:
            e = entries.get(n)
            if e is None or e.is_dir or e.info is None or not e.info.etag or not e.info.size:
                continue
            size = min(e.info.size, self.block_size)
            ahead += size
            if ahead > max(self.sibling_window, size):  # the next object, at least
                break
            window += 1
            largest = max(largest, size)
            ident = (parent + "/" + n if parent else n, e.info.etag, 0)
            if ident in self.bytes or ident in self._inflight:
                continue
            if self.bytes.delivered_before(ident):
                # a walk read again: the kernel has these pages; the few it dropped come alone
                continue
            missing.append((ident, size))
        if largest < SIBLING_BURST_BELOW and 2 * len(missing) < window:
            return  # small objects: fetched in bursts, once half of those ahead are missing
        for ident, size in missing:
            if self._sibling_fetches >= SIBLING_PARALLEL or self._sibling_bytes + size > budget:
                break
            self.stats["cache.sibling-prefetches"] += 1
            self._start(ident, sibling=size)

    def _metadata_ahead(self, key: str) -> None:
        """A metadata object is being read: if it lies in a tree listed in one request (a dataset
        being opened), fetch that tree's other small metadata objects in the background, at most
        ``SIBLING_PARALLEL`` at once, each pinned to its listed ETag. Once a tree listing."""
        if self.siblings <= 0 or not self.cache_bytes or not self.inner.checks_versions or not self._tree_metadata:
            return
        top = parent_of(key)
        while top not in self._tree_metadata:
            if not top:
                return
            top = parent_of(top)
        budget = min(METADATA_AHEAD_BYTES, self.cache_size // 16)
        todo = []
        for k, etag, size in self._tree_metadata.pop(top):
            budget -= size
            if budget < 0:
                break
            if k != key and (k, etag, 0) not in self.bytes and (k, etag, 0) not in self._inflight:
                todo.append((k, etag, 0))
        if todo:
            trio.lowlevel.spawn_system_task(self._fetch_ahead, todo, name=f"nczfs metadata of {top!r}")

    async def _fetch_ahead(self, idents: list[tuple[str, str, int]]) -> None:
        """Fetch ``idents`` (first blocks) not cached or in flight yet, at most ``SIBLING_PARALLEL`` at once."""
        running = trio.Semaphore(SIBLING_PARALLEL)

        async def fetched(fetch: _Fetch) -> None:
            try:
                await fetch.done.wait()
            finally:
                running.release()

        async with trio.open_nursery() as nursery:
            for ident in idents:
                await running.acquire()
                if ident in self.bytes or ident in self._inflight:
                    running.release()
                    continue
                self.stats["cache.metadata-prefetches"] += 1
                nursery.start_soon(fetched, self._start(ident))


#: backends whose object bytes are worth keeping in memory: remote ones (a local directory or
#: archive is already in the kernel's page cache)
BYTE_CACHED_BACKENDS = frozenset({"s3", "gcs", "azure", "http", "reference", "icechunk"})


def cached(store, config) -> CachingStore:
    """The mount's cache over ``store``, as ``config`` (cache_size, metadata_ttl, backend) asks."""
    return CachingStore(
        store,
        cache_size=config.cache_size,
        ttl=config.metadata_ttl,
        cache_bytes=config.source.backend in BYTE_CACHED_BACKENDS,
        disk=DiskCache(config.cache_dir, config.cache_dir_size, source_identity(config))
        if config.cache_dir and config.source.backend in BYTE_CACHED_BACKENDS else None,
        siblings=config.prefetch_siblings,
        tree_keys=config.list_tree_keys,
        kernel_keeps_reads=not config.direct_io,
    )
