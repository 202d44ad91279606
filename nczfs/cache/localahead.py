"""Small files read ahead of a reader walking a local directory (:class:`SmallFilesAhead`).

A local directory's small file costs the daemon two worker-thread hops (the lookup's ``lstat``,
the read's ``pread``), each some 50 us of CPU and two context switches (docs/PERFORMANCE.md).
Once a reader reads two neighbours of a directory from their start (``2.9`` then ``2.10``), the
directory is listed (one hop) and, while the reader keeps reading near neighbours in natural name
order (zarr reading chunk after chunk), the next ``count`` small regular files have their entries
and bytes read in one hop per burst (the store's ``read_small``). A lookup of such a file is
answered with its entry, its read with its bytes (the version the entry names), without a hop;
the bytes go once read to their end (the kernel keeps its pages), and everything held goes after
``fresh`` seconds.

What it trades (docs/SEMANTICS.md): a file changed by another program after its burst was read
and before the reader got to it reads as it was then, at most ``fresh`` seconds before. Every
change made through the mount (any write, rename, link, attribute change, directory change)
forgets everything held first, and a burst read meanwhile is not kept.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

import trio

from nczfs.cache.bytecache import MiB
from nczfs.cache.prefetch import natural
from nczfs.store import optional
from nczfs.store.keys import join
from nczfs.store.optional import ReadsSmallFiles
from nczfs.store.values import ByteRange, DirEntry
from nczfs.store.wrapper import WrapperStore
from nczfs.toolbox import background

T = TypeVar("T")

#: files ahead of the reader whose entries and bytes are held or being read
AHEAD_FILES = 64
#: the largest file read ahead
AHEAD_FILE_SIZE = 256 * 1024
#: bytes held or being read ahead, at most
AHEAD_BYTES = 16 * MiB
#: seconds what was read ahead answers lookups and reads (at most the mount's metadata TTL)
AHEAD_FRESH = 5.0
#: directories whose order is kept
MAX_DIRS = 64


@dataclass
class Held:
    """A file a burst read: its entry, its bytes (None: not a small regular file), and when."""

    entry: DirEntry
    data: bytes | None
    at: float


def _of_version(held: Held | None, etag: str | None) -> bytes | None:
    """The bytes ``held`` read, if it read version ``etag`` of a small regular file."""
    if held is None or held.data is None or held.entry.info is None or held.entry.info.etag != etag:
        return None
    return held.data


@dataclass
class Order:
    """A directory's names in natural order, when it was listed, and its small regular files' sizes."""

    at: float
    names: list[str]
    position: dict[str, int]
    small: dict[str, int]
    #: the position of the last name a burst took (or passed over: not a small file)
    until: int = -1


def near(a: str, b: str, count: int) -> bool:
    """Do the names ``a`` and ``b`` look like neighbours in a walk: the same but for their last
    number, at most ``count`` apart (chunks ``2.9`` and ``2.10``; not ``3.63`` and ``4.0``, nor
    two names without a number)? Reads far apart (a reader picking chunks) list nothing."""
    ka, kb = natural(a), natural(b)
    if len(ka) != len(kb) or len(ka) < 3 or ka[:-2] != kb[:-2] or ka[-1] != kb[-1]:
        return False
    return 0 < abs(int(ka[-2]) - int(kb[-2])) <= count


class SmallFilesAhead(WrapperStore):
    """Over a store that :class:`ReadsSmallFiles` (a local directory, in worker threads)."""

    def __init__(self, inner: Any, *, fresh: float = AHEAD_FRESH, count: int = AHEAD_FILES,
                 size: int = AHEAD_FILE_SIZE, budget: int = AHEAD_BYTES, clock: Callable[[], float] = time.monotonic):
        super().__init__(inner)
        assert isinstance(inner, ReadsSmallFiles)
        self.reader: ReadsSmallFiles = inner
        self.fresh, self.count, self.size, self.budget, self.clock = fresh, count, size, budget, clock
        self.held: collections.OrderedDict[str, Held] = collections.OrderedDict()
        self.held_bytes = 0
        #: keys being read ahead, and the end of their burst
        self.pending: dict[str, trio.Event] = {}
        self.pending_bytes = 0
        self.orders: collections.OrderedDict[str, Order] = collections.OrderedDict()
        #: directories being listed
        self.listing: set[str] = set()
        #: per directory: the name of the file last read from its start
        self.last: dict[str, str] = {}
        #: changes made through the mount so far: a burst read across one is not kept
        self.changes = 0
        self.stats: collections.Counter[str] = collections.Counter()

    def counters(self) -> dict[str, int]:
        return {**optional.counters(self.inner), **self.stats}

    # ------------------------------------------------------------------ answered from what is held

    async def entry(self, key: str) -> DirEntry | None:
        held = await self._held(key)
        if held is not None:
            self.stats["ahead.lookups"] += 1
            return held.entry
        return await self.inner.entry(key)

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        data = _of_version(await self._held(key), etag) if etag else None
        start = rng.start if rng is not None else 0
        if data is not None:
            end = len(data) if rng is None or rng.end is None else min(rng.end, len(data))
            if end >= len(data):  # read to its end: the kernel keeps the pages
                self._drop(key)
            self.stats["ahead.reads"] += 1
            out = data if start == 0 and end == len(data) else data[start:end]
        else:
            out = await self.inner.get_version(key, rng, etag)
        if start == 0:
            self._walked(key)
        return out

    def held_object(self, key: str, etag: str, size: int) -> bytes | None:
        """The bytes of ``key`` a burst read, if that burst has ended and read this version (the
        entry's ETag) whole; handed out, they are a read of the file from its start."""
        data = _of_version(self._fresh(key), etag)
        if data is None or len(data) != size:
            return None
        self._drop(key)  # the kernel's pages hold it now
        self.stats["ahead.reads"] += 1
        self._walked(key)
        return data

    async def object_arrives(self, key: str, etag: str) -> bool:
        """Once the burst reading ``key`` (if one is) has ended: whether one was."""
        running = self.pending.get(key)
        if running is not None:
            await running.wait()
        return running is not None

    async def _held(self, key: str) -> Held | None:
        await self.object_arrives(key, "")
        return self._fresh(key)

    def _fresh(self, key: str) -> Held | None:
        """What a burst holds of ``key``, unless it is older than ``fresh`` (then dropped)."""
        held = self.held.get(key)
        if held is not None and self.clock() - held.at > self.fresh:
            self._drop(key)
            return None
        return held

    # ------------------------------------------------------------------ changes through the mount

    async def _write(self, op: str, keys: tuple[str, ...], call: Callable[..., Awaitable[T]],
                     data: bytes | bytearray | memoryview | None = None) -> T:
        self._forget()
        try:
            return await call()
        finally:
            self._forget()

    async def refresh(self, key: str) -> None:
        """Another program changed ``key`` (found by a layer above): nothing held is trusted."""
        self._forget()

    def _forget(self) -> None:
        self.changes += 1
        self.held.clear()
        self.held_bytes = 0
        self.orders.clear()

    def _drop(self, key: str) -> None:
        held = self.held.pop(key, None)
        if held is not None and held.data is not None:
            self.held_bytes -= len(held.data)

    def _keep(self, key: str, held: Held) -> None:
        self._drop(key)
        self.held[key] = held
        self.held_bytes += len(held.data) if held.data is not None else 0
        while self.held and (self.held_bytes > self.budget or len(self.held) > 4 * self.count * MAX_DIRS):
            self._drop(next(iter(self.held)))

    # ------------------------------------------------------------------ the walk

    def _walked(self, key: str) -> None:
        """``key`` was read from its start: after a read of a near neighbour (:func:`near`) its
        directory is listed; a neighbour of the last one in the order reads the next files ahead."""
        parent, _, name = key.rpartition("/")
        last = self.last.get(parent)
        if len(self.last) > MAX_DIRS:
            self.last.clear()
        self.last[parent] = name
        if last is None or last == name:
            return
        order = self.orders.get(parent)
        here = order.position.get(name) if order is not None else None
        # listed once two reads look like a walk; again when a name read is not in an order
        # older than ``fresh`` (made since: the old order serves meanwhile)
        stale = order is not None and here is None and self.clock() - order.at > self.fresh
        if (stale or (order is None and near(last, name, self.count))) and parent not in self.listing:
            self.listing.add(parent)
            self.stats["ahead.listings"] += 1
            background.start_soon(self._list, parent, self.changes, name=f"nczfs listing {parent!r} ahead")
        if order is None or here is None:
            return
        before = order.position.get(last)
        if before is not None and 0 < abs(here - before) <= self.count:
            self._fill(parent, order, here)

    async def _list(self, parent: str, changes: int) -> None:
        try:
            entries = await self.inner.list_dir(parent)
        except Exception:  # noqa: BLE001  # the reader's own lookups report what is wrong
            self.stats["ahead.errors"] += 1
            return
        finally:
            self.listing.discard(parent)
        if changes != self.changes:
            return
        names = sorted((e.name for e in entries), key=natural)
        small = {e.name: e.info.size for e in entries
                 if not e.is_dir and e.info is not None and e.info.etag and e.info.size <= self.size}
        order = Order(self.clock(), names, {n: i for i, n in enumerate(names)}, small)
        old = self.orders.pop(parent, None)
        if old is not None and old.until >= 0:  # where the bursts got to, by name
            order.until = order.position.get(old.names[old.until], -1)
        self.orders[parent] = order
        if len(self.orders) > MAX_DIRS:
            self.orders.popitem(last=False)
        here = order.position.get(self.last.get(parent, ""))
        if here is not None:
            self._fill(parent, order, here)

    def _fill(self, parent: str, order: Order, here: int) -> None:
        """Read ahead, in one burst, the small files the directory's earlier bursts did not take
        up to ``count`` after ``here``, once the reader is within half of that of their end."""
        if here > order.until or here < order.until - 2 * self.count:  # ahead of the bursts, or walking again
            order.until = here
        if order.until - here > self.count // 2:
            return
        room = self.budget - self.held_bytes - self.pending_bytes
        keys, size = [], 0
        for at in range(order.until + 1, min(here + 1 + self.count, len(order.names))):
            name = order.names[at]
            small = order.small.get(name)
            if small is None:
                order.until = at
                continue
            if size + small > room:
                break
            key = join(parent, name)
            order.until = at
            if key not in self.held and key not in self.pending:
                size += small
                keys.append(key)
        if not keys:
            return
        done = trio.Event()
        for key in keys:
            self.pending[key] = done
        self.pending_bytes += size
        self.stats["ahead.bursts"] += 1
        background.start_soon(self._burst, keys, size, done, self.changes, name=f"nczfs small files of {parent!r}")

    async def _burst(self, keys: list[str], size: int, done: trio.Event, changes: int) -> None:
        try:
            got = await self.reader.read_small(keys, self.size)
            if changes == self.changes:
                now = self.clock()
                for key, entry, data in got:
                    self._keep(key, Held(entry, data, now))
                self.stats["ahead.files"] += len(got)
        except Exception:  # noqa: BLE001  # the reader's own lookups and reads report what is wrong
            self.stats["ahead.errors"] += 1
        finally:
            for key in keys:
                if self.pending.get(key) is done:
                    del self.pending[key]
            self.pending_bytes -= size
            done.set()
