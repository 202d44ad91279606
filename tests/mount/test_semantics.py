"""One test per claim of docs/SEMANTICS.md, through a real mount with plain ``os.*`` calls.

Where bytes should (or should not yet) have reached the store, the backend is read through
its backdoor. Keep the claims in docs/SEMANTICS.md and these tests in step: every claim there
names the test here that backs it.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
import shlex
import stat
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.helpers import as_user, counts, mounted
from tests.mount.trees import DIR, as_stored, backend_dirs, backend_snapshot, keeps_directories

pytestmark = pytest.mark.fuse

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(None, use_errno=True)


def renameat2(src: os.PathLike, dst: os.PathLike, flags: int) -> None:
    at_fdcwd = -100
    if _libc.renameat2(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(src))


def err(fn, *args, **kwargs) -> int | None:
    """The errno ``fn`` fails with, or None if it succeeds (its result is discarded)."""
    try:
        fn(*args, **kwargs)
    except OSError as exc:
        return exc.errno
    return None


def write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


@contextlib.contextmanager
def checked_mount(backend, mnt: Path, *args: str):
    """A second or special mount of ``backend`` (the ``mount`` fixture's log check included)."""
    with mounted(backend, mnt, *args) as m:
        yield m
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, f"daemon log has errors:\n{text}"


# ---------------------------------------------------------------------- open / create


def test_create_is_visible_at_once_and_stored_at_close(mount):
    p = mount.path / "new"
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        st = os.stat(p)
        assert stat.S_ISREG(st.st_mode) and st.st_size == 0
        assert os.listdir(mount.path) == ["new"]
        assert not mount.backend.exists("new")
    finally:
        os.close(fd)
    assert mount.backend.read("new") == b""


def test_create_excl_on_existing_fails_with_eexist(mount):
    mount.backend.put("f", b"stored")
    os.mkdir(mount.path / "d")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY
    assert err(os.open, mount.path / "f", flags) == errno.EEXIST
    assert err(os.open, mount.path / "d", flags) == errno.EEXIST
    fd = os.open(mount.path / "g", flags)
    os.close(fd)
    assert err(os.open, mount.path / "g", flags) == errno.EEXIST
    assert mount.backend.read("f") == b"stored"
    assert mount.backend.read("g") == b""


def test_open_errors(mount):
    mount.backend.put("f", b"x")
    os.mkdir(mount.path / "d")
    assert err(os.open, mount.path / "missing", os.O_RDONLY) == errno.ENOENT
    assert err(os.open, mount.path / "nodir/f", os.O_CREAT | os.O_WRONLY) == errno.ENOENT
    assert err(os.open, mount.path / "f/below", os.O_CREAT | os.O_WRONLY) == errno.ENOTDIR
    assert err(os.open, mount.path / "d", os.O_WRONLY) == errno.EISDIR
    assert err(os.open, mount.path / "d", os.O_RDWR) == errno.EISDIR
    assert err(os.open, mount.path / ("n" * 256), os.O_CREAT | os.O_WRONLY) == errno.ENAMETOOLONG
    write_file(mount.path / ("n" * 255), b"ok")
    assert mount.backend.read("n" * 255) == b"ok"
    assert sorted(mount.backend.keys()) == sorted(["f", "n" * 255])


def test_open_trunc_empties_an_existing_file(mount):
    mount.backend.put("f", b"0123456789")
    fd = os.open(mount.path / "f", os.O_WRONLY | os.O_TRUNC)
    try:
        assert os.fstat(fd).st_size == 0
        os.write(fd, b"ab")
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"ab"
    assert (mount.path / "f").read_bytes() == b"ab"


def test_new_files_and_dirs_get_default_or_requested_modes(mount):
    write_file(mount.path / "plain", b"")
    os.close(os.open(mount.path / "private", os.O_CREAT | os.O_WRONLY, 0o600))
    os.mkdir(mount.path / "d")
    os.mkdir(mount.path / "dprivate", 0o700)
    assert stat.S_IMODE(os.stat(mount.path / "plain").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(mount.path / "private").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(mount.path / "d").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(mount.path / "dprivate").st_mode) == 0o700
    st = os.stat(mount.path / "plain")
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


def test_uid_gid_umask_options_set_presented_ownership_and_modes(backend, tmp_path):
    backend.put("stored", b"x")
    backend.put("dir/inner", b"y")
    with checked_mount(backend, tmp_path / "m", "-o", "uid=1234,gid=5678,umask=027") as m:
        for rel, mode in (("stored", 0o640), ("dir", 0o750), ("dir/inner", 0o640)):
            st = os.stat(m.path / rel)
            if backend.name == "directory":  # a local directory's entries show their own attributes
                real = os.stat(backend.root / rel)
                assert (st.st_mode, st.st_uid, st.st_gid) == (real.st_mode, real.st_uid, real.st_gid), rel
            else:
                assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (mode, 1234, 5678), rel
        if backend.name != "directory":
            assert {(e.name, e.stat().st_uid) for e in os.scandir(m.path)} == {("stored", 1234), ("dir", 1234)}


# ---------------------------------------------------------------------- read


def test_read_ranges_of_a_stored_object(mount):
    data = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4
    mount.backend.put("big", data)
    fd = os.open(mount.path / "big", os.O_RDONLY)
    try:
        assert os.fstat(fd).st_size == len(data)
        assert os.pread(fd, 10, 0) == data[:10]
        assert os.pread(fd, 100_000, 500_000) == data[500_000:600_000]
        assert os.pread(fd, 100, len(data) - 4) == b"tail"
        assert os.pread(fd, 100, len(data)) == b""
        assert os.pread(fd, 100, len(data) + 1000) == b""
    finally:
        os.close(fd)
    assert (mount.path / "big").read_bytes() == data
    st = os.stat(mount.path / "big")
    if mount.backend.name == "directory":  # a local file's own times
        real = os.stat(mount.backend.root / "big")
        assert (st.st_mtime_ns, st.st_ctime_ns) == (real.st_mtime_ns, real.st_ctime_ns)
    else:
        assert st.st_atime_ns == st.st_mtime_ns == st.st_ctime_ns  # reading does not touch atime


def test_mmap_reads_and_shared_writes(mount):
    mount.backend.put("f", b"0123456789abcdef")
    fd = os.open(mount.path / "f", os.O_RDWR)
    try:
        with mmap.mmap(fd, 0) as m:
            assert m[:10] == b"0123456789"
            m[0:4] = b"WXYZ"
            assert mount.backend.read("f") == b"0123456789abcdef"
            m.flush()  # msync -> fsync: stored
            assert mount.backend.read("f") == b"WXYZ456789abcdef"
    finally:
        os.close(fd)
    assert (mount.path / "f").read_bytes() == b"WXYZ456789abcdef"


def test_names_may_hold_any_bytes_but_slash_and_nul(mount):
    names = [b"with space", "\u00fcn\u00ef \u20ac".encode(), b"new\nline", b"\xff\xfenot-utf8", b"-dash", b".hidden", b"a\\b*?"]
    if mount.backend.name == "zip":  # a zip member name is UTF-8, and a backslash in one is refused (zip-slip)
        for name in (b"\xff\xfenot-utf8", b"a\\b*?"):
            names.remove(name)
            assert err(open, os.path.join(os.fsencode(mount.path), name), "wb") == errno.EINVAL
    if mount.backend.name == "s3":  # an S3 key is UTF-8; a backslash is not portable between S3 servers
        for name in (b"\xff\xfenot-utf8", b"a\\b*?"):
            names.remove(name)
            assert err(open, os.path.join(os.fsencode(mount.path), name), "wb") == errno.EINVAL
    for name in names:
        with open(os.path.join(os.fsencode(mount.path), name), "wb") as f:
            f.write(name)
    assert sorted(os.listdir(os.fsencode(mount.path))) == sorted(names)
    for name in names:
        assert mount.backend.read(os.fsdecode(name)) == name


# ---------------------------------------------------------------------- write


def test_write_at_random_offsets_fills_holes_with_zeros(mount):
    p = mount.path / "sparse"
    fd = os.open(p, os.O_CREAT | os.O_RDWR)
    try:
        assert os.pwrite(fd, b"end", 100_000) == 3
        assert os.pwrite(fd, b"mid", 5_000) == 3
        assert os.pwrite(fd, b"start", 0) == 5
        assert os.fstat(fd).st_size == 100_003
        assert os.pread(fd, 10, 4_998) == b"\0\0mid\0\0\0\0\0"
    finally:
        os.close(fd)
    want = bytearray(100_003)
    want[0:5], want[5_000:5_003], want[100_000:] = b"start", b"mid", b"end"
    assert mount.backend.read("sparse") == bytes(want)
    assert p.read_bytes() == bytes(want)


def test_rdwr_rewrite_without_trunc_keeps_the_rest(mount):
    data = bytes(range(256)) * 1000
    mount.backend.put("d/f", data)
    fd = os.open(mount.path / "d/f", os.O_RDWR)
    try:
        os.pwrite(fd, b"XYZ", 1000)
        assert os.pread(fd, 5, 999) == data[999:1000] + b"XYZ" + data[1003:1004]
    finally:
        os.close(fd)
    want = data[:1000] + b"XYZ" + data[1003:]
    assert mount.backend.read("d/f") == want
    assert (mount.path / "d/f").read_bytes() == want


def test_o_append_writes_at_the_end(mount):
    mount.backend.put("log", b"line1\n")
    fd = os.open(mount.path / "log", os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"line2\n")
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, b"line3\n")
    finally:
        os.close(fd)
    with open(mount.path / "log", "ab") as f:
        f.write(b"line4\n")
    assert mount.backend.read("log") == b"line1\nline2\nline3\nline4\n"


