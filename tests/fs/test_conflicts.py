"""Writes another client got in before (nczfs/fs/conflicts.py), over the memory store, which
checks writes as S3 does (``if_version``), without a kernel; the medium is changed behind the
filesystem through the backdoor (``raw``), as another client would."""

from __future__ import annotations

from dataclasses import replace

import errno
import os

import pytest

from nczfs.toolbox.errors import Conflict, to_errno
from nczfs.fs.attrs import SetattrRequest
from nczfs.fs.filesystem import Filesystem
from nczfs.fs.inodes import ROOT_INO
from nczfs.fs.options import FsOptions
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.threads import ThreadedStore

WRITE_NEW = os.O_WRONLY | os.O_CREAT


@pytest.fixture
def raw() -> MemoryStore:
    return MemoryStore("conflicts")


@pytest.fixture
def fs(raw) -> Filesystem:
    return Filesystem(ThreadedStore(raw), FsOptions(metadata_ttl=60))


async def _ino(fs: Filesystem, name: str) -> int:
    await fs.lookup(ROOT_INO, name)
    node = fs.table.at(name)
    assert node is not None
    return node.ino


async def _write_new(fs: Filesystem, name: str, data: bytes) -> None:
    fh, _ = await fs.create(ROOT_INO, name, 0o644, WRITE_NEW)
    await fs.write(fh, 0, data)
    await fs.flush(fh)
    await fs.release(fh)


def _kept(raw: MemoryStore, name: str) -> list[bytes]:
    return [raw.get(k) for k in raw.list_prefix("") if k.startswith(f"{name}.nczfs-conflict-")]


async def test_an_rdwr_rewrite_over_another_clients_version_is_refused_and_kept(fs, raw):
    raw.set("f", b"v0")
    fh = await fs.open(await _ino(fs, "f"), os.O_RDWR)
    await fs.write(fh, 2, b"+mine")
    raw.set("f", b"theirs")
    with pytest.raises(Conflict) as refused:
        await fs.flush(fh)
    assert to_errno(refused.value) == errno.ESTALE and refused.value.expected != refused.value.found
    with pytest.raises(Conflict):  # every close of it meets the refusal; its data is kept once
        await fs.fsync(fh)
    await fs.release(fh)
    assert raw.get("f") == b"theirs" and _kept(raw, "f") == [b"v0+mine"]
    assert fs.stats["write.conflicts"] == 1 and fs.stats["write.overwrite-checked"] == 1


async def test_the_mounts_own_writes_move_the_version_it_replaces(fs, raw):
    """A truncate of a closed file, a rewrite, a rename over a file the mount stored: each
    replaces the version the mount itself made, never a conflict."""
    await _write_new(fs, "t", b"0123456789")
    await fs.setattr(await _ino(fs, "t"), SetattrRequest(size=4))
    await _write_new(fs, "tmp", b"renamed over")
    await fs.rename(ROOT_INO, "tmp", ROOT_INO, "t")
    fh = await fs.open(await _ino(fs, "t"), os.O_WRONLY | os.O_TRUNC)
    await fs.write(fh, 0, b"rewritten")
    await fs.flush(fh)
    await fs.release(fh)
    assert raw.get("t") == b"rewritten" and fs.stats["write.conflicts"] == 0


async def test_a_file_renamed_while_open_is_written_over_its_moved_version(fs, raw):
    """Found by tests/fs/test_filesystem_model.py (shrunk): a stored file open for writing,
    renamed (the memory store, as a copy on GCS and Azure, gives the moved object a new
    version), then written: the mount's own rename is no other writer (it was ESTALE)."""
    raw.set("b", b"")
    fh = await fs.open(await _ino(fs, "b"), os.O_RDWR)
    await fs.write(fh, 0, b"")
    await fs.rename(ROOT_INO, "b", ROOT_INO, "a")
    fh2 = await fs.open(await _ino(fs, "a"), os.O_RDWR)
    await fs.write(fh2, 0, b"mine")
    await fs.flush(fh2)
    await fs.release(fh2)
    await fs.release(fh)
    assert raw.get("a") == b"mine" and raw.list_prefix("") == ["a"] and fs.stats["write.conflicts"] == 0


async def test_a_rename_of_an_open_file_asks_the_store_nothing_more(raw):
    """The rename answers the moved object's version (the memory store's copy makes a new one):
    the descriptor still open writes over that one without a stat of its own after the rename."""
    counted = FaultyStore(ThreadedStore(raw))
    fs = Filesystem(counted, FsOptions(metadata_ttl=60))
    raw.set("b", b"v0")
    fh = await fs.open(await _ino(fs, "b"), os.O_RDWR)
    await fs.write(fh, 0, b"v1")
    stats_before = counted.calls["stat"]
    await fs.rename(ROOT_INO, "b", ROOT_INO, "a")
    assert counted.calls["stat"] == stats_before and counted.calls["rename"] == 1
    await fs.flush(fh)
    await fs.release(fh)
    assert raw.get("a") == b"v1" and raw.list_prefix("") == ["a"] and fs.stats["write.conflicts"] == 0

