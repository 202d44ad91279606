"""ThreadedStore: the bound on a backend's non-blocking reads (S3's lean GETs on the trio thread)."""

from __future__ import annotations

import trio

from nczfs.errors import KeyNotFound
from nczfs.store.base import ByteRange
from nczfs.store.memory import MemoryStore
from nczfs.threads import ThreadedStore


class AsyncGets(MemoryStore):
    """A backend whose reads run on the trio thread, at most ``max_concurrency`` at once."""

    max_concurrency = 2

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