def test_write_on_read_only_descriptor_fails_with_ebadf(mount):
    mount.backend.put("f", b"data")
    fd = os.open(mount.path / "f", os.O_RDONLY)
    try:
        assert err(os.write, fd, b"x") == errno.EBADF
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"data"


# ---------------------------------------------------------------------- truncate


def test_truncate_of_a_closed_file_changes_the_store_at_once(mount):
    mount.backend.put("f", b"0123456789")
    os.truncate(mount.path / "f", 4)
    assert mount.backend.read("f") == b"0123"
    os.truncate(mount.path / "f", 6)
    assert mount.backend.read("f") == b"0123\0\0"
    assert os.stat(mount.path / "f").st_size == 6
    os.truncate(mount.path / "f", 0)
    assert mount.backend.read("f") == b""
    assert err(os.truncate, mount.path / "missing", 0) == errno.ENOENT
    os.mkdir(mount.path / "d")
    assert err(os.truncate, mount.path / "d", 0) == errno.EISDIR


def test_ftruncate_of_an_open_file_is_stored_at_close(mount):
    mount.backend.put("f", b"0123456789")
    fd = os.open(mount.path / "f", os.O_RDWR)
    try:
        os.ftruncate(fd, 3)
        assert os.fstat(fd).st_size == 3
        assert os.stat(mount.path / "f").st_size == 3
        assert mount.backend.read("f") == b"0123456789"
        os.ftruncate(fd, 5)
        assert os.pread(fd, 10, 0) == b"012\0\0"
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"012\0\0"


def _peak_rss(mnt: Path) -> int:
    """The mount's daemon's peak resident memory so far (VmHWM), in bytes."""
    from nczfs.fuse.control import read_control

    pid = read_control(str(mnt))["pid"]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_truncate_past_the_largest_file_gives_efbig_and_changes_nothing(mount):
    mount.backend.put("f", b"data")
    assert err(os.truncate, mount.path / "f", 999_999_999_999_999) == errno.EFBIG
    fd = os.open(mount.path / "f", os.O_RDWR)
    try:
        assert err(os.ftruncate, fd, 999_999_999_999_999) == errno.EFBIG
        assert os.fstat(fd).st_size == 4
    finally:
        os.close(fd)
    assert (mount.path / "f").read_bytes() == b"data"
    assert mount.backend.read("f") == b"data"


