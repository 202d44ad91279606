"""Made chunks (nczfs.nczarr.chunks.madechunks): one cache for a view's recoded chunks and
NAME.nc4's re-encoded ones, their sizes kept in the cache dir (sizebook.SizeBook) so that a
remount knows NAME.nc4's size without making a chunk again; a changed chunk is made again."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time

import numcodecs
import numpy as np
import pytest
import trio

from nczfs.nczarr.chunks import decoding, deflater
from nczfs.nczarr.chunks.madechunks import MadeChunks, Stored
from nczfs.nczarr.chunks.sizebook import FILE, SizeBook
from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.values import ByteRange
from nczfs.toolbox.errors import Stale
from tests.nczarr.test_decoding import CHUNK, CHUNKS, _lz4_dataset

SOURCE = '["memory", "one"]'


def test_a_size_kept_is_found_by_another_book_on_the_directory_and_only_for_its_version(tmp_path):
    SizeBook(str(tmp_path), SOURCE).put(("k", 0, None, "recode"), "e1", 1234)
    again = SizeBook(str(tmp_path), SOURCE)  # a remount
    assert again.get(("k", 0, None, "recode"), "e1") == 1234
    assert again.get(("k", 0, None, "recode"), "e2") is None  # the object rewritten
    assert again.get(("k", 0, None, "other recode"), "e1") is None
    assert again.get(("k", 0, 100, "recode"), "e1") is None  # another byte range (a shard's chunk)
    assert SizeBook(str(tmp_path), '["memory", "two"]').get(("k", 0, None, "recode"), "e1") is None
    again.put(("k", 0, None, "recode"), "", 99)  # no version: nothing kept
    assert again.get(("k", 0, None, "recode"), "") is None


def test_the_book_keeps_at_most_its_rows_the_oldest_going_first(tmp_path):
    book = SizeBook(str(tmp_path), SOURCE, max_rows=20)
    for i in range(45):
        book.put((f"k{i}", 0, None, "r"), "e", i)
    rows = sqlite3.connect(tmp_path / FILE).execute("SELECT count(*) FROM sizes").fetchone()[0]
    assert rows <= 20 + 2  # trimmed every tenth of the bound written
    assert book.get(("k44", 0, None, "r"), "e") == 44 and book.get(("k0", 0, None, "r"), "e") is None


def test_a_book_that_cannot_be_opened_is_logged_once_and_never_fails(tmp_path, caplog):
    (tmp_path / FILE).write_bytes(b"not a database at all" * 100)
    book = SizeBook(str(tmp_path), SOURCE)
    with caplog.at_level(logging.WARNING):
        book.put(("k", 0, None, "r"), "e", 1)
        assert book.get(("k", 0, None, "r"), "e") is None
    assert [r.message for r in caplog.records if FILE in r.message and "failed" in r.message].__len__() == 1


def _nc4(below: MemoryStore, book_dir, made: MadeChunks | None = None) -> NcFilesStore:
    made = made or MadeChunks(64 * 1024 * 1024, SizeBook(str(book_dir), SOURCE))
    # transcode=zlib: the lz4 chunks are re-encoded as deflate (sizes known once made)
    return NcFilesStore(ThreadedStore(below), ttl=0, classic=False, netcdf4=True, transcode="zlib", made=made)


async def test_a_remount_knows_the_nc4_size_without_making_a_chunk_and_reads_the_same_bytes(tmp_path):
    below = MemoryStore()
    _lz4_dataset(below)
    first = _nc4(below, tmp_path)
    size = (await first.stat("ds.nc4")).size
    assert first._pieces.made.count == CHUNKS  # each chunk made once for its size
    whole = await first.get("ds.nc4", ByteRange(0, size))
    again = _nc4(below, tmp_path)  # a new mount: nothing in memory, the book on disk
    assert (await again.stat("ds.nc4")).size == size
    assert again._pieces.made.count == 0  # no chunk made to know the size
    assert await again.get("ds.nc4", ByteRange(0, size)) == whole
    # one chunk rewritten: that one (only) is made again for the new size
    values = np.arange(CHUNK, dtype="<f4") * 3.5
    below.set("ds/v/3", numcodecs.LZ4().encode(values.tobytes()))
    third = _nc4(below, tmp_path)
    assert (await third.stat("ds.nc4")).size != size
    assert third._pieces.made.count == 1


async def test_a_kept_size_the_chunk_is_not_made_to_fails_one_read_then_is_mended(tmp_path, caplog):
    """A size in the cache dir that making the chunk does not give (an encoder that changed its
    bytes under the same version): the read of that chunk fails (ESTALE: the file's version has
    the old size), saying so in the log with the key and both sizes; the book is corrected, so
    the next ``stat`` (this mount's, or a remount's) gives the file of the bytes made, read whole."""
    below = MemoryStore()
    _lz4_dataset(below)
    first = _nc4(below, tmp_path)
    size = (await first.stat("ds.nc4")).size
    whole = await first.get("ds.nc4", ByteRange(0, size))
    db = sqlite3.connect(tmp_path / FILE)
    with db:  # one chunk's kept size off by 7 bytes
        db.execute("UPDATE sizes SET size = size + 7 WHERE rowid = (SELECT min(rowid) FROM sizes)")
    db.close()
    again = _nc4(below, tmp_path)
    assert (await again.stat("ds.nc4")).size == size + 7
    with caplog.at_level(logging.WARNING), pytest.raises(Stale):
        await again.get("ds.nc4", ByteRange(0, size + 7))
    said = [r.getMessage() for r in caplog.records if "made again" in r.getMessage()]
    assert len(said) == 1 and "'ds/v/" in said[0] and "bytes where" in said[0], said
    assert (await again.stat("ds.nc4")).size == size  # this mount: the size made
    assert await again.get("ds.nc4", ByteRange(0, size)) == whole
    third = _nc4(below, tmp_path)  # a remount: the book corrected
    assert (await third.stat("ds.nc4")).size == size and third._pieces.made.count == 0
    assert await third.get("ds.nc4", ByteRange(0, size)) == whole


async def test_sizes_kept_by_another_deflate_encoder_are_not_trusted(tmp_path, monkeypatch, caplog):
    """A cache dir filled while ``deflate`` could not be imported (stdlib zlib's deflate, the
    fallback, logged once) holds other sizes: a mount deflating with libdeflate makes its chunks again."""
    below = MemoryStore()
    _lz4_dataset(below)
    monkeypatch.setitem(sys.modules, "deflate", None)  # the import fails
    deflater._pick.cache_clear()
    deflater.libdeflate.cache_clear()
    try:
        with caplog.at_level(logging.WARNING):
            old_size = (await _nc4(below, tmp_path).stat("ds.nc4")).size
        assert deflater.encoder().startswith("zlib ") and sum("libdeflate" in r.message for r in caplog.records) == 1
    finally:
        monkeypatch.undo()
        deflater._pick.cache_clear()
        deflater.libdeflate.cache_clear()
    assert deflater.encoder().startswith("libdeflate ")
    again = _nc4(below, tmp_path)
    size = (await again.stat("ds.nc4")).size
    assert again._pieces.made.count == CHUNKS  # the kept sizes were not used
    assert size != old_size and len(await again.get("ds.nc4", ByteRange(0, size + 100))) == size
    assert (await _nc4(below, tmp_path).stat("ds.nc4")).size == size  # and its own are


async def test_with_a_book_that_cannot_be_opened_a_remount_makes_every_chunk_again(tmp_path):
    below = MemoryStore()
    _lz4_dataset(below)
    size = (await _nc4(below, tmp_path).stat("ds.nc4")).size
    for name in os.listdir(tmp_path):  # the book's database spoilt between the mounts
        os.remove(tmp_path / name)
    (tmp_path / FILE).write_bytes(b"not a database at all" * 100)
    again = _nc4(below, tmp_path)
    assert (await again.stat("ds.nc4")).size == size
    assert again._pieces.made.count == CHUNKS
    assert again._pieces.made.book is not None and again._pieces.made.book._broken


class _Counting(MemoryStore):
    """Counts the reads of chunks."""

    reads = 0

    def get_version(self, key, rng, etag):
        self.reads += key.startswith("ds/v/") and not key.rpartition("/")[2].startswith(".")
        return super().get_version(key, rng, etag)


async def test_a_view_and_nc4_recoding_alike_share_the_made_chunks(tmp_path):
    below = _Counting()
    values = _lz4_dataset(below)
    made = MadeChunks(64 * 1024 * 1024)
    nc = _nc4(below, tmp_path, made)
    view = PresentingStore(nc, "netcdf-4.10", ttl=60, transcode="zlib", made=made)
    await nc.stat("ds.nc4")
    assert below.reads == CHUNKS
    shown = [await view.stat(f"ds/v/{i}") for i in range(CHUNKS)]  # sizes of the view's deflated chunks
    data = await view.get("ds/v/0")
    with trio.fail_after(10):
        while view._recoded_chunks._ahead:
            await trio.sleep(0.01)
    assert below.reads == CHUNKS and made.count == CHUNKS  # the view made no chunk again
    assert shown[0].size == len(data)
    assert np.array_equal(np.frombuffer(numcodecs.Zlib().decode(data), "<f4"), values[:CHUNK])


async def test_a_views_deflated_chunk_sizes_are_found_in_the_book_after_a_remount(tmp_path):
    below = _Counting()
    _lz4_dataset(below)

    def view() -> PresentingStore:
        made = MadeChunks(1 << 26, SizeBook(str(tmp_path), SOURCE))
        return PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60, transcode="zlib", made=made)

    one = view()
    first = [(await one.stat(f"ds/v/{i}")).size for i in range(CHUNKS)]
    assert below.reads == CHUNKS
    again = view()  # a remount: the sizes from the book, no chunk fetched or made
    assert [(await again.stat(f"ds/v/{i}")).size for i in range(CHUNKS)] == first
    assert below.reads == CHUNKS and again._recoded_chunks.made.count == 0


def _rows(book_dir) -> int:
    if not os.path.exists(book_dir / FILE):
        return 0
    return sqlite3.connect(book_dir / FILE).execute("SELECT count(*) FROM sizes").fetchone()[0]


async def test_a_chunk_shown_uncompressed_writes_no_size_to_the_book(tmp_path):
    below = MemoryStore()
    values = _lz4_dataset(below)
    made = MadeChunks(1 << 26, SizeBook(str(tmp_path), SOURCE))
    # netcdf-4.10 shows the lz4 chunks decoded: their size is known without making them
    view = PresentingStore(ThreadedStore(below), "netcdf-4.10", ttl=60, made=made)
    got = b"".join([await view.get(f"ds/v/{i}") for i in range(CHUNKS)])
    assert np.array_equal(np.frombuffer(got, "<f4"), values)
    nc = NcFilesStore(ThreadedStore(below), ttl=0, classic=False, netcdf4=True, transcode="none", made=made)
    size = (await nc.stat("ds.nc4")).size
    assert len(await nc.get("ds.nc4", ByteRange(0, size))) == size
    assert made.count >= CHUNKS and _rows(tmp_path) == 0
    await _nc4(below, tmp_path, made).stat("ds.nc4")  # deflated: each size needed, kept
    assert _rows(tmp_path) == CHUNKS


class _Overlapping(MemoryStore):
    """Counts the chunk reads running at once (each takes a while)."""

    def __init__(self):
        super().__init__()
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def get_version(self, key, rng, etag):
        if not key.startswith("ds/v/") or key.rpartition("/")[2].startswith("."):
            return super().get_version(key, rng, etag)
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.02)
        with self.lock:
            self.now -= 1
        return super().get_version(key, rng, etag)


async def test_a_first_stat_holds_the_chunks_it_makes_only_where_the_cache_has_room(tmp_path):
    below = _Overlapping()
    _lz4_dataset(below)
    decoding.set_threads(1)
    try:
        made = MadeChunks(1000 + 3 * 1300)  # room for the view's chunk and three deflated (1.0-1.3 KiB)
        other = Stored("elsewhere", "e")  # a chunk a view made before
        await made.get(other, "view", lambda: _value(b"x" * 1000), bytes, book=False)
        nc = _nc4(below, tmp_path, made)
        size = (await nc.stat("ds.nc4")).size
    finally:
        decoding.set_threads(0)
    assert made.count == CHUNKS + 1 and size > 0
    assert made.bytes_held <= made.limit and 1 < len(made._held) < CHUNKS  # some kept, not all
    assert not made.wanted(other, "view")  # what was held stays: made for its size, none evicts
    assert below.most <= 2  # fetched one per decode thread, one more meanwhile


async def _value(data: bytes) -> bytes:
    return data
