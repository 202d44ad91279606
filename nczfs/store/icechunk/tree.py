"""The Zarr tree of one Icechunk session, read through its store's coroutines, and where chunk
keys lie in it (which names of a listing are files)."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from nczfs.store.aiobridge import AsyncioBridge
from nczfs.toolbox.errors import BackendError, KeyNotFound
from nczfs.store.keys import join, usable_name
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.icechunk.errors import missing, reason


def snapshot_ns(repo: Any, snap: str) -> int:
    """When the snapshot was written (now, if the repository cannot say)."""
    try:
        return int(repo.lookup_snapshot(snap).written_at.timestamp() * 1e9)
    except Exception:  # noqa: BLE001 - a time is only decoration
        return time.time_ns()


@dataclass(frozen=True)
class ChunkLayout:
    """Where an array's chunk keys lie: how many key segments a chunk key has below the array."""

    depth: int

    @classmethod
    def of(cls, meta: dict[str, Any]) -> "ChunkLayout":
        ndim = len(meta.get("shape") or ())
        enc = meta.get("chunk_key_encoding") or {}
        name = enc.get("name", "default")
        sep = (enc.get("configuration") or {}).get("separator", "/" if name == "default" else ".")
        if sep != "/":
            return cls(1)
        return cls(ndim + 1 if name == "default" else max(ndim, 1))


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

    @classmethod
    def of(cls, bridge: AsyncioBridge, repo: Any, session: Any, snap: str) -> SnapshotTree:
        """The tree of ``session``, which shows snapshot ``snap`` of ``repo``."""
        return cls(bridge, session, snap, snapshot_ns(repo, snap))

    # -------------------------------------------------------------- coroutines (run in the loop)

    async def _get(self, key: str, rng: ByteRange | None) -> bytes:
        try:
            if rng is not None and key.rpartition("/")[2] == "zarr.json":
                # Icechunk 1.1 panics on a range past the end of metadata (chunks are clipped)
                return rng.slice(await self.py.get(key, (None, None)))
            data = bytes(await self.py.get(key, (None, None) if rng is None else (rng.start, rng.end)))
        except Exception as exc:  # noqa: BLE001 - icechunk raises KeyError and IcechunkError
            if missing(exc):
                raise KeyNotFound(key) from None
            if "virtual chunk container" in str(exc):
                raise BackendError(f"{key!r}: a virtual chunk whose container the mount does not name: mount with "
                                   f"-o virtual_chunk_container=PREFIX[=URL] ({reason(exc).split(', see http')[0]})") from None
            raise BackendError(f"{key!r}: {reason(exc)}") from exc
        if rng is not None and rng.start > 0 and len(data) == 1 and (rng.end is None or rng.end > rng.start + 1):
            # Icechunk answers a range of a chunk starting at or past its end with its last byte
            size = await self._size(key)
            if size is not None and rng.start >= size:
                return b""
        return data

    async def _size(self, key: str) -> int | None:
        try:
            if not await self.py.exists(key):  # getsize answers 0 for a missing chunk
                return None
            return await self.py.getsize(key)
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

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.bridge.run(self._get, key, rng)

    async def get_async(self, key: str, rng: ByteRange | None) -> bytes:
        return await self.bridge.trio_run(self._get, key, rng)

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

    def forget_layouts(self) -> None:
        self._layouts.clear()

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
        try:
            return list(await asyncio.gather(*(self.py.getsize(k) for k in keys)))
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"{keys[0] if keys else ''!r}...: sizes not read: {reason(exc)}") from exc

    def list_dir(self, prefix: str) -> list[DirEntry]:
        names = self.bridge.run(self._names, "list_dir", prefix)
        if not names:
            return []
        is_file = self.file_test(prefix)
        names = [n for n in sorted(set(names)) if usable_name(n)]
        files = [n for n in names if is_file(n)]
        # sizes come with the listing, as every store's do (ls -l, readdirplus)
        sizes = dict(zip(files, self.bridge.run(self._sizes, [join(prefix, n) for n in files]))) if files else {}
        return [
            DirEntry(n, False, ObjectInfo(join(prefix, n), sizes[n], self.mtime_ns, self.etag)) if n in sizes else DirEntry(n, True)
            for n in names
        ]

    def has_children(self, prefix: str) -> bool:
        """Is ``prefix`` a directory of the tree (names only: no sizes asked for)?"""
        return bool(self.bridge.run(self._names, "list_dir", prefix))

    def list_prefix(self, prefix: str) -> list[str]:
        # Icechunk lists below a node only: below a chunk directory its array is listed, below
        # anything else that is no node the whole tree, and the keys filtered
        segs = prefix.split("/") if prefix else []
        node = next(("/".join(segs[:i]) for i in range(len(segs), -1, -1) if self.layout("/".join(segs[:i]))), None)
        try:
            keys = self.bridge.run(self._names, "list_prefix", prefix if node is None else node)
        except BackendError:
            keys = self.bridge.run(self._names, "list_prefix", "")
        return sorted(k for k in keys if not prefix or k.startswith(prefix + "/"))

    def info(self, key: str) -> ObjectInfo | None:
        size = self.size(key)
        return None if size is None else ObjectInfo(key, size, self.mtime_ns, self.etag)
