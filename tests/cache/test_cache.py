"""CachingStore without a kernel: the store conformance suite, bounds, coalescing, TTLs, invalidation.

Calls reaching the backend are counted by a FaultyStore between the cache and a MemoryStore;
time is a fake clock, so TTLs are tested without sleeping.
"""

from __future__ import annotations

from dataclasses import replace

import os
from pathlib import Path

import pytest
import trio

from nczfs.cache import blocks as cache_module
from nczfs.cache import CachingStore
from nczfs.toolbox.errors import BackendError, KeyNotFound, Stale
from nczfs.store.values import ByteRange
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.wrapper import WrapperStore
from nczfs.store.threads import ThreadedStore
from nczfs.store import optional
from tests.store import test_memory

KiB = 1024
DATA = Path(__file__).resolve().parent  # an existing directory, as a directory SOURCE


class TestCachingStoreConformance(test_memory.TestMemoryStore):
    """With TTL 0 the cache is transparent (changes behind it are seen at once); small blocks
    make the 5 MiB conformance object span many blocks."""

    lists_trees = False  # the cache uses the trees its store lists; it offers none to the layers above

    @pytest.fixture
    async def store(self, sync_store):
        s = CachingStore(ThreadedStore(sync_store), cache_size=1024 * KiB, ttl=0, block_size=64 * KiB)
        yield s
        await s.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def mem() -> MemoryStore:
    return MemoryStore("cache")


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(mem: MemoryStore, clock: Clock, **kw) -> tuple[CachingStore, FaultyStore]:
    faulty = FaultyStore(ThreadedStore(mem))
    kw.setdefault("cache_size", 1024 * KiB)
    kw.setdefault("ttl", 5.0)
    kw.setdefault("block_size", 64 * KiB)
    kw.setdefault("is_metadata", is_metadata)
    return CachingStore(faulty, clock=clock, **kw), faulty


def is_metadata(key: str) -> bool:
    """Which keys are metadata objects: the stack's builder tells the cache (NCZarr knows)."""
    return key.rpartition("/")[2] in (".zgroup", ".zarray", ".zattrs", "zarr.json")


def put_behind(mem: MemoryStore, key: str, data: bytes) -> None:
    """Another client changes the medium: the cache is not told."""
    mem.set(key, data)


# ---------------------------------------------------------------------- bytes


async def test_repeated_reads_cost_one_backend_get(mem, clock):
    cache, faulty = make(mem, clock)
    put_behind(mem, "k", b"x" * 1000)
    etag = mem.stat("k").etag
    for off in range(0, 1000, 100):
        assert await cache.get_version("k", ByteRange(off, off + 100), etag) == b"x" * 100
    assert faulty.calls["get"] == 1
    assert cache.counters()["cache.hits"] == 9 and cache.counters()["cache.misses"] == 1


async def test_the_cache_never_holds_more_than_its_size(mem, clock):
    cache, faulty = make(mem, clock, cache_size=200 * KiB, block_size=64 * KiB)
    for i in range(20):
        put_behind(mem, f"k{i}", bytes([i]) * (50 * KiB))
    for i in range(20):
        assert await cache.get(f"k{i}") == bytes([i]) * (50 * KiB)
        assert cache.bytes.used <= 200 * KiB
    assert cache.bytes.used == 200 * KiB  # four 50 KiB objects: the most recent ones
    faulty.calls.clear()
    assert await cache.get("k19") == bytes([19]) * (50 * KiB)
    assert faulty.calls["get"] == 0
    assert await cache.get("k0") == bytes([0]) * (50 * KiB)  # evicted long ago: fetched again
    assert faulty.calls["get"] == 1


async def test_an_object_larger_than_the_cache_is_read_but_not_kept(mem, clock):
    cache, faulty = make(mem, clock, cache_size=100 * KiB, block_size=64 * KiB, readahead=0)
    data = bytes(range(256)) * 1024  # 256 KiB: four 64 KiB blocks, only one fits... never more than 100 KiB
    put_behind(mem, "big", data)
    assert await cache.get("big") == data
    assert cache.bytes.used <= 100 * KiB


async def test_concurrent_reads_of_one_object_are_coalesced(mem, clock):
    cache, faulty = make(mem, clock)
    faulty.latency = 0.05
    put_behind(mem, "k", b"abc" * 1000)
    etag = mem.stat("k").etag
    results = []

    async def read(off: int) -> None:
        results.append(await cache.get_version("k", ByteRange(off, off + 3), etag))

    async with trio.open_nursery() as n:
        for off in range(0, 30, 3):
            n.start_soon(read, off)
    assert results == [b"abc"] * 10
    assert faulty.calls["get"] == 1
    assert cache.counters()["cache.coalesced"] == 9


async def test_a_failed_fetch_fails_every_waiter_and_is_not_cached(mem, clock):
    cache, faulty = make(mem, clock)
    faulty.latency = 0.02
    put_behind(mem, "k", b"data")
    etag = mem.stat("k").etag
    faulty.fail("get", times=1)
    errors = []

    async def read() -> None:
        try:
            await cache.get_version("k", None, etag)
        except BackendError as exc:
            errors.append(exc)

    async with trio.open_nursery() as n:
        for _ in range(3):
            n.start_soon(read)
    assert len(errors) == 3 and faulty.calls["get"] == 1
    clock.now += cache_module.FAILED_FOR
    assert await cache.get_version("k", None, etag) == b"data"  # the next read asks again
    assert cache.counters()["errors"] >= 1  # counted: a failure, not an answer of the store


async def test_a_block_read_again_just_after_its_fetch_failed_gets_the_same_error(mem, clock):
    """The kernel reads again at once what its read-ahead could not get: that read is answered by
    the failure (one round of the store's attempts, not two); a second later the store is asked
    again. A missing key is an answer, not a failure: it is asked again at once."""
    cache, faulty = make(mem, clock)
    put_behind(mem, "k", b"data")
    etag = mem.stat("k").etag
    faulty.fail("get", times=1)
    with pytest.raises(BackendError) as first:
        await cache.get_version("k", ByteRange(0, 4), etag)
    clock.now += cache_module.FAILED_FOR / 2
    with pytest.raises(BackendError) as again:
        await cache.get_version("k", ByteRange(0, 4), etag)
    assert again.value is first.value and faulty.calls["get"] == 1
    assert cache.counters()["cache.failures-repeated"] == 1
    clock.now += cache_module.FAILED_FOR / 2
    assert await cache.get_version("k", ByteRange(0, 4), etag) == b"data"
    assert faulty.calls["get"] == 2
    mem.delete("k")
    for _ in range(2):
        with pytest.raises((KeyNotFound, Stale)):
            await cache.get_version("k", ByteRange(0, 4), "other")
    assert faulty.calls["get"] == 4
    # failures are not kept past their second: the next one lets go of those before it
    put_behind(mem, "k2", b"data")
    faulty.fail("get", times=1)
    with pytest.raises(BackendError):
        await cache.get_version("k2", ByteRange(0, 4), mem.stat("k2").etag)
    assert [ident[0] for ident in cache.fetcher.failed] == ["k2"]


async def test_a_changed_object_is_read_under_its_new_etag(mem, clock):
    cache, faulty = make(mem, clock)
    put_behind(mem, "k", b"old")
    assert await cache.get_version("k", None, mem.stat("k").etag) == b"old"
    put_behind(mem, "k", b"new!")
    assert await cache.get_version("k", None, mem.stat("k").etag) == b"new!"
    assert faulty.calls["get"] == 2


async def test_plain_get_follows_the_metadata_ttl(mem, clock):
    cache, faulty = make(mem, clock, ttl=5.0)
    put_behind(mem, "k", b"one")
    assert await cache.get("k") == b"one"
    put_behind(mem, "k", b"two")
    assert await cache.get("k") == b"one"  # within the TTL: the version last seen
    clock.now += 5.1
    assert await cache.get("k") == b"two"


