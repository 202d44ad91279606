"""The Zarr tree of one Icechunk session, read through its store's coroutines, and where chunk
keys lie in it (which names of a listing are files)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, TypeVar

from nczfs.store.aiobridge import AsyncioBridge, run_apart
from nczfs.toolbox.errors import BackendError, KeyNotFound
from nczfs.store.keys import join, usable_name
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.icechunk.bursts import ReadBursts
from nczfs.store.icechunk.errors import missing, reason
from nczfs.store.icechunk.rwlock import Apart


def snapshot_ns(repo: Any, snap: str) -> int:
    """When the snapshot was written (now, if the repository cannot say)."""
    try:
        return int(repo.lookup_snapshot(snap).written_at.timestamp() * 1e9)
    except Exception:  # noqa: BLE001 - a time is only decoration
        return time.time_ns()


def _is_metadata(key: str) -> bool:
    return key.rpartition("/")[2] == "zarr.json"


def _pair(rng: ByteRange | None) -> tuple[int | None, int | None]:
    return (None, None) if rng is None else (rng.start, rng.end)


def _maybe_past_end(rng: ByteRange | None, data: bytes) -> bool:
    """Might ``data`` be Icechunk's answer to a range starting past the chunk's end (its last byte)?"""
    return rng is not None and rng.start > 0 and len(data) == 1 and (rng.end is None or rng.end > rng.start + 1)


#: chunks read from this size on are not copied: a read-only view of Icechunk's buffer (a fresh
#: copy of 8 MiB costs 2.3 ms, mostly the first touch of its pages; docs/PERFORMANCE.md)
KEEP_BUFFER = 1024 * 1024

#: object sizes a tree keeps (more: it starts again)
SIZES_KEPT = 1 << 17


T = TypeVar("T")

#: chunk coordinates asked of Icechunk at once (one Python future a batch)
COORDS_BATCH = 1 << 16

#: ``getsize`` calls in flight at once for a listing: each takes a blocking thread of Icechunk's
#: runtime, whose pool thousands at once grow to 512 threads (docs/PERFORMANCE.md, "Issue 46:
#: Icechunk's small chunks")
SIZES_AT_ONCE = 16


@dataclass(frozen=True)
class ChunkLayout:
    """Where an array's chunk keys lie: how many key segments a chunk key has below the array,
    and the array's dimensions if its chunk keys are ``c/I/J`` (the default encoding)."""

    depth: int
    ndim: int | None = None

    @classmethod
    def of(cls, meta: dict[str, Any]) -> "ChunkLayout":
        ndim = len(meta.get("shape") or ())
        enc = meta.get("chunk_key_encoding") or {}
        name = enc.get("name", "default")
        sep = (enc.get("configuration") or {}).get("separator", "/" if name == "default" else ".")
        if sep != "/":
            return cls(1)
        return cls(ndim + 1, ndim) if name == "default" else cls(max(ndim, 1))


