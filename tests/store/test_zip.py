import errno
import os
import struct
import zipfile

import pytest

from nczfs.store.values import ByteRange
from nczfs.toolbox.errors import BackendError, SourceError
from nczfs.store.zip import store as zip_mod
from nczfs.store import fileversions, noreplace
from nczfs.store.zip.store import ZipStore
from nczfs.store.zip.staging import staging_dir
from tests.store.conformance import StoreConformance
from tests.ziputil import rewrite_zip, zip_members
from tests.store.offers import OFFERS


class ZipConformance(StoreConformance):
    optional = OFFERS[ZipStore]
    checks_writes = True
    checks_deletes = True

    layout = "netcdf"

    @pytest.fixture
    def sync_store(self, tmp_path) -> ZipStore:
        self.archive = tmp_path / "medium.zarr.zip"
        self.medium = ZipStore(str(self.archive), layout=self.layout)
        yield self.medium
        self.medium.close()

    def read_only_store(self) -> ZipStore:
        self.medium.sync()
        return ZipStore(str(self.archive), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        self.medium.sync()
        rewrite_zip(self.archive, {key: data}, default_layout=self.layout)

    def get_raw(self, key: str) -> bytes | None:
        self.medium.sync()
        return zip_members(self.archive, self.layout).get(key)

    async def test_layout_of_the_written_archive(self, store):
        await store.set("g/v/0", b"chunk")
        await store.sync()
        names = zipfile.ZipFile(self.archive).namelist()
        if self.layout == "netcdf":
            assert names == ["medium.zarr/", "medium.zarr/g/", "medium.zarr/g/v/", "medium.zarr/g/v/0"]
        else:
            assert names == ["g/v/0"]


class TestZipNetcdfLayout(ZipConformance):
    layout = "netcdf"


class TestZipFlatLayout(ZipConformance):
    layout = "flat"


# ---------------------------------------------------------------------- zip-only: commits and crashes


def make_zip(path, members: dict[str, bytes], top: str | None = "ds") -> None:
    with zipfile.ZipFile(path, "w") as zf:
        if top:
            zf.mkdir(top + "/")
        for k, v in members.items():
            zf.writestr(f"{top}/{k}" if top else k, v)


def die(store: ZipStore) -> None:
    """What a kill -9 leaves: nothing closed or cleaned up, only the lock released (by the kernel)."""
    os.close(store.staging._lock_fd)


def test_second_writable_store_on_one_archive_is_refused(tmp_path):
    a = ZipStore(str(tmp_path / "x.zip"))
    try:
        with pytest.raises(SourceError, match="already mounted read/write"):
            ZipStore(str(tmp_path / "x.zip"))
    finally:
        a.close()


def swap_then_die(src: str, dst: str, **fds) -> bool:
    """``rename_exchange`` killed right after it swapped (tests/mount/test_zip.py uses it too)."""
    noreplace.rename_exchange(src, dst, **fds)
    raise SystemExit


@pytest.mark.parametrize("dies", ["before-rename", "after-swap", "after-rename", "no-commit"])
def test_staged_writes_survive_a_crash_at_any_point_of_a_commit(tmp_path, monkeypatch, dies):
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"old": b"old", "gone": b"x"})
    s = ZipStore(str(archive))
    s.set("new/a", b"A")
    s.delete("gone")
    s.rename("old", "moved")
    if dies == "before-rename":  # new.zip written and fsynced, the marker too, no rename yet
        monkeypatch.setattr(fileversions, "rename_exchange", lambda src, dst, **fds: (_ for _ in ()).throw(SystemExit))
    elif dies == "after-swap":  # swapped: the new archive in place, the old one in new.zip, unchecked
        monkeypatch.setattr(fileversions, "rename_exchange", swap_then_die)
    elif dies == "after-rename":  # the new archive is in place, the staging area not yet cleaned
        monkeypatch.setattr(zip_mod.Staging, "committed", lambda self, ident: (_ for _ in ()).throw(SystemExit))
    if dies != "no-commit":
        with pytest.raises(SystemExit):
            s.sync()
    monkeypatch.undo()
    left = set(os.listdir(staging_dir(str(archive))))
    assert {"before-rename": {"new.zip", "committing"}, "after-swap": {"new.zip", "committing"},
            "after-rename": {"committing"}, "no-commit": set()}[dies] <= left
    die(s)
    with zipfile.ZipFile(archive) as zf:
        assert zf.testzip() is None
    want = {"new/a": b"A", "moved": b"old"}
    assert zip_members(archive) in (want, {"old": b"old", "gone": b"x"})
    s2 = ZipStore(str(archive))  # recovers
    assert {k: s2.get(k) for k in s2.list_prefix("")} == want
    s2.close()
    assert zip_members(archive) == want
    assert not os.path.exists(staging_dir(str(archive)))