async def test_own_writes_are_read_back_at_once_whatever_the_ttl(mem, clock):
    cache, faulty = make(mem, clock, ttl=1e9)
    await cache.set("k", b"first")
    assert await cache.get("k") == b"first"
    info = await cache.set("k", b"second, longer")
    assert await cache.get("k") == b"second, longer"
    assert await cache.get_version("k", ByteRange(0, 6), info.etag) == b"second"
    assert (await cache.stat("k")).size == len(b"second, longer")
    assert faulty.calls["get"] == 0 and faulty.calls["stat"] == 0  # all from what the writes left
    await cache.delete("k")
    with pytest.raises(KeyNotFound):
        await cache.get("k")
    assert await cache.entry("k") is None


async def test_own_writes_are_kept_only_up_to_a_sixteenth_of_the_cache_until_read(mem, clock):
    """What the mount stored went through the kernel and is seldom read back: the cache keeps the
    most recent of it up to the delivered blocks' bound (memory reused for the next writes,
    instead of the cache filling with fresh memory); a written block read back is kept as any."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, cache_size=4096 * KiB)  # bound: 256 KiB
    infos = [await cache.set(f"w{i}", bytes([i]) * 64 * KiB) for i in range(8)]
    c = cache.counters()
    assert c["cache.bytes-held"] == c["cache.bytes-held-written"] == 256 * KiB, c
    assert await cache.get_version("w7", ByteRange(0, 64 * KiB), infos[7].etag) == bytes([7]) * 64 * KiB
    assert faulty.calls["get"] == 0  # the newest are still there
    assert cache.counters()["cache.bytes-held-written"] == 192 * KiB  # w7, read back: kept as any block
    await cache.set("w8", b"8" * 64 * KiB)
    await cache.set("w9", b"9" * 64 * KiB)
    c = cache.counters()
    assert c["cache.bytes-held"] == 320 * KiB and c["cache.bytes-held-written"] == 256 * KiB, c
    assert await cache.get_version("w7", ByteRange(0, 64 * KiB), infos[7].etag) == bytes([7]) * 64 * KiB
    assert faulty.calls["get"] == 0
    assert await cache.get_version("w0", ByteRange(0, 64 * KiB), infos[0].etag) == bytes([0]) * 64 * KiB
    assert faulty.calls["get"] == 1  # the oldest went first


async def test_a_stale_read_drops_what_is_cached_about_the_object(mem, clock):
    """A pinned read finding the object changed (S3: If-Match fails) makes the next stat ask the store."""
    from nczfs.toolbox.errors import Stale

    cache, faulty = make(mem, clock, ttl=1e9)
    put_behind(mem, "k", b"old")
    info = await cache.stat("k")
    put_behind(mem, "k", b"new")
    faulty.fail("get", Stale("k changed"), times=1)
    with pytest.raises(Stale):
        await cache.get_version("k", None, info.etag)
    assert (await cache.stat("k")).etag == mem.stat("k").etag
    assert faulty.calls["stat"] == 2


async def test_a_failed_write_counts_as_an_error(mem, clock):
    cache, faulty = make(mem, clock)
    faulty.fail("set", BackendError("'k': refused"), times=1)
    with pytest.raises(BackendError):
        await cache.set("k", b"x")
    assert cache.counters()["errors"] >= 1  # counted: a failure, not an answer of the store
    await cache.set("k", b"x")
    assert cache.counters()["errors"] >= 1  # counted: a failure, not an answer of the store


async def test_a_stale_read_drops_the_listing_that_holds_the_old_version_too(mem, clock):
    """Objects changed elsewhere after their directory was listed: the listing still holds their
    old ETags, so a failed pinned read drops it with the rest (the next stat asks the store), and
    a plain get reads the current version rather than failing again."""
    from nczfs.toolbox.errors import Stale

    cache, faulty = make(mem, clock, ttl=1e9)
    for key in ("d/f", "d/g"):
        put_behind(mem, key, b"old")
    assert sorted(e.name for e in await cache.list_dir("d")) == ["f", "g"]
    old = (await cache.stat("d/f")).etag
    assert faulty.calls["stat"] == 0  # answered by the listing
    put_behind(mem, "d/f", b"new, f")
    with pytest.raises(Stale):
        await cache.get_version("d/f", None, old)
    assert (await cache.stat("d/f")).etag == mem.stat("d/f").etag
    assert faulty.calls["stat"] == 1
    assert sorted(e.name for e in await cache.list_dir("d")) == ["f", "g"]  # listed again
    put_behind(mem, "d/g", b"new!")
    assert await cache.get("d/g") == b"new!"


async def test_a_refused_conditional_write_drops_the_listing_that_holds_the_old_version_too(mem, clock):
    """A write conditioned on the version the listing holds, refused (another client stored
    another meanwhile): the listing goes too, so the writer's next stat (to read and merge again,
    as the consolidating layer does) finds the version stored, not the old one again."""
    from nczfs.toolbox.errors import Conflict

    cache, faulty = make(mem, clock, ttl=1e9)
    put_behind(mem, "d/.zmetadata", b"old")
    await cache.list_dir("d")
    old = (await cache.stat("d/.zmetadata")).etag
    put_behind(mem, "d/.zmetadata", b"theirs")
    with pytest.raises(Conflict):
        await cache.set("d/.zmetadata", b"ours", if_version=old)
    assert (await cache.stat("d/.zmetadata")).etag == mem.stat("d/.zmetadata").etag != old


async def test_sequential_reads_fetch_the_next_blocks_ahead(mem, clock):
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=3, cache_size=4096 * KiB)
    data = bytes(range(256)) * (4 * 1024)  # 1 MiB: 16 blocks
    put_behind(mem, "big", data)
    etag = (await cache.stat("big")).etag
    got = b""
    for off in range(0, len(data), 32 * KiB):  # the kernel's 32 KiB.. 128 KiB reads, in order
        got += await cache.get_version("big", ByteRange(off, off + 32 * KiB), etag)
        await trio.testing.wait_all_tasks_blocked()
    assert got == data
    c = cache.counters()
    assert c["cache.prefetches"] >= 10
    assert faulty.calls["get"] == 16  # every block fetched once, none past the end


async def test_reads_of_a_whole_object_fetch_nothing_past_its_end_once_its_entry_expired(mem, clock):
    # zarr reads 8 MiB chunk objects (one block) whole on a mount with a 1 s TTL: on a busy
    # machine the reads outlast the entry, and readahead must still know where this version ends
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=3, cache_size=4096 * KiB, ttl=1.0)
    data = bytes(range(256)) * 256  # exactly one block
    put_behind(mem, "c/0", data)
    etag = (await cache.stat("c/0")).etag
    got = b""
    for off in range(0, len(data), 16 * KiB):
        got += await cache.get_version("c/0", ByteRange(off, off + 16 * KiB), etag)
        await trio.testing.wait_all_tasks_blocked()
        clock.now += 2.0  # the entry expires between the kernel's reads
    assert got == data
    assert faulty.calls["get"] == 1  # the block; no GET of the blocks past the end
    assert faulty.calls["stat"] == 1  # nor HEADs to tell an empty range from a missing object


async def test_random_reads_fetch_no_blocks_ahead(mem, clock):
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=3, cache_size=4096 * KiB)
    put_behind(mem, "big", bytes(1024 * KiB))
    etag = mem.stat("big").etag
    for block in (9, 2, 14, 5, 11):
        await cache.get_version("big", ByteRange(block * 64 * KiB + 10, block * 64 * KiB + 4106), etag)
    await trio.testing.wait_all_tasks_blocked()
    assert faulty.calls["get"] == 5
    assert cache.counters().get("cache.prefetches", 0) == 0


async def _stream(cache: CachingStore, key: str, size: int, piece: int = 32 * KiB) -> bytes:
    """Read ``key`` from start to end in the kernel's pieces, as a reader of a mounted file does."""
    etag = (await cache.stat(key)).etag
    got = b""
    for off in range(0, size, piece):
        got += await cache.get_version(key, ByteRange(off, off + piece), etag)
    return got


