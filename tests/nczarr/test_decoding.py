"""Chunks decoded in the decode pool (nczfs.nczarr.chunks.decoding, -o decode_threads=): at once on every
thread of the pool, the next chunks of a sequential reader decoded ahead of it (bounded by the
decoded cache), a chunk that cannot be decoded failing its own read with EIO naming its key."""

from __future__ import annotations

import errno
import json
import threading

import numcodecs
import numpy as np
import pytest
import trio
import trio.testing

from nczfs.nczarr.chunks import decoding
from nczfs.nczarr.chunks.recode import UndecodableChunk
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.nczarr.views.recodedchunks import next_chunk
from nczfs.store.memory.store import MemoryStore
from nczfs.toolbox.errors import BackendError
from nczfs.store.threads import ThreadedStore

CHUNK = 1024  # float32 elements a chunk: 4 KiB shown
CHUNKS = 8


@pytest.fixture(autouse=True)
def _pool():
    yield
    decoding.set_threads(0)


def _lz4_dataset(store: MemoryStore, bad: int | None = None, rank2: bool = False) -> np.ndarray:
    """Zarr v2 ``ds/v``: CHUNKS chunks of float32 compressed with lz4 (which the netCDF4 wheel
    lacks: netcdf-4.10 shows them decoded); chunk ``bad`` holds bytes lz4 cannot decode."""
    values = np.arange(CHUNK * CHUNKS, dtype="<f4")
    shape, chunks = ([CHUNK * CHUNKS], [CHUNK]) if not rank2 else ([2, CHUNK * CHUNKS // 2], [1, CHUNK])
    store.set("ds/.zgroup", b'{"zarr_format": 2}')
    store.set("ds/v/.zarray", json.dumps({"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": "<f4",
                                          "compressor": {"id": "lz4", "acceleration": 1}, "fill_value": 0.0,
                                          "order": "C", "filters": None}).encode())
    store.set("ds/v/.zattrs", json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"][-len(shape):]}).encode())
    for i in range(CHUNKS):
        name = str(i) if not rank2 else f"{i // (CHUNKS // 2)}.{i % (CHUNKS // 2)}"
        raw = numcodecs.LZ4().encode(values[i * CHUNK:(i + 1) * CHUNK].tobytes())
        store.set(f"ds/v/{name}", b"not lz4 at all" if i == bad else raw)
    return values


async def _settled(view: PresentingStore) -> None:
    """Wait until nothing is being decoded ahead."""
    with trio.fail_after(10):
        while view._recoded_chunks._ahead:
            await trio.sleep(0.01)


async def _nc_settled(decoded) -> None:
    """Wait until the background decodes started have begun and ended."""
    await trio.sleep(0.05)
    with trio.fail_after(10):
        while decoded._decoding:
            await trio.sleep(0.01)


async def test_the_pool_decodes_as_many_chunks_at_once_as_it_has_threads():
    barrier = threading.Barrier(2, timeout=1)

    def meet() -> bool:
        try:
            barrier.wait()
            return True
        except threading.BrokenBarrierError:
            return False

    async def two() -> list[bool]:
        met: list[bool] = []

        async def one() -> None:
            met.append(await decoding.decode(meet))

        barrier.reset()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(one)
            nursery.start_soon(one)
        return met

    decoding.set_threads(2)
    assert await two() == [True, True]  # two decodes meet: they run at once
    decoding.set_threads(1)
    assert await two() == [False, False]  # one thread: the first waits alone, the second after it


def test_the_pool_is_sized_to_the_cores_unless_the_option_says():
    import os

    assert decoding.threads() == len(os.sched_getaffinity(0))
    decoding.set_threads(3)
    assert decoding.threads() == 3 and decoding.ahead() == 3
    decoding.set_threads(1)
    assert decoding.ahead() == 2  # one decoding while the reader takes the last


async def test_a_sequential_reader_finds_the_next_chunks_decoded_ahead_in_order():
    below = MemoryStore()
    values = _lz4_dataset(below)
    decoding.set_threads(3)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    chunks = view._recoded_chunks
    got = [await view.get("ds/v/0")]
    await _settled(view)
    assert chunks.made.count == 1 + 3  # the chunk read and the next three (one per thread)
    for i in range(1, CHUNKS):
        got.append(await view.get(f"ds/v/{i}"))
    await _settled(view)
    assert chunks.made.count == CHUNKS  # each decoded once: the reader's reads found them made
    assert np.array_equal(np.frombuffer(b"".join(got), "<f4"), values)  # each chunk its own bytes


async def test_reads_from_the_middle_of_a_chunk_decode_nothing_ahead():
    from nczfs.store.values import ByteRange

    below = MemoryStore()
    _lz4_dataset(below)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    assert len(await view.get("ds/v/2", ByteRange(100, 200))) == 100
    await _settled(view)
    assert view._recoded_chunks.made.count == 1


async def test_reading_ahead_keeps_within_the_decoded_cache():
    below = MemoryStore()
    values = _lz4_dataset(below)
    decoding.set_threads(8)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60, recoded_cache_bytes=3 * CHUNK * 4)
    chunks = view._recoded_chunks
    for i in range(CHUNKS):
        data = await view.get(f"ds/v/{i}")
        assert np.array_equal(np.frombuffer(data, "<f4"), values[i * CHUNK:(i + 1) * CHUNK])
        await _settled(view)
        assert chunks.made.bytes_held <= 3 * CHUNK * 4
        # the chunk read and two ahead of it fit the cache: 8 threads decode no more than that
        assert chunks.made.count <= min(i + 3, CHUNKS)
    assert chunks.made.count == CHUNKS


async def test_a_chunk_that_cannot_be_decoded_fails_its_own_read_with_eio_naming_it():
    below = MemoryStore()
    values = _lz4_dataset(below, bad=2)
    decoding.set_threads(2)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    assert np.array_equal(np.frombuffer(await view.get("ds/v/1"), "<f4"), values[CHUNK:2 * CHUNK])
    await _settled(view)  # chunk 2 failed ahead of the reader: quietly, nothing kept
    for _ in range(2):  # each read of it fails, none waits forever
        with trio.fail_after(10), pytest.raises(UndecodableChunk, match="'ds/v/2'.*cannot be decoded") as err:
            await view.get("ds/v/2")
        assert err.value.errno == errno.EIO
    assert np.array_equal(np.frombuffer(await view.get("ds/v/3"), "<f4"), values[3 * CHUNK:4 * CHUNK])


async def test_readers_waiting_for_a_chunk_that_fails_each_get_the_error():
    below = MemoryStore()
    _lz4_dataset(below, bad=0)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    failed = []

    async def read() -> None:
        try:
            await view.get("ds/v/0")
        except UndecodableChunk as exc:
            failed.append(exc)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(read)
    assert len(failed) == 4


async def test_the_next_chunk_follows_c_order_across_rows():
    below = MemoryStore()
    _lz4_dataset(below, rank2=True)
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60)
    v = await view.view_for("ds/v/0.0", reading=True)
    assert [next_chunk(v, k) for k in ("ds/v/0.2", "ds/v/0.3", "ds/v/1.3", "ds/v/.zarray")] == \
        ["ds/v/0.3", "ds/v/1.0", None, None]


async def test_a_nc_file_read_from_its_start_has_the_next_chunks_decoded_ahead_within_the_cache():
    from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
    from nczfs.store.values import ByteRange

    below = MemoryStore()
    values = _lz4_dataset(below)
    decoding.set_threads(3)
    s = NcFilesStore(ThreadedStore(below), ttl=60)
    size = (await s.stat("ds.nc")).size
    head = size - values.nbytes  # the classic file: its header, then v's values (big-endian)
    first = await s.get("ds.nc", ByteRange(head, head + 100))
    assert np.array_equal(np.frombuffer(first, ">f4"), values[:25])
    decoded = s._decoded
    await _nc_settled(decoded)
    assert decoded.count == 1 + 3  # one per thread ahead
    assert np.array_equal(np.frombuffer(await s.get("ds.nc", ByteRange(head, size)), ">f4"), values)
    assert decoded.count == CHUNKS  # each decoded once
    small = NcFilesStore(ThreadedStore(below), ttl=60, decoded_bytes=2 * CHUNK * 4)  # room for 2 chunks
    await small.get("ds.nc", ByteRange(head, head + 100))
    await _nc_settled(small._decoded)
    assert small._decoded.count == 2 and small._decoded.bytes_held <= 2 * CHUNK * 4


async def test_recoded_inner_chunks_of_a_shard_are_decoded_ahead_too(tmp_path):
    import zarr
    from zarr.codecs import BytesCodec, GzipCodec, ShardingCodec

    from nczfs.store.directory.store import DirectoryStore

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=3)
    gz = ShardingCodec(chunk_shape=(CHUNK,), codecs=[BytesCodec(), GzipCodec()])  # gzip: the wheel lacks it
    a = g.create_array("v", shape=(CHUNK * CHUNKS,), chunks=(CHUNK * 4,), serializer=gz, compressors=None,
                       dtype="<f4", dimension_names=["x"])
    values = np.arange(CHUNK * CHUNKS, dtype="<f4")
    a[:] = values
    decoding.set_threads(2)
    view = PresentingStore(ThreadedStore(DirectoryStore(str(tmp_path))), "netcdf-4.10", ttl=60)
    assert np.array_equal(np.frombuffer(await view.get("s.zarr/v/0"), "<f4"), values[:CHUNK])
    await _settled(view)
    assert view._recoded_chunks.made.count == 1 + 2  # across the first shard's end too
    got = [await view.get(f"s.zarr/v/{i}") for i in range(1, CHUNKS)]
    assert np.array_equal(np.frombuffer(b"".join(got), "<f4"), values[CHUNK:])
    await _settled(view)
    assert view._recoded_chunks.made.count == CHUNKS


