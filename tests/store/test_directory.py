from dataclasses import replace
import errno
import os
import stat
from pathlib import Path

import pytest

import nczfs.store.directory.store as directory_mod
from nczfs.toolbox.errors import (
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
from nczfs.store.directory.store import TMP_MARK, DirectoryStore
from nczfs.store.threads import ThreadedStore
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS


class TestDirectoryStore(StoreConformance):
    optional = OFFERS[DirectoryStore]
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
    from nczfs.toolbox.errors import Conflict
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


#: another process's change of a backing file: rewritten in place, or a new file renamed over it
OTHER_PROCESS = {
    "in-place": "import sys; f = open(sys.argv[1], 'r+b'); f.write(b'THEIRS'); f.close()",
    "renamed-over": "import os, sys; open(sys.argv[1] + '.o', 'wb').write(b'theirs'); os.replace(sys.argv[1] + '.o', sys.argv[1])",
}


@pytest.mark.parametrize("how", sorted(OTHER_PROCESS))
@pytest.mark.parametrize("op", ["set", "rename", "delete"])
def test_a_change_between_the_check_and_the_rename_is_not_replaced(tmp_path, monkeypatch, how, op):
    """Another process changes the file right after the version was compared, right before the
    rename (the store's fault hook runs it there): the swap (``RENAME_EXCHANGE``) finds it, puts
    the other process's file back and refuses the write; nothing of the mount's is left behind.
    An unlink the same: the file is renamed aside first, found changed and put back."""
    import subprocess
    import sys

    import nczfs.store.fileversions as fileversions
    from nczfs.toolbox.errors import Conflict

    swaps: list[bool] = []  # each swap made: a write is refused by the swap, not the plain rename's check
    exchange = fileversions.rename_exchange
    monkeypatch.setattr(fileversions, "rename_exchange", lambda *a, **kw: swaps.append(exchange(*a, **kw)) or swaps[-1])
    s = DirectoryStore(str(tmp_path))
    (tmp_path / "t").write_bytes(b"before")
    os.utime(tmp_path / "t", ns=(10**18, 10**18))  # an mtime long past: a write in place makes another
    seen = s.stat("t").etag
    s.before_replace = lambda key: subprocess.run([sys.executable, "-c", OTHER_PROCESS[how], str(tmp_path / key)],
                                                  check=True, timeout=60)
    if op == "rename":
        (tmp_path / "zarr.partial").write_bytes(b"mine")
    with pytest.raises(Conflict) as refused:
        {"set": lambda: s.set("t", b"mine", if_version=seen), "delete": lambda: s.delete("t", if_version=seen),
         "rename": lambda: s.rename("zarr.partial", "t", if_version=seen)}[op]()
    assert refused.value.expected == seen and refused.value.found == s.stat("t").etag != seen
    assert swaps == ([] if op == "delete" else [True, True])  # swapped, then swapped back
    assert (tmp_path / "t").read_bytes() == (b"THEIRS" if how == "in-place" else b"theirs")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["t", "zarr.partial"] if op == "rename" else ["t"])
    if op == "rename":
        assert (tmp_path / "zarr.partial").read_bytes() == b"mine"
    s.before_replace = None
    s.set("t", b"mine", if_version=s.stat("t").etag)  # the version there now: replaced, the old one gone
    assert (tmp_path / "t").read_bytes() == b"mine"
    assert sorted(os.listdir(tmp_path)) == (["t", "zarr.partial"] if op == "rename" else ["t"])
    s.delete("t", if_version=s.stat("t").etag)  # the version there: removed
    assert sorted(os.listdir(tmp_path)) == (["zarr.partial"] if op == "rename" else [])


def test_without_rename_exchange_the_version_is_compared_right_before_the_rename(tmp_path, monkeypatch):
    """Where ``renameat2`` is missing (or the file system cannot swap), a rewrite compares the
    file's ``lstat`` right before a plain rename: a change made before that is refused."""
    import nczfs.store.noreplace as noreplace
    from nczfs.toolbox.errors import Conflict

    monkeypatch.setattr(noreplace, "_call", None)
    s = DirectoryStore(str(tmp_path))
    seen = s.set("t", b"v0").etag
    s.before_replace = lambda key: os.replace(tmp_path / "o", tmp_path / key)
    (tmp_path / "o").write_bytes(b"theirs")
    with pytest.raises(Conflict):
        s.set("t", b"mine", if_version=seen)
    assert (tmp_path / "t").read_bytes() == b"theirs" and os.listdir(tmp_path) == ["t"]
    s.before_replace = None
    s.set("t", b"mine", if_version=s.stat("t").etag)
    assert (tmp_path / "t").read_bytes() == b"mine" and os.listdir(tmp_path) == ["t"]


