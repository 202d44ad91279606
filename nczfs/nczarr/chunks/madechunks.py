"""MadeChunks: the one cache of chunks made from stored ones (a view's recoded chunks, the
re-encoded and string chunks of ``NAME.nc4``), and of their sizes.

A made chunk is known by the stored chunk (:class:`Stored`: key, version, byte range) and what
makes it (a recode's token): a view and ``NAME.nc4`` that make the same bytes from the same stored
chunk (the same recode) share them. Each is made once (a reader asking for one being made waits
for it), in the decode pool (:mod:`nczfs.nczarr.chunks.decoding`), and kept in a cache of at most
``limit`` bytes (least recently used go first; a chunk made for its size alone only where there
is room, so that a first ``stat`` making every chunk of a big file holds no more than the cache). Its size is remembered beyond that (in memory,
and with a :class:`~nczfs.nczarr.chunks.sizebook.SizeBook` in the cache directory across mounts):
the size of a chunk shown compressed is known only once it was made, and a ``stat`` needs it
(the callers say which sizes those are: only they go to the book).
"""

from __future__ import annotations

import collections
import functools
import logging
from typing import Awaitable, Callable, NamedTuple

from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.sizebook import SizeBook
from nczfs.toolbox.singleflight import SingleFlight
from nczfs.store.threads import run_blocking

log = logging.getLogger(__name__)

#: sizes remembered in memory (of every made chunk, of every dataset)
MAX_SIZES = 1 << 20


class Stored(NamedTuple):
    """A stored chunk: its object's key and version (ETag), its byte range there (None: all)."""

    key: str
    etag: str
    start: int = 0
    length: int | None = None

    def ident(self, maker: str) -> tuple:
        """The chunk ``maker`` makes of this one, but for the stored version."""
        return self.key, self.start, self.length, maker


class MadeChunks:
    """Made chunks, at most ``limit`` bytes of them kept; their sizes also in ``book``."""

    def __init__(self, limit: int, book: SizeBook | None = None):
        self.limit, self.book = limit, book
        #: made chunks by (ident, version), least recently used first
        self._held: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()
        self._making: SingleFlight[tuple, bytes] = SingleFlight(lambda full: repr(full[0]))
        self.bytes_held = 0
        #: chunks made so far
        self.count = 0
        #: the size of each chunk made, or why it cannot be made, by (ident, version)
        self._sizes: collections.OrderedDict[tuple, int | str] = collections.OrderedDict()

    def wanted(self, stored: Stored, maker: str) -> bool:
        """Is the chunk ``maker`` makes of ``stored`` neither held nor being made?"""
        full = (*stored.ident(maker), stored.etag)
        return full not in self._held and full not in self._making

    def known(self, stored: Stored, maker: str) -> int | str | None:
        """The size of the chunk ``maker`` makes of ``stored`` if it was made (here, or by a mount
        sharing the book), or why it cannot be made (None: neither known). Blocks on the book:
        off the trio thread."""
        full = (*stored.ident(maker), stored.etag)
        got = self._sizes.get(full)
        if got is None and self.book is not None:
            got = self.book.get(stored.ident(maker), stored.etag)
            if got is not None:
                self._remember(full, got)
        return got

    async def size(self, stored: Stored, maker: str) -> int | None:
        """The size of the chunk if known (:meth:`known`, the book read in a worker thread)."""
        got = self._sizes.get((*stored.ident(maker), stored.etag))
        if got is None and self.book is not None and stored.etag:
            got = await run_blocking(self.known, stored, maker)
        return got if isinstance(got, int) else None

    def cannot(self, stored: Stored, maker: str, why: str) -> None:
        """The chunk cannot be made (remembered in memory only: the cause may pass)."""
        self._remember((*stored.ident(maker), stored.etag), why)

    def _remember(self, full: tuple, size: int | str) -> None:
        self._sizes[full] = size
        self._sizes.move_to_end(full)
        while len(self._sizes) > MAX_SIZES:
            self._sizes.popitem(last=False)

    async def get(self, stored: Stored, maker: str, fetch: Callable[[], Awaitable[bytes]],
                  make: Callable[[bytes], bytes], book: bool, evict: bool = True) -> bytes:
        """The chunk ``make`` (named ``maker``) makes of ``stored``'s bytes, which ``fetch`` gets;
        its size kept in the book if ``book`` (a size known only once the chunk was made). Kept
        in the cache, the least recently used making room; not ``evict``: only if there is room
        (a chunk made for its size alone)."""
        full = (*stored.ident(maker), stored.etag)
        held = self._held.get(full)
        if held is not None:
            self._held.move_to_end(full)
            self._remember(full, len(held))
            return held
        make_it = functools.partial(self._make, full, stored, maker, fetch, make, book)
        data = await self._making.run(full, make_it, retry=True)
        self._keep(full, data, evict)
        return data

    async def _make(self, full: tuple, stored: Stored, maker: str, fetch: Callable[[], Awaitable[bytes]],
                    make: Callable[[bytes], bytes], book: bool) -> bytes:
        raw = await fetch()
        if book and self.book is not None:
            data = await decoding.decode(self._made, make, raw, stored, maker)
        else:  # a size known without the chunk: no row to write
            data = await decoding.decode(make, raw)
        self.count += 1
        before = self._sizes.get(full)
        if isinstance(before, int) and before != len(data):
            log.warning("chunk %r made again is %d bytes where %d were known (made before, or kept in the "
                        "cache dir): the files made of it take the new size", stored.key, len(data), before)
        self._remember(full, len(data))
        return data

    def _made(self, make: Callable[[bytes], bytes], raw: bytes, stored: Stored, maker: str) -> bytes:
        """``make(raw)``, its size kept in the book unless known to be that (in the decode
        pool's thread)."""
        data = make(raw)
        if self.book is not None and self._sizes.get((*stored.ident(maker), stored.etag)) != len(data):
            self.book.put(stored.ident(maker), stored.etag, len(data))
        return data

    def _keep(self, full: tuple, data: bytes, evict: bool) -> None:
        if full in self._held:  # kept by another caller of the same making
            self._held.move_to_end(full)
            return
        if not evict and self.bytes_held + len(data) > self.limit:
            return
        self._held[full] = data
        self.bytes_held += len(data)
        while self.bytes_held > self.limit and len(self._held) > 1:
            _, old = self._held.popitem(last=False)
            self.bytes_held -= len(old)