async def test_blocks_read_to_their_end_are_kept_only_up_to_a_sixteenth_of_the_cache(mem, clock):
    """Every byte of them went to the kernel's page cache: a streamed object turns over a few
    buffers instead of filling the cache."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=0, cache_size=4096 * KiB)
    data = bytes(range(256)) * (4 * 1024)  # 1 MiB: 16 blocks
    put_behind(mem, "big", data)
    assert await _stream(cache, "big", len(data)) == data
    c = cache.counters()
    assert c["cache.bytes-held"] == c["cache.bytes-held-delivered"] == 256 * KiB, c  # 4096 KiB / 16
    faulty.calls.clear()
    etag = mem.stat("big").etag
    assert await cache.get_version("big", ByteRange(15 * 64 * KiB, 16 * 64 * KiB), etag) == data[15 * 64 * KiB:]
    assert faulty.calls["get"] == 0  # the newest are still there
    assert await cache.get_version("big", ByteRange(0, 100), etag) == data[:100]
    assert faulty.calls["get"] == 1  # the oldest went first


async def test_without_the_kernels_page_cache_blocks_read_to_their_end_are_kept(mem, clock):
    """-o direct_io: the kernel keeps no pages, so the cache is all there is for a second read."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=0, cache_size=4096 * KiB, kernel_keeps_reads=False)
    data = bytes(range(256)) * (4 * 1024)  # 1 MiB: 16 blocks
    put_behind(mem, "big", data)
    assert await _stream(cache, "big", len(data)) == data
    assert cache.counters()["cache.bytes-held"] == len(data)
    faulty.calls.clear()
    assert await _stream(cache, "big", len(data)) == data
    assert faulty.calls["get"] == 0


async def test_a_part_of_a_dropped_delivered_block_is_fetched_alone_once(mem, clock):
    """The kernel reclaims pages, not files: when it asks again for a few pages of a block
    dropped after its delivery, only those are fetched; asked again, the whole block."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=0, cache_size=4096 * KiB)
    data = bytes(range(256)) * (4 * 1024)  # 1 MiB: 16 blocks, the first 12 dropped after delivery
    put_behind(mem, "big", data)
    assert await _stream(cache, "big", len(data)) == data
    etag = mem.stat("big").etag
    fetched = cache.counters()["cache.bytes-fetched"]
    faulty.calls.clear()
    assert await cache.get_version("big", ByteRange(8 * KiB, 12 * KiB), etag) == data[8 * KiB : 12 * KiB]
    c = cache.counters()
    assert faulty.calls["get"] == 1 and c["cache.bytes-fetched"] - fetched == 4 * KiB, c
    assert c["cache.part-refetches"] == 1
    assert await cache.get_version("big", ByteRange(20 * KiB, 24 * KiB), etag) == data[20 * KiB : 24 * KiB]
    assert faulty.calls["get"] == 2 and cache.counters()["cache.bytes-fetched"] - fetched == 68 * KiB
    assert await cache.get_version("big", ByteRange(40 * KiB, 44 * KiB), etag) == data[40 * KiB : 44 * KiB]
    assert faulty.calls["get"] == 2  # kept now


async def test_blocks_read_in_part_are_kept_up_to_the_cache_size(mem, clock):
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=0, cache_size=4096 * KiB)
    put_behind(mem, "big", bytes(1024 * KiB))
    etag = mem.stat("big").etag
    for block in range(16):  # 4 KiB of each block, never its end
        await cache.get_version("big", ByteRange(block * 64 * KiB, block * 64 * KiB + 4 * KiB), etag)
    c = cache.counters()
    assert c["cache.bytes-held"] == 1024 * KiB and c["cache.bytes-held-delivered"] == 0, c


async def test_a_delivered_block_read_again_is_kept_like_any_other(mem, clock):
    """The kernel came back for it (its page cache dropped it): streaming more does not evict it."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, readahead=0, cache_size=4096 * KiB)
    put_behind(mem, "small", b"s" * 1000)
    put_behind(mem, "big", bytes(1024 * KiB))
    etag = mem.stat("small").etag
    assert await _stream(cache, "small", 1000) == b"s" * 1000
    assert cache.counters()["cache.bytes-held-delivered"] == 1000
    assert await cache.get_version("small", ByteRange(0, 1000), etag) == b"s" * 1000
    assert await _stream(cache, "big", 1024 * KiB) == bytes(1024 * KiB)
    faulty.calls.clear()
    assert await cache.get_version("small", ByteRange(0, 1000), etag) == b"s" * 1000
    assert faulty.calls["get"] == 0


async def test_whole_object_gets_are_not_counted_as_delivered(mem, clock):
    """The NCZarr layer's own reads (metadata) hand nothing to the kernel."""
    cache, faulty = make(mem, clock, block_size=64 * KiB, cache_size=4096 * KiB)
    for i in range(20):
        put_behind(mem, f"m{i}", bytes([i]) * (60 * KiB))
    for i in range(20):
        await cache.get(f"m{i}")
    c = cache.counters()
    assert c["cache.bytes-held"] == 20 * 60 * KiB and c["cache.bytes-held-delivered"] == 0, c


class BufferAnswers(WrapperStore):
    """Answers reads as read-only views of a buffer of its own, as the object-store backend hands
    on a large GET's body (obstore's buffer, not copied): the buffers it made, in order."""

    def __init__(self, inner):
        super().__init__(inner)
        self.buffers: list[bytes] = []

    async def get_version(self, key, rng, etag):
        self.buffers.append(bytes(await self.inner.get_version(key, rng, etag)))
        return memoryview(self.buffers[-1])


async def test_a_read_of_a_whole_block_hands_on_the_gets_buffer_without_a_copy(mem, clock):
    """The kernel's read of all of a block (an object of one block read whole) is the GET's
    buffer itself, as a view: pyfuse3 writes it to the device from there."""
    answers = BufferAnswers(ThreadedStore(mem))
    cache = CachingStore(answers, cache_size=4096 * KiB, ttl=5.0, clock=clock, block_size=64 * KiB, readahead=0)
    data = os.urandom(64 * KiB)
    put_behind(mem, "one", data)
    etag = (await cache.stat("one")).etag
    got = await cache.get_version("one", ByteRange(0, 64 * KiB), etag)
    assert got == data and isinstance(got, memoryview) and got.obj is answers.buffers[-1]
    part = await cache.get_version("one", ByteRange(4 * KiB, 8 * KiB), etag)
    assert part == data[4 * KiB : 8 * KiB] and part.obj is answers.buffers[-1]


async def test_a_read_across_blocks_gets_its_bytes_and_leaves_the_blocks_as_fetched(mem, clock):
    """A read that spans blocks (unaligned, or larger than a block) gets its bytes, the right ones
    whatever the blocks are (joined: only the bytes asked for), and the blocks stay as fetched."""
    answers = BufferAnswers(ThreadedStore(mem))
    cache = CachingStore(answers, cache_size=4096 * KiB, ttl=5.0, clock=clock, block_size=64 * KiB, readahead=0,
                         kernel_keeps_reads=False)  # every block kept: each fetched once
    data = os.urandom(300 * KiB)  # 4 full blocks and a short one
    put_behind(mem, "big", data)
    etag = (await cache.stat("big")).etag
    for start, end in [(60 * KiB, 70 * KiB), (1, 300 * KiB), (64 * KiB - 1, 3 * 64 * KiB + 1),
                       (200 * KiB, 400 * KiB), (0, 128 * KiB)]:
        got = await cache.get_version("big", ByteRange(start, end), etag)
        assert bytes(got) == data[start:end], (start, end)
        assert len(got) == len(data[start:end])
    # each block fetched once (at once, in any order) and left as it came; the blocks past the
    # end that a read asked for came empty
    fetched = sorted((b for b in answers.buffers if b), key=data.index)
    assert [len(b) for b in fetched] == [64 * KiB] * 4 + [300 * KiB - 4 * 64 * KiB]
    assert b"".join(fetched) == data
    assert cache.counters()["cache.bytes-served"] == sum(
        len(data[s:e]) for s, e in [(60 * KiB, 70 * KiB), (1, 300 * KiB), (64 * KiB - 1, 3 * 64 * KiB + 1),
                                    (200 * KiB, 400 * KiB), (0, 128 * KiB)])


async def _walk(cache: CachingStore, keys: list[str]) -> None:
    """Read objects one after another from their start, as zarr reads chunks (listing cached)."""
    for k in keys:
        info = await cache.stat(k)
        await cache.get_version(k, ByteRange(0, 4 * KiB), info.etag)
        await trio.testing.wait_all_tasks_blocked()