class SnapshotTree:
    """The Zarr tree of one Icechunk session, read through its store."""

    def __init__(self, bridge: AsyncioBridge, session: Any, etag: str, mtime_ns: int):
        self.bridge = bridge
        self.session = session
        self.py = session.store._store  # the coroutines of icechunk's IcechunkStore, without zarr's buffers
        self.etag = etag
        self.mtime_ns = mtime_ns
        #: node path -> its chunk layout (None: not an array)
        self._layouts: dict[str, ChunkLayout | None] = {}
        #: reads from trio, small ones sent together
        self.bursts = ReadBursts(bridge, self._get, self._get_many)
        #: the sizes of the objects listed or looked at (up to SIZES_KEPT): which reads are small
        #: enough to be sent in bursts (a stale one changes that choice only)
        self.sizes: dict[str, int] = {}
        #: listings and writes of the session take turns (:class:`Apart`)
        self.apart = Apart()

    @classmethod
    def of(cls, bridge: AsyncioBridge, repo: Any, session: Any, snap: str) -> SnapshotTree:
        """The tree of ``session``, which shows snapshot ``snap`` of ``repo``."""
        return cls(bridge, session, snap, snapshot_ns(repo, snap))

    # -------------------------------------------------------------- coroutines (run in the loop)

    async def _get(self, key: str, rng: ByteRange | None) -> bytes:
        try:
            if rng is not None and _is_metadata(key):
                # Icechunk 1.1 panics on a range past the end of metadata (chunks are clipped)
                return rng.slice(await self.py.get(key, (None, None)))
            got = await self.py.get(key, _pair(rng))
        except Exception as exc:  # noqa: BLE001 - icechunk raises KeyError and IcechunkError
            if missing(exc):
                raise KeyNotFound(key) from None
            if "virtual chunk container" in str(exc):
                raise BackendError(f"{key!r}: a virtual chunk whose container the mount does not name: mount with "
                                   f"-o virtual_chunk_container=PREFIX[=URL] ({reason(exc).split(', see http')[0]})") from None
            raise BackendError(f"{key!r}: {reason(exc)}") from exc
        # a large chunk is handed on as a view of Icechunk's buffer (the cache hands out parts of it)
        data: bytes = memoryview(got) if len(got) >= KEEP_BUFFER else bytes(got)  # type: ignore[assignment]  # bytes-like
        return await self._clipped(key, rng, data) if _maybe_past_end(rng, data) else data

    async def _clipped(self, key: str, rng: ByteRange | None, data: bytes) -> bytes:
        """Icechunk answers a range of a chunk starting at or past its end with its last byte."""
        assert rng is not None  # _maybe_past_end: a range
        size = await self._size(key)
        return b"" if size is not None and rng.start >= size else data

    async def _get_many(self, asks: list[tuple[str, ByteRange | None]]) -> list[bytes | BaseException]:
        """Chunk reads in one ``get_partial_values`` (one Python future for them all); what it
        does not answer (None: a missing chunk or an error, it does not say which), metadata
        (whose ranges it would not clip) and answers that may lie past the end read by
        :meth:`_get`, which says what went wrong."""
        chunks = [i for i, (key, _) in enumerate(asks) if not _is_metadata(key)]
        try:
            values: list[bytes | None] = await self.py.get_partial_values([(asks[i][0], _pair(asks[i][1])) for i in chunks])
        except Exception:  # noqa: BLE001 - every read is tried alone, which says why it fails
            values = [None] * len(chunks)
        answered: dict[int, bytes | None] = dict(zip(chunks, values))
        out: list[bytes | BaseException] = [b""] * len(asks)
        alone = []
        for i, (_, rng) in enumerate(asks):
            got = answered.get(i)
            if got is None or _maybe_past_end(rng, got):
                alone.append(i)
            else:
                out[i] = got

        async def settle(i: int) -> None:
            key, rng = asks[i]
            got = answered.get(i)
            try:
                out[i] = await (self._get(key, rng) if got is None else self._clipped(key, rng, got))
            except Exception as exc:  # noqa: BLE001 - the read's own error, raised to its reader
                out[i] = exc

        await asyncio.gather(*(settle(i) for i in alone))
        return out

    async def _size(self, key: str) -> int | None:
        """``key``'s size, None if it is missing: one call for an object that holds bytes."""
        try:
            size: int = await self.py.getsize(key)
            if not size and not await self.py.exists(key):  # getsize answers 0 for a missing chunk
                return None
            return size
        except Exception as exc:  # noqa: BLE001
            if missing(exc):
                return None
            raise BackendError(f"{key!r}: {reason(exc)}") from exc

    async def _names(self, method: str, prefix: str) -> list[str]:
        try:
            return [k async for k in getattr(self.py, method)(prefix)]
        except Exception as exc:  # noqa: BLE001
            if missing(exc):
                return []
            raise BackendError(f"{prefix or '/'}: listing failed: {reason(exc)}") from exc

    # -------------------------------------------------------------- blocking face

    def _listing(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """A listing, never on the bridge's loop: Icechunk's listing calls block their thread
        until the session's lock is theirs, and their streams hold it until read to the end; and
        never while the session is written (:class:`Apart`)."""
        with self.apart.listing():
            return run_apart(fn, *args)

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        data = self.bridge.run(self._get, key, rng)
        return data if isinstance(data, bytes) else bytes(data)

    async def get_async(self, key: str, rng: ByteRange | None) -> bytes:
        return await self.bursts.get(key, rng, self.sizes.get(key))

    def _known(self, key: str, size: int) -> None:
        if len(self.sizes) >= SIZES_KEPT:
            self.sizes.clear()
        self.sizes[key] = size

    def changed(self, key: str) -> None:
        """``key`` was written or deleted in the session."""
        self.sizes.pop(key, None)
        if _is_metadata(key):
            self._layouts.clear()

    def size(self, key: str) -> int | None:
        return self.bridge.run(self._size, key)

    def layout(self, node: str) -> ChunkLayout | None:
        if node in self._layouts:
            return self._layouts[node]
        try:
            meta = json.loads(self.get(join(node, "zarr.json")))
        except (KeyNotFound, ValueError):
            meta = None
        found = ChunkLayout.of(meta) if isinstance(meta, dict) and meta.get("node_type") == "array" else None
        self._layouts[node] = found
        return found

    def file_test(self, prefix: str) -> Callable[[str], bool]:
        """Which children of ``prefix`` are files: ``zarr.json``, and chunk keys at their depth."""
        segs = prefix.split("/") if prefix else []
        for i in range(len(segs), -1, -1):
            layout = self.layout("/".join(segs[:i]))
            if layout is not None:
                below = len(segs) - i
                return lambda name: (below == 0 and name == "zarr.json") or below + 1 == layout.depth
        return lambda name: name == "zarr.json"

    async def _sizes(self, keys: list[str]) -> list[int]:
        """The sizes of ``keys``, at most :data:`SIZES_AT_ONCE` asked at a time."""
        out = [0] * len(keys)
        todo = iter(range(len(keys)))

        async def asker() -> None:
            for i in todo:
                try:
                    out[i] = await self.py.getsize(keys[i])
                except Exception as exc:  # noqa: BLE001
                    raise BackendError(f"{keys[i]!r}: size not read: {reason(exc)}") from exc

        try:
            async with asyncio.TaskGroup() as tasks:  # the others stop at the first failure
                for _ in range(min(SIZES_AT_ONCE, len(keys))):
                    tasks.create_task(asker())
        except ExceptionGroup as group:
            raise group.exceptions[0] from None
        return out

    def _chunk_dir(self, prefix: str) -> tuple[str, list[int]] | None:
        """``prefix`` as a directory of an array's chunk keys (``a/c``, ``a/c/0``, not ``a/c/0/0``
        of a 2-D array): the array and the chunk coordinates the directory names; None if it is
        none of those."""
        segs = prefix.split("/") if prefix else []
        for i in range(len(segs), -1, -1):
            layout = self.layout("/".join(segs[:i]))
            if layout is not None:
                below = segs[i:]
                if layout.ndim is None or below[:1] != ["c"] or len(below) > layout.ndim or not all(s.isdigit() for s in below[1:]):
                    return None
                return "/".join(segs[:i]), [int(s) for s in below[1:]]
        return None

    async def _coords(self, array: str) -> list[list[int]]:
        try:
            out: list[list[int]] = []
            async for batch in self.session._session.chunk_coordinates("/" + array, COORDS_BATCH):
                out.extend(batch)
            return out
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"{array or '/'}: chunks not listed: {reason(exc)}") from exc

    def _listed_names(self, prefix: str) -> list[str]:
        """The names below ``prefix``: in a chunk directory from the array's chunk coordinates
        (Icechunk lists a chunk directory's names one Python future a name)."""
        where = self._chunk_dir(prefix)
        if where is None:
            return self._listing(self._names, "list_dir", prefix)
        array, known = where
        k = len(known)
        return [str(n) for n in sorted({c[k] for c in self._listing(self._coords, array) if c[:k] == known})]

    def list_dir(self, prefix: str) -> list[DirEntry]:
        names = self._listed_names(prefix)
        if not names:
            return []
        is_file = self.file_test(prefix)
        names = [n for n in sorted(set(names)) if usable_name(n)]
        files = [n for n in names if is_file(n)]
        # sizes come with the listing, as every store's do (ls -l, readdirplus)
        sizes = dict(zip(files, self.bridge.run(self._sizes, [join(prefix, n) for n in files]))) if files else {}
        for n, size in sizes.items():
            self._known(join(prefix, n), size)
        return [
            DirEntry(n, False, ObjectInfo(join(prefix, n), sizes[n], self.mtime_ns, self.etag)) if n in sizes else DirEntry(n, True)
            for n in names
        ]

    def has_children(self, prefix: str) -> bool:
        """Is ``prefix`` a directory of the tree (names only: no sizes asked for)?"""
        return bool(self._listed_names(prefix))

    def list_prefix(self, prefix: str) -> list[str]:
        # Icechunk lists below a node only: below a chunk directory its array is listed, below
        # anything else that is no node the whole tree, and the keys filtered
        segs = prefix.split("/") if prefix else []
        node = next(("/".join(segs[:i]) for i in range(len(segs), -1, -1) if self.layout("/".join(segs[:i]))), None)
        try:
            keys = self._listing(self._names, "list_prefix", prefix if node is None else node)
        except BackendError:
            keys = self._listing(self._names, "list_prefix", "")
        return sorted(k for k in keys if not prefix or k.startswith(prefix + "/"))

    def info(self, key: str) -> ObjectInfo | None:
        size = self.size(key)
        if size is None:
            return None
        self._known(key, size)
        return ObjectInfo(key, size, self.mtime_ns, self.etag)
