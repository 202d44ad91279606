"""ThreadedStore: the bound on a backend's non-blocking reads (S3's lean GETs on the trio thread)."""

from __future__ import annotations

from dataclasses import replace

import threading

import pytest
import trio

from nczfs.store import threads

from nczfs.toolbox.errors import KeyNotFound
from nczfs.store.values import ByteRange
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore


class AsyncGets(MemoryStore):
    """A backend whose reads run on the trio thread, at most ``max_concurrency`` at once."""

    capabilities = replace(MemoryStore.capabilities, max_concurrency=2)

    def __init__(self) -> None:
        super().__init__("async-gets")
        self.running = self.peak = 0

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await trio.sleep(0.01)
            return self.get_version(key, rng, etag)
        finally:
            self.running -= 1


async def test_non_blocking_reads_stay_within_the_bound_and_failures_free_their_slots():
    impl = AsyncGets()
    impl.set("here", b"data")
    store = ThreadedStore(impl)
    results: list[bytes | str] = []

    async def read(key: str) -> None:
        try:
            results.append(await store.get_version(key, None, None))
        except KeyNotFound:
            results.append("missing")

    async def read_all(keys: list[str]) -> None:
        with trio.fail_after(5):  # a slot never freed would leave reads waiting for good
            async with trio.open_nursery() as nursery:
                for key in keys:
                    nursery.start_soon(read, key)

    await read_all(["here", "gone"] * 5)
    assert impl.peak == 2
    assert sorted(results, key=str) == [b"data"] * 5 + ["missing"] * 5
    with trio.move_on_after(0.005):  # cancelled mid-read: its slot is freed too
        await store.get_version("here", None, None)
    impl.peak = 0
    await read_all(["here"] * 4)
    assert impl.peak == 2 and impl.running == 0


class Stalling(MemoryStore):
    """A blocking backend (its calls run in worker threads) whose reads of ``stall*`` keys hang
    until ``release`` is set, as on a server that stopped answering; 2 slots."""

    capabilities = replace(MemoryStore.capabilities, max_concurrency=2, non_blocking=False)

    def __init__(self) -> None:
        super().__init__("stalling")
        self.release = threading.Event()

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        if key.startswith("stall"):
            self.release.wait(30)
        return super().get_version(key, rng, etag)


class StallingAsync(AsyncGets):
    def __init__(self) -> None:
        super().__init__()
        self.release = trio.Event()

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        if key.startswith("stall"):
            await self.release.wait()
        return await super().get_version_async(key, rng, etag)


@pytest.mark.parametrize("kind", [Stalling, StallingAsync])
async def test_calls_stalled_in_every_slot_hold_up_others_only_for_the_patience(kind, monkeypatch):
    """Every slot held by a read the server never answers: another call waits SLOT_PATIENCE for
    one, then takes a spare slot (counted) instead of waiting for the stalled ones to time out."""
    monkeypatch.setattr(threads, "SLOT_PATIENCE", 0.2)
    impl = kind()
    for key in ("stall1", "stall2", "stall3", "ok"):
        impl.set(key, key.encode())
    store = ThreadedStore(impl)
    got: list[bytes] = []

    async def read(key: str) -> None:
        got.append(await store.get_version(key, None, None))

    async with trio.open_nursery() as nursery:
        for key in ("stall1", "stall2"):
            nursery.start_soon(read, key)
        await trio.sleep(0.05)
        with trio.fail_after(10):
            assert await store.get_version("ok", None, None) == b"ok"
            assert await store.stat("ok") is not None
        # (the memory store's stat never blocks: no slot for it in the non-blocking kind)
        assert store.counters()["spare-slots-taken"] == (2 if kind is Stalling else 1) and got == []
        nursery.start_soon(read, "stall3")  # a spare slot held too: the next waits for either kind
        impl.release.set()
    assert sorted(got) == [b"stall1", b"stall2", b"stall3"]


class BlockingStat(MemoryStore):
    """A backend whose ``stat`` blocks (a worker thread's), noting the OS name of its thread."""

    capabilities = replace(MemoryStore.capabilities, non_blocking=False)

    def __init__(self) -> None:
        super().__init__("blocking-stat")
        self.seen: list[tuple[str, bool]] = []

    def stat(self, key: str):
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            self.seen.append((f.read().strip(), threading.current_thread() is threading.main_thread()))
        return super().stat(key)


async def test_a_backends_blocking_calls_run_in_worker_threads_not_renamed_per_call():
    """Each call runs off the trio thread, its result or error brought back, in a worker whose
    OS name is not set for the call (trio's to_thread names it twice a call: two prctl through
    ctypes, each giving up the GIL), and the slots it takes are freed."""
    impl = BlockingStat()
    impl.set("here", b"data")
    store = ThreadedStore(impl)
    for _ in range(3):
        assert (await store.stat("here")).size == 4
        with pytest.raises(KeyNotFound):
            await store.stat("gone")
    assert len(impl.seen) == 6 and not any(main for _, main in impl.seen), impl.seen
    assert not any(" from " in name for name, _ in impl.seen), impl.seen
    assert store._limiter.borrowed_tokens == 0 and store._threads.borrowed_tokens == 0
