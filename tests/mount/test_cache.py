"""The cache through real S3 mounts: request counts, bounds, and never a stale byte after the mount's own writes.

Counters come from the daemon (its control file ``.nczfs``, what ``nczfs stats`` prints).
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from nczfs.cache.prefetch import READAHEAD_BLOCKS
from tests.helpers import S3Backend, counts, delta, mounted, pages_in_memory, run_nczfs

pytestmark = pytest.mark.fuse

MiB = 1024 * 1024


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.new_bucket("c"))


def clean(m) -> None:
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text


def test_an_object_read_in_kernel_sized_pieces_costs_one_get(s3, tmp_path):
    """The kernel reads a 4 MiB file in 128 KiB requests; the cache fetches it with one GET and a
    second reader (page cache dropped) gets it from memory."""
    data = os.urandom(4 * MiB)
    s3.put("obj", data)
    with mounted(s3, tmp_path / "mnt") as m:
        before = counts(m.path)
        assert (m.path / "obj").read_bytes() == data
        d = delta(before, counts(m.path))
        assert d.get("GetObject") == 1, d
        with open(m.path / "obj", "rb") as f:  # its pages only: the whole page cache is other workers' too
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            assert not any(pages_in_memory(f.fileno()))
        assert (m.path / "obj").read_bytes() == data
        d = delta(before, counts(m.path))
        assert d.get("GetObject") == 1 and d.get("cache.hits", 0) >= 1, d
    clean(m)


def test_zarr_reading_chunk_after_chunk_lists_the_directory_instead_of_each_name(s3, tmp_path):
    import zarr

    with mounted(s3, tmp_path / "mnt") as m:
        z = zarr.open_array(str(m.path / "a.zarr"), mode="w", shape=(200,), chunks=(2,), dtype="i4",
                            zarr_format=2, fill_value=0)
        z[:] = np.arange(200, dtype="i4")
    with mounted(s3, tmp_path / "mnt") as m:
        before = counts(m.path)
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], np.arange(200))
        d = delta(before, counts(m.path))
        assert d.get("GetObject", 0) <= 102, d  # 100 chunks and the metadata
        assert d.get("ListObjectsV2", 0) <= 20, d  # not one a chunk
    clean(m)


def test_zarr_reading_chunk_after_chunk_fetches_the_next_chunks_ahead(s3, tmp_path):
    """Sibling prefetch: chunks come from memory, fetched ahead in chunk order, each once; and a
    walk longer than the 1 s TTL does not list the directory again and again (each If-Match GET
    confirms its entry). ``-o prefetch_siblings=0`` turns it off."""
    import zarr

    s3.put_many({f"a.zarr/{i}": np.full(4, i, dtype="i4").tobytes() for i in range(300)})
    s3.put("a.zarr/.zarray", b'{"zarr_format": 2, "shape": [1200], "chunks": [4], "dtype": "<i4", '
           b'"compressor": null, "fill_value": 0, "order": "C", "filters": null}')
    want = np.repeat(np.arange(300, dtype="i4"), 4)
    with mounted(s3, tmp_path / "mnt") as m:
        before = counts(m.path)
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], want)
        d = delta(before, counts(m.path))
        assert d.get("cache.sibling-prefetches", 0) >= 250, d
        assert d.get("GetObject", 0) <= 302, d  # every chunk once (and the metadata): reads used what came ahead
    with mounted(s3, tmp_path / "mnt", "-o", "prefetch_siblings=0") as m:
        before = counts(m.path)
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], want)
        d = delta(before, counts(m.path))
        assert "cache.sibling-prefetches" not in d, d
    clean(m)


def test_direct_io_reads_skip_the_page_cache_and_come_from_the_daemons_memory(s3, tmp_path):
    """-o direct_io: each read reaches the daemon (the kernel keeps no pages), the second from
    its memory; a read across the end asks S3 for nothing past it; MAP_SHARED mmap is refused
    with ENODEV (the kernel's rule for direct I/O files), a private mapping works; writes and
    read-after-write work as without it."""
    data = os.urandom(8 * MiB)  # one cache block exactly
    s3.put("obj", data)
    with mounted(s3, tmp_path / "mnt", "-o", "direct_io") as m:
        p = m.path / "obj"
        before = counts(m.path)
        assert p.read_bytes() == data
        with open(p, "rb") as f:
            assert os.pread(f.fileno(), MiB, len(data) - 100) == data[-100:]  # across the end
        d = delta(before, counts(m.path))
        assert d.get("GetObject") == 1 and "HeadObject" not in d, d
        before = counts(m.path)
        assert p.read_bytes() == data
        d = delta(before, counts(m.path))
        assert d.get("fuse.read", 0) >= 8 and "GetObject" not in d and d.get("cache.hits", 0) >= 1, d
        with open(p, "rb") as f:
            with pytest.raises(OSError) as exc:
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            assert exc.value.errno == errno.ENODEV
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as mm:
                assert mm[:4096] == data[:4096] and mm[-10:] == data[-10:]
        w = m.path / "w"
        w.write_bytes(b"x" * 300_000)
        with open(w, "r+b") as f:
            f.seek(1000)
            f.write(b"y" * 10)
            f.seek(0)
            assert f.read() == b"x" * 1000 + b"y" * 10 + b"x" * 298_990
        assert s3.read("w") == b"x" * 1000 + b"y" * 10 + b"x" * 298_990
    clean(m)


def test_own_writes_are_never_read_stale_whatever_the_ttl(s3, tmp_path):
    """Cached bytes and metadata of a file follow every change made through the mount at once
    (same size, so only the content tells the versions apart), with a 60 s TTL."""
    with mounted(s3, tmp_path / "mnt", "--metadata-ttl", "60") as m:
        p = m.path / "f"
        p.write_bytes(b"A" * 1000)
        assert p.read_bytes() == b"A" * 1000
        with open(p, "r+b") as f:  # rewrite in place
            f.write(b"B" * 10)
        assert p.read_bytes() == b"B" * 10 + b"A" * 990
        tmp = m.path / "f.1234.partial"  # zarr's way: a temp file renamed over the object
        tmp.write_bytes(b"C" * 1000)
        os.rename(tmp, p)
        assert p.read_bytes() == b"C" * 1000
        os.truncate(p, 500)
        assert p.read_bytes() == b"C" * 500
        os.unlink(p)
        assert not p.exists()
        p.write_bytes(b"D" * 1000)
        assert p.read_bytes() == b"D" * 1000
        assert s3.read("f") == b"D" * 1000
    clean(m)


def test_a_remote_change_of_a_cached_object_is_seen_after_the_ttl(s3, tmp_path):
    """Same size, new content: neither nczfs's cache nor the kernel's page cache (keep_cache) serves the old bytes."""
    with mounted(s3, tmp_path / "mnt", "--metadata-ttl", "0.5") as m:
        # both versions usually fall in one second of S3's LastModified, so the kernel's own
        # check (size and mtime) cannot tell them apart: only the ETag can
        s3.put("r", b"1" * 5000)
        assert (m.path / "r").read_bytes() == b"1" * 5000
        assert (m.path / "r").read_bytes() == b"1" * 5000  # a second open: kernel pages kept
        s3.put("r", b"2" * 5000)
        time.sleep(1.0)
        assert (m.path / "r").read_bytes() == b"2" * 5000
    clean(m)


def test_the_cache_stays_within_cache_size(s3, tmp_path):
    for i in range(6):
        s3.put(f"o{i}", bytes([i]) * MiB)
    with mounted(s3, tmp_path / "mnt", "-o", "cache_size=2M") as m:
        for i in range(6):
            assert (m.path / f"o{i}").read_bytes() == bytes([i]) * MiB
            c = counts(m.path)
            assert c["cache.bytes-limit"] == 2 * MiB and c["cache.bytes-held"] <= 2 * MiB, c
        assert c["cache.bytes-held"] == 2 * MiB
    clean(m)


def test_replies_from_blocks_the_cache_evicts_meanwhile_are_the_right_bytes(s3, tmp_path):
    """A read's reply is a view of the cached block (or of the GET's buffer), not a copy: blocks
    evicted and others fetched into the memory they left while replies are on their way never
    change a reply. Direct I/O: every read reaches the daemon; a 2 MiB cache of 2 MiB blocks
    evicts at nearly every read; four threads, unaligned reads, some across blocks."""
    import random
    from concurrent.futures import ThreadPoolExecutor

    objs = {f"o{i}": os.urandom(3 * MiB + i * 4099) for i in range(6)}
    for key, data in objs.items():
        s3.put(key, data)
    rng = random.Random(46)
    picks = []
    for _ in range(240):
        key = rng.choice(sorted(objs))
        off = rng.randrange(len(objs[key]))
        picks.append((key, off, rng.choice([1, 4096, 100_000, MiB, MiB + 12345])))
    with mounted(s3, tmp_path / "mnt", "-o", "direct_io", "-o", "cache_size=2M") as m:
        def read(part: list[tuple[str, int, int]]) -> int:
            fds = {key: os.open(m.path / key, os.O_RDONLY) for key in objs}
            try:
                for key, off, size in part:
                    assert os.pread(fds[key], size, off) == objs[key][off : off + size], (key, off, size)
            finally:
                for fd in fds.values():
                    os.close(fd)
            return len(part)

        with ThreadPoolExecutor(4) as pool:
            assert sum(pool.map(read, [picks[i::4] for i in range(4)])) == len(picks)
        c = counts(m.path)
        assert c["cache.bytes-held"] <= 2 * MiB and c["GetObject"] > 3 * len(objs), c  # blocks came and went
    clean(m)


def test_files_written_at_once_share_the_write_memory(s3, tmp_path):
    """Eight files written at the same time hold at most ``write_memory`` bytes in the daemon;
    the ones that grow past it go to temp files. Zarr chunks that went there are stored once
    under their final key at the rename (no copy, no temp object), and every byte arrives."""
    import zarr

    from tests.mount.clientutil import assert_no_temporaries

    with mounted(s3, tmp_path / "mnt", "--write-memory", "8M") as m:
        files = [open(m.path / f"f{i}", "wb") for i in range(8)]
        for piece in range(12):
            for i, f in enumerate(files):
                f.write(bytes([i]) * (256 * 1024))
                f.flush()
        c = counts(m.path)
        assert c["write.memory-limit"] == 8 * MiB and c["write.bytes-in-memory"] <= 8 * MiB, c
        for f in files:
            f.close()
        c = counts(m.path)
        assert c["write.spilled-files"] >= 4 and c["write.bytes-in-memory-peak"] <= 8 * MiB, c
        assert c["write.bytes-in-memory"] == 0, c

        before = counts(m.path)
        data = np.random.default_rng(5).random(6 * MiB, dtype="f4")
        a = zarr.create_array(zarr.storage.LocalStore(m.path / "z.zarr"), shape=data.shape, chunks=(3 * MiB,),
                              dtype="f4", compressors=None, zarr_format=2)
        a[:] = data  # 2 chunks of 12 MiB: each is more than the budget alone
        d = delta(before, counts(m.path))
        assert d.get("write.spilled-files", 0) == 2 and "CopyObject" not in d, d
    for i in range(8):
        assert s3.read(f"f{i}") == bytes([i]) * (3 * MiB)
    for i in range(2):
        assert s3.read(f"z.zarr/{i}") == data[i * 3 * MiB : (i + 1) * 3 * MiB].tobytes()
    assert_no_temporaries(s3)
    clean(m)


def test_a_streamed_object_turns_over_a_few_buffers_and_the_kernel_keeps_it(s3, tmp_path):
    """Blocks read to their end are in the page cache: the daemon keeps a sixteenth of its cache
    of them (and reuses their memory: tests/test_mount_memory.py). Reading the file again comes
    from the kernel (keep_cache), without a GET; pages the kernel dropped are fetched alone."""
    data = np.random.default_rng(3).bytes(128 * MiB)
    s3.put("stream", data)
    with mounted(s3, tmp_path / "mnt", "-o", "cache_size=128M") as m:
        before = counts(m.path)
        with open(m.path / "stream", "rb") as f:
            while f.read(MiB):
                pass
            c = counts(m.path)
        assert c["cache.bytes-held"] <= 16 * MiB and c["cache.bytes-held-delivered"] <= 16 * MiB, c
        d = delta(before, c)
        assert d["GetObject"] == 16 and d["cache.bytes-fetched"] == 128 * MiB, d  # every block once
        # pages the kernel dropped from a block the daemon dropped too: only they are fetched again
        # (probed before any other read: a block read again has had its one part refetch)
        before = counts(m.path)
        fd = os.open(m.path / "stream", os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 8 * MiB, 64 * 1024, os.POSIX_FADV_DONTNEED)
            pages = pages_in_memory(fd)[8 * MiB // mmap.PAGESIZE : 16 * MiB // mmap.PAGESIZE]
            assert os.pread(fd, 64 * 1024, 8 * MiB) == data[8 * MiB : 8 * MiB + 64 * 1024]
        finally:
            os.close(fd)
        d = delta(before, counts(m.path))
        # fetched again alone, or (the daemon still holding that block: the host's page cache
        # decides which blocks the daemon let go of) served from the daemon's memory
        assert d.get("cache.part-refetches", 0) + d.get("cache.hits", 0) >= 1, d
        # more of that block gone from the kernel's cache than was dropped, as the read began
        # (another worker's files pressing on it): the kernel's readahead may ask for all of it
        gone = pages.count(0) * mmap.PAGESIZE
        assert d.get("cache.bytes-fetched", 0) <= (2 * MiB if gone <= 64 * 1024 else 10 * MiB), (d, gone)
        # the last read is the kernel's; pages may have left its cache since the first read (a
        # test in another worker dropping the page cache, the host reclaiming it: once 48 MiB of
        # this file), so blocks the kernel no longer holds pages of, as it begins, may be fetched,
        # and the sequential readahead that a block fetched whole starts
        before = counts(m.path)
        with open(m.path / "stream", "rb") as f:
            pages = pages_in_memory(f.fileno())
            assert f.read() == data
        d = delta(before, counts(m.path))
        dropped = {i * mmap.PAGESIZE // (8 * MiB) for i, kept in enumerate(pages) if not kept}
        dropped = {b + k for b in dropped for k in range(READAHEAD_BLOCKS + 1) if b + k < 16}
        assert d.get("cache.bytes-fetched", 0) <= 8 * MiB * len(dropped), (d, sorted(dropped))
    clean(m)


def test_what_the_mount_writes_is_kept_only_up_to_a_sixteenth_of_the_cache(s3, tmp_path):
    """Written objects are kept in the cache like blocks read to their end (the most recent, up
    to a sixteenth of it): the daemon reuses the memory of the rest for the next writes instead
    of faulting in fresh memory for every byte written until the cache is full."""
    from nczfs.fuse.control import read_control

    def faults(pid: int) -> int:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])

    data = [np.random.default_rng(i).bytes(8 * MiB) for i in range(8)]
    with mounted(s3, tmp_path / "mnt", "-o", "cache_size=256M") as m:
        pid = read_control(str(m.path))["pid"]
        rounds = []
        for r in range(2):
            before = faults(pid)
            for i, d in enumerate(data):
                (m.path / f"w{r}-{i}").write_bytes(d)
            rounds.append(faults(pid) - before)
            c = counts(m.path)
            assert c["cache.bytes-held-written"] <= 16 * MiB and c["cache.bytes-held"] <= 16 * MiB, c
        assert rounds[1] < (64 * MiB // mmap.PAGESIZE) // 4, rounds  # 64 MiB written: 16,384 pages
        assert (m.path / "w1-7").read_bytes() == data[7] and (m.path / "w0-0").read_bytes() == data[0]
    assert [s3.read(f"w1-{i}") for i in range(8)] == data
    clean(m)


def test_stats_command_prints_cache_counters(s3, tmp_path):
    s3.put("x", b"1")
    with mounted(s3, tmp_path / "mnt") as m:
        (m.path / "x").read_bytes()
        res = run_nczfs("stats", str(m.path))
        assert res.returncode == 0, res.stderr
        names = {line.split()[0] for line in res.stdout.splitlines()}
        assert {"GetObject", "cache.misses", "cache.bytes-held", "cache.bytes-limit", "meta.misses"} <= names, res.stdout


@pytest.mark.skipif(shutil.which("ncdump") is None, reason="Debian ncdump (netcdf-bin) not installed")
def test_opening_a_dataset_of_many_arrays_lists_its_tree_once_and_fetches_the_metadata_together(s3, tmp_path):
    """Debian's ncdump reading the header of a dataset of 30 arrays (written by the netCDF4
    wheel) from a cold mount: one LIST for the dataset's tree instead of lookups array by array,
    the arrays' metadata fetched together once the first is read, and the header the local
    copy's. ``-o list_tree_keys=0`` turns both off. ``find`` over it lists the tree once too."""
    import netCDF4

    local = tmp_path / "local" / "many.file"
    local.parent.mkdir()
    ds = netCDF4.Dataset(f"file://{local}#mode=nczarr,file", "w")
    ds.createDimension("x", 4)
    for i in range(30):
        v = ds.createVariable(f"v{i:02d}", "f4", ("x",))
        v.units = "K"
        v[:] = np.full(4, i, "f4")
    ds.close()
    s3.put_many({str(p.relative_to(local.parent)): p.read_bytes() for p in local.rglob("*") if p.is_file()})

    def header(path: Path) -> str:
        res = subprocess.run(["ncdump", "-h", f"file://{path}#mode=nczarr,file"], capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout

    want = header(local)
    assert "v29:units" in want
    for opts, tree in (((), True), (("-o", "list_tree_keys=0"), False)):
        with mounted(s3, tmp_path / "mnt", *opts) as m:
            before = counts(m.path)
            assert header(m.path / "many.file") == want
            d = delta(before, counts(m.path))
            if tree:
                assert d.get("meta.tree-listings") == 1 and d.get("cache.metadata-prefetches", 0) >= 50, d
                assert d.get("ListObjectsV2", 0) <= 5, d
            else:
                assert "meta.tree-listings" not in d and "cache.metadata-prefetches" not in d, d
                assert d.get("ListObjectsV2", 0) >= 30, d
        clean(m)
    with mounted(s3, tmp_path / "mnt") as m:  # find walking the dataset lists its tree once too
        before = counts(m.path)
        found = subprocess.run(["find", "many.file"], cwd=m.path, capture_output=True, text=True, check=True).stdout
        d = delta(before, counts(m.path))
        want = subprocess.run(["find", "many.file"], cwd=local.parent, capture_output=True, text=True, check=True).stdout
        assert sorted(found.split()) == sorted(want.split()) and "many.file/v29/.zarray" in found
        assert d.get("meta.tree-listings") == 1 and d.get("ListObjectsV2", 0) <= 4, d
    clean(m)