async def test_a_walk_through_a_directory_fetches_the_next_objects_ahead_in_natural_order(mem, clock):
    cache, faulty = make(mem, clock, siblings=4)
    names = [str(i) for i in range(30)]  # listed 0 1 10 11 ... 2 20 ...: read 0 1 2 3 ... as zarr does
    for n in names:
        put_behind(mem, f"arr/{n}", n.encode() * 100)
    await cache.list_dir("arr")
    await _walk(cache, ["arr/0", "arr/1"])
    assert faulty.calls["get"] == 2 + 4  # the second read of the walk fetched 2, 3, 4, 5 ahead
    assert cache.counters()["cache.sibling-prefetches"] == 4
    await _walk(cache, [f"arr/{i}" for i in range(2, 30)])
    assert faulty.calls["get"] == 30  # every object fetched once, nothing past the last one
    assert cache.counters()["cache.hits"] >= 27
    for n in names:
        assert await cache.get(f"arr/{n}") == n.encode() * 100


async def test_sibling_objects_are_not_fetched_without_a_walk_or_a_listing(mem, clock):
    cache, faulty = make(mem, clock, siblings=4)
    for i in range(20):
        put_behind(mem, f"arr/{i}", b"x" * 100)
    await _walk(cache, ["arr/0", "arr/1"])  # no listing cached: nothing to walk along
    assert faulty.calls["get"] == 2
    await cache.list_dir("arr")
    await _walk(cache, ["arr/9", "arr/19"])  # far apart: not a walk
    assert faulty.calls["get"] == 4
    assert cache.counters().get("cache.sibling-prefetches", 0) == 0
    cache0, faulty0 = make(mem, clock, siblings=0)  # -o prefetch_siblings=0
    await cache0.list_dir("arr")
    await _walk(cache0, [f"arr/{i}" for i in range(5)])
    assert faulty0.calls["get"] == 5


async def test_large_sibling_objects_are_fetched_fewer_ahead(mem, clock):
    """At most ``sibling_window`` bytes of objects ahead of the reader (fetched or not): 16
    objects of small chunks, fewer of large ones, at least the next one."""
    cache, faulty = make(mem, clock, siblings=16, cache_size=4096 * KiB, block_size=64 * KiB,
                         sibling_window=192 * KiB)
    for i in range(40):
        put_behind(mem, f"big/{i}", bytes(64 * KiB))
        put_behind(mem, f"small/{i}", bytes(4 * KiB))
    for d in ("big", "small"):
        await cache.list_dir(d)
    await _walk(cache, ["big/0", "big/1"])
    assert faulty.calls["get"] == 2 + 3  # 192 KiB: the next three
    await _walk(cache, ["big/2", "big/3"])
    assert faulty.calls["get"] == 2 + 3 + 2  # big/5 and big/6: still three ahead of big/3
    faulty.calls.clear()
    await _walk(cache, [f"small/{i}" for i in range(3)])
    assert faulty.calls["get"] == 2 + 16  # 16 ahead of small/2 (64 KiB of them), in 2 bursts of 8
    narrow, faulty = make(mem, clock, siblings=16, cache_size=4096 * KiB, block_size=64 * KiB,
                          sibling_window=16 * KiB)
    await narrow.list_dir("big")
    await _walk(narrow, ["big/0", "big/1"])
    assert faulty.calls["get"] == 2 + 1  # a window smaller than one object: the next one still


async def _prefetches_per_read(cache: CachingStore, keys: list[str]) -> list[int]:
    """Walk ``keys``; how many sibling objects each read started fetching ahead."""
    steps = []
    for k in keys:
        before = cache.counters().get("cache.sibling-prefetches", 0)
        await _walk(cache, [k])
        steps.append(cache.counters().get("cache.sibling-prefetches", 0) - before)
    return steps


async def test_small_sibling_objects_are_fetched_in_bursts(mem, clock):
    """Objects under ``SIBLING_BURST_BELOW`` are fetched ahead 8 at once (``SIBLING_PARALLEL``),
    once half of the 16 ahead are missing, not one as each is read: a server spends less on GETs
    that arrive together. Objects from that size on are fetched one as each is read."""
    cache, faulty = make(mem, clock, siblings=16)
    for i in range(80):
        put_behind(mem, f"small/{i}", bytes([i]) * 100)
    await cache.list_dir("small")
    steps = await _prefetches_per_read(cache, [f"small/{i}" for i in range(80)])
    assert steps[:4] == [0, 8, 8, 0]  # the walk begins at small/1: 16 ahead, 8 at a time
    assert set(steps[4:64]) == {0, 8} and steps[4:64].count(8) == 60 // 8  # a burst every 8 reads
    assert sum(steps) == 78  # all but the first two, ahead of the reader
    assert faulty.calls["get"] == 80  # each object fetched once, nothing past the last one
    for i in range(80):
        assert await cache.get(f"small/{i}") == bytes([i]) * 100

    cache, faulty = make(mem, clock, siblings=16, block_size=1024 * KiB, cache_size=64 * 1024 * KiB,
                         sibling_window=4096 * KiB)
    for i in range(20):
        put_behind(mem, f"large/{i}", bytes([i]) * 1024 * KiB)
    await cache.list_dir("large")
    steps = await _prefetches_per_read(cache, [f"large/{i}" for i in range(20)])
    assert steps[:2] == [0, 4] and set(steps[2:16]) == {1}  # 4 MiB ahead, topped up one by one
    assert faulty.calls["get"] == 20


async def test_a_walk_fetches_ahead_the_version_the_mount_stored_of_a_sibling(mem, clock):
    """The walk's order of a directory is worked out once per listing; an object the mount
    stores meanwhile changes its entry in the listing, and what is fetched ahead of the reader
    is that new version (its first block), never the one the order was made from."""
    cache, faulty = make(mem, clock, siblings=4)
    for i in range(12):
        put_behind(mem, f"d/{i}", bytes([i]) * 100)
    await cache.list_dir("d")
    await _walk(cache, ["d/0", "d/1"])  # the order is made; d/2.. d/5 fetched ahead
    await cache.set("d/8", b"new" * 40000)  # more than a block: the cache keeps none of it
    await _walk(cache, ["d/2", "d/3", "d/4", "d/5", "d/6"])  # d/8 comes ahead again
    faulty.calls.clear()
    etag = (await cache.stat("d/8")).etag
    assert await cache.get_version("d/8", ByteRange(0, 3000), etag) == b"new" * 1000
    assert faulty.calls["get"] == 0, faulty.calls  # fetched ahead: the new version
    assert cache.counters().get("errors", 0) == 0


async def test_a_walk_read_again_fetches_no_objects_the_kernel_already_holds(mem, clock):
    """Objects read whole went to the kernel's page cache: when a second walk reaches nczfs only
    for the few pages the kernel dropped, it fetches those pages, not the objects around them."""
    cache, faulty = make(mem, clock, siblings=4, cache_size=4096 * KiB, block_size=64 * KiB)
    for i in range(20):
        put_behind(mem, f"arr/{i}", bytes([i]) * 64 * KiB)
    await cache.list_dir("arr")
    for i in range(20):
        assert await _stream(cache, f"arr/{i}", 64 * KiB) == bytes([i]) * 64 * KiB
        await trio.testing.wait_all_tasks_blocked()
    assert faulty.calls["get"] == 20
    faulty.calls.clear()
    ahead = cache.counters()["cache.sibling-prefetches"]  # the first walk's: objects never read
    for i in range(12):  # the first 12 were dropped here; the kernel lost two of their pages
        etag = (await cache.stat(f"arr/{i}")).etag
        for page in (0, 4):
            got = await cache.get_version(f"arr/{i}", ByteRange(page * 4 * KiB, (page + 1) * 4 * KiB), etag)
            assert got == bytes([i]) * 4 * KiB
            await trio.testing.wait_all_tasks_blocked()
    assert cache.counters()["cache.sibling-prefetches"] == ahead
    assert faulty.calls["get"] == 24  # the first page alone, then the whole block: nothing else


