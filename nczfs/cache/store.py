"""CachingStore: a bounded in-memory cache of object bytes and a TTL cache of metadata.

It sits right over the backend (``CachingStore(ThreadedStore(backend))``, below the NCZarr
layer), so every write the mount makes, its own consolidated-metadata rewrites included,
passes through it and updates or drops what it cached. It composes the package's mechanisms:

- :mod:`.metadata` (with :mod:`.trees`): ``entry``/``stat``/``list_dir`` answers reused for
  ``ttl`` seconds, listings after repeated misses, whole trees listed in one request;
- :mod:`.bytecache`: blocks of ``block_size`` bytes under ``(key, etag, block)``, at most
  ``cache_size`` bytes (least recently used first), so a changed object (new ETag) is never
  served from an old entry; an object no larger than a block is one block (a zarr chunk is one
  GET); what the mount stores (one block) is kept for reading back, the most recent only;
- :mod:`.blocks`: one request per block however many readers wait, failures remembered briefly;
- :mod:`.disk`: blocks kept in a local directory across mounts (``--cache-dir``);
- :mod:`.prefetch`: readahead, sibling objects of a directory being walked, a dataset's metadata.

Concurrency: everything runs on the trio thread (no locks); fetches run as trio system tasks
so that a cancelled reader never strands the readers waiting for the same block.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Awaitable, Callable, TypeVar, cast

from nczfs.cache.blocks import BlockFetcher, Fetch, as_long_as_its_version
from nczfs.cache.disk import DiskCache
from nczfs.toolbox.budgets import default_cache_size
from nczfs.cache.bytecache import MiB, ByteCache
from nczfs.cache.metadata import LIST_AFTER_MISSES, MetadataCache
from nczfs.cache.prefetch import (
    READAHEAD_BLOCKS,
    SIBLING_WINDOW,
    SIBLINGS_AHEAD,
    MetadataAhead,
    Readahead,
    Siblings,
)
from nczfs.cache.trees import TREE_KEYS
from nczfs.toolbox.errors import KeyNotFound, Stale
from nczfs.store.capabilities import HoldsBytes, Stages, UploadsInParts
from nczfs.store.values import ByteRange, DirEntry, Meta, ObjectInfo, Staged, Upload
from nczfs.store.wrapper import WrapperStore
from nczfs.store import optional

BLOCK_SIZE = 8 * MiB

T = TypeVar("T")


class CachingStore(WrapperStore):
    #: staged and uploaded objects are cached as they are made; tree listings are the cache's own
    #: (it lists its store's trees), not offered above
    passes = ("stage", "open_upload")

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
        is_metadata: Callable[[str], bool] | None = None,
    ):
        super().__init__(inner)
        #: blocks kept on local disk across mounts (--cache-dir), consulted before the backend
        self.disk = disk
        self.cache_size = default_cache_size() if cache_size is None else cache_size
        self.ttl = ttl
        self.block_size = max(1, min(block_size, self.cache_size)) if self.cache_size else block_size
        self.cache_bytes = cache_bytes and self.cache_size > 0
        self.stats: collections.Counter[str] = collections.Counter()
        #: delivered blocks (see ByteCache) kept: a sixteenth of the cache, at least two blocks;
        #: all of them when the kernel keeps no pages (direct I/O), like any other block
        delivered = max(self.cache_size // 16, 2 * self.block_size) if kernel_keeps_reads else self.cache_size
        self.bytes = ByteCache(self.cache_size, delivered)
        self.meta = MetadataCache(inner, self.stats, ttl=ttl, clock=clock, list_after_misses=list_after_misses,
                                  tree_keys=tree_keys)
        self.fetcher = BlockFetcher(inner, self.meta, self.bytes, disk, self.stats, block_size=self.block_size)
        siblings = siblings if self.cache_bytes else 0
        self.readahead = Readahead(self.fetcher, self.stats, blocks=readahead, cache_size=self.cache_size)
        self.siblings = Siblings(self.fetcher, self.stats, count=siblings, window=sibling_window,
                                 cache_size=self.cache_size)
        #: which keys are metadata objects is the NCZarr layer's knowledge: without it, none is
        #: fetched ahead (``nczfs.daemon.stack.cached`` passes it)
        self.metadata_ahead = MetadataAhead(self.fetcher, self.stats, is_metadata or (lambda key: False),
                                            enabled=siblings > 0 and is_metadata is not None,
                                            cache_size=self.cache_size)
        # the prefetchers hear of what the metadata cache does
        self.meta.confirming = self.siblings.confirming_fetch
        self.meta.trees.on_tree = self.metadata_ahead.remember

    # what tests look at
    _inflight = property(lambda self: self.fetcher.inflight)

    def counters(self) -> dict[str, int]:
        out = dict(optional.counters(self.inner))
        out.update(self.stats)
        out["cache.bytes-held"] = self.bytes.used
        out["cache.bytes-held-delivered"] = self.bytes.delivered_used
        out["cache.bytes-held-written"] = self.bytes.written_used
        out["cache.bytes-limit"] = self.cache_size
        if self.disk is not None:
            out.update(self.disk.counters())
        return out

    # ------------------------------------------------------------------ metadata

    async def entry(self, key: str) -> DirEntry | None:
        return await (self.meta.entry(key) if key else self.inner.entry(key))  # no key: the root's own attributes

    async def stat(self, key: str) -> ObjectInfo:
        return await self.meta.stat(key)

    async def list_dir(self, prefix: str) -> list[DirEntry]:
        return await self.meta.list_dir(prefix)

    async def _optional_dir_exists(self, prefix: str) -> bool:  # offered where the store below has it
        return await self.meta.dir_exists(prefix)

    async def forget_dir(self, prefix: str) -> None:
        """Offered whatever the store below has: nothing cached below ``prefix`` is trusted after
        (a directory emptied through the mount must list empty), and the store below forgets it
        too where it keeps a trace (S3's folder objects)."""
        await self._write("forget_dir", (prefix,), lambda: optional.forget_dir(self.inner, prefix))

    # ------------------------------------------------------------------ invalidation

    def _touch(self, key: str) -> None:
        """``key`` changed through the mount: forget what was cached about it and its ancestors."""
        self.meta.touch(key)
        self.bytes.drop(key)
        self.readahead.forget(key)

    def _touch_subtree(self, prefix: str) -> None:
        self.bytes.drop_under(prefix)
        self.readahead.forget(prefix)
        self.meta.touch_subtree(prefix)

    def _written(self, key: str, info: ObjectInfo | None) -> None:
        """An object was stored (info) or deleted (None): the parent listing follows; higher ones are dropped."""
        self._touch(key)
        self.meta.stored(key, info)

    def _changed_elsewhere(self, key: str) -> None:
        """``key`` was found changed in the store (a version read is gone): forget what was cached
        about it, its parent's listing included, which holds the old version's size and ETag."""
        self._touch(key)  # an answer about it or its parent still on its way is not kept either
        self.meta.drop_listing_of(key)

    async def refresh(self, key: str) -> None:
        self._changed_elsewhere(key)
        await optional.refresh(self.inner, key)

    # ------------------------------------------------------------------ writes

    async def _store(self, key: str, call: Awaitable[ObjectInfo]) -> ObjectInfo:
        """Run a write of ``key``; whatever happens, nothing cached before it is trusted after it."""
        self._touch(key)
        try:
            info = await call
        except BaseException as exc:
            if isinstance(exc, Stale):  # refused: another version is stored, which the parent's listing lacks too
                self._changed_elsewhere(key)
            else:
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

    async def _stage(self, key: str, data: bytes) -> Staged | None:
        assert isinstance(self.inner, Stages)  # offered only where it is
        staged = await self.inner.stage(key, data)
        if staged is None:
            return None

        kept = data if self.cache_bytes and len(data) <= self.block_size else None  # not the bytes of a big one

        async def commit(if_version: str | None = None) -> ObjectInfo:
            info = await self._store(key, cast(Awaitable[ObjectInfo], staged.commit(if_version)))  # the async form
            if kept is not None:
                self._keep_written(key, info, kept)
            return info

        return Staged(key, commit, staged.abort)

    async def _open_upload(self, key: str) -> Upload | None:
        assert isinstance(self.inner, UploadsInParts)  # offered only where it is
        upload = await self.inner.open_upload(key)
        if upload is None:
            return None

        async def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            return await self._store(key, cast(Awaitable[ObjectInfo], upload.complete(size, if_version)))  # the async form

        return Upload(key, upload.part_size, upload.send, complete, upload.abort)

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[[], Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        """Every change of the store below: what is cached about its keys is forgotten around it,
        and what it stored is kept, as :data:`_AROUND` says for ``op`` (by default a change of
        one object, the last key: set_file, copy, make_node, truncate)."""
        around = _AROUND.get(op, CachingStore._one_object)
        return await around(self, keys, call, data)

    async def _one_object(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> Any:
        return await self._store(keys[-1], call())

    async def _set(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> ObjectInfo:
        info = await self._store(keys[0], call())
        self._keep_written(keys[0], info, data)
        return info

    async def _delete(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> None:
        self._touch(keys[0])
        try:
            await call()
        finally:
            self._written(keys[0], None)

    async def _rename(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> ObjectInfo:
        src, dst = keys
        self._touch(src)
        self._touch(dst)
        try:
            return await call()
        finally:
            self._written(src, None)
            self._touch(dst)
            self.meta.drop_listing_of(dst)

    async def _dir_change(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> Any:
        """mkdir, rmdir, forget_dir: nothing cached below the directory is trusted after."""
        try:
            return await call()
        finally:
            self._touch_subtree(keys[0])

    async def _rename_dir(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> None:
        for key in keys:
            self._touch_subtree(key)
        try:
            await call()
        finally:
            for key in keys:
                self._touch_subtree(key)

    async def _set_meta(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> Meta:
        key = keys[0]
        self._touch(key)
        self.meta.drop_listing_of(key)
        try:
            return await call()
        finally:
            self._touch(key)
            self.meta.drop_listing_of(key)

    async def _link(self, keys: tuple[str, ...], call: Callable[[], Awaitable[Any]], data: Any) -> ObjectInfo:
        src, dst = keys
        self._touch(src)  # its link count changes
        self.meta.drop_listing_of(src)
        return await self._store(dst, call())

    # ------------------------------------------------------------------ bytes

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        if not self.cache_bytes:
            return await self.inner.get(key, rng)
        info = await self.stat(key)
        try:
            return await self._read(key, rng, info.etag)  # type: ignore[return-value]  # bytes-like: a view of cached blocks, not a copy
        except Stale:  # changed since the cached stat: read the current version
            self._changed_elsewhere(key)
            return await self._read(key, rng, (await self.stat(key)).etag)  # type: ignore[return-value]  # bytes-like: a view of cached blocks, not a copy

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        if not self.cache_bytes:
            return await self.inner.get_version(key, rng, etag)
        if not etag:
            return await self.get(key, rng)
        try:
            return await self._read(key, rng, etag)  # type: ignore[return-value]  # bytes-like: a view of cached blocks, not a copy
        except Stale:  # the object changed: what is cached about it is out of date too
            self._changed_elsewhere(key)
            raise

    def held_object(self, key: str, etag: str, size: int) -> bytes | None:
        """:class:`HoldsBytes`: a one-block object in memory (where none are kept here, the store
        below's answer), handed out as if read whole (delivered; a walk fetches ahead)."""
        if not self.cache_bytes:
            return cast(HoldsBytes, self.inner).held_object(key, etag, size) if optional.offers(self.inner, HoldsBytes) else None
        if (data := self.fetcher.held_whole(key, etag, size)) is not None:
            self._from_start(key)
        return data

    async def object_arrives(self, key: str, etag: str) -> bool:
        """:class:`HoldsBytes`: once the fetch of the object's first block on its way has ended."""
        if self.cache_bytes:
            return await self.fetcher.arrives((key, etag, 0))
        return optional.offers(self.inner, HoldsBytes) and await cast(HoldsBytes, self.inner).object_arrives(key, etag)

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
        if end is not None and self._refetch_part(key, etag, first, end):
            return await self._read_part(key, rng, etag, start, end)  # type: ignore[arg-type]  # end is not None: neither is rng
        if end is not None:
            blocks = await self._blocks(key, etag, range(first, (end - 1) // b + 1))
        else:
            blocks = await self._to_the_end(key, etag, first)
        self.readahead.after_read(key, etag, first, first + len(blocks) - 1, len(blocks[-1]) == b)
        if end is not None:  # a ranged read: a reader's (the kernel's), so count what it got
            for i, got in enumerate(blocks, first):
                self.bytes.served((key, etag, i), max(0, min(end, i * b + len(got)) - max(start, i * b)))
        return self._served(blocks, start - first * b, None if end is None else end - first * b)

    def _refetch_part(self, key: str, etag: str, first: int, end: int) -> bool:
        """Is the read, within block ``first``, to fetch only its part (see ByteCache.refetch_part)?"""
        ident = (key, etag, first)
        return (end - 1) // self.block_size == first and not self.fetcher.held(ident) and self.bytes.refetch_part(ident)

    async def _read_part(self, key: str, rng: ByteRange, etag: str, start: int, end: int) -> bytes:
        data = as_long_as_its_version(key, etag, start, self.meta.length(key, etag, start, end),
                                      await self.inner.get_version(key, rng, etag))
        self.stats["cache.part-refetches"] += 1
        self.stats["cache.bytes-fetched"] += len(data)
        self.stats["cache.bytes-served"] += len(data)
        return data

    async def _to_the_end(self, key: str, etag: str, first: int) -> list[bytes]:
        """Blocks from ``first`` until a short one."""
        blocks, i = [], first
        while True:
            got = (await self._blocks(key, etag, range(i, i + 1)))[0]
            blocks.append(got)
            if len(got) < self.block_size:
                return blocks
            i += 1

    def _served(self, blocks: list[bytes], lo: int, hi: int | None) -> bytes | memoryview:
        """Bytes ``lo`` to ``hi`` of ``blocks`` (counted as served to readers, from blocks cached or
        just fetched). A ranged read (``hi``: the kernel's) copies nothing from one block: a view
        of it, or the block itself (bytes, immutable; or a read-only view of the GET's buffer,
        which pyfuse3 writes to the device as it is); across blocks, only the bytes asked for
        are joined. A whole object from ``lo`` gives bytes where it starts at 0."""
        if hi is None:
            data = blocks[0] if len(blocks) == 1 else b"".join(blocks)
            out = memoryview(data)[lo:] if lo else bytes(data)
        elif len(blocks) == 1:
            block = blocks[0]
            out = block if lo == 0 and hi >= len(block) else memoryview(block)[lo:hi]
        else:
            last = hi - (len(blocks) - 1) * self.block_size  # where the read ends in its last block
            out = b"".join([memoryview(blocks[0])[lo:], *blocks[1:-1], memoryview(blocks[-1])[:last]])
        self.stats["cache.bytes-served"] += len(out)
        return out

    async def _blocks(self, key: str, etag: str, indexes: range) -> list[bytes]:
        fetches = self.fetcher.claim(key, etag, indexes)
        if indexes.start == 0:
            self._from_start(key)
        return [await f.wait() if isinstance(f, Fetch) else f for f in fetches]

    def _from_start(self, key: str) -> None:
        """``key`` is read from its start: the prefetchers hear of it."""
        self.siblings.ahead(key)
        self.metadata_ahead.ahead(key)


#: what the cache does around each kind of write (:meth:`CachingStore._write`)
_AROUND = {"set": CachingStore._set, "delete": CachingStore._delete, "rename": CachingStore._rename,
           "rename_dir": CachingStore._rename_dir, "mkdir": CachingStore._dir_change,
           "rmdir": CachingStore._dir_change, "forget_dir": CachingStore._dir_change,
           "set_meta": CachingStore._set_meta, "link": CachingStore._link}