def test_growing_a_closed_file_holds_no_zeros_in_memory_and_writes_none_where_holes_exist(mount):
    mount.backend.put("f", b"head")
    # a local directory: 16 GiB, a hole in the backing file; zip and S3 have no holes: the
    # object holds the zeros, streamed from a temp file with a hole, never held in memory
    size = 16 * 1024**3 if mount.backend.name == "directory" else 160 * 1024**2
    before = _peak_rss(mount.path)
    os.truncate(mount.path / "f", size)
    assert os.stat(mount.path / "f").st_size == size
    with open(mount.path / "f", "rb") as f:
        assert f.read(4) == b"head"
        f.seek(size - 8)
        assert f.read() == bytes(8)
    # S3 sends the object in 8 MiB parts, 8 at a time: at most those are in memory at once
    assert _peak_rss(mount.path) - before < (64 * 1024**2 if mount.backend.name == "directory" else size // 2)
    if mount.backend.name == "directory":
        st = os.stat(mount.backend.root / "f")
        assert st.st_size == size and st.st_blocks * 512 < 1024**2
    else:
        assert len(mount.backend.read("f")) == size


def test_paths_up_to_path_max_on_the_mount_work_whatever_the_store_can_name(backend, tmp_path):
    """The kernel takes paths up to 4,095 bytes on the mount; a local directory's own path adds
    to that (reached a directory at a time), a zip member name has room; an S3 key is at most
    1,024 bytes: a longer one fails at once, at mkdir, create or rename, with ENAMETOOLONG."""
    if backend.name == "directory":
        root = tmp_path / ("r" * 200) / ("s" * 200)
        root.mkdir(parents=True)
        backend = type(backend)(root)
    levels, name = 18, "n" * 200
    with checked_mount(backend, tmp_path / "m") as m:
        assert len(os.fsencode(m.path)) + levels * 201 + 20 < 4096
        fds = [os.open(m.path, os.O_RDONLY | os.O_DIRECTORY)]
        try:
            for depth in range(levels):
                key_bytes = (depth + 1) * 201 - 1
                code = err(os.mkdir, name, dir_fd=fds[-1])
                if backend.name == "s3" and key_bytes > 1024 - len(backend.prefix) - 1:
                    assert code == errno.ENAMETOOLONG, depth
                    fd = os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fds[-1])
                    os.close(fd)
                    assert err(os.rename, "f", name, src_dir_fd=fds[-1], dst_dir_fd=fds[-1]) == errno.ENAMETOOLONG
                    assert err(os.open, name, os.O_CREAT | os.O_WRONLY, dir_fd=fds[-1]) == errno.ENAMETOOLONG
                    os.unlink("f", dir_fd=fds[-1])
                    break
                assert code is None, (depth, code)
                fds.append(os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
            else:
                fd = os.open("file", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=fds[-1])
                os.write(fd, b"deep")
                os.close(fd)
                os.rename("file", "moved", src_dir_fd=fds[-1], dst_dir_fd=fds[-1])
                os.symlink("moved", "link", dir_fd=fds[-1])
                assert os.readlink("link", dir_fd=fds[-1]) == "moved"
                fd = os.open("link", os.O_RDONLY, dir_fd=fds[-1])
                assert os.read(fd, 10) == b"deep"
                os.close(fd)
                assert stat.S_IMODE(os.stat("moved", dir_fd=fds[-1]).st_mode) == 0o600
                os.unlink("link", dir_fd=fds[-1])
        finally:
            for fd in fds:
                os.close(fd)
    if backend.name == "directory":  # its path and the key past PATH_MAX: read a directory at a time
        assert _read_below(backend.root, [name] * levels + ["moved"]) == b"deep"
    elif backend.name != "s3":
        assert backend.read("/".join([name] * levels + ["moved"])) == b"deep"
    else:
        assert backend.keys() == []


def _read_below(root, parts: list[str]) -> bytes:
    """The file ``root/parts...``, opened one directory at a time (its whole path may pass PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            below = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        f = os.open(parts[-1], os.O_RDONLY, dir_fd=fd)
        try:
            return os.read(f, 1 << 16)
        finally:
            os.close(f)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- close / flush / fsync


def test_data_reaches_the_store_at_close_not_before(mount):
    mount.backend.put("f", b"old")
    fd = os.open(mount.path / "f", os.O_WRONLY)
    try:
        os.pwrite(fd, b"new!", 0)
        assert mount.backend.read("f") == b"old"
        assert (mount.path / "f").read_bytes() == b"new!"  # the mount shows the buffer
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"new!"


def test_fsync_uploads_while_open(mount):
    fd = os.open(mount.path / "f", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"first")
        os.fsync(fd)
        assert mount.backend.read("f") == b"first"
        os.write(fd, b"+second")
        assert mount.backend.read("f") == b"first"
        os.fdatasync(fd)
        assert mount.backend.read("f") == b"first+second"
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"first+second"


def test_fsync_of_a_directory_uploads_every_pending_file(mount):
    os.mkdir(mount.path / "d")
    fds = [os.open(mount.path / "d" / f"f{i}", os.O_CREAT | os.O_WRONLY) for i in range(3)]
    try:
        for i, fd in enumerate(fds):
            os.write(fd, f"data{i}".encode())
        assert mount.backend.keys() == []
        dfd = os.open(mount.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        assert [mount.backend.read(f"d/f{i}") for i in range(3)] == [b"data0", b"data1", b"data2"]
    finally:
        for fd in fds:
            os.close(fd)


def test_temp_files_are_stored_once_under_their_final_name(backend, tmp_path):
    """zarr-python's ``<key>.<uuid>.partial`` and rsync's ``.<name>.XXXXXX``: closed but never
    stored, they wait for their rename and reach the store once, under the final name; one that
    is never renamed is stored at unmount."""
    with checked_mount(backend, tmp_path / "m") as m:
        (m.path / "c.1f2e3d.partial").write_bytes(b"chunk")
        assert not backend.exists("c.1f2e3d.partial")  # closed, not stored yet
        assert (m.path / "c.1f2e3d.partial").read_bytes() == b"chunk"  # but there in the mount
        os.rename(m.path / "c.1f2e3d.partial", m.path / "c")
        assert backend.read("c") == b"chunk"
        assert backend.keys() == ["c"]
        (m.path / ".notes.txt.AbC123").write_bytes(b"left behind")
        assert not backend.exists(".notes.txt.AbC123")
    assert backend.read(".notes.txt.AbC123") == b"left behind"


def test_closes_by_readers_and_by_children_of_the_writer_store_nothing(mount):
    """Only the writer's close stores: a reader's close and the close of a copy a child
    inherited (at exec, for a descriptor marked close-on-exec; at exit, for one passed on) leave
    the store as it was, so no other client sees the file half-written; so do the commands of a
    shell whose output is redirected to the file. The writer's close stores the whole file."""
    mount.backend.put("f", b"old")
    before = counts(mount.path)["write.closes-not-storing"]
    fd = os.open(mount.path / "f", os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, b"part one;")
        subprocess.run(["true"], check=True)
        subprocess.run(["true"], check=True, pass_fds=(fd,))
        assert (mount.path / "f").read_bytes() == b"part one;"
        assert mount.backend.read("f") == b"old"
        os.write(fd, b" part two")
    finally:
        os.close(fd)
    assert mount.backend.read("f") == b"part one; part two"
    assert counts(mount.path)["write.closes-not-storing"] - before >= 3
    g = shlex.quote(str(mount.path / "g"))
    subprocess.run(["sh", "-c", f"exec > {g}; echo a; /bin/true; echo b; /bin/true; echo c"], check=True)
    assert mount.backend.read("g") == b"a\nb\nc\n"
    assert counts(mount.path)["write.closes-not-storing"] - before >= 5


def test_every_close_uploads_the_whole_file(mount):
    fd1 = os.open(mount.path / "f", os.O_CREAT | os.O_RDWR)
    fd2 = os.open(mount.path / "f", os.O_RDWR)
    try:
        os.pwrite(fd1, b"aaaa", 0)
        os.pwrite(fd2, b"bb", 4)
        os.close(fd1)
        assert mount.backend.read("f") == b"aaaabb"
        os.pwrite(fd2, b"cc", 6)
        assert mount.backend.read("f") == b"aaaabb"
    finally:
        os.close(fd2)
    assert mount.backend.read("f") == b"aaaabbcc"



FS_IOC_GETFLAGS, FS_IOC_SETFLAGS, FS_IMMUTABLE_FL = 0x80086601, 0x40086602, 0x10


def _set_immutable(path: Path, on: bool) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        flags[0] = flags[0] | FS_IMMUTABLE_FL if on else flags[0] & ~FS_IMMUTABLE_FL
        fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags)
    finally:
        os.close(fd)


@contextlib.contextmanager
def immutable(path: Path):
    """Make a backing directory refuse new entries, even to root (``chattr +i``), in-process."""
    _set_immutable(path, True)
    try:
        yield
    finally:
        _set_immutable(path, False)