async def test_sibling_fetches_stay_within_a_quarter_of_the_cache(mem, clock):
    cache, faulty = make(mem, clock, siblings=16, cache_size=1024 * KiB, block_size=64 * KiB)
    faulty.latency = 0.05
    for i in range(20):
        put_behind(mem, f"arr/{i}", bytes(100 * KiB))  # one 64 KiB first block fetched ahead each
    await cache.list_dir("arr")
    for k in ("arr/0", "arr/1"):
        info = await cache.stat(k)
        await cache.get_version(k, ByteRange(0, 4 * KiB), info.etag)
    assert cache.siblings.bytes_ahead <= 256 * KiB and cache.counters()["cache.sibling-prefetches"] == 4
    await trio.testing.wait_all_tasks_blocked()


async def test_a_pinned_get_confirms_the_entry_so_a_long_walk_lists_its_directory_once(mem, clock):
    cache, faulty = make(mem, clock, siblings=4, ttl=5.0, list_after_misses=2)
    for i in range(40):
        put_behind(mem, f"arr/{i}", b"v" * 10)
    for i in range(40):  # zarr: a kernel lookup, then the read; the walk outlives the listing
        assert (await cache.entry(f"arr/{i}")).info.size == 10
        await _walk(cache, [f"arr/{i}"])
        clock.now += 1.0
    assert faulty.calls["list_dir"] == 1  # not once per TTL: each If-Match GET confirmed its entry
    assert faulty.calls["get"] == 40
    put_behind(mem, "arr/new", b"n")  # a name the old listing lacks is still found after the TTL
    assert (await cache.entry("arr/new")).info.size == 1


async def test_pinned_gets_below_a_directory_answer_its_lookups_after_the_ttl_without_a_request(mem, clock):
    cache, faulty = make(mem, clock, siblings=0, ttl=1.0)  # every read a GET
    for i in range(20):
        put_behind(mem, f"ds/arr/{i}", b"v" * 10)
    await cache.list_dir("")
    await cache.list_dir("ds")
    etags = {e.name: e.info.etag for e in await cache.list_dir("ds/arr")}
    asked = faulty.calls["list_dir"] + faulty.calls["entry"] + faulty.calls["stat"]
    for i in range(20):  # a reader's path walks: the directories looked up again once the TTL is over
        clock.now += 0.6
        assert (await cache.entry("ds")).is_dir and (await cache.entry("ds/arr")).is_dir
        await cache.get_version(f"ds/arr/{i}", ByteRange(0, 4 * KiB), etags[str(i)])  # an open file's read
        await trio.testing.wait_all_tasks_blocked()
    assert faulty.calls["list_dir"] + faulty.calls["entry"] + faulty.calls["stat"] == asked  # each GET vouched for them
    mem.delete("ds/arr/0")  # another client empties the directory: seen once no GET vouches any more
    for i in range(1, 20):
        mem.delete(f"ds/arr/{i}")
    clock.now += 1.0
    assert await cache.entry("ds") is None


async def test_concurrent_misses_of_one_key_share_one_request(mem, clock):
    cache, faulty = make(mem, clock, ttl=1.0, list_after_misses=100)
    put_behind(mem, "ds/arr/0", b"v")
    faulty.latency = 0.01
    got: list = []
    async with trio.open_nursery() as nursery:  # the kernel revalidating ds from 5 path walks at once
        for _ in range(5):
            nursery.start_soon(lambda: _append(got, cache.entry("ds")))
            nursery.start_soon(lambda: _append(got, cache.stat("ds/arr/0")))
    assert faulty.calls["entry"] == 1 and faulty.calls["stat"] == 1
    assert all(e.is_dir for e in got[::2] if hasattr(e, "is_dir")) and len(got) == 10
    assert cache.counters()["meta.coalesced"] == 8


async def _append(out: list, call) -> None:
    out.append(await call)


