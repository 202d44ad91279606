"""Blocking backends lifted to async: every call of a SyncStore runs in a worker thread.

One :class:`trio.CapacityLimiter` per store bounds how many calls run at once (for S3 it
matches the connection pool). A call that waits :data:`SLOT_PATIENCE` seconds for a slot takes
one of as many spare ones instead: calls stalled on a server that stopped answering (S3: up to
3 attempts of 15 s without a byte) then hold up the others for seconds, not minutes. Stores that never block
(memory) are called inline; a backend may offer ``get_version_async``, reads awaited on the
trio thread without a worker (Icechunk's, and large GETs of object stores, both
sent on an asyncio loop thread); it answers None for a read it leaves to a worker thread.
Reads asked for together (the cache's burst of small sibling objects) go in one hand-over: to
the backend's loop, which sends them at once (object stores), or to one worker thread, which
reads them one after another (:meth:`ThreadedStore.get_versions`).
"""

from __future__ import annotations

import contextvars
import functools
from contextlib import asynccontextmanager, suppress
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar, cast

import trio

from nczfs.store.base import Store, SyncStore
from nczfs.store.capabilities import (Capabilities, FAST_PATHS, THREADED, ListsTreesBlocking, ReadsOnLoop, SendsReadsTogether,
                                     StagesBlocking, UploadsInPartsBlocking, offer, offer_fast_paths, offer_hooks)
from nczfs.store.optional import counters
from nczfs.store.forwarding import at_once, in_thread
from nczfs.store.values import Ask, ByteRange, DirEntry, ObjectInfo, Staged, Upload

T = TypeVar("T")

#: seconds a call waits for one of the store's slots before it takes a spare one
SLOT_PATIENCE = 5.0


def read_each(impl: SyncStore, asks: list[Ask]) -> list[bytes | Exception]:
    """``impl.get_version`` of each ask in turn (in the calling worker thread): its bytes, or
    the error it raised, in order."""
    out: list[bytes | Exception] = []
    for key, rng, etag in asks:
        try:
            out.append(impl.get_version(key, rng, etag))
        except Exception as exc:  # noqa: BLE001 - each ask's own outcome, handed to its reader
            out.append(exc)
    return out


def reads_together(impl: SyncStore) -> bool:
    """Can several of ``impl``'s reads share one hand-over? Where it sends them at once itself
    (``get_versions_async``: object stores), or its reads run in worker threads (they share a
    call). Not for stores called inline (memory), nor for those whose reads are awaited on their
    own loop one by one (Icechunk's, which gathers its bursts itself)."""
    if impl.capabilities.non_blocking:
        return False
    return isinstance(impl, SendsReadsTogether) or not isinstance(impl, ReadsOnLoop)


async def run_blocking(fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter | None = None) -> T:
    """Run a blocking call off the trio thread (the only sanctioned way to do so)."""
    return await trio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter)


async def run_store_call(fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter) -> T:
    """:func:`run_blocking` for a backend's own calls, which never call back into trio: trio's
    ``to_thread.run_sync`` names the worker's OS thread twice a call (two ``prctl`` through
    ctypes, each giving up the GIL and taking it again) and sets ``trio.from_thread`` up; this
    does neither. Not cancellable once started, as run_blocking."""
    await trio.lowlevel.checkpoint_if_cancelled()
    placeholder = object()
    try:
        limiter.acquire_on_behalf_of_nowait(placeholder)
    except trio.WouldBlock:
        await limiter.acquire_on_behalf_of(placeholder)
    try:
        task, token = trio.lowlevel.current_task(), trio.lowlevel.current_trio_token()

        def deliver(result: Any) -> None:
            with suppress(trio.RunFinishedError):
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        trio.lowlevel.start_thread_soon(functools.partial(contextvars.copy_context().run, fn, *args), deliver)
        return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
    finally:
        limiter.release_on_behalf_of(placeholder)


