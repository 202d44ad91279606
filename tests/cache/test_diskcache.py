"""DiskCache (``--cache-dir``) without a kernel: bound, LRU, corrupt entries, sharing, disk errors;
and CachingStore over it (a second cache over the same directory needs no backend reads)."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from nczfs.cache import disk as diskcache
from nczfs.cache import CachingStore
from nczfs.config.mountconfig import MountConfig
from nczfs.cache.disk import HEADER, DiskCache
from nczfs.cache.disktotal import HELD_WIDTH
from nczfs.toolbox.errors import Stale
from nczfs.config.source import parse_source
from nczfs.daemon.stack import source_identity
from nczfs.store.values import ByteRange
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.wrapper import WrapperStore
from nczfs.store.threads import ThreadedStore
from tests.helpers import is_mounted, run_nczfs
from tests.test_cli import _one_line_error

KiB = 1024
ENTRY = HEADER.size + 1000  # bytes on disk of a 1000-byte block


def held_on_disk(root: Path) -> int:
    """Bytes of every entry and temp file under ``root``, counted independently of the cache."""
    return sum(p.stat().st_size for sub in root.iterdir() if sub.is_dir() for p in sub.iterdir())


def entry_files(root: Path) -> list[Path]:
    return [p for sub in root.iterdir() if sub.is_dir() for p in sub.iterdir() if not p.name.startswith(".tmp.")]


async def put(cache: DiskCache, key: str, data: bytes, etag: str = "e1", index: int = 0) -> None:
    cache.put_soon(key, etag, 64 * KiB, index, data)
    await cache.wait_idle()


async def test_an_entry_survives_a_new_instance_over_the_same_dir(tmp_path):
    a = DiskCache(str(tmp_path), 1 << 20, "src")
    await put(a, "k", b"x" * 1000)
    a.close()
    b = DiskCache(str(tmp_path), 1 << 20, "src")
    assert await b.get("k", "e1", 64 * KiB, 0) == b"x" * 1000
    assert b.counters()["diskcache.hits"] == 1
    assert b.counters()["diskcache.bytes-held"] == ENTRY == held_on_disk(tmp_path)


async def test_source_etag_block_size_and_index_all_tell_entries_apart(tmp_path):
    a = DiskCache(str(tmp_path), 1 << 20, "bucket-a/prefix")
    await put(a, "k", b"a" * 1000)
    other = DiskCache(str(tmp_path), 1 << 20, "bucket-b/prefix")
    assert await other.get("k", "e1", 64 * KiB, 0) is None
    assert await a.get("k", "e2", 64 * KiB, 0) is None  # the object changed
    assert await a.get("k", "e1", 32 * KiB, 0) is None
    assert await a.get("k", "e1", 64 * KiB, 1) is None
    assert await a.get("k", "e1", 64 * KiB, 0) == b"a" * 1000
    assert a.counters()["diskcache.misses"] == 3


def test_source_identity_names_backend_location_and_endpoint(tmp_path):
    def ident(url: str, **kw) -> str:
        return source_identity(MountConfig.of(parse_source(url), str(tmp_path), **kw))

    assert ident("s3://bkt/p", endpoint_url="http://127.0.0.1:1") != ident("s3://bkt/p", endpoint_url="http://127.0.0.1:2")
    assert len({ident("s3://bkt/p"), ident("s3://bkt/q"), ident("s3://cat/p"), ident("s3://bkt/p", region="r")}) == 4
    assert ident("http://127.0.0.1:1/bkt/p") != ident("http://127.0.0.1:2/bkt/p")
    assert ident("s3://bkt/p") == ident("s3://bkt/p#mode=zarr,s3")
    assert ident("/data/refs.json") != ident("/data/other.json")
    assert ident("s3://bkt/p", profile="a") != ident("s3://bkt/p", profile="b")
    assert ident("s3://bkt/p#aws.profile=a") != ident("s3://bkt/p#aws.profile=b")


def test_a_reference_sets_identity_names_how_its_s3_targets_are_reached(tmp_path):
    """Two mounts of one reference set whose s3:// targets are read as other profiles, from other
    endpoints or regions, read other bytes: they share no --cache-dir entries."""
    def ident(url: str, **kw) -> str:
        return source_identity(MountConfig.of(parse_source(url), str(tmp_path), **kw))

    refs = "/data/refs.json"
    assert len({ident(refs), ident(refs, profile="a"), ident(refs, profile="b"), ident(refs + "#aws.profile=c"),
                ident(refs, endpoint_url="http://127.0.0.1:1"), ident(refs, region="r")}) == 6
    assert ident(refs, profile="a") == ident(refs, profile="a")


async def test_the_bytes_held_never_exceed_the_limit(tmp_path):
    limit = 10 * ENTRY + 500
    cache = DiskCache(str(tmp_path), limit, "src")
    for i in range(40):
        await put(cache, f"k{i}", bytes([i]) * 1000)
        assert held_on_disk(tmp_path) <= limit
        assert cache.counters()["diskcache.bytes-held"] == held_on_disk(tmp_path)
    assert cache.counters()["diskcache.evictions"] >= 30
    assert await cache.get("k39", "e1", 64 * KiB, 0) == bytes([39]) * 1000


async def test_the_least_recently_used_entries_go_first(tmp_path):
    cache = DiskCache(str(tmp_path), 10 * ENTRY, "src")
    for i in range(10):
        await put(cache, f"k{i}", bytes([i]) * 1000)
    past = time.time() - 100
    for n, p in enumerate(sorted(entry_files(tmp_path), key=lambda p: p.stat().st_mtime_ns)):
        os.utime(p, (past + n, past + n))  # written in order k0..k9, a second apart
    assert await cache.get("k0", "e1", 64 * KiB, 0) == bytes([0]) * 1000  # now the most recent
    await put(cache, "new", b"n" * 1000)
    assert await cache.get("k0", "e1", 64 * KiB, 0) is not None
    assert await cache.get("k1", "e1", 64 * KiB, 0) is None  # the oldest unused one went
    assert await cache.get("new", "e1", 64 * KiB, 0) is not None


@pytest.mark.parametrize("damage", ["truncate", "flip a data byte", "flip a header byte", "empty"])
async def test_a_damaged_entry_is_deleted_and_never_served(tmp_path, damage):
    cache = DiskCache(str(tmp_path), 1 << 20, "src")
    await put(cache, "k", b"x" * 1000)
    [path] = entry_files(tmp_path)
    raw = bytearray(path.read_bytes())
    if damage == "truncate":
        raw = raw[:-1]
    elif damage == "flip a data byte":
        raw[-1] ^= 1
    elif damage == "flip a header byte":
        raw[9] ^= 1  # the length
    else:
        raw = bytearray()
    path.write_bytes(raw)
    assert await cache.get("k", "e1", 64 * KiB, 0) is None
    assert not path.exists()
    c = cache.counters()
    assert c["diskcache.corrupt"] == 1 and c["diskcache.misses"] == 1 and c["diskcache.bytes-held"] == 0


async def test_two_caches_on_one_dir_share_entries_and_one_bound(tmp_path):
    limit = 8 * ENTRY
    a = DiskCache(str(tmp_path), limit, "src")
    b = DiskCache(str(tmp_path), limit, "src")
    for i in range(30):
        await put(a if i % 2 else b, f"k{i}", bytes([i]) * 1000)
        assert held_on_disk(tmp_path) <= limit
    assert await a.get("k28", "e1", 64 * KiB, 0) == bytes([28]) * 1000  # written by b
    await put(a, "k28", bytes([28]) * 1000)  # the same entry again: replaced, counted once
    assert a.counters()["diskcache.bytes-held"] == held_on_disk(tmp_path)


async def test_a_cache_whose_dir_was_emptied_under_it_shares_the_bound_with_a_new_one(tmp_path):
    """``rm -rf`` of the dir while a mount uses it: that mount takes the lock a mount started
    since then made, and the two keep one total, within the limit."""
    import shutil

    limit = 8 * ENTRY
    a = DiskCache(str(tmp_path), limit, "src")
    for i in range(8):
        await put(a, f"old{i}", bytes([i]) * 1000)
    shutil.rmtree(tmp_path)
    b = DiskCache(str(tmp_path), limit, "src")
    for i in range(16):
        await put(b if i % 2 else a, f"k{i}", bytes([i]) * 1000)
        assert held_on_disk(tmp_path) <= limit
    assert (tmp_path / ".lock").exists()


async def test_stale_temp_files_of_a_dead_writer_are_removed_on_open(tmp_path):
    (tmp_path / "ab").mkdir()
    stale = tmp_path / "ab" / ".tmp.999999.1.abcd"
    stale.write_bytes(b"z" * 100)
    os.utime(stale, (time.time() - 2 * diskcache.STALE_TMP,) * 2)
    cache = DiskCache(str(tmp_path), 1 << 20, "src")
    assert await cache.get("k", "e1", 64 * KiB, 0) is None
    assert not stale.exists() and cache.counters()["diskcache.bytes-held"] == 0


async def test_disk_errors_are_counted_never_raised(tmp_path, monkeypatch, caplog):
    cache = DiskCache(str(tmp_path), 1 << 20, "src")

    def no_space(fd, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(diskcache.os, "ftruncate", no_space)
    await put(cache, "k2", b"y" * 1000)
    monkeypatch.undo()
    assert cache.counters()["diskcache.errors"] == 1
    assert cache.counters()["diskcache.bytes-held"] == 0 == held_on_disk(tmp_path)  # the reservation was returned
    assert str(tmp_path) in caplog.text and "No space left on device" in caplog.text

    await put(cache, "k", b"x" * 1000)
    [path] = entry_files(tmp_path)
    path.unlink()
    path.mkdir()  # reading it: EISDIR
    assert await cache.get("k", "e1", 64 * KiB, 0) is None
    assert cache.counters()["diskcache.errors"] == 2

    blocked = tmp_path / "file"
    blocked.write_text("")
    unusable = DiskCache(str(blocked), 1 << 20, "src")  # not a directory
    assert await unusable.get("k", "e1", 64 * KiB, 0) is None
    await put(unusable, "k", b"x")
    assert unusable.counters()["diskcache.errors"] == 1


@pytest.mark.parametrize("when", ["writing", "opening"])
async def test_an_entry_that_cannot_be_deleted_is_passed_over(tmp_path, when):
    """The oldest entry cannot be deleted (here a directory stands in its place): eviction
    deletes the next ones instead, so new blocks are still kept, and a dir over its limit at
    mount time is still used."""
    size = HEADER.size + 10_000
    cache = DiskCache(str(tmp_path), 4 * size, "src")
    for i in range(4):
        await put(cache, f"k{i}", bytes([i]) * 10_000)
    now = time.time()
    for path in entry_files(tmp_path):  # k0 the least recently used, k3 the most
        age = 100 - path.read_bytes()[-1]
        os.utime(path, (now - age, now - age))
    oldest = min(entry_files(tmp_path), key=lambda p: p.stat().st_mtime)
    oldest.unlink()
    oldest.mkdir()
    os.utime(oldest, (now - 100, now - 100))
    if when == "opening":
        cache = DiskCache(str(tmp_path), 2 * size + oldest.stat().st_size, "src")  # over its limit: evicts at open
        assert await cache.get("k3", "e1", 64 * KiB, 0) == bytes([3]) * 10_000
    else:
        await put(cache, "new", b"n" * 10_000)
        assert await cache.get("new", "e1", 64 * KiB, 0) == b"n" * 10_000
    assert cache.counters()["diskcache.evictions"] >= 1
    assert cache.counters()["diskcache.errors"] >= 1 and oldest.is_dir()


def test_prepare_dir_creates_the_dir_and_refuses_a_file(tmp_path):
    assert diskcache.prepare_dir(str(tmp_path / "new" / "cache")) == str(tmp_path / "new" / "cache")
    (tmp_path / "f").write_text("")
    with pytest.raises(OSError):
        diskcache.prepare_dir(str(tmp_path / "f"))
    with pytest.raises(OSError):
        diskcache.prepare_dir(str(tmp_path / "f" / "sub"))


# ---------------------------------------------------------------------- CachingStore over it


def caching(mem: MemoryStore, root: Path, **kw) -> tuple[CachingStore, FaultyStore]:
    faulty = FaultyStore(ThreadedStore(mem))
    disk = DiskCache(str(root), 1 << 20, "memory://dc")
    return CachingStore(faulty, cache_size=1024 * KiB, ttl=5.0, block_size=64 * KiB, disk=disk, **kw), faulty


async def test_a_second_cache_over_the_same_dir_reads_without_the_backend(tmp_path):
    mem = MemoryStore("dc")
    data = os.urandom(150 * KiB)  # three blocks
    mem.set("k", data)
    etag = mem.stat("k").etag
    first, faulty = caching(mem, tmp_path)
    assert await first.get_version("k", None, etag) == data
    assert faulty.calls["get"] == 3
    await first.disk.wait_idle()
    assert first.counters()["diskcache.writes"] == 3

    second, faulty = caching(mem, tmp_path)  # a remount
    assert await second.get_version("k", ByteRange(70 * KiB, 140 * KiB), etag) == data[70 * KiB : 140 * KiB]
    assert await second.get_version("k", None, etag) == data
    assert faulty.calls["get"] == 0
    c = second.counters()
    assert c["diskcache.hits"] == 3 and c.get("cache.bytes-fetched", 0) == 0, c


async def test_a_changed_object_is_fetched_fresh_not_read_from_disk(tmp_path):
    mem = MemoryStore("dc")
    mem.set("k", b"1" * 5000)
    first, _ = caching(mem, tmp_path)
    assert await first.get("k") == b"1" * 5000
    await first.disk.wait_idle()
    mem.set("k", b"2" * 5000)  # another client, same size
    second, faulty = caching(mem, tmp_path)
    assert await second.get("k") == b"2" * 5000
    assert faulty.calls["get"] == 1
    await second.disk.wait_idle()
    third, faulty = caching(mem, tmp_path)
    assert await third.get("k") == b"2" * 5000 and faulty.calls["get"] == 0


class ShortAnswers(WrapperStore):
    """Answers the next ``n`` pinned GETs with the first half of what was asked, as a faulty
    server or proxy may (with a Content-Range to match)."""

    def __init__(self, inner, n: int):
        super().__init__(inner)
        self.n = n

    async def get_version(self, key, rng, etag):
        data = await self.inner.get_version(key, rng, etag)
        if self.n:
            self.n -= 1
            return data[: len(data) // 2]
        return data


def cut_once(mem: MemoryStore, root: Path, ttl: float) -> tuple[CachingStore, FaultyStore]:
    """A cache of 64 KiB blocks over ``mem`` whose next pinned GET is answered short."""
    faulty = FaultyStore(ThreadedStore(mem))
    store = CachingStore(ShortAnswers(faulty, 1), cache_size=1024 * KiB, ttl=ttl, block_size=64 * KiB,
                         disk=DiskCache(str(root), 1 << 20, "memory://dc"))
    return store, faulty


async def test_a_block_shorter_than_its_version_says_is_never_kept(tmp_path):
    """A short answer for a version whose size is known is Stale (the object is changing), is
    neither cached nor written to the cache dir, and the next read gets the whole block."""
    mem = MemoryStore("dc")
    data = os.urandom(100 * KiB)
    mem.set("k", data)
    store, faulty = cut_once(mem, tmp_path, ttl=5.0)
    etag = (await store.stat("k")).etag  # as the filesystem does before it reads
    with pytest.raises(Stale, match="the object is changing"):
        await store.get_version("k", ByteRange(0, 4096), etag)
    await store.disk.wait_idle()
    assert store.counters().get("diskcache.writes", 0) == 0
    etag = (await store.stat("k")).etag
    assert await store.get_version("k", None, etag) == data
    assert faulty.calls["get"] == 3  # the short block, then both blocks whole


@pytest.mark.parametrize("ask", ["entry", "stat"])
async def test_a_short_block_is_never_kept_with_a_ttl_of_0(tmp_path, ask):
    """With ``metadata_ttl=0`` nothing is kept for lookups, but the size of the version just
    looked up is remembered: a short answer for it is Stale as with a TTL, neither served as the
    whole object nor written to the cache dir; and every lookup still asks the backend."""
    mem = MemoryStore("dc")
    data = os.urandom(100 * KiB)
    mem.set("k", data)
    store, faulty = cut_once(mem, tmp_path, ttl=0.0)

    async def etag() -> str:  # what the filesystem pins a read to
        if ask == "entry":
            found = await store.entry("k")
            assert found is not None and found.info is not None
            return found.info.etag
        return (await store.stat("k")).etag

    with pytest.raises(Stale, match="the object is changing"):
        await store.get_version("k", None, await etag())
    await store.disk.wait_idle()
    assert store.counters().get("diskcache.writes", 0) == 0
    assert ("k", mem.stat("k").etag, 0) not in store.bytes
    assert await store.get_version("k", None, await etag()) == data
    assert faulty.calls[ask] == 2  # nothing kept: each lookup asked the backend


async def test_a_short_block_of_what_the_mount_stored_is_never_kept_with_a_ttl_of_0(tmp_path):
    """With ``metadata_ttl=0``, the version a write through the mount stored has a known size
    too (a handle reads it back with no lookup between): its short block is Stale."""
    mem = MemoryStore("dc")
    data = os.urandom(100 * KiB)  # larger than a block: not kept in memory as written
    store, _ = cut_once(mem, tmp_path, ttl=0.0)
    info = await store.set("k", data)
    with pytest.raises(Stale, match="the object is changing"):
        await store.get_version("k", None, info.etag)
    await store.disk.wait_idle()
    assert store.counters().get("diskcache.writes", 0) == 0
    assert await store.get_version("k", None, info.etag) == data


class OldVersionCut(WrapperStore):
    """Answers a GET pinned to the version ``etag`` (no longer the store's) with the first half of
    what that version holds there."""

    def __init__(self, inner, etag: str, data: bytes):
        super().__init__(inner)
        self.etag, self.data = etag, data

    async def get_version(self, key, rng, etag):
        if etag != self.etag:
            return await self.inner.get_version(key, rng, etag)
        data = rng.slice(self.data) if rng is not None else self.data
        return data[: len(data) // 2]


async def test_a_short_block_of_a_version_no_longer_current_is_never_kept(tmp_path):
    """What is cached about the key has moved on to a newer version (TTL over, new HEAD) while a
    handle still reads the old one: the old version's size is still known, so its short block is
    Stale, not the file's end, and is neither cached nor written to the cache dir."""
    mem = MemoryStore("dc")
    old = os.urandom(100 * KiB)
    mem.set("k", old)
    now = [1000.0]
    cut = OldVersionCut(FaultyStore(ThreadedStore(mem)), mem.stat("k").etag, old)
    store = CachingStore(cut, cache_size=1024 * KiB, ttl=1.0, block_size=64 * KiB, clock=lambda: now[0],
                         disk=DiskCache(str(tmp_path), 1 << 20, "memory://dc"))
    etag = (await store.stat("k")).etag  # a handle opens the old version
    mem.set("k", os.urandom(90 * KiB))  # another client replaces it
    now[0] += 2
    assert (await store.stat("k")).etag != etag  # the cache has seen the new one
    with pytest.raises(Stale, match="the object is changing"):
        await store.get_version("k", ByteRange(0, 4096), etag)
    await store.disk.wait_idle()
    assert store.counters().get("diskcache.writes", 0) == 0
    assert ("k", etag, 0) not in store.bytes


async def test_an_entry_shorter_than_its_version_says_is_deleted_and_fetched_again(tmp_path):
    """An entry kept before lengths were checked (a short answer cached as the block) is not
    served: it is deleted like a damaged one, and the block fetched."""
    mem = MemoryStore("dc")
    data = os.urandom(100 * KiB)
    mem.set("k", data)
    etag = mem.stat("k").etag
    early = DiskCache(str(tmp_path), 1 << 20, "memory://dc")
    await put(early, "k", data[: 10 * KiB], etag=etag)
    store, faulty = caching(mem, tmp_path)
    etag = (await store.stat("k")).etag
    assert await store.get_version("k", None, etag) == data
    assert faulty.calls["get"] == 2
    assert store.counters()["diskcache.corrupt"] == 1


async def test_a_broken_cache_dir_does_not_fail_reads(tmp_path):
    mem = MemoryStore("dc")
    mem.set("k", b"1" * 5000)
    (tmp_path / "f").write_text("")
    store, faulty = caching(mem, tmp_path / "f")
    assert await store.get("k") == b"1" * 5000
    await store.disk.wait_idle()
    assert faulty.calls["get"] == 1 and store.counters()["diskcache.errors"] == 1


# ---------------------------------------------------------------------- command line


def _refused(*args: str) -> str:
    """``nczfs mount`` exits 2 with one line."""
    return _one_line_error(run_nczfs("mount", *args))


def _src_and_mnt(tmp_path: Path) -> tuple[str, str]:
    for name in ("src", "mnt"):
        (tmp_path / name).mkdir()
    return str(tmp_path / "src"), str(tmp_path / "mnt")


@pytest.mark.parametrize(
    "where, reason",
    [("file", "not a directory"), ("file/sub", "cannot create it"), ("/sys/kernel", "cannot write in it"),
     ("mnt/cache", "inside the mount point")],
)
def test_an_unusable_cache_dir_is_refused_at_mount_time(tmp_path, where, reason):
    src, mnt = _src_and_mnt(tmp_path)
    (tmp_path / "file").write_text("")
    bad = str(tmp_path / where)
    for opts in (["--cache-dir", bad], ["-o", f"cache_dir={bad}"]):
        line = _refused(src, mnt, *opts)
        assert bad in line and reason in line, line
        assert not is_mounted(mnt)


def test_cache_dir_size_errors(tmp_path):
    src, mnt = _src_and_mnt(tmp_path)
    assert "needs --cache-dir" in _refused(src, mnt, "--cache-dir-size", "1G")
    assert "not a size" in _refused(src, mnt, "--cache-dir", str(tmp_path / "c"), "--cache-dir-size", "lots")
    assert "cache_dir_size=-1" in _refused(src, mnt, "-o", f"cache_dir={tmp_path / 'c'},cache_dir_size=-1")
    assert not is_mounted(mnt)


def test_cache_dir_options_reach_the_config(tmp_path):
    from nczfs.cli.mountargs import build_config
    from nczfs.cli.parser import build_parser

    (tmp_path / "mnt").mkdir()

    def config(*argv: str) -> MountConfig:
        return build_config(build_parser().parse_args(["mount", "s3://bkt/p", str(tmp_path / "mnt"), *argv]))

    assert config().cache_dir is None and config().cache_dir_size == 10 * 1024**3
    c = config("--cache-dir", str(tmp_path / "c"), "--cache-dir-size", "2G")
    assert (c.cache_dir, c.cache_dir_size) == (str(tmp_path / "c"), 2 * 1024**3) and (tmp_path / "c").is_dir()
    c = config("-o", f"cache_dir={tmp_path / 'd'},cache_dir_size=512M")
    assert (c.cache_dir, c.cache_dir_size) == (str(tmp_path / "d"), 512 * 1024**2)


def test_only_remote_stores_use_the_cache_dir(tmp_path):
    """The store's capabilities decide (each backend's: tests/store/test_backend_defaults.py)."""
    from dataclasses import replace

    from nczfs.daemon.stack import cached

    config = MountConfig(source=parse_source("memory://x"), mountpoint=str(tmp_path), cache_dir=str(tmp_path / "c"))
    for remote in (True, False):
        store = MemoryStore("dc")
        store.capabilities = replace(store.capabilities, remote=remote)
        assert (cached(ThreadedStore(store), config).disk is not None) is remote
    assert cached(ThreadedStore(store), replace(config, cache_dir=None)).disk is None


async def test_a_bug_in_the_disk_code_is_logged_never_raised(tmp_path, monkeypatch, caplog):
    cache = DiskCache(str(tmp_path), 1 << 20, "src")
    await put(cache, "k", b"x" * 1000)

    def broken(*args):
        raise ValueError("a bug")

    monkeypatch.setattr(cache, "_get_sync", broken)
    monkeypatch.setattr(cache, "_put_sync", broken)
    assert await cache.get("k", "e1", 64 * KiB, 0) is None
    await put(cache, "k2", b"y")
    assert cache.counters()["diskcache.errors"] == 2 and "a bug" in caplog.text


WRITER = """
import sys, trio
from nczfs.cache.disk import DiskCache

async def main(root, limit, me):
    cache = DiskCache(root, int(limit), "src")
    for i in range(60):
        cache.put_soon(f"{me}-{i}", "e1", 65536, 0, bytes([i]) * 1000)
        await cache.wait_idle()
        assert await cache.get(f"{me}-{i}", "e1", 65536, 0) == bytes([i]) * 1000

trio.run(main, *sys.argv[1:])
"""


def test_two_processes_writing_at_once_keep_one_bound(tmp_path):
    import fcntl
    import subprocess
    import sys

    limit = 12 * ENTRY
    diskcache.prepare_dir(str(tmp_path))  # creates .lock
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(limit), me]) for me in "ab"]
    peak = 0
    with open(tmp_path / ".lock", "rb") as lock:
        while any(p.poll() is None for p in procs):
            fcntl.flock(lock, fcntl.LOCK_EX)  # a consistent view: the writers change sizes only under it
            peak = max(peak, held_on_disk(tmp_path))
            fcntl.flock(lock, fcntl.LOCK_UN)
    assert [p.wait() for p in procs] == [0, 0]
    assert peak <= limit and held_on_disk(tmp_path) <= limit
    recorded = int((tmp_path / ".lock").read_bytes()[: HELD_WIDTH])
    assert recorded == held_on_disk(tmp_path)