class AnswersLate:
    """The store's stat answers, held back until ``answer`` is set (a response on its way)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.answer = trio.Event()

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    async def stat(self, key: str):
        info = await self.inner.stat(key)
        await self.answer.wait()
        return info


async def test_a_miss_waiting_on_a_request_a_write_overtook_asks_again(mem, clock):
    cache, faulty = make(mem, clock, ttl=1.0, list_after_misses=100)
    put_behind(mem, "ds/a", b"old")
    cache.meta.inner = late = AnswersLate(faulty)
    got: list = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _append(got, cache.stat("ds/a")))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(lambda: _append(got, cache.stat("ds/a")))  # joins the request on its way
        await trio.testing.wait_all_tasks_blocked()
        await cache.set("ds/a", b"newer")  # overtakes it: its answer is kept by no one
        late.answer.set()
    assert [i.size for i in got] == [3, 5] and faulty.calls["stat"] == 2  # the waiter asked again


async def test_a_get_from_a_store_that_does_not_check_versions_confirms_nothing(mem, clock):
    mem.capabilities = replace(mem.capabilities, checks_versions=False)  # e.g. a reference store: get_version reads whatever is current
    cache, faulty = make(mem, clock, siblings=4, ttl=5.0, list_after_misses=2)
    for i in range(12):
        put_behind(mem, f"arr/{i}", b"v" * 10)
    for i in range(12):
        assert (await cache.entry(f"arr/{i}")).info.size == 10
        await _walk(cache, [f"arr/{i}"])
        clock.now += 1.0
    assert faulty.calls["list_dir"] >= 2  # the listing expired and nothing vouched for its entries
    assert cache.counters().get("cache.lookups-by-get", 0) == 0


async def test_in_a_walked_directory_an_expired_small_entry_is_confirmed_by_fetching_it(mem, clock):
    cache, faulty = make(mem, clock, siblings=1, ttl=5.0, block_size=4096 * KiB, cache_size=64 * 1024 * KiB)
    for i in range(40):
        put_behind(mem, f"arr/{i}", b"s" * 10)
    put_behind(mem, "arr/big", b"b" * (2 * 1024 * KiB))
    await cache.list_dir("arr")
    await _walk(cache, ["arr/0", "arr/1"])  # a walk: arr/2 fetched ahead
    clock.now += 10  # the listing expires
    gets = faulty.calls["get"]
    assert (await cache.entry("arr/30")).info.size == 10  # one GET, which the read then uses
    assert faulty.calls["list_dir"] == 1 and faulty.calls["get"] == gets + 1
    assert cache.counters()["cache.lookups-by-get"] == 1
    assert await cache.get("arr/30") == b"s" * 10 and faulty.calls["get"] == gets + 1
    asked = faulty.calls["list_dir"] + faulty.calls["entry"]
    assert (await cache.entry("arr/big")).info.size == 2 * 1024 * KiB  # over 1 MiB: asked as before
    assert faulty.calls["list_dir"] + faulty.calls["entry"] == asked + 1
    assert faulty.calls["get"] == gets + 1 and cache.counters()["cache.lookups-by-get"] == 1


async def test_a_sibling_changed_behind_the_listing_is_never_served_stale(mem, clock):
    cache, faulty = make(mem, clock, siblings=4)
    for i in range(6):
        put_behind(mem, f"arr/{i}", b"old")
    await cache.list_dir("arr")
    await _walk(cache, ["arr/0", "arr/1"])  # fetches 2..5 ahead under their listed ETags
    put_behind(mem, "arr/3", b"new")
    clock.now += 10  # past the TTL: the next stat sees the new ETag
    assert await cache.get("arr/3") == b"new"


# ---------------------------------------------------------------------- metadata


async def test_missing_names_are_remembered_for_the_ttl(mem, clock):
    cache, faulty = make(mem, clock, ttl=5.0)
    assert await cache.entry("a/missing") is None
    assert await cache.entry("a/missing") is None
    assert faulty.calls["entry"] == 1
    put_behind(mem, "a/missing", b"now here")
    assert await cache.entry("a/missing") is None  # the negative entry holds for the TTL
    clock.now += 5.1
    assert (await cache.entry("a/missing")).info.size == 8


async def test_below_a_missing_name_nothing_is_asked(mem, clock):
    cache, faulty = make(mem, clock)
    assert await cache.entry("g") is None
    assert await cache.entry("g/.zarray") is None
    assert await cache.entry("g/sub/0.0") is None
    assert faulty.calls["entry"] == 1


async def test_a_listing_answers_lookups_of_its_children(mem, clock):
    cache, faulty = make(mem, clock)
    for name in ("a", "b", "d/x"):
        put_behind(mem, f"dir/{name}", b"1")
    names = [e.name for e in await cache.list_dir("dir")]
    assert names == ["a", "b", "d"]
    assert (await cache.entry("dir/a")).info.size == 1
    assert (await cache.stat("dir/b")).size == 1
    assert (await cache.entry("dir/d")).is_dir
    assert await cache.entry("dir/nope") is None
    with pytest.raises(KeyNotFound):
        await cache.stat("dir/nope")
    assert await cache.list_dir("dir") and faulty.calls["list_dir"] == 1
    assert faulty.calls["entry"] == 0 and faulty.calls["stat"] == 0
    assert cache.counters()["meta.hits"] >= 6


async def test_many_lookups_in_one_directory_list_it_once(mem, clock):
    """zarr opening chunk after chunk: after a few misses the directory is listed and answers the rest."""
    cache, faulty = make(mem, clock, list_after_misses=4)
    for i in range(50):
        put_behind(mem, f"a/{i}", b"c")

    async def look(i: int) -> None:
        found = await cache.entry(f"a/{i}")
        assert found is not None and found.info.size == 1

    async with trio.open_nursery() as n:
        for i in range(50):
            n.start_soon(look, i)
    assert await cache.entry("a/missing.partial") is None
    assert faulty.calls["list_dir"] == 1 and faulty.calls["entry"] <= 3


async def test_a_directory_still_being_walked_is_listed_again_when_its_listing_expires(mem, clock):
    cache, faulty = make(mem, clock, ttl=1.0, list_after_misses=4)
    for i in range(40):
        put_behind(mem, f"a/{i}", b"c")
    for i in range(20):
        assert await cache.entry(f"a/{i}") is not None
    assert faulty.calls["list_dir"] == 1 and faulty.calls["entry"] == 3
    clock.now += 1.5  # the listing expired; the walk goes on
    for i in range(20, 40):
        assert await cache.entry(f"a/{i}") is not None
    assert faulty.calls["list_dir"] == 2 and faulty.calls["entry"] == 3
    clock.now += 100  # long after: back to asking name by name first
    assert await cache.entry("a/1") is not None
    assert faulty.calls["entry"] == 4


async def test_one_name_looked_up_past_the_ttl_relists_only_a_one_page_directory_at_once(mem, clock):
    """A directory listed because of misses is listed again at the next miss after its listing
    expires (above) only if that listing was one page (1,000 names, as cheap as one lookup): a
    name looked up again and again in a larger one costs single lookups, and a listing only
    after as many misses as the first time."""
    for n in (40, 1500):
        cache, faulty = make(mem, clock, ttl=1.0, list_after_misses=4)
        for i in range(n):
            put_behind(mem, f"d{n}/{i}", b"c")
        for i in range(8):
            assert await cache.entry(f"d{n}/{i}") is not None
        assert faulty.calls["list_dir"] == 1
        for _ in range(8):  # a reader opening one file again and again, past the TTL
            clock.now += 1.5
            assert await cache.entry(f"d{n}/0") is not None
        assert faulty.calls["list_dir"] == (1 + 8 if n == 40 else 1 + 8 // 4), n


def put_dataset(mem: MemoryStore, arrays: int = 5, chunks: int = 1) -> None:
    """A dataset as netCDF-C writes it: root metadata, and per array ``.zarray``, ``.zattrs``, chunks."""
    put_behind(mem, "ds/.zgroup", b'{"zarr_format": 2}')
    put_behind(mem, "ds/.zattrs", b"{}")
    for a in range(arrays):
        put_behind(mem, f"ds/v{a}/.zarray", b'{"zarr_format": 2, "a": %d}' % a)
        put_behind(mem, f"ds/v{a}/.zattrs", b'{"units": "K"}')
        for c in range(chunks):
            put_behind(mem, f"ds/v{a}/{c}", b"c" * 100)


async def test_a_directory_among_several_is_listed_with_its_parents_whole_tree(mem, clock):
    """netCDF-C opening a dataset looks up each array's metadata, array after array: the first
    lookup in an array's directory lists the dataset's whole tree in one request, which answers
    every later lookup and listing below it, missing names included."""
    cache, faulty = make(mem, clock)
    put_dataset(mem)
    assert [e.name for e in await cache.list_dir("ds")] == [".zattrs", ".zgroup"] + [f"v{a}" for a in range(5)]
    assert (await cache.entry("ds/v0/.zarray")).info.size == mem.stat("ds/v0/.zarray").size
    assert faulty.calls["list_tree"] == 1 and faulty.calls["entry"] == 0
    for a in range(5):
        assert (await cache.stat(f"ds/v{a}/.zattrs")).etag == mem.stat(f"ds/v{a}/.zattrs").etag
        assert await cache.entry(f"ds/v{a}/.zgroup") is None
        assert [e.name for e in await cache.list_dir(f"ds/v{a}")] == [".zarray", ".zattrs", "0"]
    assert faulty.calls["list_tree"] == 1 and faulty.calls["list_dir"] == 1
    assert faulty.calls["entry"] == faulty.calls["stat"] == 0
    assert cache.counters()["meta.tree-listings"] == 1


async def test_a_tree_is_listed_only_below_a_parent_of_several_directories_and_within_its_limit(mem, clock):
    put_behind(mem, "one/sub/x", b"1")
    cache, faulty = make(mem, clock)
    await cache.list_dir("one")  # a single subdirectory: nothing to gain
    assert (await cache.entry("one/sub/x")).info.size == 1
    assert faulty.calls["list_tree"] == 0 and faulty.calls["entry"] == 1
    put_dataset(mem, arrays=5, chunks=3)  # 27 keys under ds
    cache, faulty = make(mem, clock, tree_keys=20)
    await cache.list_dir("ds")
    assert (await cache.entry("ds/v0/.zarray")) is not None
    assert (await cache.entry("ds/v1/.zarray")) is not None
    assert faulty.calls["list_tree"] == 1 and faulty.calls["entry"] == 2  # too large: not asked again
    clock.now += 61  # ... for a minute
    await cache.list_dir("ds")
    assert (await cache.entry("ds/v2/.zarray")) is not None
    assert faulty.calls["list_tree"] == 2
    cache, faulty = make(mem, clock, tree_keys=0)  # -o list_tree_keys=0
    await cache.list_dir("ds")
    assert (await cache.entry("ds/v0/.zarray")) is not None
    assert faulty.calls["list_tree"] == 0 and faulty.calls["entry"] == 1
    cache, faulty = make(mem, clock)
    await cache.list_dir("ds")
    faulty.fail("list_tree", times=1)  # a failed tree listing: the name is asked alone
    assert (await cache.entry("ds/v0/.zarray")) is not None
    assert faulty.calls["list_tree"] == 1 and faulty.calls["entry"] == 1


async def test_a_tree_listing_is_not_kept_if_a_write_below_it_raced_it(mem, clock):
    class SlowTree(WrapperStore):  # the answer travels while the mount writes below the tree
        passes = ("list_tree",)

        async def _list_tree(self, prefix: str, limit: int):
            out = await self.inner.list_tree(prefix, limit)
            await trio.sleep(0.05)
            return out

    put_dataset(mem)
    cache = CachingStore(SlowTree(ThreadedStore(mem)), clock=clock, ttl=5.0)

    async def write() -> None:
        await trio.sleep(0.01)
        await cache.set("ds/v3/new", b"n")

    await cache.list_dir("ds")
    async with trio.open_nursery() as n:
        n.start_soon(write)
        assert await cache.entry("ds/v0/.zarray") is not None
    assert cache.counters()["meta.tree-listings"] == 1
    assert "new" in [e.name for e in await cache.list_dir("ds/v3")]
    assert (await cache.entry("ds/v3/new")).info.size == 1


async def test_reading_one_metadata_object_of_a_listed_tree_fetches_the_others_ahead(mem, clock):
    """Opening a dataset reads every array's metadata: once one is read, the tree's other small
    metadata objects are fetched together, not one by one as the reader reaches them; chunks are not."""
    put_dataset(mem, arrays=6, chunks=2)
    cache, faulty = make(mem, clock)
    await cache.list_dir("ds")
    info = await cache.stat("ds/v0/.zarray")
    assert await cache.get_version("ds/v0/.zarray", None, info.etag) == mem.get("ds/v0/.zarray")
    with trio.fail_after(5):
        while cache.counters().get("cache.metadata-prefetches", 0) < 13 or cache._inflight:
            await trio.sleep(0.001)
    gets = faulty.calls["get"]
    assert gets == 14  # the one read, and 2 + 2 x 6 - 1 others; no chunk
    for a in range(6):
        for name in (".zarray", ".zattrs"):
            key = f"ds/v{a}/{name}"
            assert await cache.get(key) == mem.get(key)
    assert await cache.get("ds/.zgroup") == mem.get("ds/.zgroup")
    assert faulty.calls["get"] == gets
    assert await cache.get("ds/v5/1") == mem.get("ds/v5/1") and faulty.calls["get"] == gets + 1
    cache, faulty = make(mem, clock, siblings=0)  # -o prefetch_siblings=0: nothing fetched ahead
    await cache.list_dir("ds")
    info = await cache.stat("ds/v0/.zarray")
    await cache.get_version("ds/v0/.zarray", None, info.etag)
    await trio.sleep(0.01)
    assert faulty.calls["get"] == 1
    cache, faulty = make(mem, clock, is_metadata=None)  # not told which keys are metadata: none
    await cache.list_dir("ds")
    info = await cache.stat("ds/v0/.zarray")
    await cache.get_version("ds/v0/.zarray", None, info.etag)
    await trio.sleep(0.01)
    assert faulty.calls["get"] == 1


async def test_own_writes_update_the_cached_listing(mem, clock):
    cache, faulty = make(mem, clock, ttl=1e9)
    put_behind(mem, "dir/a", b"1")
    await cache.list_dir("dir")
    await cache.set("dir/new", b"22")
    assert [e.name for e in await cache.list_dir("dir")] == ["a", "new"]
    assert (await cache.entry("dir/new")).info.size == 2
    await cache.delete("dir/a")
    assert [e.name for e in await cache.list_dir("dir")] == ["new"]
    assert faulty.calls["list_dir"] == 1 and faulty.calls["entry"] == 0
    await cache.rename("dir/new", "dir/renamed")
    assert [e.name for e in await cache.list_dir("dir")] == ["renamed"]
    assert await cache.entry("dir/new") is None


async def test_a_new_key_ends_negative_entries_of_its_ancestors(mem, clock):
    cache, faulty = make(mem, clock, ttl=1e9)
    assert await cache.entry("g") is None
    await cache.list_dir("")
    await cache.set("g/h/x", b"1")
    assert (await cache.entry("g")).is_dir
    assert (await cache.entry("g/h")).is_dir
    assert "g" in [e.name for e in await cache.list_dir("")]
    assert await optional.dir_exists(cache, "g/h")


async def test_directory_rename_drops_everything_below_both_names(mem, clock):
    cache, faulty = make(mem, clock, ttl=1e9)
    await cache.set("src/a", b"A")
    await cache.list_dir("src")
    assert await cache.entry("dst/a") is None
    await optional.rename_dir(cache, "src", "dst")
    assert await cache.entry("src/a") is None
    assert (await cache.entry("dst/a")).info.size == 1
    assert await cache.get("dst/a") == b"A"
    assert [e.name for e in await cache.list_dir("")] == ["dst"]


class SlowAnswers(WrapperStore):
    """Answers lookups as the store stood when asked, but delivers the answer late."""

    async def entry(self, key):
        found = await self.inner.entry(key)
        await trio.sleep(0.05)
        return found


async def test_a_lookup_racing_a_write_is_not_kept(mem, clock):
    """A lookup answered before a write of the same key, arriving after it, must not mask the write."""
    slow = SlowAnswers(ThreadedStore(mem))
    cache = CachingStore(slow, cache_size=1024 * KiB, ttl=1e9, clock=clock)
    result = []

    async def lookup() -> None:
        result.append(await cache.entry("k"))

    async with trio.open_nursery() as n:
        n.start_soon(lookup)
        await trio.sleep(0.01)  # the store has answered "missing"; the answer is on its way
        await cache.set("k", b"v")
    assert result == [None]
    assert (await cache.entry("k")).info.size == 1  # the late "missing" was not kept


async def test_ttl_zero_keeps_no_metadata(mem, clock):
    cache, faulty = make(mem, clock, ttl=0)
    for _ in range(3):
        assert await cache.entry("x") is None
        await cache.list_dir("")
    assert faulty.calls["entry"] == 3 and faulty.calls["list_dir"] == 3


async def test_counters_include_the_backends(mem, clock):
    cache, _ = make(mem, clock)
    c = cache.counters()
    assert c["cache.bytes-limit"] == 1024 * KiB and c["cache.bytes-held"] == 0


# ---------------------------------------------------------------------- options


@pytest.mark.parametrize("text, size", [("536870912", 512 * 1024 * KiB), ("512M", 512 * 1024 * KiB),
                                        ("512MiB", 512 * 1024 * KiB), ("2g", 2 * 1024**3), ("0", 0), ("64k", 64 * KiB)])
def test_cache_size_option(text, size):
    from nczfs.config.mountconfig import parse_options

    assert parse_options([f"cache_size={text}"]) == {"cache_size": size}


@pytest.mark.parametrize("bad", ["cache_size=lots", "cache_size=-1M", "cache_size=inf", "cache_size"])
def test_bad_cache_size_is_refused(bad):
    from nczfs.config.mountconfig import parse_options
    from nczfs.toolbox.errors import SourceError

    with pytest.raises(SourceError, match="cache_size"):
        parse_options([bad])


@pytest.mark.parametrize("argv, ttl", [
    (["s3://bucket/p"], None),
    (["s3://bucket/p", "-o", "ro"], None),
    ([str(DATA)], None),
    (["s3://bucket/p", "--metadata-ttl", "7"], 7.0),
    ([str(DATA), "-o", "metadata_ttl=0"], 0.0),
])
def test_a_metadata_ttl_not_given_is_left_to_the_store(argv, ttl, tmp_path):
    """None: the opened store's default (tests/store/test_backend_defaults.py: each backend's)."""
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    # an empty mount point of the test's own (/mnt need not be empty: refused without -o nonempty)
    args = build_parser().parse_args(["mount", argv[0], str(tmp_path), *argv[1:]])
    assert build_config(args).metadata_ttl == ttl


def test_prefetch_siblings_and_list_tree_keys_options():
    from nczfs.config.mountconfig import parse_options
    from nczfs.toolbox.errors import SourceError

    assert parse_options(["prefetch_siblings=0"]) == {"prefetch_siblings": 0}
    assert parse_options(["prefetch_siblings=32"]) == {"prefetch_siblings": 32}
    for bad in ("prefetch_siblings=-1", "prefetch_siblings=many", "prefetch_siblings"):
        with pytest.raises(SourceError, match="prefetch_siblings"):
            parse_options([bad])
    assert parse_options(["list_tree_keys=0"]) == {"list_tree_keys": 0}
    assert parse_options(["list_tree_keys=200"]) == {"list_tree_keys": 200}
    for bad in ("list_tree_keys=-1", "list_tree_keys=all", "list_tree_keys"):
        with pytest.raises(SourceError, match="list_tree_keys"):
            parse_options([bad])


def test_direct_io_option():
    from nczfs.config.mountconfig import parse_options
    from nczfs.toolbox.errors import SourceError

    assert parse_options(["direct_io"]) == {"direct_io": True}
    assert parse_options(["ro,direct_io"]) == {"read_only": True, "direct_io": True}
    with pytest.raises(SourceError, match="-o direct_io=1: takes no value"):
        parse_options(["direct_io=1"])


def test_cache_size_flag(tmp_path):
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    args = build_parser().parse_args(["mount", "s3://bucket/p", str(tmp_path), "--cache-size", "256M"])
    assert build_config(args).cache_size == 256 * 1024 * KiB
    assert build_config(build_parser().parse_args(["mount", "s3://bucket/p", str(tmp_path)])).cache_size is None


def test_default_cache_size_is_bounded():
    from nczfs.toolbox.budgets import default_cache_size

    assert 64 * 1024 * KiB <= default_cache_size() <= 1024 * 1024 * KiB


@pytest.mark.parametrize(
    "ram_mib, cache_mib",
    [(256, 64), (2048, 256), (4096, 512), (8192, 1024), (65536, 1024)],
)
def test_default_cache_size_is_an_eighth_of_ram_between_64_mib_and_1_gib(monkeypatch, ram_mib, cache_mib):
    from nczfs.toolbox import budgets as cache

    pages = {"SC_PAGE_SIZE": 4 * KiB, "SC_PHYS_PAGES": ram_mib * 256}
    monkeypatch.setattr(cache.os, "sysconf", pages.__getitem__)
    assert cache.default_cache_size() == cache_mib * 1024 * KiB


def blocking(mem: MemoryStore) -> MemoryStore:
    """``mem`` with its calls made in worker threads, as a backend's are (memory's run inline)."""
    mem.capabilities = replace(mem.capabilities, non_blocking=False)
    return mem


async def test_a_burst_of_small_siblings_is_fetched_in_one_worker_call(mem, clock):
    """The 8 small objects a walk fetches ahead at once go to the backend in one call of a
    worker thread (one thread hop and one wake-up of trio for the burst), read there one after
    another; what the reader gets is each object's own bytes."""
    cache = CachingStore(ThreadedStore(blocking(mem)), clock=clock, cache_size=1024 * KiB, ttl=5.0,
                         block_size=64 * KiB, siblings=16, is_metadata=is_metadata)
    for i in range(80):
        put_behind(mem, f"small/{i}", bytes([i]) * 100)
    await cache.list_dir("small")
    steps = await _prefetches_per_read(cache, [f"small/{i}" for i in range(80)])
    counts = cache.counters()
    assert sum(steps) == counts["reads-together"] == 78  # every object fetched ahead, in bursts
    assert counts["read-calls-together"] == counts["cache.fetch-bursts"] == len([s for s in steps if s]) == 10
    assert counts["cache.misses"] == 2 and counts.get("errors", 0) == 0  # the rest came ahead
    for i in range(80):
        assert await cache.get(f"small/{i}") == bytes([i]) * 100