def test_failed_upload_fails_fsync_and_close_and_keeps_the_old_object(backend, tmp_path):
    if backend.name == "s3":
        pytest.skip("S3 cannot be made to refuse writes by chattr; the S3 form of this test is "
                    "tests/mount/test_s3.py::test_server_down_while_writing_fails_close_with_eio_and_recovers")
    backend.put("d/x", b"old contents")
    with mounted(backend, tmp_path / "m") as m:
        p = m.path / "d" / "x"
        fd = os.open(p, os.O_WRONLY | os.O_TRUNC)
        closed = False
        try:
            os.write(fd, b"new contents that cannot be stored")
            # the medium refuses new entries: the backing directory, or the zip's staging area
            with immutable(backend.root / "d" if backend.name == "directory" else backend.staging_dir):
                assert err(os.fsync, fd) == errno.EPERM
                assert backend.read("d/x") == b"old contents"
                with pytest.raises(OSError) as close_err:
                    closed = True
                    os.close(fd)
                assert close_err.value.errno == errno.EPERM
            assert backend.read("d/x") == b"old contents"
            assert backend.keys() == ["d/x"]  # no temporary left behind
        finally:
            if not closed:
                os.close(fd)
        # the daemon is alive and the file writable again once the medium is
        p.write_bytes(b"stored now")
        assert backend.read("d/x") == b"stored now"
    log = m.log_text()
    assert "write of 'd/x' failed" in log  # one line naming the key and the reason


# ---------------------------------------------------------------------- unlink


def test_unlink_removes_the_object(mount):
    mount.backend.put("d/f", b"x")
    os.unlink(mount.path / "d/f")
    assert not mount.backend.exists("d/f")
    assert os.listdir(mount.path / "d") == []
    assert err(os.stat, mount.path / "d/f") == errno.ENOENT
    assert err(os.unlink, mount.path / "d/f") == errno.ENOENT
    assert err(os.unlink, mount.path / "d") == errno.EISDIR


def test_unlink_of_an_open_file_keeps_its_content_for_the_descriptor(mount):
    mount.backend.put("f", b"0123456789")
    fd = os.open(mount.path / "f", os.O_RDWR)
    try:
        os.unlink(mount.path / "f")
        assert not mount.backend.exists("f")
        assert os.listdir(mount.path) == []
        assert os.pread(fd, 100, 0) == b"0123456789"
        os.pwrite(fd, b"XY", 2)
        assert os.pread(fd, 100, 0) == b"01XY456789"
        assert os.fstat(fd).st_size == 10
    finally:
        os.close(fd)
    assert mount.backend.keys() == []
    assert os.listdir(mount.path) == []


def test_unlink_of_a_file_never_closed_never_stores_it(mount):
    fd = os.open(mount.path / "f", os.O_CREAT | os.O_RDWR)
    try:
        os.write(fd, b"pending")
        os.unlink(mount.path / "f")
        os.write(fd, b"+more")
        assert os.pread(fd, 100, 0) == b"pending+more"
    finally:
        os.close(fd)
    assert mount.backend.keys() == []
    assert os.listdir(mount.path) == []


# ---------------------------------------------------------------------- directories


def test_mkdir_and_rmdir(mount):
    os.mkdir(mount.path / "d")
    assert stat.S_ISDIR(os.stat(mount.path / "d").st_mode)
    if keeps_directories(mount.backend):
        assert "d" in backend_dirs(mount.backend)
    assert err(os.mkdir, mount.path / "d") == errno.EEXIST
    mount.backend.put("f", b"")
    assert err(os.mkdir, mount.path / "f") == errno.EEXIST
    assert err(os.mkdir, mount.path / "f/sub") == errno.ENOTDIR
    assert err(os.mkdir, mount.path / "nodir/sub") == errno.ENOENT
    os.rmdir(mount.path / "d")
    assert err(os.stat, mount.path / "d") == errno.ENOENT
    if keeps_directories(mount.backend):
        assert "d" not in backend_dirs(mount.backend)
    assert err(os.rmdir, mount.path / "d") == errno.ENOENT
    assert err(os.rmdir, mount.path / "f") == errno.ENOTDIR


def test_rmdir_of_a_non_empty_directory_fails_with_enotempty(mount):
    mount.backend.put("d/f", b"x")
    os.makedirs(mount.path / "e/sub")
    assert err(os.rmdir, mount.path / "d") == errno.ENOTEMPTY
    assert err(os.rmdir, mount.path / "e") == errno.ENOTEMPTY
    # a file created and not yet closed already counts
    fd = os.open(mount.path / "e/sub/pending", os.O_CREAT | os.O_WRONLY)
    try:
        assert err(os.rmdir, mount.path / "e/sub") == errno.ENOTEMPTY
    finally:
        os.close(fd)
    assert err(os.rmdir, mount.path / "e/sub") == errno.ENOTEMPTY
    assert mount.backend.read("d/f") == b"x"
    assert mount.backend.read("e/sub/pending") == b""


def test_empty_directories_persist_across_remount(backend, tmp_path):
    with checked_mount(backend, tmp_path / "m1") as m:
        os.makedirs(m.path / "a/b/c")
        os.mkdir(m.path / "e")
        write_file(m.path / "a/f", b"x")
        os.unlink(m.path / "a/f")  # the directory emptied by unlink stays
        assert sorted(os.listdir(m.path)) == ["a", "e"]
        assert os.listdir(m.path / "a") == ["b"]
    if not keeps_directories(backend):  # S3: empty directories last for the mount's life only
        with checked_mount(backend, tmp_path / "m2") as m:
            # ("a" may still show on a server that keeps a folder after its last key is deleted)
            assert "e" not in os.listdir(m.path) and not (m.path / "a/b").exists()
        assert backend.keys() == []  # no marker objects were written
        return
    with checked_mount(backend, tmp_path / "m2") as m:
        assert sorted(os.listdir(m.path)) == ["a", "e"]
        assert os.listdir(m.path / "a/b") == ["c"]
        assert os.listdir(m.path / "a/b/c") == []
    assert backend_snapshot(backend) == {"a": DIR, "a/b": DIR, "a/b/c": DIR, "e": DIR}


def test_directory_attributes(mount):
    os.makedirs(mount.path / "d/sub1")
    os.mkdir(mount.path / "d/sub2")
    st = os.stat(mount.path / "d")
    assert stat.S_ISDIR(st.st_mode)
    assert st.st_size == 0 or mount.backend.name == "directory"  # a local directory's own size
    # a local directory's own link count (2 + subdirectories); elsewhere 2 whatever it holds
    assert st.st_nlink == (4 if mount.backend.name == "directory" else 2)
    # readdir returns no "." and ".." entries
    out = subprocess.run(["ls", "-f", str(mount.path / "d")], capture_output=True, text=True, check=True)
    assert sorted(out.stdout.split()) == ["sub1", "sub2"]