async def test_without_checks_the_last_writer_wins(raw):
    """A store that does not check writes (-o overwrite=last_writer_wins, a server that ignores
    conditions): no condition is sent, the close replaces the other client's object."""
    raw.capabilities = replace(raw.capabilities, checks_writes=False)
    fs = Filesystem(ThreadedStore(raw), FsOptions(metadata_ttl=60))
    raw.set("f", b"v0")
    fh = await fs.open(await _ino(fs, "f"), os.O_WRONLY | os.O_TRUNC)
    await fs.write(fh, 0, b"mine")
    raw.set("f", b"theirs")
    await fs.flush(fh)
    await fs.release(fh)
    assert raw.get("f") == b"mine" and fs.stats["write.overwrite-checked"] == 0


async def test_a_rename_replaces_the_version_the_mount_read_last(fs, raw):
    """A reader that found the object changed under it read the new version: a rename over the
    file replaces that one, not the version known before; another client's later change is refused."""
    raw.set("r", b"v0")
    ino = await _ino(fs, "r")
    raw.set("r", b"v1 by another client")
    fh = await fs.open(ino, os.O_RDONLY)
    assert await fs.read(fh, 0, 100) == b"v1 by another client"
    await fs.release(fh)
    await _write_new(fs, "tmp", b"mine")
    await fs.rename(ROOT_INO, "tmp", ROOT_INO, "r")
    assert raw.get("r") == b"mine"
    fh = await fs.open(await _ino(fs, "r"), os.O_RDONLY)
    assert await fs.read(fh, 0, 100) == b"mine"
    await fs.release(fh)
    await _write_new(fs, "tmp2", b"mine again")
    raw.set("r", b"v2 by another client")
    with pytest.raises(Conflict):
        await fs.rename(ROOT_INO, "tmp2", ROOT_INO, "r")
    assert raw.get("r") == b"v2 by another client" and raw.get("tmp2") == b"mine again"


async def test_an_unlink_removes_only_the_version_the_mount_saw(fs, raw):
    """Where the store checks deletes (S3: DeleteObject's If-Match): an unlink of a file another
    client replaced since this mount saw it fails with ESTALE and the object stays; the mount's
    own rewrite moves the version it removes."""
    raw.set("d", b"v0")
    await _ino(fs, "d")
    raw.set("d", b"theirs")
    with pytest.raises(Conflict) as refused:
        await fs.unlink(ROOT_INO, "d")
    assert to_errno(refused.value) == errno.ESTALE and raw.get("d") == b"theirs"
    assert fs.stats["write.conflicts"] == 1
    await _write_new(fs, "mine", b"one")
    await _write_new(fs, "mine", b"two")
    await fs.unlink(ROOT_INO, "mine")
    assert raw.list_prefix("") == ["d"]


class _ChangedAfterRead(MemoryStore):
    """A store without in-place truncate whose next read of ``key`` is followed by another
    client's set of it (between the truncate's read and its store)."""

    def __init__(self) -> None:
        super().__init__("changed-after-read")
        self.change: tuple[str, bytes] | None = None

    def get_version(self, key, rng, etag):
        data = super().get_version(key, rng, etag)
        if self.change and self.change[0] == key:
            (key, theirs), self.change = self.change, None
            self.set(key, theirs)
        return data


async def test_a_truncate_on_a_store_without_in_place_truncate_rewrites_the_current_version():
    """Zip, S3, GCS, Azure (no in-place truncate): a truncate of a closed file is a rewrite of
    the object, read at the version the mount knew or, changed since its lookup, at the current
    one; another client's change between that read and the store is refused (ESTALE) and kept."""
    raw = _ChangedAfterRead()
    fs = Filesystem(ThreadedStore(raw), FsOptions(metadata_ttl=60))
    raw.set("f", b"v0 original")
    ino = await _ino(fs, "f")
    raw.set("f", b"theirs, newer")  # between the lookup and the truncate
    await fs.setattr(ino, SetattrRequest(size=6))
    assert raw.get("f") == b"theirs" and fs.stats["write.conflicts"] == 0
    raw.change = ("f", b"changed between read and store")
    with pytest.raises(Conflict) as refused:
        await fs.setattr(ino, SetattrRequest(size=3))
    assert to_errno(refused.value) == errno.ESTALE
    assert raw.get("f") == b"changed between read and store" and fs.stats["write.conflicts"] == 1
    assert _kept(raw, "f") == [b"the"]  # the refused truncate's bytes, kept beside as a close's
