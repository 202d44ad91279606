"""The write-back path (nczfs/fs/writeback.py) without a kernel: a temp file's close stages its
data under its final name, its rename commits it there, an unlink or a newer content aborts it,
a failed commit loses nothing; an early upload sent under the final name is aborted when the
file is renamed elsewhere; flush_all over a store whose sync fails.

The store is a memory store that stages as S3 does (data sent, invisible until committed), with
what it staged, committed and aborted in view; every assertion is on what the store holds.
Early uploads at close, fsync and truncate: tests/fs/test_early_upload.py; flush_all with failing
uploads: tests/fs/test_filesystem.py::test_flush_all_stores_files_at_once_and_can_leave_failed_ones.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import uuid

import pytest
import trio.testing

from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError, to_errno
from nczfs.fs import early_upload, sentahead
from nczfs.fs.filesystem import Filesystem
from nczfs.fs.inodes import ROOT_INO
from nczfs.fs.options import FsOptions
from nczfs.store.values import ObjectInfo, Staged
from nczfs.store.memory.store import MemoryStore
from nczfs.store.threads import ThreadedStore

WRITE_NEW = os.O_WRONLY | os.O_CREAT
PART = 16 * 1024


class StagingStore(MemoryStore):
    """A memory store with ``stage``: the data is kept aside (``staged``: key by number) until
    ``commit`` stores it; ``committed`` and ``aborted`` list the keys of each end; ``sets`` every
    key stored by ``set``. ``refuse``: the operations (stage, commit, sync) that fail with EIO."""

    def __init__(self) -> None:
        super().__init__("writeback", part_size=PART)
        self.staged: dict[int, str] = {}
        self.committed: list[str] = []
        self.aborted: list[str] = []
        self.sets: list[str] = []
        self.refuse: set[str] = set()
        self._numbers = itertools.count(1)

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        self.sets.append(key)
        return super().set(key, data, if_version)

    def stage(self, key: str, data: bytes) -> Staged:
        if "stage" in self.refuse:
            raise BackendError(f"{key!r}: staging refused")
        number, kept = next(self._numbers), bytes(data)
        self.staged[number] = key

        def commit(if_version: str | None = None) -> ObjectInfo:
            if self.staged.pop(number, None) is None:
                raise BackendError(f"{key!r}: committed or aborted already")
            if "commit" in self.refuse:  # S3 aborts a completion that fails
                self.aborted.append(key)
                raise BackendError(f"{key!r}: commit refused")
            self.committed.append(key)
            return MemoryStore.set(self, key, kept, if_version)

        def abort() -> None:
            if self.staged.pop(number, None) is not None:
                self.aborted.append(key)

        return Staged(key, commit, abort)

    def sync(self) -> None:
        if "sync" in self.refuse:
            raise BackendError("sync refused")

    def get_or_none(self, key: str) -> bytes | None:
        try:
            return self.get(key)
        except KeyNotFound:
            return None


@pytest.fixture(autouse=True)
def small_sizes(monkeypatch):
    monkeypatch.setattr(sentahead, "STAGE_MIN_BYTES", 1000)
    monkeypatch.setattr(early_upload, "EARLY_FROM_BYTES", 4 * PART)


@pytest.fixture
def raw() -> StagingStore:
    return StagingStore()


@pytest.fixture
def fs(raw) -> Filesystem:
    return Filesystem(ThreadedStore(raw), FsOptions(metadata_ttl=0))


def temp_name(final: str) -> str:
    """zarr-python's temp name of ``final``."""
    return f"{final}.{uuid.uuid4().hex}.partial"


async def write_closed(fs: Filesystem, name: str, data: bytes, step: int = 4096) -> None:
    """Create ``name``, write ``data`` in ``step``-byte writes and close it (FLUSH, RELEASE)."""
    fh, _ = await fs.create(ROOT_INO, name, 0o644, WRITE_NEW)
    for off in range(0, len(data), step):
        await fs.write(fh, off, data[off : off + step])
    await fs.flush(fh)
    await fs.release(fh)


async def test_a_temp_files_close_stages_it_and_its_rename_commits_it_under_the_final_name(fs, raw):
    tmp, data = temp_name("c"), b"chunk" * 1000
    await write_closed(fs, tmp, data)
    assert list(raw.staged.values()) == ["c"]  # sent at close, under the final name
    assert raw.list_prefix("") == [] and raw.sets == []  # nothing visible yet
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert raw.committed == ["c"] and raw.staged == {} and raw.aborted == []
    assert raw.list_prefix("") == ["c"] and raw.get("c") == data and raw.sets == []
    assert (await fs.lookup(ROOT_INO, "c")).size == len(data)


async def test_a_small_temp_file_is_stored_once_by_its_rename(fs, raw):
    tmp = temp_name("c")
    await write_closed(fs, tmp, b"small")
    assert raw.staged == {} and raw.list_prefix("") == []
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert raw.sets == ["c"] and raw.get("c") == b"small" and raw.committed == []


async def test_unlink_of_a_staged_temp_file_aborts_what_it_staged(fs, raw):
    tmp = temp_name("c")
    await write_closed(fs, tmp, b"x" * 5000)
    assert list(raw.staged.values()) == ["c"]
    await fs.unlink(ROOT_INO, tmp)
    assert raw.staged == {} and raw.aborted == ["c"]
    assert raw.list_prefix("") == [] and raw.sets == [] and raw.committed == []


