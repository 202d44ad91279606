"""A byte range of a netCDF-4 file (:mod:`nczfs.nczarr.ncfile.nc4file`), made from its metadata and its
chunks: a chunk passed through is a byte range of its stored object, read at the version the
file's version listed; a decoded chunk is fetched whole, made once (off the trio thread) and
kept, a bounded number of bytes of them, its size in the file remembered by its version (a file
needs the size of each deflated or string chunk before it is whole: :meth:`DecodedPieces.make`).
A chunk changed or gone since gives ``ESTALE``."""

from __future__ import annotations

import bisect
import collections
import logging

import trio

from nczfs import background
from nczfs.errors import KeyNotFound, NczfsError, Stale
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.ncfile.hdf5.writer import Piece
from nczfs.nczarr.ncfile.nc4file import Nc4File
from nczfs.nczarr.ncfile.nc4source import Source
from nczfs.store.base import Store
from nczfs.store.values import ByteRange, ObjectInfo

log = logging.getLogger(__name__)


#: sizes of chunks made remembered (a file's every deflated and string chunk, of every dataset)
MAX_SIZES = 1 << 20


class DecodedPieces:
    """Decoded chunks of ``inner`` (``limit`` bytes kept, least recently used go first);
    concurrent readers of one chunk wait for the one fetch."""

    def __init__(self, inner: Store, limit: int):
        self.inner, self.limit = inner, limit
        self._held: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()
        self._fetching: dict[tuple, trio.Event] = {}
        self.bytes_held = 0
        #: chunks decoded so far
        self.count = 0
        #: the size in the file of each chunk made, or why it cannot be, by its version
        #: (:attr:`Source.ident`, etag)
        self._sizes: collections.OrderedDict[tuple, int | str] = collections.OrderedDict()

    def known(self, src: Source, info: ObjectInfo | None) -> int | str | None:
        """The size in the file of ``src`` at version ``info`` if it was made, or why it cannot be."""
        return self._sizes.get((*src.ident, info.etag)) if info is not None else None

    async def make(self, sources: list[Source], chunks: dict[str, ObjectInfo], limit: int = 8) -> None:
        """Make each of ``sources`` (at the versions ``chunks`` lists), ``limit`` at a time, for
        their sizes; the last made are kept."""
        limiter = trio.CapacityLimiter(limit)
        stale: list[Stale] = []

        async def one(src: Source) -> None:
            async with limiter:
                try:
                    await self.get(src, chunks[src.key])
                except Stale as exc:  # changed since listed: the file is made again
                    stale.append(exc)
                except NczfsError as exc:  # a chunk that cannot be read or decoded
                    self._sizes[(*src.ident, chunks[src.key].etag)] = f"chunk {src.key!r} cannot be made: {exc}"

        async with trio.open_nursery() as nursery:
            for src in sources:
                nursery.start_soon(one, src)
        if stale:
            raise stale[0]

    async def get(self, src: Source, info: ObjectInfo) -> bytes:
        assert src.recode is not None
        ident = (*src.ident, info.etag)
        while ident not in self._held:
            waiting = self._fetching.get(ident)
            if waiting is None:
                return await self._fetch(ident, src, info)
            await waiting.wait()
        self._held.move_to_end(ident)
        self._sizes[ident] = len(self._held[ident])
        return self._held[ident]

    def ahead(self, f: Nc4File, chunks: dict[str, ObjectInfo], end: int) -> None:
        """A read of ``f`` ended at ``end``: decode the next decoded chunks after it in the
        background, one per thread of the decode pool (at least two), no more than the cache holds
        beside one; at most a few times as many chunks passed through are looked past."""
        pieces = f.layout.pieces
        i = bisect.bisect_left(f.offsets, end)
        started = 0
        for p in pieces[i:i + 4 * decoding.ahead()]:
            src: Source = p.source
            if src.recode is None or src.fill is not None or src.key not in chunks:
                continue
            if started >= min(decoding.ahead(), self.limit // max(p.size, 1) - 1):
                return
            started += 1
            info = chunks[src.key]
            ident = (*src.ident, info.etag)
            if ident not in self._held and ident not in self._fetching:
                background.start_soon(self._quietly, ident, src, info, name=f"nczfs decode ahead {src.key}")

    async def _quietly(self, ident: tuple, src: Source, info: ObjectInfo) -> None:
        if ident in self._held or ident in self._fetching:
            return
        decoding.early()
        try:
            await self._fetch(ident, src, info)
        except Exception as exc:  # noqa: BLE001 - decoded ahead; the reader's own read reports it
            log.debug("decode ahead of %s: %s", src.key, exc)

    async def _fetch(self, ident: tuple, src: Source, info: ObjectInfo) -> bytes:
        done = self._fetching[ident] = trio.Event()
        try:
            rng = ByteRange(src.start, src.start + src.length) if src.length is not None else None
            raw = await _stored(self.inner, src.key, rng, info)
            data = await decoding.decode(src.decode, raw)
            self.count += 1
            self._held[ident] = data
            self._sizes[ident] = len(data)
            while len(self._sizes) > MAX_SIZES:
                self._sizes.popitem(last=False)
            self.bytes_held += len(data)
            while self.bytes_held > self.limit and len(self._held) > 1:
                _, old = self._held.popitem(last=False)
                self.bytes_held -= len(old)
            return data
        finally:
            del self._fetching[ident]
            done.set()


async def _stored(inner: Store, key: str, rng: ByteRange | None, info: ObjectInfo) -> bytes:
    try:
        return await inner.get_version(key, rng, info.etag or None)
    except KeyNotFound as exc:
        raise Stale(f"{key!r}: gone since the netCDF-4 file's version was read") from exc


def overlapping(f: Nc4File, start: int, end: int) -> list[Piece]:
    """The chunks holding bytes of ``[start, end)``."""
    pieces = f.layout.pieces
    i = max(0, bisect.bisect_right(f.offsets, start) - 1)
    out = []
    while i < len(pieces) and pieces[i].offset < end:
        if pieces[i].offset + pieces[i].size > start:
            out.append(pieces[i])
        i += 1
    return out


async def read(f: Nc4File, chunks: dict[str, ObjectInfo], inner: Store, decoded: DecodedPieces,
               start: int, end: int) -> bytes:
    """Bytes ``start``..``end`` of ``f`` (clipped at its end), its chunks at the versions ``chunks``
    lists."""
    end = min(end, f.size)
    if start >= end:
        return b""
    out = bytearray(end - start)
    meta = f.layout.meta[start:end]
    out[:len(meta)] = meta

    async def one(p: Piece) -> None:
        lo, hi = max(start, p.offset), min(end, p.offset + p.size)
        src: Source = p.source
        if src.fill is not None:  # made of no stored object
            data = src.place(src.decode(b""), p.offset, lo - p.offset, hi - p.offset)
        elif src.recode is None:
            rng = ByteRange(src.start + lo - p.offset, src.start + hi - p.offset)
            data = await _stored(inner, src.key, rng, chunks[src.key])
        else:
            data = src.place(await decoded.get(src, chunks[src.key]), p.offset, lo - p.offset, hi - p.offset)
        if len(data) != hi - lo:
            raise Stale(f"{src.key!r}: {len(data)} bytes where the file's version has {hi - lo}")
        out[lo - start:hi - start] = data

    wanted = overlapping(f, start, end)
    if len(wanted) == 1:
        await one(wanted[0])
    elif wanted:
        async with trio.open_nursery() as nursery:
            for p in wanted:
                nursery.start_soon(one, p)
    if any(p.source.recode is not None and p.source.fill is None for p in wanted):  # through decoded chunks
        decoded.ahead(f, chunks, end)
    return bytes(out)
