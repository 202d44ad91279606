"""A byte range of a netCDF-4 file (:mod:`nczfs.nczarr.ncfile.nc4file`), made from its metadata and its
chunks: a chunk passed through is a byte range of its stored object, read at the version the
file's version listed; a decoded chunk is fetched whole, made once (off the trio thread) and
kept, a bounded number of bytes of them, its size in the file remembered by its version, across
mounts too with a cache dir (:mod:`nczfs.nczarr.chunks.madechunks`: a file needs the size of each
deflated or string chunk before it is whole, :meth:`DecodedPieces.make`).
A chunk changed or gone since gives ``ESTALE``."""

from __future__ import annotations

import bisect
import logging

import trio

from nczfs.toolbox import atonce, background
from nczfs.toolbox.errors import KeyNotFound, NczfsError, Stale
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.madechunks import MadeChunks
from nczfs.nczarr.ncfile.hdf5.writer import Piece
from nczfs.nczarr.ncfile.nc4file import Nc4File
from nczfs.nczarr.ncfile.nc4source import Source
from nczfs.store.base import Store
from nczfs.store.values import ByteRange, ObjectInfo

log = logging.getLogger(__name__)


class DecodedPieces:
    """The file's decoded chunks, made from ``inner``'s and kept in ``made`` (the mount's cache of
    made chunks, shared with a view's recoded chunks; their sizes too)."""

    def __init__(self, inner: Store, made: MadeChunks):
        self.inner, self.made = inner, made

    def known(self, src: Source, info: ObjectInfo | None) -> int | str | None:
        """The size in the file of ``src`` at version ``info`` if it was made (here or, through
        the cache dir, by an earlier mount), or why it cannot be. Blocks: off the trio thread."""
        return self.made.known(src.stored(info.etag), src.maker) if info is not None else None

    async def make(self, sources: list[Source], chunks: dict[str, ObjectInfo]) -> None:
        """Make each of ``sources`` (at the versions ``chunks`` lists) for their sizes: in the
        decode pool, one per thread, one more fetched meanwhile (so no more stored chunks are
        held than that); kept only while the cache has room (their sizes always)."""
        limiter = trio.CapacityLimiter(decoding.threads() + 1)
        stale: list[Stale] = []

        async def one(src: Source) -> None:
            async with limiter:
                try:
                    await self.get(src, chunks[src.key], evict=False)
                except Stale as exc:  # changed since listed: the file is made again
                    stale.append(exc)
                except NczfsError as exc:  # a chunk that cannot be read or decoded
                    self.made.cannot(src.stored(chunks[src.key].etag), src.maker,
                                     f"chunk {src.key!r} cannot be made: {exc}")

        async with trio.open_nursery() as nursery:
            for src in sources:
                nursery.start_soon(one, src)
        if stale:
            raise stale[0]

    async def get(self, src: Source, info: ObjectInfo, evict: bool = True) -> bytes:
        """The chunk ``src`` at version ``info``, made once; kept (``evict``: see
        :meth:`MadeChunks.get`)."""
        assert src.recode is not None
        stored = src.stored(info.etag)
        rng = ByteRange(src.start, src.start + src.length) if src.length is not None else None
        return await self.made.get(stored, src.maker, lambda: _stored(self.inner, src.key, rng, info), src.decode,
                                   book=src.size_needs_making, evict=evict)

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
            if started >= min(decoding.ahead(), self.made.limit // max(p.size, 1) - 1):
                return
            started += 1
            info = chunks[src.key]
            if self.made.wanted(src.stored(info.etag), src.maker):
                background.start_soon(self._quietly, src, info, name=f"nczfs decode ahead {src.key}")

    async def _quietly(self, src: Source, info: ObjectInfo) -> None:
        if not self.made.wanted(src.stored(info.etag), src.maker):
            return
        decoding.early()
        try:
            await self.get(src, info)
        except Exception as exc:  # noqa: BLE001 - decoded ahead; the reader's own read reports it
            log.debug("decode ahead of %s: %s", src.key, exc)


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
    await atonce.each(one, wanted)  # a chunk's failure is the read's (ESTALE, EIO), not a group
    if any(p.source.recode is not None and p.source.fill is None for p in wanted):  # through decoded chunks
        decoded.ahead(f, chunks, end)
    return bytes(out)