def test_readdir_of_a_large_directory_sees_every_entry_once(mount):
    """1600 entries: three of the kernel's readdir buffers, and two pages of an S3 listing
    (1000 keys a page); ``NCZFS_BIG_TESTS=1``: 5000 entries."""
    n_store, n_mount = (4500, 500) if os.environ.get("NCZFS_BIG_TESTS") else (1500, 100)
    names = {f"file{i:05d}" for i in range(n_store + n_mount)}
    mount.backend.put_many({f"big/file{i:05d}": b"" for i in range(n_store)})
    for i in range(n_store, n_store + n_mount):
        fd = os.open(mount.path / f"big/file{i:05d}", os.O_CREAT | os.O_WRONLY)
        os.close(fd)
    listed = os.listdir(mount.path / "big")
    assert len(listed) == len(names) and set(listed) == names
    with os.scandir(mount.path / "big") as it:
        entries = [(e.name, e.is_file(follow_symlinks=False)) for e in it]
    counts = Counter(name for name, _ in entries)
    assert set(counts) == names and max(counts.values()) == 1
    assert all(is_file for _, is_file in entries)
    out = subprocess.run(f"ls -f {shlex.quote(str(mount.path / 'big'))} | wc -l", shell=True, capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(names)
    assert len(mount.backend.keys("big")) == len(names)


# ---------------------------------------------------------------------- rename


def test_rename_file_over_file(mount):
    mount.backend.put("a", b"A")
    mount.backend.put("b", b"B")
    os.rename(mount.path / "a", mount.path / "b")
    assert os.listdir(mount.path) == ["b"]
    assert (mount.path / "b").read_bytes() == b"A"
    assert backend_snapshot(mount.backend) == {"b": b"A"}


def test_rename_file_between_directories(mount):
    mount.backend.put("d1/f", b"F")
    os.mkdir(mount.path / "d2")
    os.rename(mount.path / "d1/f", mount.path / "d2/g")
    assert os.listdir(mount.path / "d1") == []
    assert os.listdir(mount.path / "d2") == ["g"]
    assert mount.backend.read("d2/g") == b"F"
    assert not mount.backend.exists("d1/f")
    assert err(os.rename, mount.path / "d2/g", mount.path / "nodir/g") == errno.ENOENT
    assert err(os.rename, mount.path / "missing", mount.path / "x") == errno.ENOENT


def test_rename_directory_with_contents(mount):
    for key in ("d/a", "d/sub/b", "d/sub/deeper/c"):
        mount.backend.put(key, key.encode())
    os.makedirs(mount.path / "d/empty")
    os.mkdir(mount.path / "target")
    os.rename(mount.path / "d", mount.path / "target/moved")
    assert os.listdir(mount.path) == ["target"]
    assert sorted(os.listdir(mount.path / "target/moved")) == ["a", "empty", "sub"]
    assert (mount.path / "target/moved/sub/deeper/c").read_bytes() == b"d/sub/deeper/c"
    assert mount.backend.keys() == ["target/moved/a", "target/moved/sub/b", "target/moved/sub/deeper/c"]
    assert mount.backend.read("target/moved/sub/b") == b"d/sub/b"


def test_rename_directory_over_directory(mount):
    mount.backend.put("src/f", b"f")
    os.mkdir(mount.path / "empty")
    mount.backend.put("full/g", b"g")
    assert err(os.rename, mount.path / "src", mount.path / "full") == errno.ENOTEMPTY
    os.rename(mount.path / "src", mount.path / "empty")
    assert sorted(os.listdir(mount.path)) == ["empty", "full"]
    assert os.listdir(mount.path / "empty") == ["f"]
    assert backend_snapshot(mount.backend) == {"empty": DIR, "empty/f": b"f", "full": DIR, "full/g": b"g"}


def test_rename_errors_follow_rename_2(mount):
    mount.backend.put("f", b"f")
    mount.backend.put("d/x", b"x")
    os.makedirs(mount.path / "e")
    assert err(os.rename, mount.path / "d", mount.path / "f") == errno.ENOTDIR
    assert err(os.rename, mount.path / "f", mount.path / "e") == errno.EISDIR
    assert err(os.rename, mount.path / "d", mount.path / "d/inside") == errno.EINVAL
    os.rename(mount.path / "f", mount.path / "f")  # same name: no-op
    assert backend_snapshot(mount.backend) == as_stored({"f": b"f", "d": DIR, "d/x": b"x", "e": DIR}, mount.backend)


def test_rename_noreplace_and_exchange(mount):
    mount.backend.put("a", b"A")
    mount.backend.put("b", b"B")
    assert err(renameat2, mount.path / "a", mount.path / "b", RENAME_NOREPLACE) == errno.EEXIST
    assert err(renameat2, mount.path / "a", mount.path / "b", RENAME_EXCHANGE) == errno.EINVAL
    assert backend_snapshot(mount.backend) == {"a": b"A", "b": b"B"}
    renameat2(mount.path / "a", mount.path / "c", RENAME_NOREPLACE)
    assert backend_snapshot(mount.backend) == {"b": b"B", "c": b"A"}


def test_rename_of_an_open_file_then_write(mount):
    fd = os.open(mount.path / "old", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"before ")
        os.rename(mount.path / "old", mount.path / "new")
        os.write(fd, b"after")
    finally:
        os.close(fd)
    assert backend_snapshot(mount.backend) == {"new": b"before after"}


def test_rename_over_an_open_file_keeps_its_content_for_the_descriptor(mount):
    mount.backend.put("target", b"old content")
    mount.backend.put("src", b"new content")
    fd = os.open(mount.path / "target", os.O_RDONLY)
    try:
        os.rename(mount.path / "src", mount.path / "target")
        assert os.pread(fd, 100, 0) == b"old content"
        assert (mount.path / "target").read_bytes() == b"new content"
    finally:
        os.close(fd)
    assert backend_snapshot(mount.backend) == {"target": b"new content"}


# ---------------------------------------------------------------------- link, symlink, special files


def test_link_makes_a_second_name_of_one_file(mount):
    mount.backend.put("a", b"original")
    os.link(mount.path / "a", mount.path / "b")
    sa, sb = os.stat(mount.path / "a"), os.stat(mount.path / "b")
    assert (sa.st_nlink, sb.st_nlink) == (2, 2)
    assert sa.st_ino == sb.st_ino
    with open(mount.path / "a", "r+b") as f:
        f.write(b"CHANGED")
    assert (mount.path / "b").read_bytes() == b"CHANGEDl"
    os.chmod(mount.path / "b", 0o600)
    assert stat.S_IMODE(os.stat(mount.path / "a").st_mode) == 0o600
    # the store: one file with two names (a local directory), else a copy under each name
    assert backend_snapshot(mount.backend) == {"a": b"CHANGEDl", "b": b"CHANGEDl"}
    if mount.backend.name == "directory":
        assert (mount.backend.root / "a").stat().st_ino == (mount.backend.root / "b").stat().st_ino
    assert err(os.link, mount.path / "a", mount.path / "b") == errno.EEXIST
    os.mkdir(mount.path / "d")
    assert err(os.link, mount.path / "d", mount.path / "d2") == errno.EPERM
    os.unlink(mount.path / "a")
    assert os.stat(mount.path / "b").st_nlink == 1
    assert backend_snapshot(mount.backend) == {"b": b"CHANGEDl", "d": DIR} if keeps_directories(mount.backend) \
        else {"b": b"CHANGEDl"}


def test_link_of_an_open_file_stores_its_buffered_content_under_both_names(mount):
    fd = os.open(mount.path / "a", os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, b"buffered")
        os.link(mount.path / "a", mount.path / "b")
        assert mount.backend.read("b") == b"buffered"
        os.write(fd, b"+later")
    finally:
        os.close(fd)
    assert backend_snapshot(mount.backend) == {"a": b"buffered+later", "b": b"buffered+later"}


def _fifo_passes_data(path: Path) -> bytes:
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(path.read_bytes()))
    reader.start()
    with open(path, "wb") as w:
        w.write(b"through the fifo")
    reader.join(10)
    return got[0] if got else b""