async def test_a_nc4_file_read_through_decoded_chunks_has_the_next_ones_decoded_ahead():
    from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
    from nczfs.store.values import ByteRange

    below = MemoryStore()
    values = _lz4_dataset(below)
    decoding.set_threads(3)
    # transcode=none: chunks shown decoded, uncompressed (sizes known: none made before a read)
    s = NcFilesStore(ThreadedStore(below), ttl=60, classic=False, netcdf4=True, transcode="none")
    await s.get("ds.nc4", ByteRange(0, 64))  # the superblock: no chunk, nothing decoded
    v = next(iter(s._versions.values()))
    pieces = [p for p in v.file.layout.pieces if p.source.recode is not None]
    assert len(pieces) == CHUNKS and s._pieces.made.count == 0
    first = pieces[0]
    data = await s.get("ds.nc4", ByteRange(first.offset, first.offset + first.size))
    assert np.array_equal(np.frombuffer(data, "<f4"), values[:CHUNK])
    await _nc_settled_pieces(s._pieces)
    assert s._pieces.made.count == 1 + 3  # one per thread ahead
    for p in pieces[1:]:
        await s.get("ds.nc4", ByteRange(p.offset, p.offset + p.size))
    await _nc_settled_pieces(s._pieces)
    assert s._pieces.made.count == CHUNKS  # each decoded once