@pytest.fixture
def crashed(tmp_path):
    """An archive holding "a", and "b" staged by a store that then died."""
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"a": b"1"})
    s = ZipStore(str(archive))
    s.set("b", b"2")
    die(s)
    return archive


def test_a_journal_made_on_another_archive_is_set_aside_not_applied(crashed, tmp_path, caplog):
    archive = crashed
    make_zip(archive, {"a": b"changed by someone else"})
    s2 = ZipStore(str(archive))
    assert s2.list_prefix("") == ["a"] and s2.get("a") == b"changed by someone else"
    s2.close()
    orphans = [p for p in tmp_path.iterdir() if "orphaned" in p.name]
    assert len(orphans) == 1 and (orphans[0] / "journal").exists()
    assert "NOT applied" in caplog.text


def test_a_torn_last_journal_line_is_ignored(tmp_path):
    archive = tmp_path / "ds.zip"
    s = ZipStore(str(archive))
    s.set("a", b"1")
    s.set("b", b"2")
    die(s)
    journal = os.path.join(staging_dir(str(archive)), "journal")
    with open(journal, "rb+") as f:
        f.truncate(os.path.getsize(journal) - 5)
    s2 = ZipStore(str(archive))
    assert s2.list_prefix("") == ["a"]
    s2.close()


def test_archive_replaced_behind_the_store_keeps_staged_changes_on_top(tmp_path):
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"a": b"1", "b": b"2"})
    s = ZipStore(str(archive))
    s.set("mine", b"staged")
    rewrite_zip(archive, {"theirs": b"new", "a": b"1 changed"})
    assert s.list_prefix("") == ["a", "b", "mine", "theirs"]
    assert s.get("a") == b"1 changed" and s.get("mine") == b"staged"
    s.close()
    assert zip_members(archive) == {"a": b"1 changed", "b": b"2", "mine": b"staged", "theirs": b"new"}


def test_read_only_store_reports_staged_writes_left_by_a_crash(crashed, caplog):
    archive = crashed
    ro = ZipStore(str(archive), read_only=True)
    assert ro.list_prefix("") == ["a"]
    ro.close()
    assert "holds staged writes of an interrupted mount" in caplog.text


def test_unchanged_members_are_copied_raw_not_recompressed(tmp_path):
    archive = tmp_path / "ds.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.mkdir("ds/")
        zf.writestr("ds/text", b"abc" * 10000)
    raw_before = _raw_member(archive, "ds/text")
    s = ZipStore(str(archive))
    assert s.get("text") == b"abc" * 10000
    s.set("other", b"x")
    s.sync()
    assert _raw_member(archive, "ds/text") == raw_before  # the same deflate bytes (level 1, not default)
    info = zipfile.ZipFile(archive).getinfo("ds/other")
    assert info.compress_type == zipfile.ZIP_STORED
    s.close()


def _raw_member(archive, name) -> bytes:
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
    data = archive.read_bytes()
    n, m = struct.unpack("<HH", data[info.header_offset + 26: info.header_offset + 30])
    start = info.header_offset + 30 + n + m
    return data[start: start + info.compress_size]


def test_zip64_more_than_65535_members(tmp_path):
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(70_000):
            zf.writestr(f"c/{i}", b"")
        zf.writestr("c/last", b"end")
    s = ZipStore(str(archive))
    assert s.layout == "flat" and len(s.list_dir("c")) == 70_001
    assert s.get("c/last") == b"end"
    s.set("c/new", b"new")
    s.sync()
    s.close()
    with zipfile.ZipFile(archive) as zf:
        assert len(zf.infolist()) == 70_002 and zf.read("c/new") == b"new" and zf.read("c/last") == b"end"