def test_symlinks_fifos_sockets_and_device_nodes(backend, tmp_path):
    backend.put("f", b"target bytes")
    posix_meta = ("-o", "posix_meta") if backend.name == "s3" else ()  # S3: symlinks need it
    with checked_mount(backend, tmp_path / "m", *posix_meta) as m:
        os.symlink("f", m.path / "link")
        os.symlink("nowhere/at/all", m.path / "dangling")
        os.mkfifo(m.path / "fifo", 0o640)
        os.mknod(m.path / "chr", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        os.mknod(m.path / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
        with socket_bound(m.path / "sock") as server:
            assert stat.S_ISSOCK(os.lstat(m.path / "sock").st_mode)
            with contextlib.closing(__import__("socket").socket(__import__("socket").AF_UNIX)) as client:
                client.connect(str(m.path / "sock"))
                conn, _ = server.accept()
                with conn:
                    client.sendall(b"hello")
                    assert conn.recv(5) == b"hello"
        assert os.readlink(m.path / "link") == "f"
        assert (m.path / "link").read_bytes() == b"target bytes"  # the kernel follows it
        assert stat.S_ISLNK(os.lstat(m.path / "dangling").st_mode) and not (m.path / "dangling").exists()
        assert os.lstat(m.path / "dangling").st_size == len("nowhere/at/all")
        assert _fifo_passes_data(m.path / "fifo") == b"through the fifo"
        st = os.lstat(m.path / "fifo")
        assert (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)) == (stat.S_IFIFO, 0o640)
        st = os.lstat(m.path / "chr")
        assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
        assert stat.S_ISBLK(os.lstat(m.path / "blk").st_mode)
        assert sorted(os.listdir(m.path)) == ["blk", "chr", "dangling", "f", "fifo", "link", "sock"]
        os.rename(m.path / "link", m.path / "link2")
        assert os.readlink(m.path / "link2") == "f"
        os.unlink(m.path / "sock")
    # what the store holds: real ones in a directory; the types (and a symlink's target as its
    # bytes) in S3 metadata and zip entries, as s3fs-fuse and Info-ZIP keep them
    kinds = {k: stat.S_IFMT(backend.attrs(k).mode) for k in ("link2", "dangling", "fifo", "chr", "blk")}
    assert kinds == {"link2": stat.S_IFLNK, "dangling": stat.S_IFLNK, "fifo": stat.S_IFIFO, "chr": stat.S_IFCHR,
                     "blk": stat.S_IFBLK}
    if backend.name == "directory":
        assert os.readlink(backend.root / "link2") == "f"
    else:
        assert backend.read("dangling") == b"nowhere/at/all"
    if backend.name == "s3":
        md = backend.metadata("fifo")
        assert int(md["mode"]) == stat.S_IFIFO | 0o640 and md["uid"] == str(os.getuid())
    with checked_mount(backend, tmp_path / "m2", *posix_meta) as m:  # S3: a HEAD per object looked up
        assert os.readlink(m.path / "link2") == "f"
        assert stat.S_ISFIFO(os.lstat(m.path / "fifo").st_mode)
        assert os.lstat(m.path / "chr").st_rdev == os.makedev(1, 3)


@contextlib.contextmanager
def socket_bound(path: Path):
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(str(path))
        s.listen(1)
        yield s
    finally:
        s.close()


# ---------------------------------------------------------------------- attributes


def test_chmod_chown_utime_are_stored_where_the_backend_keeps_them(backend, tmp_path):
    backend.put("f", b"data")
    with checked_mount(backend, tmp_path / "m1") as m:
        os.mkdir(m.path / "d")
        os.chmod(m.path / "f", 0o600)
        os.chmod(m.path / "d", 0o700)
        os.chown(m.path / "f", 1234, 5678)
        os.utime(m.path / "f", ns=(1_000_000_000, 2_000_000_000))
        st = os.stat(m.path / "f")
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert (st.st_uid, st.st_gid) == (1234, 5678)
        assert (st.st_atime_ns, st.st_mtime_ns) == (1_000_000_000, 2_000_000_000)
        assert stat.S_IMODE(os.stat(m.path / "d").st_mode) == 0o700
        # they follow a rename
        os.rename(m.path / "f", m.path / "g")
        st = os.stat(m.path / "g")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_mtime_ns) == (0o600, 1234, 2_000_000_000)
    kept = backend.attrs("g")
    assert (stat.S_IMODE(kept.mode), kept.uid, kept.gid) == (0o600, 1234, 5678)
    assert kept.mtime_ns == 2_000_000_000  # zip: in the extended timestamp (whole seconds)
    remount = ("-o", "posix_meta") if backend.name == "s3" else ()
    with checked_mount(backend, tmp_path / "m2", *remount) as m:
        st = os.stat(m.path / "g")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns) == (0o600, 1234, 5678, 2_000_000_000)
        if keeps_directories(backend):  # S3 keeps no directories: their attributes last the mount's life
            assert stat.S_IMODE(os.stat(m.path / "d").st_mode) == 0o700
    if backend.name == "s3":  # without -o posix_meta only what the mount wrote itself shows
        with checked_mount(backend, tmp_path / "m3") as m:
            st = os.stat(m.path / "g")
            assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o644, os.getuid())
    assert backend.read("g") == b"data"


def test_new_entries_get_the_mode_asked_for_even_0(backend, tmp_path):
    with checked_mount(backend, tmp_path / "m") as m:
        os.close(os.open(m.path / "f", os.O_CREAT | os.O_WRONLY, 0))
        os.mkdir(m.path / "d", 0)
        os.mkfifo(m.path / "p", 0)
        for name in ("f", "d", "p"):
            assert stat.S_IMODE(os.stat(m.path / name).st_mode) == 0, name
        os.chmod(m.path / "d", 0o755)  # so that a remount lists it
    for name in ("f", "p"):
        assert stat.S_IMODE(backend.attrs(name).mode) == 0, name


