"""Early uploads (nczfs/fs/early_upload.py): a big file's parts are sent while it is being written;
the close sends the rest and completes. Over the memory store (its uploads keep parts aside,
as S3's multipart uploads do), through a FaultyStore, without a kernel. What the medium holds
is checked through the backdoor (``raw``), and so are the uploads left open (none may be).
The S3 backend's uploads are checked by the store conformance tests and the S3 mount tests."""

from __future__ import annotations

import os

import pytest
import trio.testing

from nczfs.fs import early_upload
from nczfs.toolbox.errors import KeyNotFound
from nczfs.fs.filesystem import Filesystem
from nczfs.fs.inodes import ROOT_INO
from nczfs.fs.options import FsOptions
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.threads import ThreadedStore

WRITE_NEW = os.O_WRONLY | os.O_CREAT
PART = 16 * 1024
WRITE = 4 * 1024


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch):
    monkeypatch.setattr(early_upload, "EARLY_FROM_BYTES", 4 * PART)


@pytest.fixture
def raw() -> MemoryStore:
    return MemoryStore("early", part_size=PART)


@pytest.fixture
def faulty(raw) -> FaultyStore:
    return FaultyStore(ThreadedStore(raw))


@pytest.fixture
def fs(faulty) -> Filesystem:
    return Filesystem(faulty, FsOptions(metadata_ttl=0))


def data_of(size: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) % 251 for i in range(size))


async def write_seq(fs: Filesystem, fh: int, data: bytes, start: int = 0) -> None:
    for off in range(start, len(data), WRITE):
        await fs.write(fh, off, data[off : off + WRITE])


async def close(fs: Filesystem, fh: int) -> None:
    await fs.flush(fh)
    await fs.release(fh)


async def test_parts_are_sent_while_the_file_is_written_and_the_close_completes(fs, raw, faulty):
    data = data_of(10 * PART + 1234)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    await trio.testing.wait_all_tasks_blocked()
    # the complete parts went while writing; nothing is visible yet
    assert faulty.calls["upload_part"] == 10 and len(raw.open_uploads) == 1
    with pytest.raises(KeyNotFound):
        raw.get("big")
    await close(fs, fh)
    assert raw.get("big") == data
    assert faulty.calls["upload_part"] == 11  # the close sent only the last, short part
    assert faulty.calls["set"] == 0 and raw.open_uploads == {}
    assert fs.early.counters() == {"write.early-uploads": 1, "write.early-uploads-completed": 1,
                                   "write.early-uploads-dropped": 0, "write.early-parts": 11}


async def test_a_small_file_is_not_sent_early(fs, raw, faulty):
    fh, _ = await fs.create(ROOT_INO, "small", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data_of(4 * PART - 1))
    await trio.testing.wait_all_tasks_blocked()
    await close(fs, fh)
    assert raw.get("small") == data_of(4 * PART - 1)
    assert faulty.calls["open_upload"] == 0 and faulty.calls["set"] == 1


async def test_the_close_sends_again_the_parts_that_writes_changed_after_they_were_sent(fs, raw, faulty):
    data = bytearray(data_of(8 * PART))
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, bytes(data))
    await trio.testing.wait_all_tasks_blocked()
    assert faulty.calls["upload_part"] == 8
    await fs.write(fh, 100, b"CHANGED")  # a header rewritten at the end, as netCDF does
    await fs.write(fh, 3 * PART - 2, b"span")  # across the end of part 3 into part 4
    data[100:107] = b"CHANGED"
    data[3 * PART - 2 : 3 * PART + 2] = b"span"
    await close(fs, fh)
    assert raw.get("big") == bytes(data)
    assert faulty.calls["upload_part"] == 8 + 3  # parts 1, 3 and 4 again
    assert fs.early.counters()["write.early-uploads-completed"] == 1 and faulty.calls["set"] == 0
    assert raw.open_uploads == {}


