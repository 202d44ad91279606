"""Zarr v3 sharding (``sharding_indexed``), as views show it to readers that have no sharding.

A shard is one object holding many inner chunks and an index of where each lies (``offset,
nbytes`` pairs of uint64, at the shard's end or start, encoded by the index codecs; an absent
inner chunk has both all ones). Views show a sharded array as a Zarr v2 array whose chunks are
the innermost chunks: each is read from its byte range in its shard. Shards may nest (an inner
chunk is itself a shard); each level's index is read once and kept by the view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

EMPTY = 2**64 - 1


@dataclass(frozen=True)
class Level:
    """One level of sharding: chunks of ``shape`` hold inner chunks of ``inner``."""

    shape: tuple[int, ...]
    inner: tuple[int, ...]
    index_endian: str
    index_checksum: bool
    index_at_end: bool

    @property
    def per_shard(self) -> tuple[int, ...]:
        return tuple(s // i for s, i in zip(self.shape, self.inner))

    @property
    def index_size(self) -> int:
        return math.prod(self.per_shard) * 16 + (4 if self.index_checksum else 0)

    def decode_index(self, data: bytes) -> np.ndarray:
        """The index as an array of ``per_shard + (2,)`` (offset, nbytes); ValueError if damaged."""
        if len(data) != self.index_size:
            raise ValueError(f"a shard index of {len(data)} bytes, not {self.index_size}")
        if self.index_checksum:
            from numcodecs import CRC32C

            data = bytes(CRC32C().decode(data))
        return np.frombuffer(data, dtype=np.dtype("u8").newbyteorder("<" if self.index_endian == "little" else ">")
                             ).reshape(*self.per_shard, 2)


@dataclass(frozen=True)
class Sharding:
    """Every level, outermost first, and the codecs of the innermost chunks (Zarr v3 form)."""

    levels: tuple[Level, ...]
    codecs: tuple[dict, ...]

    @property
    def chunks(self) -> tuple[int, ...]:
        """The innermost chunk shape: the chunks a view shows."""
        return self.levels[-1].inner

    def locate(self, index: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
        """Innermost chunk ``index`` -> (the outermost shard's grid index, the inner chunk's
        position in each level's index, outermost first)."""
        start = [i * c for i, c in zip(index, self.chunks)]
        outer = self.levels[0].shape
        shard = tuple(s // o for s, o in zip(start, outer))
        positions = []
        for level in self.levels:
            within = [s % o for s, o in zip(start, level.shape)]
            positions.append(tuple(w // i for w, i in zip(within, level.inner)))
        return shard, positions


def parse(codecs: list[Any]) -> Sharding | str:
    """The sharding of a Zarr v3 codec list that is one ``sharding_indexed`` codec (nested ones
    inside it), or why views cannot show it."""
    levels: list[Level] = []
    shape: tuple[int, ...] = ()
    while len(codecs) == 1 and isinstance(codecs[0], dict) and codecs[0].get("name") == "sharding_indexed":
        conf = codecs[0].get("configuration") or {}
        level = _level(conf, shape)
        if isinstance(level, str):
            return level
        levels.append(level)
        shape = level.inner
        codecs = list(conf.get("codecs") or [])
    if not levels:
        return "no sharding"
    return Sharding(tuple(levels), tuple(c if isinstance(c, dict) else {"name": c} for c in codecs))


def _level(conf: dict, shape: tuple[int, ...]) -> Level | str:
    """One ``sharding_indexed`` level of shards of ``shape`` (of the level above; ``()`` for the
    outermost), or why views cannot read it."""
    inner = tuple(conf.get("chunk_shape") or ())
    index = [c if isinstance(c, dict) else {"name": c} for c in conf.get("index_codecs") or
             [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]]
    names = [c.get("name") for c in index]
    if names not in (["bytes"], ["bytes", "crc32c"]):
        return f"a shard index with codecs {names} (views read bytes and crc32c)"
    endian = (index[0].get("configuration") or {}).get("endian", "little")
    location = conf.get("index_location", "end")
    if location not in ("start", "end") or not inner:
        return f"sharding_indexed configuration {conf!r} is not one views read"
    return Level(shape, inner, endian, names[-1] == "crc32c", location == "end")


def with_shard_shape(sharding: Sharding, shard_shape: tuple[int, ...]) -> Sharding | str:
    """The sharding with its outermost shard shape (the array's chunk grid) filled in, checked:
    every level's chunks divide the level above."""
    levels = list(sharding.levels)
    levels[0] = Level(tuple(shard_shape), levels[0].inner, levels[0].index_endian, levels[0].index_checksum,
                      levels[0].index_at_end)
    for level in levels:
        if len(level.inner) != len(level.shape) or any(i <= 0 or s % i for s, i in zip(level.shape, level.inner)):
            return f"inner chunks {list(level.inner)} do not divide shards {list(level.shape)}"
    return Sharding(tuple(levels), sharding.codecs)


def index_range(level: Level, start: int, end: int) -> tuple[int, int]:
    """Where a level's index lies in the byte range ``[start, end)`` that holds its shard."""
    return (end - level.index_size, end) if level.index_at_end else (start, start + level.index_size)


#: shard indexes a view keeps (each a few KiB at most for usual shards)
INDEX_CACHE_ENTRIES = 4096


class IndexCache:
    """Decoded shard indexes by (shard key, version, the byte range of the (inner) shard they index)."""

    def __init__(self, entries: int = INDEX_CACHE_ENTRIES):
        import collections

        self.entries = entries
        self._items: collections.OrderedDict[tuple, np.ndarray] = collections.OrderedDict()

    def get(self, ident: tuple) -> np.ndarray | None:
        found = self._items.get(ident)
        if found is not None:
            self._items.move_to_end(ident)
        return found

    def put(self, ident: tuple, index: np.ndarray) -> None:
        self._items[ident] = index
        while len(self._items) > self.entries:
            self._items.popitem(last=False)


@dataclass(frozen=True)
class Located:
    """Where an innermost chunk's bytes lie: in ``key`` (of version ``etag``), ``[start, end)``."""

    key: str
    etag: str
    start: int
    end: int
    mtime_ns: int = 0

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def tag(self) -> str:
        """The chunk's version: its shard's, and where in it (a rewrite moves it)."""
        return f"{self.etag}@{self.start}:{self.end}"


@dataclass
class ShardedArray:
    """A sharded Zarr v3 array as a view reads it from the store (``store``: an async Store)."""

    #: the array's store prefix, and what comes between it and a shard's grid indices ("c/" ...)
    array: str
    prefix: str
    separator: str
    sharding: Sharding
    #: innermost chunks along each axis
    grid: tuple[int, ...]

    def shard_key(self, shard: tuple[int, ...]) -> str:
        return f"{self.array}/{self.prefix}{self.separator.join(str(i) for i in shard)}"

    def chunk_index(self, name: str) -> tuple[int, ...] | None:
        """The innermost chunk a view chunk name (``i.j``) names, or None."""
        parts = name.split(".")
        if len(parts) != len(self.grid) or not all(p.isdigit() for p in parts):
            return None
        index = tuple(int(p) for p in parts)
        return index if all(i < g for i, g in zip(index, self.grid)) else None

    async def _index(self, store: Any, cache: IndexCache, key: str, etag: str, level: Level, start: int,
                     end: int) -> np.ndarray:
        from nczfs.toolbox.errors import InvalidArgument
        from nczfs.store.values import ByteRange

        ident = (key, etag, start, end)
        index = cache.get(ident)
        if index is None:
            a, b = index_range(level, start, end)
            if a < start or b > end:
                raise InvalidArgument(f"{key!r}: a shard of {end - start} bytes cannot hold its index")
            data = await store.get_version(key, ByteRange(a, b), etag or None)
            try:
                index = level.decode_index(data)
            except ValueError as exc:
                raise InvalidArgument(f"{key!r}: shard index unreadable: {exc}") from exc
            cache.put(ident, index)
        return index

    async def locate(self, store: Any, cache: IndexCache, name: str) -> Located | None:
        """Where the view chunk ``name`` lies, or None if it is absent (its shard or its entry)."""
        from nczfs.toolbox.errors import KeyNotFound

        index = self.chunk_index(name)
        if index is None:
            return None
        shard, _ = self.sharding.locate(index)
        key = self.shard_key(shard)
        try:
            info = await store.stat(key)
        except KeyNotFound:
            return None
        return await self.locate_in(store, cache, index, key, info)

    async def locate_in(self, store: Any, cache: IndexCache, index: tuple[int, ...], key: str,
                        info: Any) -> Located | None:
        """Where innermost chunk ``index`` lies in its shard ``key`` of the version and size ``info``
        (an ObjectInfo) gives, or None if its entry is empty. Indexes are read pinned to that
        version (a rewritten shard: Stale)."""
        _, positions = self.sharding.locate(index)
        start, end = 0, info.size
        for level, pos in zip(self.sharding.levels, positions):
            off, n = (int(x) for x in (await self._index(store, cache, key, info.etag, level, start, end))[pos])
            if off == EMPTY and n == EMPTY:
                return None
            start, end = start + off, start + off + n
        return Located(key, info.etag, start, end, info.mtime_ns)

    async def chunks(self, store: Any, cache: IndexCache) -> dict[str, Located]:
        """Every innermost chunk the store holds, by view chunk name."""
        from nczfs.toolbox.errors import KeyNotFound

        try:
            keys = await store.list_prefix(self.array)
        except KeyNotFound:
            keys = []
        out: dict[str, Located] = {}
        lead = f"{self.array}/{self.prefix}"
        outer = self.sharding.levels[0].shape
        for key in keys:
            if not key.startswith(lead):
                continue
            parts = key[len(lead):].split(self.separator)
            if len(parts) != len(self.grid) or not all(p.isdigit() for p in parts):
                continue
            shard = tuple(int(p) for p in parts)
            try:
                info = await store.stat(key)
                await self._walk(store, cache, key, info, 0, [s * o for s, o in zip(shard, outer)], 0, info.size, out)
            except KeyNotFound:
                continue
        return out

    async def _walk(self, store: Any, cache: IndexCache, key: str, info: Any, depth: int, origin: list[int],
                    start: int, end: int, out: dict[str, Located]) -> None:
        level = self.sharding.levels[depth]
        index = await self._index(store, cache, key, info.etag, level, start, end)
        for pos in np.ndindex(*level.per_shard):
            off, n = (int(x) for x in index[pos])
            if off == EMPTY and n == EMPTY:
                continue
            corner = [o + p * i for o, p, i in zip(origin, pos, level.inner)]
            if depth + 1 < len(self.sharding.levels):
                await self._walk(store, cache, key, info, depth + 1, corner, start + off, start + off + n, out)
                continue
            chunk = tuple(c // i for c, i in zip(corner, level.inner))
            if all(c < g for c, g in zip(chunk, self.grid)):
                out[".".join(str(c) for c in chunk)] = Located(key, info.etag, start + off, start + off + n,
                                                               info.mtime_ns)
