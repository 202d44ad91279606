"""The in-memory tier: blocks of object bytes under a bound (by default nczfs.toolbox.budgets')."""

from __future__ import annotations

import collections

MiB = 1024 * 1024
#: delivered blocks remembered after they were dropped (see ByteCache.refetch_part)
MAX_DROPPED = 65536


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