def test_times_follow_posix(mount):
    """A directory's mtime and ctime change when an entry is made, removed or renamed in it;
    chmod, chown, link and rename change a file's ctime; a write its mtime and ctime."""
    os.mkdir(mount.path / "d")
    os.mkdir(mount.path / "e")

    def times(rel: str) -> tuple[int, int]:
        st = os.stat(mount.path / rel)
        return st.st_mtime_ns, st.st_ctime_ns

    def changes(rel: str, action, now_at: str | None = None) -> tuple[bool, bool]:
        before = times(rel)
        time.sleep(0.01)
        action()
        after = times(now_at or rel)
        return after[0] > before[0], after[1] > before[1]

    assert changes("d", lambda: write_file(mount.path / "d/f", b"x")) == (True, True)
    assert changes("d", lambda: os.mkdir(mount.path / "d/sub")) == (True, True)
    assert changes("d", lambda: os.rename(mount.path / "d/f", mount.path / "d/g")) == (True, True)
    assert changes("e", lambda: os.rename(mount.path / "d/g", mount.path / "e/g")) == (True, True)
    assert changes("d", lambda: os.mkfifo(mount.path / "d/p")) == (True, True)
    assert changes("d", lambda: os.unlink(mount.path / "d/p")) == (True, True)
    assert changes("d", lambda: os.rmdir(mount.path / "d/sub")) == (True, True)
    assert changes("e/g", lambda: os.chmod(mount.path / "e/g", 0o600)) == (False, True)
    assert changes("e/g", lambda: os.chown(mount.path / "e/g", 4321, 4321)) == (False, True)
    assert changes("e/g", lambda: os.link(mount.path / "e/g", mount.path / "e/h")) == (False, True)
    assert changes("e/g", lambda: os.rename(mount.path / "e/g", mount.path / "e/i"), now_at="e/i") == (False, True)
    assert changes("e/i", lambda: write_file(mount.path / "e/i", b"more")) == (True, True)
    assert changes("d", lambda: os.utime(mount.path / "d", ns=(5_000_000_000, 5_000_000_000))) == (False, True)


def test_files_made_by_another_user_through_allow_other_are_theirs(backend, public_dir, other_user):
    posix_meta = ("-o", "posix_meta") if backend.name == "s3" else ()  # S3: symlinks need it
    with checked_mount(backend, public_dir / "m", "-o", "allow_other", *posix_meta) as m:
        os.mkdir(m.path / "pub")
        os.chmod(m.path / "pub", 0o777)
        script = "; ".join([
            "import os",
            f"p = {str(m.path / 'pub')!r}",
            "fd = os.open(p + '/mine', os.O_CREAT | os.O_WRONLY, 0o644); os.write(fd, b'user data'); os.close(fd)",
            "os.chmod(p + '/mine', 0o600)",
            "open(p + '/mine', 'ab').write(b'+more')",
            "os.mkdir(p + '/dir')",
            "os.symlink('mine', p + '/link')",
        ])
        res = as_user(other_user, sys.executable, "-c", script)
        assert res.returncode == 0, res.stderr
        uid, gid = other_user.pw_uid, other_user.pw_gid
        for name in ("mine", "dir", "link"):
            st = os.lstat(m.path / "pub" / name)
            assert (st.st_uid, st.st_gid) == (uid, gid), name
        assert stat.S_IMODE(os.stat(m.path / "pub/mine").st_mode) == 0o600
        assert (m.path / "pub/mine").read_bytes() == b"user data+more"
    kept = backend.attrs("pub/mine")
    assert (kept.uid, kept.gid, stat.S_IMODE(kept.mode)) == (uid, gid, 0o600)


def test_a_write_replaces_an_mtime_set_by_utime(mount):
    mount.backend.put("f", b"data")
    os.utime(mount.path / "f", ns=(1_000_000_000, 1_000_000_000))
    assert os.stat(mount.path / "f").st_mtime_ns == 1_000_000_000
    with open(mount.path / "f", "r+b") as f:
        f.write(b"D")
    assert os.stat(mount.path / "f").st_mtime_ns > 1_000_000_000


def test_statfs_reports_the_backing_filesystem(mount):
    st = os.statvfs(mount.path)
    assert st.f_bsize == 4096 and st.f_frsize == 4096
    assert st.f_namemax == 255
    assert not st.f_flag & os.ST_RDONLY
    if keeps_directories(mount.backend):
        real = os.statvfs(mount.backend.root if mount.backend.name == "directory" else mount.backend.archive.parent)
        assert st.f_blocks == real.f_blocks * real.f_frsize // 4096
        assert st.f_files == real.f_files


# ---------------------------------------------------------------------- xattrs


def test_xattrs_are_not_supported(mount):
    mount.backend.put("f", b"x")
    f = mount.path / "f"
    assert os.listxattr(f) == []
    assert os.listxattr(mount.path) == []
    # the mount turned getxattr off at start: the kernel answers EOPNOTSUPP itself
    for path in (f, mount.path, f):
        assert err(os.getxattr, path, "user.test") == errno.ENOTSUP
    assert err(os.setxattr, f, "user.test", b"1") == errno.ENOTSUP
    assert err(os.setxattr, f, "user.test", b"1", os.XATTR_CREATE) == errno.ENOTSUP
    assert err(os.setxattr, f, "user.test", b"1", os.XATTR_REPLACE) == errno.ENODATA
    assert err(os.setxattr, f, "user.test", b"1") == errno.ENOTSUP  # not turned off by the kernel
    assert err(os.removexattr, f, "user.test") == errno.ENODATA
    assert os.listxattr(f) == []


# ---------------------------------------------------------------------- concurrency


def test_readers_see_writes_of_other_descriptors_before_close(mount):
    mount.backend.put("f", b"0123456789")
    reader = os.open(mount.path / "f", os.O_RDONLY)
    writer = os.open(mount.path / "f", os.O_WRONLY)
    try:
        assert os.pread(reader, 100, 0) == b"0123456789"
        os.pwrite(writer, b"AB", 3)
        assert os.pread(reader, 100, 0) == b"012AB56789"
        second = os.open(mount.path / "f", os.O_RDONLY)
        assert os.pread(second, 100, 0) == b"012AB56789"
        assert mount.backend.read("f") == b"0123456789"
        os.close(second)  # a reader's close stores nothing: the writer's does
        assert mount.backend.read("f") == b"0123456789"
        os.pwrite(writer, b"CD", 8)
        assert os.pread(reader, 100, 0) == b"012AB567CD"
    finally:
        os.close(writer)
        os.close(reader)
    assert mount.backend.read("f") == b"012AB567CD"