def test_members_beyond_4_gib_are_read_by_offset(tmp_path):
    """ZIP64 offsets: members placed after a 5 GiB hole (a sparse file, no disk used)."""
    archive = tmp_path / "far.zip"
    with open(archive, "wb") as f:
        f.seek(5 << 30)
        with zipfile.ZipFile(f, "w") as zf:
            zf.writestr("far/x", b"beyond four gibibytes")
            zf.writestr("far/y", b"y" * 1000, compress_type=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(archive) as zf:
        assert zf.getinfo("far/x").header_offset > 0xFFFFFFFF
    s = ZipStore(str(archive), read_only=True)
    assert s.get("x", ByteRange(7, 11)) == b"four" and s.get("y") == b"y" * 1000
    s.close()


def test_members_outside_the_dataset_directory_are_kept_but_not_shown(tmp_path):
    archive = tmp_path / "ds.zip"
    make_zip(archive, {".zgroup": b"{}"})
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr(".zgroup", b"stray")  # at the archive root, beside the dataset directory "ds/"
    s = ZipStore(str(archive))
    assert s.list_prefix("") == [".zgroup"] and s.get(".zgroup") == b"{}"
    s.set("new", b"n")
    s.close()
    with zipfile.ZipFile(archive) as zf:
        assert zf.read(".zgroup") == b"stray" and zf.read("ds/new") == b"n"


def test_a_failed_commit_keeps_the_archive_and_the_staged_writes(tmp_path, monkeypatch):
    archive = tmp_path / "ds.zip"
    make_zip(archive, {"a": b"1"})
    before = archive.read_bytes()
    s = ZipStore(str(archive))
    s.set("b", b"2")
    real = zip_mod.ZipStore._write_archive

    def disk_full(self, tmp):
        real(self, tmp)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(zip_mod.ZipStore, "_write_archive", disk_full)
    with pytest.raises(BackendError) as info:
        s.sync()
    assert info.value.errno == errno.ENOSPC and "staged writes kept" in str(info.value)
    assert archive.read_bytes() == before
    assert os.listdir(staging_dir(str(archive))) != [] and s.get("b") == b"2"
    monkeypatch.undo()
    s.sync()
    assert zip_members(archive) == {"a": b"1", "b": b"2"}
    s.close()


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["deflate", "bzip2", "lzma"])
def test_compressed_members_are_inflated_once_and_stored_ones_read_by_range(tmp_path, monkeypatch, method):
    archive = tmp_path / "ds.zip"
    data = os.urandom(300_000) + bytes(700_000)
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("packed", data, compress_type=method)
        zf.writestr("stored", data)
    s = ZipStore(str(archive), read_only=True)
    opened, preads = [], []
    real_open, real_pread = s._zf.open, os.pread
    monkeypatch.setattr(s._zf, "open", lambda *a, **k: opened.append(a[0].filename) or real_open(*a, **k))
    monkeypatch.setattr(zip_mod.os, "pread", lambda fd, n, off: preads.append(n) or real_pread(fd, n, off))
    for start in (0, 5000, 999_990):
        assert s.get("packed", ByteRange(start, start + 10)) == data[start:start + 10]
    assert opened == ["packed"]  # decompressed once, then served from the cache
    assert s.get("stored", ByteRange(500_000, 500_010)) == data[500_000:500_010]
    assert max(preads) <= 30 and 10 in preads  # the local header, then the 10 bytes asked for
    s.close()


def test_a_stored_member_larger_than_4_gib_is_read_by_range(tmp_path):
    """ZIP64 sizes: a 4.5 GiB stored member (sparse: zeros but for a marker), read at 4.4 GiB."""
    archive = tmp_path / "huge.zip"
    size, at = 9 << 29, (4 << 30) + (400 << 20)
    with open(archive, "w+b") as f:
        zf = zipfile.ZipFile(f, "w")
        zf.mkdir("huge/")
        info = zipfile.ZipInfo("huge/v/0")
        info.file_size = info.compress_size = size
        info.CRC = 0  # range reads do not check it
        f.seek(zf.start_dir)
        info.header_offset = f.tell()
        f.write(info.FileHeader(zip64=True))
        data_start = f.tell()
        f.seek(data_start + at)
        f.write(b"marker")
        f.seek(data_start + size)
        zf.filelist.append(info)
        zf.NameToInfo[info.filename] = info
        zf.start_dir = f.tell()
        zf._didModify = True
        zf.close()
    s = ZipStore(str(archive), read_only=True)
    assert s.stat("v/0").size == size
    assert s.get("v/0", ByteRange(at - 2, at + 8)) == b"\0\0marker\0\0"
    assert s.get("v/0", ByteRange(size - 3)) == b"\0\0\0"
    s.close()