async def test_a_hole_filled_after_its_parts_were_sent(fs, raw, faulty):
    """Parts sent while they were still a hole (zeros) are sent again once written."""
    data = bytearray(data_of(9 * PART))
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, bytes(data[: 5 * PART]))
    await fs.write(fh, 8 * PART, bytes(data[8 * PART :]))
    await trio.testing.wait_all_tasks_blocked()
    await fs.write(fh, 5 * PART, bytes(data[5 * PART : 8 * PART]))
    await close(fs, fh)
    assert raw.get("big") == bytes(data)
    assert fs.early.counters()["write.early-uploads-completed"] == 1 and raw.open_uploads == {}


@pytest.mark.parametrize("step", ["upload_part", "complete_upload", "open_upload"])
async def test_a_failing_early_upload_leaves_the_close_to_store_the_file_whole(fs, raw, faulty, step):
    faulty.fail(step, times=1)
    data = data_of(7 * PART + 5)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    await close(fs, fh)  # no error: the whole upload stored it
    assert raw.get("big") == data
    assert faulty.calls["set"] == 1 and raw.open_uploads == {}
    counters = fs.early.counters()
    opened = 0 if step == "open_upload" else 1
    assert (counters["write.early-uploads"], counters["write.early-uploads-dropped"],
            counters["write.early-uploads-completed"]) == (opened, opened, 0), counters


async def test_the_close_reports_a_failure_of_the_whole_upload_after_an_early_one_failed(fs, raw, faulty):
    faulty.fail("upload_part", times=1)
    faulty.fail("set", times=1)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data_of(6 * PART))
    with pytest.raises(Exception, match="injected"):
        await fs.flush(fh)
    await fs.release(fh)
    assert raw.open_uploads == {}


@pytest.mark.parametrize("how", ["truncate", "unlink", "rename"])
async def test_truncate_unlink_and_rename_drop_the_early_upload(fs, raw, faulty, how):
    from nczfs.fs.attrs import SetattrRequest

    data = data_of(6 * PART)
    fh, attr = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    await trio.testing.wait_all_tasks_blocked()
    assert len(raw.open_uploads) == 1
    if how == "truncate":
        await fs.setattr(attr.ino, SetattrRequest(size=PART), fh)
        want, key = data[:PART], "big"
    elif how == "unlink":
        await fs.unlink(ROOT_INO, "big")
        want, key = None, "big"
    else:
        await fs.rename(ROOT_INO, "big", ROOT_INO, "moved")
        want, key = data, "moved"
    await trio.testing.wait_all_tasks_blocked()
    assert raw.open_uploads == {}
    counters = fs.early.counters()
    assert (counters["write.early-uploads"], counters["write.early-uploads-dropped"]) == (1, 1), counters
    await close(fs, fh)
    if want is None:
        assert raw.list_prefix("") == []
    else:
        assert raw.get(key) == want and raw.list_prefix("") == [key]
    assert raw.open_uploads == {}


async def test_fsync_completes_it_and_later_writes_send_the_file_again(fs, raw, faulty):
    data = data_of(12 * PART)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data[: 6 * PART])
    await fs.fsync(fh)
    assert raw.get("big") == data[: 6 * PART]
    await write_seq(fs, fh, data, start=6 * PART)
    await close(fs, fh)
    assert raw.get("big") == data
    assert fs.early.counters()["write.early-uploads-completed"] == 2 and raw.open_uploads == {}


async def test_parts_of_a_file_in_its_temp_file_are_read_from_it(faulty, raw, tmp_path):
    fs = Filesystem(faulty, FsOptions(metadata_ttl=0, spill_threshold=3 * PART, spill_dir=str(tmp_path)))
    data = data_of(9 * PART + 17)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    assert fs.write_memory.counters()["write.spilled-files"] == 1
    await close(fs, fh)
    assert raw.get("big") == data
    assert fs.early.counters()["write.early-uploads-completed"] == 1 and faulty.calls["set"] == 0