class ThreadedStore(Store):
    """``impl``'s calls in worker threads; its capabilities, optional operations and fast paths
    are ``impl``'s."""

    def __init__(self, impl: SyncStore, max_threads: int | None = None):
        self.impl = impl
        offer_fast_paths(self, impl, FAST_PATHS)
        offer(self, impl, THREADED)
        offer_hooks(self, impl)
        # sized to the backend's connection pool where it has one (S3); as many spare slots
        # for calls that waited SLOT_PATIENCE for one, and threads for both
        size = max_threads or impl.capabilities.max_concurrency
        self._limiter = trio.CapacityLimiter(size)
        self._spare = trio.CapacityLimiter(size)
        self._threads = trio.CapacityLimiter(2 * size)
        self.spare_slots_taken = 0
        #: calls sent to a worker thread (``nczfs stats``: ``store.worker-calls``)
        self.worker_calls = 0
        # a backend's reads awaited on the trio thread (sent on its own asyncio loop); None from
        # it: the read goes to a worker thread
        self._get_async: Callable[[str, ByteRange | None, str | None], Awaitable[bytes | None]] | None = (
            impl.get_version_async if isinstance(impl, ReadsOnLoop) else None)
        #: calls of :meth:`get_versions` and the reads they held
        self.read_calls_together = 0
        self.reads_together = 0
        if reads_together(impl):
            self.get_versions = self._get_versions

    @property
    def below(self) -> SyncStore:
        return self.impl

    @property
    def capabilities(self) -> Capabilities:
        """The store below's."""
        return self.impl.capabilities

    @asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """One of the store's slots, or a spare one after SLOT_PATIENCE seconds without."""
        token = object()
        limiter = None
        try:
            self._limiter.acquire_on_behalf_of_nowait(token)  # free: no wait, no deadline to set up
            limiter = self._limiter
        except trio.WouldBlock:
            with trio.move_on_after(SLOT_PATIENCE):
                await self._limiter.acquire_on_behalf_of(token)
                limiter = self._limiter
        if limiter is None:
            self.spare_slots_taken += 1
            await self._spare.acquire_on_behalf_of(token)
            limiter = self._spare
        try:
            yield
        finally:
            limiter.release_on_behalf_of(token)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        if self.impl.capabilities.non_blocking:
            return fn(*args)
        self.worker_calls += 1
        token = object()
        try:  # a free slot: taken without the context manager (a call per FUSE request)
            self._limiter.acquire_on_behalf_of_nowait(token)
        except trio.WouldBlock:
            async with self._slot():
                return await run_store_call(fn, *args, limiter=self._threads)
        try:
            return await run_store_call(fn, *args, limiter=self._threads)
        finally:
            self._limiter.release_on_behalf_of(token)

    async def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        data = await self._read(key, rng, None, self.impl.get, key, rng)
        return data if isinstance(data, bytes) else bytes(data)  # get gives bytes, never a view

    async def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        return await self._read(key, rng, etag, self.impl.get_version, key, rng, etag)

    async def _read(self, key: str, rng: ByteRange | None, etag: str | None, fn: Callable[..., T], *args: Any) -> T:
        """A GET in one of the store's slots: the backend's own async read where it takes this
        one (the same bound as the threads': S3, the connection pool's size), else ``fn(*args)``
        in a worker thread."""
        if self._get_async is None:
            return await self._call(fn, *args)
        async with self._slot():
            data = await self._get_async(key, rng, etag)
            if data is not None:
                return data  # type: ignore[return-value]  # get_version_async answers bytes (T)
            if self.impl.capabilities.non_blocking:
                return fn(*args)
            self.worker_calls += 1
            return await run_store_call(fn, *args, limiter=self._threads)

    async def _get_versions(self, asks: list[Ask]) -> list[bytes | Exception]:
        """``get_version`` of each of ``asks`` (small reads: a burst of sibling objects) in one
        hand-over, in one of the store's slots: sent at once by the store where it can
        (``get_versions_async``: object stores, on their asyncio loop), else in one worker
        call, one after another: one thread hop and one wake-up of trio for the burst, not one
        each. Each read's bytes or its error, in order. Offered as ``get_versions`` where
        :func:`reads_together` says."""
        self.read_calls_together += 1
        self.reads_together += len(asks)
        if not isinstance(self.impl, SendsReadsTogether):
            return await self._call(read_each, self.impl, asks)
        async with self._slot():
            got: list[bytes | Exception | None] = await self.impl.get_versions_async(asks)
        left = [n for n, outcome in enumerate(got) if outcome is None]
        if left:  # reads the store leaves to its blocking path
            for n, outcome in zip(left, await self._call(read_each, self.impl, [asks[n] for n in left])):
                got[n] = outcome
        return got  # type: ignore[return-value]  # None replaced above

    async def _stage(self, key: str, data: bytes) -> Staged | None:
        assert isinstance(self.impl, StagesBlocking)  # offered only where it is
        staged = await self._call(self.impl.stage, key, data)
        if staged is None:
            return None

        async def commit(if_version: str | None = None) -> ObjectInfo:
            return await self._call(cast(Callable[..., ObjectInfo], staged.commit), if_version)  # the blocking form

        async def abort() -> None:
            await self._call(staged.abort)

        return Staged(key, commit, abort)

    async def _open_upload(self, key: str) -> Upload | None:
        assert isinstance(self.impl, UploadsInPartsBlocking)  # offered only where it is
        upload = await self._call(self.impl.open_upload, key)
        if upload is None:
            return None

        async def send(number: int, data: bytes) -> None:
            await self._call(upload.send, number, data)

        async def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            return await self._call(cast(Callable[..., ObjectInfo], upload.complete), size, if_version)  # the blocking form

        async def abort() -> None:
            await self._call(upload.abort)

        return Upload(key, upload.part_size, send, complete, abort)

    async def _list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        assert isinstance(self.impl, ListsTreesBlocking)  # offered only where it is
        return await self._call(self.impl.list_tree, prefix, limit)

    def counters(self) -> dict[str, int]:
        counts = counters(self.impl)
        if self.spare_slots_taken:
            counts = {**counts, "spare-slots-taken": self.spare_slots_taken}
        if self.worker_calls:
            counts = {**counts, "store.worker-calls": self.worker_calls}
        if self.read_calls_together:
            counts = {**counts, "read-calls-together": self.read_calls_together, "reads-together": self.reads_together}
        return counts

    async def delete(self, key: str, if_version: str | None = None) -> None:
        if if_version is None:
            await self._call(self.impl.delete, key)
        else:
            await self._call(lambda: self.impl.delete(key, if_version=if_version))  # type: ignore[call-arg]  # asked only where checks_deletes: those stores take it

    # ------------------------------------------------------------------ forwarded: the one table

    stat = in_thread()
    set = in_thread()
    set_file = in_thread()
    list_dir = in_thread()
    list_prefix = in_thread()
    entry = in_thread()
    copy = in_thread()
    rename = in_thread()
    sync = in_thread()
    close = in_thread()
    # the optional operations (:data:`~nczfs.store.capabilities.THREADED`), where ``impl`` has them
    _optional_set_meta = in_thread()
    _optional_make_node = in_thread()
    _optional_readlink = in_thread()
    _optional_link = in_thread()
    _optional_truncate = in_thread()
    _optional_mkdir = in_thread()
    _optional_rmdir = in_thread()
    _optional_rename_dir = in_thread()
    _optional_forget_dir = in_thread()
    _optional_dir_exists = in_thread()
    _optional_statfs = in_thread()
    _optional_read_small = in_thread()
    _optional_write_meta = at_once()
    _optional_check_new_key = at_once()
    _optional_describe = at_once()