async def test_a_second_close_stages_the_new_content_and_aborts_the_old(fs, raw):
    tmp = temp_name("c")
    fh, attr = await fs.create(ROOT_INO, tmp, 0o644, WRITE_NEW)
    await fs.write(fh, 0, b"a" * 5000)
    await fs.flush(fh)
    await fs.flush(fh)  # unchanged: staged once
    assert list(raw.staged.values()) == ["c"] and raw.aborted == []
    await fs.write(fh, 5000, b"b" * 5000)
    await fs.flush(fh)
    await fs.release(fh)
    assert list(raw.staged.values()) == ["c"] and raw.aborted == ["c"]
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert raw.get("c") == b"a" * 5000 + b"b" * 5000 and raw.committed == ["c"] and raw.staged == {}


async def test_content_changed_after_staging_is_stored_whole_by_the_rename(fs, raw):
    """Staged, then written again with no close in between: the rename aborts the staged (old)
    content and stores the file as it is."""
    tmp = temp_name("c")
    fh, _ = await fs.create(ROOT_INO, tmp, 0o644, WRITE_NEW)
    await fs.write(fh, 0, b"a" * 5000)
    await fs.flush(fh)
    await fs.write(fh, 0, b"new")
    await fs.release(fh)  # a temp file's last close leaves it to its rename
    assert list(raw.staged.values()) == ["c"] and raw.list_prefix("") == []
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert raw.aborted == ["c"] and raw.committed == [] and raw.sets == ["c"]
    assert raw.get("c") == b"new" + b"a" * 4997


async def test_a_temp_file_renamed_to_another_name_is_stored_there_not_under_its_staged_one(fs, raw):
    tmp = temp_name("c")
    await write_closed(fs, tmp, b"y" * 5000)
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "other")
    assert raw.aborted == ["c"] and raw.committed == [] and raw.sets == ["other"]
    assert raw.list_prefix("") == ["other"] and raw.get("other") == b"y" * 5000


async def test_a_failed_commit_fails_the_rename_and_loses_nothing(fs, raw, caplog):
    tmp, data = temp_name("c"), b"z" * 5000
    await write_closed(fs, tmp, data)
    raw.refuse.add("commit")
    with caplog.at_level(logging.ERROR), pytest.raises(NczfsError) as info:
        await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert to_errno(info.value) == errno.EIO
    assert any("write of 'c' (renamed from" in r.getMessage() for r in caplog.records)
    assert raw.list_prefix("") == [] and raw.staged == {}
    raw.refuse.clear()
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")  # the data is still the file's: stored now
    assert raw.get("c") == data and raw.sets == ["c"]


async def test_a_stage_the_store_refuses_leaves_the_rename_to_store_the_file(fs, raw):
    raw.refuse.add("stage")
    tmp = temp_name("c")
    await write_closed(fs, tmp, b"w" * 5000)  # the close succeeds: staging is best effort
    assert raw.staged == {} and raw.list_prefix("") == []
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "c")
    assert raw.sets == ["c"] and raw.get("c") == b"w" * 5000


async def test_an_early_upload_under_the_final_name_is_aborted_by_a_rename_elsewhere(fs, raw):
    """A big temp file is sent in parts while written, under the name its own tells; renamed to
    another name, that upload is aborted and the file stored under the name it got."""
    tmp, data = temp_name("c"), bytes(range(256)) * (6 * PART // 256)
    fh, _ = await fs.create(ROOT_INO, tmp, 0o644, WRITE_NEW)
    for off in range(0, len(data), 4096):
        await fs.write(fh, off, data[off : off + 4096])
    await trio.testing.wait_all_tasks_blocked()
    assert list(raw.open_uploads.values()) == ["c"] and fs.early.parts >= 4  # parts sent before the close
    await fs.flush(fh)
    await fs.release(fh)
    assert list(raw.open_uploads.values()) == ["c"] and raw.list_prefix("") == []
    await fs.rename(ROOT_INO, tmp, ROOT_INO, "d")
    assert raw.open_uploads == {} and raw.list_prefix("") == ["d"] and raw.get("d") == data


async def test_flush_all_stores_every_file_and_reports_a_store_whose_sync_fails(fs, raw):
    fhs = []
    for name in ("a", "b"):
        fh, _ = await fs.create(ROOT_INO, name, 0o644, WRITE_NEW)
        await fs.write(fh, 0, name.encode() * 3)
        fhs.append(fh)
    assert fs.pending_bytes() == 6
    raw.refuse.add("sync")
    assert await fs.flush_all() == [raw.describe()]
    assert raw.get("a") == b"aaa" and raw.get("b") == b"bbb" and fs.pending_bytes() == 0
    raw.refuse.clear()
    assert await fs.flush_all() == []
    for fh in fhs:
        await fs.release(fh)
    assert raw.sets == ["a", "b"] or raw.sets == ["b", "a"]


async def test_an_upload_that_moves_the_mtime_tells_the_kernel(fs, raw):
    """The store's time of an upload becomes the file's mtime (what a new mount shows); the
    kernel, which holds the mtime create or the last write gave it, is told to ask again, or a
    stat would show the old mtime and the next setattr's answer the new one."""
    told: list[int] = []
    fs.attrs_changed = told.append
    fh, created = await fs.create(ROOT_INO, "f", 0o644, WRITE_NEW)
    await fs.write(fh, 0, b"data")
    await trio.sleep(0.01)  # the upload comes later than the write
    await fs.flush(fh)
    await fs.release(fh)
    stored = await fs.getattr(created.ino)
    assert stored.mtime_ns == raw.stat("f").mtime_ns > created.mtime_ns
    assert told == [created.ino]
