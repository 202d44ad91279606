"""Decoded chunks of the arrays .nc files are read from (NcFilesStore): each chunk fetched and
decoded once (concurrent readers wait for the one fetch), kept in a bounded cache, and the next
chunks of an array decoded ahead of a reader going through it."""

from __future__ import annotations

import collections
import functools
import logging
import math

import numpy as np

from nczfs.toolbox import background
from nczfs.toolbox.errors import KeyNotFound
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.sharding import IndexCache
from nczfs.nczarr.ncfile.classicfile import Values
from nczfs.nczarr.ncfile.ncversions import NcVersion
from nczfs.toolbox.singleflight import SingleFlight
from nczfs.store.base import Store
from nczfs.store.values import ByteRange

log = logging.getLogger(__name__)


def _ident(v: NcVersion, val: Values, idx: tuple[int, ...]) -> tuple | None:
    """Chunk ``idx`` of ``val`` in the decoded cache: its stored object (a sharded array's: its
    shard, and where in it), the object's version, how it is decoded; None if the version lists
    no such object (the chunk is missing: fill values)."""
    if val.sharding is None:
        key = val.key_of(idx)
        info = v.chunks.get(key)
        return None if info is None else (key, info.etag, val.recode.token)
    shard, _ = val.sharding.locate(idx)
    key = val.key_of(shard)
    info = v.chunks.get(key)
    return None if info is None else (key, info.etag, idx, val.recode.token)


def _next_index(index: tuple[int, ...], grid: tuple[int, ...]) -> tuple[int, ...] | None:
    out = list(index)
    for axis in reversed(range(len(out))):
        out[axis] += 1
        if out[axis] < grid[axis]:
            return tuple(out)
        out[axis] = 0
    return None


class DecodedChunks:
    """Chunks of ``inner`` decoded, at most ``limit`` bytes of them kept (least recently used go)."""

    def __init__(self, inner: Store, limit: int):
        self.inner = inner
        self.limit = limit
        self._decoded: collections.OrderedDict[tuple, np.ndarray | None] = collections.OrderedDict()
        self.bytes_held = 0
        self._decoding: SingleFlight[tuple, np.ndarray | None] = SingleFlight(lambda ident: repr(ident[0]))
        #: the indexes of shards (sharded Zarr v3 arrays), by shard, version and byte range
        self._indexes = IndexCache()
        #: chunks decoded so far
        self.count = 0

    def ahead(self, v: NcVersion, val: Values, idx: tuple[int, ...]) -> None:
        """Decode the next chunks of the array in the background (a reader going through it): one
        per thread of the decode pool (at least two), as many as the cache holds beside this one."""
        grid = val.grid
        nxt: tuple[int, ...] | None = idx
        count = min(decoding.ahead(), self.limit // max(math.prod(val.chunks) * val.itemsize, 1) - 1)
        for _ in range(max(count, 0)):
            nxt = _next_index(nxt, grid) if nxt is not None else None
            if nxt is None:
                return
            ident = _ident(v, val, nxt)
            if ident is None or ident in self._decoded or ident in self._decoding:
                continue
            background.start_soon(self._quietly, v, val, nxt, name=f"nczfs decode ahead {val.key_of(nxt)}")

    async def _quietly(self, v: NcVersion, val: Values, idx: tuple[int, ...]) -> None:
        decoding.early()
        try:
            await self.chunk(v, val, idx)
        except Exception as exc:  # noqa: BLE001 - a background fetch; the reader's own fetch reports it
            log.debug("fetch ahead of %s: %s", val.key_of(idx), exc)

    async def chunk(self, v: NcVersion, val: Values, idx: tuple[int, ...]) -> np.ndarray | None:
        """Chunk ``idx`` of ``val``'s array as this version lists it, decoded (None: missing)."""
        ident = _ident(v, val, idx)
        if ident is None:
            return None
        if ident in self._decoded:
            self._decoded.move_to_end(ident)
            return self._decoded[ident]
        return await self._decoding.run(ident, functools.partial(self._decode, v, val, idx, ident), retry=True)

    async def _decode(self, v: NcVersion, val: Values, idx: tuple[int, ...], ident: tuple) -> np.ndarray | None:
        key = ident[0]
        try:
            raw = await self._stored(v, val, idx, key)
        except KeyNotFound:
            raw = None
        arr = None
        if raw is not None:
            arr = await decoding.decode(val.decode, raw, key)
            self.count += 1
        self._keep(ident, arr)
        return arr

    async def _stored(self, v: NcVersion, val: Values, idx: tuple[int, ...], key: str) -> bytes | None:
        """The stored bytes of chunk ``idx`` (a sharded array's: its byte range of shard ``key``,
        found through the shard's indexes, read once per shard version); None: missing."""
        info = v.chunks[key]
        if val.shards is None:
            return await self.inner.get_version(key, None, info.etag or None)
        loc = await val.shards.locate_in(self.inner, self._indexes, idx, key, info)
        if loc is None:
            return None
        return await self.inner.get_version(key, ByteRange(loc.start, loc.end), info.etag or None)

    def _keep(self, ident: tuple, arr: np.ndarray | None) -> None:
        self._decoded[ident] = arr
        self.bytes_held += arr.nbytes if arr is not None else 0
        while self.bytes_held > self.limit and len(self._decoded) > 1:
            _, old = self._decoded.popitem(last=False)
            self.bytes_held -= old.nbytes if old is not None else 0