def test_a_truncate_cuts_only_the_version_it_names(tmp_path):
    """``truncate`` with ``if_version`` cuts the file only while it is that version (its
    ``fstat`` on the descriptor it cuts through); another version stays whole (Conflict)."""
    from nczfs.toolbox.errors import Conflict

    s = DirectoryStore(str(tmp_path))
    seen = s.set("t", b"version zero").etag
    (tmp_path / "t").write_bytes(b"another program's")  # in place: same inode, another size
    with pytest.raises(Conflict) as refused:
        s.truncate("t", 2, if_version=seen)
    assert refused.value.found == s.stat("t").etag and (tmp_path / "t").read_bytes() == b"another program's"
    cut = s.truncate("t", 7, if_version=s.stat("t").etag)
    assert (tmp_path / "t").read_bytes() == b"another" and cut.etag == s.stat("t").etag
    assert s.truncate("t", 3).size == 3  # no version named: cut whatever is there


def _kernel() -> tuple[int, ...]:
    import platform
    import re

    return tuple(int(n) for n in re.findall(r"\d+", platform.release())[:2])


@pytest.mark.skipif(_kernel() < (6, 13), reason="multigrain timestamps came with Linux 6.13")
def test_a_write_in_place_right_after_the_version_was_taken_is_a_new_version(tmp_path):
    """A file whose mtime was read (the ``stat`` that took its version) gets a fine-grained mtime
    at its next change (Linux 6.13's multigrain timestamps, on ext4 here): a write in place of
    the same size right after is a new version, never within one tick of the coarse clock."""
    s = DirectoryStore(str(tmp_path))
    s.set("t", b"0" * 16)
    fd = os.open(tmp_path / "t", os.O_WRONLY)
    try:
        unseen = 0
        for n in range(2000):
            version = s.stat("t").etag
            os.pwrite(fd, b"%016d" % n, 0)
            unseen += s.stat("t").etag == version
    finally:
        os.close(fd)
    assert unseen == 0


@pytest.mark.parametrize("medium", ["directory", "memory"])
def test_list_prefix_names_the_entries_that_are_objects_by_one_rule(tmp_path, medium):
    """``DirEntry.is_object`` is the one rule for what ``list_prefix`` names (the stores' own
    and PresentingStore's): a local directory holds a symlink or fifo as itself, no object; a
    store without ``live_meta`` holds it as an object, named like any other."""
    from nczfs.store.memory.store import MemoryStore
    from nczfs.store.values import Meta

    s = DirectoryStore(str(tmp_path)) if medium == "directory" else MemoryStore("one-rule")
    s.set("d/file", b"x")
    s.make_node("d/link", Meta(mode=stat.S_IFLNK | 0o777), "file")
    s.make_node("d/fifo", Meta(mode=stat.S_IFIFO | 0o644))
    entries = {e.name: e for e in s.list_dir("d")}
    assert sorted(entries) == ["fifo", "file", "link"]
    objects = sorted(f"d/{n}" for n, e in entries.items() if e.is_object(s.capabilities.live_meta))
    assert s.list_prefix("d") == objects == (["d/file"] if medium == "directory" else ["d/fifo", "d/file", "d/link"])


def test_read_small_gives_each_entry_and_the_bytes_of_small_regular_files_only(tmp_path):
    """A burst read ahead (``nczfs.cache.localahead``): entries as ``entry`` gives them; bytes for
    regular files up to the limit, never a symlink's target, a fifo's or a directory's."""
    s = DirectoryStore(str(tmp_path))
    s.set("d/small", b"x" * 10)
    s.set("d/empty", b"")
    s.set("d/big", b"y" * 100)
    s.mkdir("d/sub")
    os.symlink("small", tmp_path / "d" / "link")
    os.mkfifo(tmp_path / "d" / "fifo")
    fds = len(os.listdir("/proc/self/fd"))
    got = {k: (e, data) for k, e, data in s.read_small([f"d/{n}" for n in ("small", "empty", "big", "sub", "link", "fifo",
                                                                          "missing")], 50)}
    assert len(os.listdir("/proc/self/fd")) == fds  # every file it opened is closed
    assert sorted(got) == ["d/big", "d/empty", "d/fifo", "d/link", "d/small", "d/sub"]
    assert {k: data for k, (_, data) in got.items()} == {"d/small": b"x" * 10, "d/empty": b"", "d/big": None,
                                                         "d/sub": None, "d/link": None, "d/fifo": None}
    def same(e):  # the read may have moved the atime since
        return e.name, e.is_dir, e.info and (e.info.etag, e.info.size), (e.meta or e.info.meta).mode

    assert all(same(e) == same(s.entry(k)) for k, (e, _) in got.items())