def test_concurrent_writers_of_one_file_share_one_buffer(mount):
    n, chunk, piece = 8, 64 * 1024, 4096
    p = mount.path / "shared"
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY))
    errors: list[BaseException] = []
    reads: list[int] = []

    def writer(i: int) -> None:
        try:
            fd = os.open(p, os.O_RDWR)
            try:
                for off in range(0, chunk, piece):
                    os.pwrite(fd, bytes([65 + i]) * piece, i * chunk + off)
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            fd = os.open(p, os.O_RDONLY)
            try:
                for _ in range(20):
                    data = os.pread(fd, n * chunk, 0)
                    # each byte is either not written yet (0) or its writer's letter
                    assert all(b in (0, 65 + pos * piece // chunk) for pos, b in enumerate(data[::piece]))
                    reads.append(len(data))
            finally:
                os.close(fd)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(reads) == 40
    want = b"".join(bytes([65 + i]) * chunk for i in range(n))
    assert p.read_bytes() == want
    assert mount.backend.read("shared") == want


def test_advisory_locks_are_local_to_this_machine(mount):
    mount.backend.put("f", b"x")
    fd1 = os.open(mount.path / "f", os.O_RDONLY)
    fd2 = os.open(mount.path / "f", os.O_RDONLY)
    try:
        fcntl.flock(fd1, fcntl.LOCK_EX)
        assert err(fcntl.flock, fd2, fcntl.LOCK_EX | fcntl.LOCK_NB) == errno.EWOULDBLOCK
        fcntl.flock(fd1, fcntl.LOCK_UN)
        fcntl.flock(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd1)
        os.close(fd2)


# ---------------------------------------------------------------------- read-only mounts


def test_read_only_mount_sends_one_flush_and_close_succeeds(backend, tmp_path):
    """Nothing is stored at close on a read-only mount: the first FLUSH is answered ENOSYS and the
    kernel sends no other; every close() succeeds. A writable mount gets a flush at every close."""
    backend.put("f", b"content")
    with checked_mount(backend, tmp_path / "ro", "--read-only") as m:
        for _ in range(20):
            fd = os.open(m.path / "f", os.O_RDONLY)
            assert os.read(fd, 10) == b"content"
            os.close(fd)  # no error: the kernel takes ENOSYS for "nothing to flush"
        got = counts(m.path)
        assert got["fuse.flush"] == 1 and got["fuse.open"] >= 20
    with checked_mount(backend, tmp_path / "rw") as m:  # writable: every close flushes (upload errors)
        for _ in range(20):
            os.close(os.open(m.path / "f", os.O_RDONLY))
        assert counts(m.path)["fuse.flush"] >= 20
    assert backend.read("f") == b"content"


def test_a_read_only_mounts_small_files_cost_four_requests_each(backend, tmp_path):
    """Reading small files whole on a read-only mount: lookup, open, read, release each (the read
    not sent where the file's bytes went to the kernel at its open: ``fuse.pages-stored``); the one
    flush is the first file's, answered ENOSYS (a writable mount gets a flush at every close)."""
    files = 60
    backend.put_many({f"d/{i:02d}": b"%04d" % i for i in range(files)})
    ops = ("lookup", "open", "read", "pages-stored", "flush", "release", "getattr")
    with checked_mount(backend, tmp_path / "ro", "-o", "ro") as m:
        # reading the counters (the control file) costs requests too: what one reading costs
        first, before = counts(m.path), counts(m.path)
        for i in range(files):
            assert (m.path / "d" / f"{i:02d}").read_bytes() == b"%04d" % i
        after = counts(m.path)
    got = {op: after.get(f"fuse.{op}", 0) - 2 * before.get(f"fuse.{op}", 0) + first.get(f"fuse.{op}", 0)
           for op in ops}
    got["flush"] = after["fuse.flush"] - before["fuse.flush"]  # the first close's (the control file's) only
    assert got["open"] == got["read"] + got["pages-stored"] == got["release"] == files and got["flush"] == 0, got
    assert files <= got["lookup"] <= files + 1 and got["getattr"] <= 1, got  # (and the directory's own)
    assert files * 4 <= sum(got.values()) <= files * 4 + 2, got


def test_read_only_mount_refuses_every_write_with_erofs(backend, tmp_path):
    backend.put("d/f", b"content")
    backend.put("g", b"other")
    if keeps_directories(backend):
        backend.mkdir("empty")
    before = backend_snapshot(backend)
    with checked_mount(backend, tmp_path / "ro", "--read-only") as m:
        p = m.path
        # reads work
        assert (p / "d/f").read_bytes() == b"content"
        assert sorted(os.listdir(p)) == sorted(["d", "g"] + (["empty"] if keeps_directories(backend) else []))
        assert os.stat(p / "g").st_size == 5
        assert os.statvfs(p).f_flag & os.ST_RDONLY
        fd = os.open(p / "d/f", os.O_RDONLY)
        assert os.pread(fd, 3, 2) == b"nte"
        os.close(fd)
        # every write fails with EROFS
        attempts = {
            "create": lambda: os.open(p / "new", os.O_CREAT | os.O_WRONLY),
            "open O_WRONLY": lambda: os.open(p / "g", os.O_WRONLY),
            "open O_RDWR": lambda: os.open(p / "g", os.O_RDWR),
            "open O_TRUNC": lambda: os.open(p / "g", os.O_WRONLY | os.O_TRUNC),
            "open O_APPEND": lambda: os.open(p / "g", os.O_WRONLY | os.O_APPEND),
            "truncate": lambda: os.truncate(p / "g", 0),
            "mkdir": lambda: os.mkdir(p / "newdir"),
            "rmdir": lambda: os.rmdir(p / "empty" if keeps_directories(backend) else p / "d"),
            "unlink": lambda: os.unlink(p / "g"),
            "rename": lambda: os.rename(p / "g", p / "h"),
            "rename dir": lambda: os.rename(p / "d", p / "e"),
            "link": lambda: os.link(p / "g", p / "h"),
            "symlink": lambda: os.symlink("g", p / "h"),
            "chmod": lambda: os.chmod(p / "g", 0o600),
            "chown": lambda: os.chown(p / "g", 1, 1),
            "utime": lambda: os.utime(p / "g", (1, 1)),
            "setxattr": lambda: os.setxattr(p / "g", "user.x", b"1"),
        }
        got = {name: err(fn) for name, fn in attempts.items()}
        assert got == {name: errno.EROFS for name in attempts}
        assert (p / "g").read_bytes() == b"other"
    assert backend_snapshot(backend) == before


# ---------------------------------------------------------------------- changes behind the mount


def test_changes_behind_the_mount_follow_the_metadata_ttl(backend, tmp_path):
    with checked_mount(backend, tmp_path / "m0", "--metadata-ttl", "0") as m:
        p = m.path / "late"
        assert err(os.stat, p) == errno.ENOENT
        backend.put("late", b"12345")
        assert os.stat(p).st_size == 5  # no negative entry kept with TTL 0
        backend.put("late", b"1234567")
        assert os.stat(p).st_size == 7 and p.read_bytes() == b"1234567"
        backend.put("sub/x", b"x")
        assert os.listdir(m.path / "sub") == ["x"]
    with checked_mount(backend, tmp_path / "m60", "--metadata-ttl", "60") as m:
        p = m.path / "later"
        assert err(os.stat, p) == errno.ENOENT
        backend.put("later", b"abc")
        assert err(os.stat, p) == errno.ENOENT  # the negative entry holds for the TTL
        q = m.path / "mine"
        assert err(os.stat, q) == errno.ENOENT
        q.write_bytes(b"through the mount")  # changes through the mount are seen at once
        assert os.stat(q).st_size == len(b"through the mount")
        os.unlink(q)
        assert err(os.stat, q) == errno.ENOENT
