"""Recoded chunks of a view (PresentingStore): each made once (a reader asking for one being
made waits for it), in the decode pool (:mod:`nczfs.nczarr.chunks.decoding`), kept in the mount's
cache of made chunks (:mod:`nczfs.nczarr.chunks.madechunks`, their sizes too); and the next chunks of an array made ahead of a reader going through it in C
order, one per thread of the pool, so one reader's chunks decode on every core."""

from __future__ import annotations

import json
import logging
import math
from typing import Awaitable, Callable

from nczfs.toolbox import background
from nczfs.toolbox.errors import KeyNotFound
from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.madechunks import MadeChunks, Stored
from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.views.datasetview import DatasetView

log = logging.getLogger(__name__)


def next_chunk(v: DatasetView, key: str) -> str | None:
    """The view key of the chunk after ``key`` in C order in its (Zarr v2 shown) array, or None
    (the last one, or not a chunk of an array the view shows with its ``.zarray``)."""
    array = v.array_of(key)
    meta = v.objects.get(f"{array}/.zarray") if array else None
    if array is None or meta is None:
        return None
    layout = _layout(meta)
    if layout is None:
        return None
    grid, sep = layout
    parts = key[len(array) + 1:].split(sep)
    if len(parts) != len(grid) or not grid or not all(p.isdigit() for p in parts):
        return None
    index = [int(p) for p in parts]
    for axis in reversed(range(len(index))):
        index[axis] += 1
        if index[axis] < grid[axis]:
            return f"{array}/{sep.join(map(str, index))}"
        index[axis] = 0
    return None


_LAYOUTS: dict[bytes, tuple[tuple[int, ...], str] | None] = {}


def _layout(meta: bytes) -> tuple[tuple[int, ...], str] | None:
    """Chunks along each axis and the key separator of the array whose ``.zarray`` is ``meta``."""
    if meta in _LAYOUTS:
        return _LAYOUTS[meta]
    try:
        z = json.loads(meta)
        grid = tuple(math.ceil(s / c) if c else 0 for s, c in zip(z["shape"], z["chunks"], strict=True))
        out: tuple[tuple[int, ...], str] | None = (grid, z.get("dimension_separator") or ".")
    except (ValueError, KeyError, TypeError):
        out = None
    if len(_LAYOUTS) > 4096:
        _LAYOUTS.clear()
    _LAYOUTS[meta] = out
    return out


class RecodedChunks:
    """Chunks recoded from stored ones, kept in ``made`` (shared with ``NAME.nc4``'s, where the
    mount shows both), and made ahead of readers."""

    def __init__(self, made: MadeChunks):
        self.made = made
        #: view keys being made ahead of a reader
        self._ahead: set[str] = set()

    async def get(self, key: str, plan: Recode, stored: Stored, fetch: Callable[[], Awaitable[bytes]]) -> bytes:
        """The shown chunk ``key``: ``plan`` applied to the stored chunk ``fetch`` gets."""
        return await self.made.get(stored, plan.token, fetch, lambda raw: plan.apply(raw, key),
                                   book=plan.shown_size() is None)

    async def size(self, plan: Recode, stored: Stored) -> int | None:
        """The shown size of the chunk, if it was made before (here, or in the cache dir's book)."""
        return await self.made.size(stored, plan.token)

    def wanted(self, plan: Recode, stored: Stored) -> bool:
        """Is the chunk neither held nor being made?"""
        return self.made.wanted(stored, plan.token)

    def ahead(self, v: DatasetView, key: str, size: int, make: Callable[[str], Awaitable[object]]) -> None:
        """Chunk ``key`` (``size`` bytes shown) was read from its start: make the next chunks of
        its array in the background with ``make(view key)``, one per decode thread, no more than
        the cache holds beside this one, at most that many made ahead at once."""
        count = min(decoding.ahead(), self.made.limit // max(size, 1) - 1)
        nxt: str | None = key
        for _ in range(max(count, 0)):
            nxt = next_chunk(v, nxt) if nxt is not None else None
            if nxt is None or len(self._ahead) >= count:
                return
            if nxt not in self._ahead:
                self._ahead.add(nxt)
                background.start_soon(self._quietly, make, nxt, name=f"nczfs recode ahead {nxt}")

    async def _quietly(self, make: Callable[[str], Awaitable[object]], key: str) -> None:
        decoding.early()
        try:
            await make(key)
        except KeyNotFound:
            pass  # a missing chunk: fill values, nothing to make
        except Exception as exc:  # noqa: BLE001 - made ahead; the reader's own read reports it
            log.debug("recode ahead of %s: %s", key, exc)
        finally:
            self._ahead.discard(key)

