"""Block fetching: one backend request per block however many readers wait, and failures remembered briefly.

A block is ``(key, etag, index)``, fetched pinned to its ETag, from the disk tier first
(:mod:`.disk`) when there is one. Blocks fetched ahead together (a burst of small sibling
objects) are asked for in one backend call where the backend takes several reads at once
(:meth:`BlockFetcher.start_many`). Concurrent reads of one block wait for a single request; it
runs in the background (:meth:`nczfs.toolbox.singleflight.SingleFlight.start`), so that a cancelled
reader never strands the readers waiting for the same block. A block whose fetch failed
answers the reads that ask for it again with the same failure for ``FAILED_FOR`` seconds.
"""

from __future__ import annotations

import collections
import functools
from dataclasses import dataclass, field
from typing import Any, Callable

from nczfs.cache.disk import DiskCache
from nczfs.cache.bytecache import ByteCache
from nczfs.cache.metadata import MetadataCache
from nczfs.toolbox.errors import KeyNotFound, Stale
from nczfs.toolbox.singleflight import Flight, SingleFlight
from nczfs.store.capabilities import ReadsTogether
from nczfs.store.values import ByteRange

#: seconds a block's failed fetch answers the reads that ask for the block again: the kernel
#: reads once more, at once, what its read-ahead could not get, and that read would pay another
#: round of the store's attempts (S3 on a stalled server: 3 of 60 s)
FAILED_FOR = 1.0

Ident = tuple[str, str, int]
#: a block's data (named apart: in BlockFetcher, ``bytes`` is its ByteCache)
Block = bytes


#: one backend request in flight; every reader of the block waits for it
Fetch = Flight


def as_long_as_its_version(key: str, etag: str, start: int, want: int | None, data: bytes) -> bytes:
    """``data``, the backend's answer for bytes from ``start`` of that version, if it is as long
    as the version's size says (``want``, from :meth:`MetadataCache.length`; None: unknown). A
    server or proxy may answer a GET pinned to a version with fewer bytes and a self-consistent
    Content-Range: kept, that block would read as the file's end, here and, through the disk
    cache, after every remount. It is Stale instead (the reader gets the new version, or ESTALE)."""
    if want is not None and len(data) != want:
        raise Stale(f"{key!r}: {want} bytes from {start} of version {etag} came as {len(data)} bytes: "
                    "the object is changing")
    return data


