"""nczfs's store stack as a zarr-python store, in process (``nczfs.open_view``).

The stack a mount serves (backend, cache, NCZarr layer: views, validation, consolidation) is
trio code; it runs on a thread of its own running trio, and zarr's asyncio calls reach it from
worker threads (``trio.from_thread``). Nothing here touches FUSE.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import trio
from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype

from nczfs.daemon import stack
from nczfs.config.mountconfig import MountConfig
from nczfs.toolbox.errors import IsADirectory, KeyNotFound, NotADirectory
from nczfs.store.registry import open_store
from nczfs.store.values import ByteRange
from nczfs.store import optional


class _TrioThread:
    """A thread running trio until stopped; ``call`` runs an async function there."""

    def __init__(self) -> None:
        self._started = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name="nczfs view", daemon=True)
        self._thread.start()
        self._started.wait()

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        self._started.set()
        await self._stop.wait()

    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        return trio.from_thread.run(fn, *args, trio_token=self.token)

    def stop(self) -> None:
        trio.from_thread.run_sync(self._stop.set, trio_token=self.token)
        self._thread.join()


class NczfsZarrStore(Store):
    """A zarr-python store over nczfs's NCZarr layer (see the module doc)."""

    supports_listing = True
    supports_partial_writes = False

    def __init__(self, config: MountConfig, sync_store, trio_thread: _TrioThread, stack,
                 read_only: bool = False, owner: "NczfsZarrStore | None" = None) -> None:
        super().__init__(read_only=read_only or config.read_only or sync_store.capabilities.read_only)
        self.config = config
        self._sync_store = sync_store
        self._trio = trio_thread
        self._stack = stack
        self._owner = owner  # a copy (``with_read_only``) shares its owner's stack and thread
        self._is_open = owner is None  # zarr's flag: the owner has nothing more to open

    def with_read_only(self, read_only: bool = False) -> "NczfsZarrStore":
        """The same view with ``read_only`` set (zarr's ``open_group(store, mode="r")`` asks for
        one): it shares this store's stack, so closing it stores nothing and stops nothing."""
        owner = self._owner or self
        if owner._trio is None:
            raise ValueError(f"{self!r} is closed")
        if not read_only and (self.config.read_only or self._sync_store.capabilities.read_only):
            why = "read_only=True" if self.config.read_only else "a read-only source"
            raise ValueError(f"{self!r} was opened with {why}: open_view again without it to write")
        return type(self)(self.config, self._sync_store, owner._trio, self._stack, read_only=read_only, owner=owner)

    @classmethod
    def open(cls, config: MountConfig) -> "NczfsZarrStore":  # type: ignore[override]  # opens from a MountConfig, not zarr's arguments
        sync_store = open_store(config)
        thread = _TrioThread()
        try:
            stack = thread.call(_build, sync_store, config)
        except BaseException:
            thread.stop()
            sync_store.close()
            raise
        return cls(config, sync_store, thread, stack)

    @property
    def supports_writes(self) -> bool:
        return not self.read_only

    @property
    def supports_deletes(self) -> bool:
        return not self.read_only

    def problems(self) -> list[str]:
        """What is wrong with the medium itself (as ``nczfs validate`` reports it)."""
        return optional.problems(self._sync_store)

    async def _call(self, name: str, *args: Any) -> Any:
        method = getattr(self._stack, name)
        trio_thread = (self._owner or self)._trio
        if trio_thread is None:
            raise ValueError(f"{self!r} is closed")
        return await asyncio.to_thread(trio_thread.call, method, *args)

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"NczfsZarrStore({self.config.source.text!r}, present={self.config.present!r})"

    async def _range(self, key: str, byte_range: ByteRequest | None) -> ByteRange | None:
        if byte_range is None:
            return None
        if isinstance(byte_range, RangeByteRequest):
            return ByteRange(byte_range.start, byte_range.end)
        if isinstance(byte_range, OffsetByteRequest):
            return ByteRange(byte_range.offset)
        if isinstance(byte_range, SuffixByteRequest):
            size = (await self._call("stat", key)).size
            return ByteRange(max(0, size - byte_range.suffix))
        raise TypeError(f"unexpected byte range {byte_range!r}")

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        try:
            data = await self._call("get", key, await self._range(key, byte_range))
        except (KeyNotFound, IsADirectory, NotADirectory):
            return None
        return prototype.buffer.from_bytes(bytes(data))

    async def get_partial_values(self, prototype: BufferPrototype,
                                 key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[Buffer | None]:
        return [await self.get(key, prototype, rng) for key, rng in key_ranges]

    async def exists(self, key: str) -> bool:
        try:
            entry = await self._call("entry", key)
        except (KeyNotFound, NotADirectory):
            return False
        return entry is not None and not entry.is_dir

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        await self._call("set", key, value.to_bytes())

    async def delete(self, key: str) -> None:
        self._check_writable()
        try:
            await self._call("delete", key)
        except KeyNotFound:
            pass

    async def list(self) -> AsyncIterator[str]:
        for key in await self._call("list_prefix", ""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        folder = prefix.rstrip("/") if prefix.endswith("/") else prefix.rpartition("/")[0]
        try:
            keys = await self._call("list_prefix", folder)
        except (KeyNotFound, NotADirectory):
            return
        for key in keys:
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        try:
            entries = await self._call("list_dir", prefix.rstrip("/"))
        except (KeyNotFound, NotADirectory):
            return
        for entry in entries:
            yield entry.name

    def close(self) -> None:
        """Store what was written, then stop the store's thread (idempotent; a read-only copy
        only marks itself closed: its owner holds the stack)."""
        if self._owner is not None or self._trio is None:
            super().close()
            return
        try:
            self._trio.call(self._stack.sync)
            self._trio.call(self._stack.close)
        finally:
            self._trio.stop()
            self._trio = None  # type: ignore[assignment]  # closed: no thread any more
            self._sync_store.close()
        super().close()


async def _build(sync_store, config: MountConfig):
    return stack.build(sync_store, config)