async def test_a_read_that_fails_in_a_burst_fails_its_own_reader_only(mem, clock):
    """One object of a burst fetched in one call fails (the backend's error, named) or changed
    behind the mount (Stale: the new version is read); the others of the burst are served."""
    cache = CachingStore(ThreadedStore(blocking(mem)), clock=clock, cache_size=1024 * KiB, ttl=5.0,
                         block_size=64 * KiB, siblings=16, is_metadata=is_metadata)
    for i in range(30):
        put_behind(mem, f"d/{i}", bytes([i]) * 100)
    await cache.list_dir("d")
    get_version = mem.get_version

    def failing(key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        if key == "d/5":
            raise BackendError(f"{key!r}: injected failure")
        return get_version(key, rng, etag)

    mem.get_version = failing  # type: ignore[method-assign]
    put_behind(mem, "d/6", b"changed")  # its listed version is gone: the burst's GET of it is Stale
    await _walk(cache, ["d/0", "d/1"])  # d/2 .. d/9 fetched ahead, in one call
    assert cache.counters()["reads-together"] == 8
    await _walk(cache, ["d/2", "d/3", "d/4"])
    with pytest.raises(BackendError, match="'d/5'"):
        await _walk(cache, ["d/5"])
    assert cache.counters()["errors"] >= 1  # counted: a failure, not an answer of the store
    assert await cache.get("d/6") == b"changed"
    for i in (7, 8, 9):
        assert await cache.get(f"d/{i}") == bytes([i]) * 100


async def test_held_objects_are_handed_out_without_a_fetch_and_move_the_walk_on(mem, clock):
    """``held_object`` (the page cache filled at an open): an object fetched ahead is handed out
    whole, as a read of it from its start would be (the walk's next ones are fetched ahead);
    one not held, of another version or size, or larger than a block is not, and nothing is fetched."""
    from nczfs.store.capabilities import HoldsBytes

    cache = CachingStore(ThreadedStore(blocking(mem)), clock=clock, cache_size=1024 * KiB, ttl=5.0,
                         block_size=64 * KiB, siblings=16, is_metadata=is_metadata)
    assert isinstance(cache, HoldsBytes)
    for i in range(60):
        put_behind(mem, f"d/{i}", bytes([i]) * 100)
    put_behind(mem, "big", b"b" * 70 * KiB)
    await cache.list_dir("d")
    await _walk(cache, ["d/0", "d/1"])  # the next ones fetched ahead
    await _fetched_ahead(cache)
    fetched = cache.counters()["cache.bytes-fetched"]
    etag = lambda k: mem.stat(k).etag  # noqa: E731
    assert cache.held_object("d/2", etag("d/2"), 100) == bytes([2]) * 100
    assert cache.held_object("d/3", "another version", 100) is None
    assert cache.held_object("d/3", etag("d/3"), 99) is None
    assert cache.held_object("d/40", etag("d/40"), 100) is None  # not fetched yet: never fetched here
    assert cache.held_object("big", etag("big"), 70 * KiB) is None
    assert cache.counters()["cache.bytes-fetched"] == fetched
    for i in range(3, 40):  # a walk whose every object is handed out at its open keeps going ahead
        await _fetched_ahead(cache)
        assert cache.held_object(f"d/{i}", etag(f"d/{i}"), 100) == bytes([i]) * 100, i
    assert cache.counters()["cache.misses"] == 2


class GatedReads(WrapperStore):
    """Answers reads of objects under ``d/`` (not the first two) only once ``gate`` is set; those
    of ``fail`` then fail."""

    def __init__(self, inner, fail=()):
        super().__init__(inner)
        self.gate = trio.Event()
        self.fail = set(fail)

    async def get_version(self, key, rng, etag):
        if key.startswith("d/") and key not in ("d/0", "d/1"):
            await self.gate.wait()
        if key in self.fail:
            raise BackendError(f"{key!r}: refused")
        return await self.inner.get_version(key, rng, etag)


async def test_an_object_on_its_way_is_held_once_it_arrives_and_none_is_fetched_for_it(mem, clock):
    """``object_arrives`` (the page cache filled at an open while a read ahead of the file is on
    its way): it returns once that fetch has ended, and the object is then held, or, the fetch
    failed, not (the read meets the error); for an object no fetch is bringing it returns at
    once and starts none."""
    for i in range(20):
        put_behind(mem, f"d/{i}", bytes([i]) * 100)
    gated = GatedReads(ThreadedStore(mem), fail={"d/3"})
    cache = CachingStore(gated, clock=clock, cache_size=1024 * KiB, ttl=5.0, block_size=64 * KiB, siblings=4,
                         is_metadata=is_metadata)
    await cache.list_dir("d")
    await _walk(cache, ["d/0", "d/1"])  # d/2.. fetched ahead, held up at the gate
    etag = lambda k: mem.stat(k).etag  # noqa: E731
    assert cache.held_object("d/2", etag("d/2"), 100) is None
    misses = cache.counters()["cache.misses"]
    with trio.move_on_after(0.2) as waited:
        await cache.object_arrives("d/2", etag("d/2"))
    assert waited.cancelled_caught  # the fetch is still at the gate: it waits
    assert await cache.object_arrives("d/19", etag("d/19")) is False  # nothing on its way: at once
    assert cache.held_object("d/19", etag("d/19"), 100) is None
    arrived = []

    async def arrives(key: str) -> None:
        arrived.append(await cache.object_arrives(key, etag(key)))

    async with trio.open_nursery() as n:
        n.start_soon(arrives, "d/2")
        n.start_soon(arrives, "d/3")
        await trio.testing.wait_all_tasks_blocked()
        gated.gate.set()
    assert arrived == [True, True]
    assert cache.held_object("d/2", etag("d/2"), 100) == bytes([2]) * 100
    assert cache.held_object("d/3", etag("d/3"), 100) is None  # its fetch failed
    assert cache.counters()["cache.misses"] == misses


async def _fetched_ahead(cache: CachingStore) -> None:
    """Until the sibling fetches running (in worker threads) have ended."""
    while cache.siblings.fetches:
        await trio.sleep(0.001)