async def _nc_settled_pieces(pieces) -> None:
    await trio.sleep(0.05)
    with trio.fail_after(10):
        while pieces.made._making:
            await trio.sleep(0.01)


class _AheadFails(ThreadedStore):
    """The first read of chunk ``ds/v/1`` waits for ``gate``, then fails (a read-ahead's own error:
    a dropped connection, say); the next reads of it succeed."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.gate = trio.Event()
        self.failed = False

    async def get_version(self, key, rng, etag):
        if key == "ds/v/1" and not self.failed:
            self.failed = True
            await self.gate.wait()
            raise BackendError("ds/v/1: connection reset")
        return await super().get_version(key, rng, etag)


async def test_a_chunk_made_ahead_that_fails_does_not_fail_the_reader_waiting_for_it():
    below = _AheadFails()
    values = _lz4_dataset(below.impl)
    view = PresentingStore(below, "netcdf-4.10", ttl=60)
    got = await _past_a_failed_read_ahead(below, lambda: view.get("ds/v/0"), lambda: view.get("ds/v/1"))
    assert np.array_equal(np.frombuffer(got, "<f4"), values[CHUNK:2 * CHUNK])
    await _settled(view)


async def test_a_nc_chunk_decoded_ahead_that_fails_does_not_fail_the_reader_waiting_for_it():
    from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
    from nczfs.store.values import ByteRange

    below = _AheadFails()
    values = _lz4_dataset(below.impl)
    s = NcFilesStore(below, ttl=60)
    head = (await s.stat("ds.nc")).size - values.nbytes  # the header, then v's values (big-endian)
    got = await _past_a_failed_read_ahead(below, lambda: s.get("ds.nc", ByteRange(head, head + 100)),
                                          lambda: s.get("ds.nc", ByteRange(head + 4 * CHUNK, head + 4 * CHUNK + 100)))
    assert np.array_equal(np.frombuffer(got, ">f4"), values[CHUNK:CHUNK + 25])
    await _nc_settled(s._decoded)


async def _past_a_failed_read_ahead(below: _AheadFails, first, second) -> bytes:
    """``second()`` (a read of chunk 1) while chunk 1 is made ahead of ``first()`` (a read of
    chunk 0) and that fails: the reader's own bytes."""
    await first()
    await trio.testing.wait_all_tasks_blocked()
    assert below.failed  # chunk 1 is being made ahead: its read waits for the gate
    got: list[bytes] = []

    async def reader() -> None:
        got.append(await second())

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()  # the reader waits for the chunk made ahead
            below.gate.set()
    return got[0]