@dataclass
class BlockFetcher:
    """Fetches blocks of ``block_size`` bytes of ``inner`` into ``bytes``."""

    inner: Any
    meta: MetadataCache
    bytes: ByteCache
    disk: DiskCache | None
    stats: collections.Counter[str]
    block_size: int
    inflight: SingleFlight[Ident, Block] = field(default_factory=lambda: SingleFlight(lambda ident: repr(ident[0])))
    #: fetches that failed, and until when they answer (FAILED_FOR)
    failed: dict[Ident, tuple[Fetch, float]] = field(default_factory=dict)

    def held(self, ident: Ident) -> bool:
        """Is the block cached or being fetched?"""
        return ident in self.bytes or ident in self.inflight

    def held_whole(self, key: str, etag: str, size: int) -> Block | None:
        """The object ``key`` at ``etag`` if it is one block held now of ``size`` bytes, served."""
        data = self.bytes.get((key, etag, 0))
        if data is None or len(data) != size:
            return None
        self.stats.update({"cache.hits": 1, "cache.bytes-served": size})
        self.bytes.served((key, etag, 0), size)
        return data

    async def arrives(self, ident: Ident) -> bool:
        """Once the fetch of the block on its way, if one is, has ended (however it ended): whether one was."""
        fetch = self.inflight.get(ident)
        if fetch is not None:
            await fetch.done.wait()
        return fetch is not None

    def claim(self, key: str, etag: str, indexes: range) -> list[Block | Fetch]:
        """Each block: its cached bytes, or the fetch (running, just failed, or started now) to wait for."""
        out: list[Block | Fetch] = []
        for i in indexes:
            ident = (key, etag, i)
            data = self.bytes.get(ident)
            if data is not None:
                self.stats["cache.hits"] += 1
                out.append(data)
                continue
            fetch = self.inflight.get(ident)
            if fetch is not None:
                self.stats["cache.coalesced"] += 1
            elif (fetch := self._just_failed(ident)) is not None:
                self.stats["cache.failures-repeated"] += 1
            else:
                self.stats["cache.misses"] += 1
                fetch = self.start(ident)
            out.append(fetch)
        return out

    def _just_failed(self, ident: Ident) -> Fetch | None:
        """The fetch of this block that failed less than FAILED_FOR seconds ago, if any."""
        failed = self.failed.get(ident)
        if failed is not None and self.meta.clock() < failed[1]:
            return failed[0]
        return None

    def _remember_failure(self, ident: Ident, fetch: Fetch) -> None:
        now = self.meta.clock()
        while self.failed:  # oldest first: they are kept in the order they failed
            oldest = next(iter(self.failed))
            if self.failed[oldest][1] > now:
                break
            del self.failed[oldest]
        self.failed.pop(ident, None)
        self.failed[ident] = (fetch, now + FAILED_FOR)

    def start(self, ident: Ident, done: Callable[[], None] | None = None) -> Fetch:
        """Fetch a block in a system task; ``done`` is called when it has ended, however."""
        return self.inflight.start(ident, functools.partial(self._fetch, ident, done), name=f"nczfs fetch {ident[0]}")

    def start_many(self, idents: list[Ident], done: Callable[[Ident], None]) -> None:
        """Fetch blocks in the background, those not in flight yet in one backend call where the
        backend offers ``get_versions`` and there is no disk tier to look in first, else each
        alone (:meth:`start`); ``done(ident)`` is called when each has ended, however."""
        if not isinstance(self.inner, ReadsTogether) or self.disk is not None or len(idents) < 2:
            for ident in idents:
                self.start(ident, done=functools.partial(done, ident))
            return
        for ident in idents:
            if ident in self.inflight:
                done(ident)  # started meanwhile: that fetch is the one its readers wait for
        self.stats["cache.fetch-bursts"] += 1
        self.inflight.start_group(idents, functools.partial(self._fetch_many, self.inner.get_versions, done),
                                  name=f"nczfs fetch {len(idents)} from {idents[0][0]}")

    async def _fetch_many(self, get_versions: Callable[..., Any], done: Callable[[Ident], None],
                          idents: list[Ident]) -> list[Block | Exception]:
        """The blocks ``idents`` in one ``get_versions`` call: each one's bytes, checked and cached
        as :meth:`_fetch` does one, or its error."""
        b = self.block_size
        asked_at = [self.meta.begin() for _ in idents]
        confirmed = [False] * len(idents)
        try:
            lengths = [self.meta.length(key, etag, i * b, (i + 1) * b) for key, etag, i in idents]
            got = await get_versions([(key, ByteRange(i * b, (i + 1) * b), etag) for key, etag, i in idents])
            out: list[Block | Exception] = []
            for n, (ident, length, data) in enumerate(zip(idents, lengths, got)):
                try:
                    if isinstance(data, Exception):
                        raise data
                    data = as_long_as_its_version(ident[0], ident[1], ident[2] * b, length, data)
                    confirmed[n] = True
                    self._fetched(ident, data)
                    self.bytes.put(ident, data)
                except Exception as exc:  # noqa: BLE001 - this block's readers get it
                    self._failed(ident, exc)
                    data = exc
                out.append(data)
            return out
        except BaseException as exc:
            for ident in idents:
                self._failed(ident, exc)
            raise
        finally:
            for ident, at, ok in zip(idents, asked_at, confirmed):
                if self.meta.end(ident[0], at) and ok and self.inner.capabilities.checks_versions:
                    self.meta.confirm(ident[0], ident[1])
                done(ident)

    async def _fetch(self, ident: Ident, done: Callable[[], None] | None) -> Block:
        key, etag, i = ident
        b = self.block_size
        asked_at = self.meta.begin()
        confirmed = False  # by the backend (a disk cache hit says nothing of the current version)
        try:
            length = self.meta.length(key, etag, i * b, (i + 1) * b)
            data = await self.disk.get(key, etag, b, i, length) if self.disk is not None else None
            if data is None:
                data = await self.inner.get_version(key, self._asked(i, length), etag)
                data = as_long_as_its_version(key, etag, i * b, length, data)
                confirmed = True
                self._fetched(ident, data)
        except BaseException as exc:
            self._failed(ident, exc)
            raise
        else:
            self.bytes.put(ident, data)
            return data
        finally:
            if self.meta.end(key, asked_at) and confirmed and self.inner.capabilities.checks_versions:
                self.meta.confirm(key, etag)
            if done is not None:
                done()

    def _asked(self, i: int, length: int | None) -> ByteRange:
        """The range a GET of block ``i`` asks for: the block, or, where the store pins each read
        to its version and the version's length there is known, just that length (a small object
        is then a small GET: object stores send those from worker threads, large ones from their
        asyncio loop)."""
        b = self.block_size
        if length and self.inner.capabilities.checks_versions:
            return ByteRange(i * b, i * b + length)
        return ByteRange(i * b, (i + 1) * b)

    def _fetched(self, ident: Ident, data: Block) -> None:
        """The backend answered: counted, and kept on disk in the background."""
        self.stats["cache.bytes-fetched"] += len(data)
        if self.disk is not None:
            self.disk.put_soon(ident[0], ident[1], self.block_size, ident[2], data)

    def _failed(self, ident: Ident, exc: BaseException) -> None:
        """The fetch raised ``exc``: its waiters get it (:class:`~nczfs.toolbox.singleflight.Abandoned`
        for a cancellation: unmount); a failure (not an answer of the store's) is counted, and
        unless it is a cancellation, remembered."""
        if isinstance(exc, (KeyNotFound, Stale)):
            return
        self.stats["errors"] += 1
        fetch = self.inflight.get(ident)
        if isinstance(exc, Exception) and fetch is not None:
            self._remember_failure(ident, fetch)