@pytest.mark.parametrize("name", ["c.0123456789abcdef0123456789abcdef.partial", ".c.Ab12Cd"], ids=["zarr", "rsync"])
async def test_a_temp_file_is_sent_under_its_final_name_and_the_rename_completes_it(fs, raw, faulty, name):
    """zarr's ``.partial`` and rsync's ``.NAME.XXXXXX`` files: their parts go to the final name
    while they are written, the close sends the rest, the rename completes the upload."""
    data = data_of(6 * PART + 3)
    fh, _ = await fs.create(ROOT_INO, name, 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    await close(fs, fh)
    assert faulty.calls["upload_part"] == 7 and list(raw.open_uploads.values()) == ["c"]
    assert raw.list_prefix("") == []  # nothing visible before the rename
    await fs.rename(ROOT_INO, name, ROOT_INO, "c")
    assert raw.get("c") == data and raw.list_prefix("") == ["c"] and raw.open_uploads == {}
    assert faulty.calls["set"] == 0 and fs.early.counters()["write.early-uploads-completed"] == 1


async def test_a_temp_file_changed_after_its_close_is_stored_as_changed_at_the_rename(fs, raw, faulty):
    name = ".c.Ab12Cd"
    data = bytearray(data_of(6 * PART))
    fh, attr = await fs.create(ROOT_INO, name, 0o644, WRITE_NEW)
    await write_seq(fs, fh, bytes(data))
    await close(fs, fh)
    fh = await fs.open(attr.ino, os.O_WRONLY)
    await fs.write(fh, 0, b"again")
    data[:5] = b"again"
    await close(fs, fh)
    await fs.rename(ROOT_INO, name, ROOT_INO, "c")
    await trio.testing.wait_all_tasks_blocked()
    assert raw.get("c") == bytes(data) and raw.list_prefix("") == ["c"] and raw.open_uploads == {}


async def test_a_temp_file_unlinked_after_its_close_leaves_no_upload(fs, raw, faulty):
    fh, _ = await fs.create(ROOT_INO, ".c.Ab12Cd", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data_of(6 * PART))
    await close(fs, fh)
    assert len(raw.open_uploads) == 1
    await fs.unlink(ROOT_INO, ".c.Ab12Cd")
    assert raw.open_uploads == {} and raw.list_prefix("") == []


async def test_a_store_without_uploads_stores_the_file_at_close(tmp_path):
    root = tmp_path / "medium"
    root.mkdir()
    raw = DirectoryStore(str(root))
    fs = Filesystem(FaultyStore(ThreadedStore(raw)), FsOptions(metadata_ttl=0))
    data = data_of(6 * PART)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    await close(fs, fh)
    assert raw.get("big") == data
    assert set(fs.early.counters().values()) == {0}  # nothing counted where the store has no uploads


async def test_a_big_file_made_where_another_client_made_one_meanwhile_is_refused_and_kept(fs, raw, faulty):
    """The completion of an early upload carries the file's condition (created: no object may be
    there): another client's object made meanwhile stays, the close fails with ESTALE, and the
    writer's data goes beside it, whole, as ``big.nczfs-conflict-<time>``; nothing is left open."""
    import errno

    from nczfs.toolbox.errors import Conflict, to_errno

    data = data_of(10 * PART + 99)
    fh, _ = await fs.create(ROOT_INO, "big", 0o644, WRITE_NEW)
    await write_seq(fs, fh, data)
    raw.set("big", b"another client's")
    with pytest.raises(Conflict) as refused:
        await fs.flush(fh)
    assert to_errno(refused.value) == errno.ESTALE and faulty.calls["complete_upload"] == 1
    await fs.release(fh)
    assert raw.get("big") == b"another client's" and raw.open_uploads == {}
    kept = [k for k in raw.list_prefix("") if k.startswith("big.nczfs-conflict-")]
    assert len(kept) == 1 and raw.get(kept[0]) == data and refused.value.kept == kept[0]
    assert fs.stats["write.conflicts"] == 1
