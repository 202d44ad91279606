import errno
import os
import stat
from pathlib import Path

import pytest

import nczfs.store.directory as directory_mod
from nczfs.errors import (
    BackendError,
    DirectoryNotEmpty,
    Exists,
    IsADirectory,
    KeyNotFound,
    NczfsError,
    NotADirectory,
    PermissionDenied,
    SourceError,
    from_os_error,
    to_errno,
)
from nczfs.store.directory import TMP_MARK, DirectoryStore
from nczfs.store.threads import ThreadedStore
from tests.store.conformance import StoreConformance


class TestDirectoryStore(StoreConformance):
    checks_writes = True
    checks_deletes = True

    @pytest.fixture
    def sync_store(self, tmp_path) -> DirectoryStore:
        self.root = tmp_path / "medium"
        self.root.mkdir()
        return DirectoryStore(str(self.root))

    def read_only_store(self) -> DirectoryStore:
        return DirectoryStore(str(self.root), read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        p = self.root / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    def get_raw(self, key: str) -> bytes | None:
        p = self.root / key
        return p.read_bytes() if p.is_file() else None


# ---------------------------------------------------------------------- directory-only


def on_disk(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "medium"
    r.mkdir()
    return r


async def test_failed_write_keeps_old_object_and_leaves_no_temp_file(root, monkeypatch):
    store = ThreadedStore(DirectoryStore(str(root)))
    await store.set("g/obj", b"old contents")
    before = on_disk(root)

    real_open = open

    class HalfFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(bytes(data[: len(data) // 2]))
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

    def failing_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return HalfFile(f) if "w" in mode else f

    monkeypatch.setattr(directory_mod, "open", failing_open, raising=False)
    with pytest.raises(NczfsError) as info:
        await store.set("g/obj", b"new contents that never fully arrive")
    assert to_errno(info.value) == errno.ENOSPC
    monkeypatch.undo()

    assert (root / "g" / "obj").read_bytes() == b"old contents"
    assert await store.get("g/obj") == b"old contents"
    assert on_disk(root) == before  # no temp file left behind
    assert [e.name for e in await store.list_dir("g")] == ["obj"]


async def test_failed_rename_into_place_keeps_old_object(root, monkeypatch):
    store = ThreadedStore(DirectoryStore(str(root)))
    await store.set("obj", b"old")

    def failing_replace(src, dst, **kw):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(directory_mod.os, "replace", failing_replace)
    with pytest.raises(NczfsError) as info:
        await store.set("obj", b"new")
    assert to_errno(info.value) == errno.EIO
    monkeypatch.undo()
    assert (root / "obj").read_bytes() == b"old"
    assert on_disk(root) == ["obj"]


async def test_write_below_a_file_fails_cleanly(root):
    store = ThreadedStore(DirectoryStore(str(root)))
    await store.set("f", b"a file")
    with pytest.raises(NotADirectory):
        await store.set("f/x", b"x")
    assert (root / "f").read_bytes() == b"a file"
    assert on_disk(root) == ["f"]


async def test_temp_files_are_never_listed(root):
    store = ThreadedStore(DirectoryStore(str(root)))
    await store.set("d/real", b"1")
    (root / "d" / f"{TMP_MARK}abc").write_bytes(b"in flight")
    (root / f"{TMP_MARK}def").write_bytes(b"in flight")
    assert [e.name for e in await store.list_dir("d")] == ["real"]
    assert [e.name for e in await store.list_dir("")] == ["d"]
    assert await store.list_prefix("") == ["d/real"]


async def test_special_files_are_entries_of_their_own_type_never_read_as_objects(root):
    os.mkfifo(root / "fifo")
    os.symlink("nowhere", root / "dangling")
    store = ThreadedStore(DirectoryStore(str(root)))
    listed = {e.name: stat.S_IFMT(e.attrs.mode) for e in await store.list_dir("")}
    assert listed == {"fifo": stat.S_IFIFO, "dangling": stat.S_IFLNK}
    assert await store.list_prefix("") == []
    assert await store.readlink("dangling") == "nowhere"
    with pytest.raises(KeyNotFound):
        await store.get("fifo")  # never opened: that would wait for a writer


@pytest.mark.parametrize("code, kind", [
    (errno.ENOENT, KeyNotFound), (errno.ENOTDIR, NotADirectory), (errno.EISDIR, IsADirectory),
    (errno.ENOTEMPTY, DirectoryNotEmpty), (errno.EEXIST, Exists), (errno.EACCES, PermissionDenied),
    (errno.EPERM, PermissionDenied), (errno.ENOSPC, BackendError), (errno.EIO, BackendError),
])
def test_an_os_error_of_a_local_file_is_the_error_it_stands_for_with_its_errno(code, kind):
    err = from_os_error("g/obj", OSError(code, os.strerror(code)))
    assert type(err) is kind and to_errno(err) == code and "'g/obj'" in str(err)


def test_root_must_be_a_directory(tmp_path):
    with pytest.raises(SourceError):
        DirectoryStore(str(tmp_path / "missing"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(SourceError):
        DirectoryStore(str(tmp_path / "file"))


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "hard-link"])
def test_rename_noreplace_falls_back_to_a_hard_link(tmp_path, monkeypatch, renameat2):
    """A write made only where no file is never replaces one, with ``renameat2(RENAME_NOREPLACE)``
    and where it is missing (a hard link, then the temp name removed)."""
    import nczfs.store.noreplace as noreplace
    from nczfs.errors import Conflict
    from nczfs.store.values import ABSENT

    if not renameat2:
        monkeypatch.setattr(noreplace, "_call", None)
    else:
        assert noreplace._call is not None
    s = DirectoryStore(str(tmp_path))
    made = s.set("a", b"mine", if_version=ABSENT)
    (tmp_path / "b").write_bytes(b"another program's")
    with pytest.raises(Conflict) as refused:
        s.set("b", b"mine", if_version=ABSENT)
    assert refused.value.found == s.stat("b").etag
    with pytest.raises(Conflict):
        s.rename("a", "b", if_version=ABSENT)
    s.rename("a", "c", if_version=ABSENT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "c"]  # no temp file left
    assert (tmp_path / "b").read_bytes() == b"another program's" and (tmp_path / "c").read_bytes() == b"mine"
    assert s.stat("c").etag == made.etag
