"""A full disk (a small tmpfs) under what the daemon writes locally: a directory store, a zip
archive and its staging directory, the temp files of pending writes (TMPDIR), the cache dir.

Asserted: the writer gets the error (``ENOSPC``) from ``close``/``fsync``/``nczfs sync``, never a
success for data that was not kept; the store keeps its previous objects, whole (no temp file
shows); the mount keeps working; once space is freed, what was acknowledged is all there.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.faults.tools import check_store, ledger, start_writer
from tests.helpers import DirectoryBackend, S3Backend, ZipBackend, mounted, pages_in_memory, run_nczfs
from tests.ziputil import zip_members

pytestmark = pytest.mark.fuse

MIB = 1024 * 1024


@contextlib.contextmanager
def small_fs(path: Path, mib: int):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0755", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(fs: Path, leave: int) -> Path:
    """A ballast file taking all but ``leave`` bytes of ``fs``."""
    st = os.statvfs(fs)
    ballast = fs / "ballast"
    with open(ballast, "wb") as f:
        f.truncate(0)
        want = st.f_bavail * st.f_frsize - leave
        for _ in range(want // MIB):
            f.write(b"\0" * MIB)
    return ballast


def _errno_of(fn) -> int | None:
    try:
        fn()
    except OSError as exc:
        return exc.errno
    return None


def test_a_full_directory_store_fails_the_close_keeps_the_old_object_and_shows_no_temp_file(tmp_path):
    with small_fs(tmp_path / "disk", 16) as disk:
        backend = DirectoryBackend(disk / "store")
        backend.mkdir("")
        backend.put("keep", b"old contents")
        ballast = _fill(disk, 2 * MIB)
        book = tmp_path / "ledger"
        with mounted(backend, tmp_path / "mnt", log=tmp_path / "log") as m:
            writer = start_writer(m.path, book, [600_000], files=20, every=5)
            writer.wait(timeout=120)
            assert "error " in book.read_text()  # the disk filled up: a close said so
            f = open(m.path / "keep", "r+b")
            f.write(b"N" * (3 * MIB))
            assert _errno_of(f.close) == errno.ENOSPC
            assert backend.read("keep") == b"old contents"
            assert not any(".nczfs-tmp-" in name for name in os.listdir(m.path))
            started, acked = ledger(book)
            objects = {k: backend.read(k) for k in backend.keys() if k != "keep" and ".nczfs-tmp-" not in k}
            assert check_store(objects, started, acked) == []
            ballast.unlink()
            (m.path / "after").write_bytes(b"space again")  # the mount works on
        assert backend.read("after") == b"space again"


def test_a_full_disk_under_a_zip_archive_fails_the_close_or_the_commit_and_loses_nothing(tmp_path):
    """Staged writes that do not fit fail their close; a commit that does not fit (a new
    archive beside the old) fails ``nczfs sync`` and leaves the old archive whole; with room
    again, the next commit holds every acknowledged write."""
    with small_fs(tmp_path / "disk", 64) as disk:
        archive = disk / "z.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            zf.writestr("z/base", os.urandom(12 * MIB))
        base = zip_members(archive)
        backend = ZipBackend(archive)
        ballast = _fill(disk, 9 * MIB)  # room for a few staged files, not for a new archive
        book = tmp_path / "ledger"
        with mounted(backend, tmp_path / "mnt", log=tmp_path / "log") as m:
            writer = start_writer(m.path, book, [2 * MIB], files=10, every=4)
            writer.wait(timeout=120)
            assert "error " in book.read_text(), book.read_text()  # a close that did not fit
            res = run_nczfs("sync", str(m.path))
            assert res.returncode == 1 and "could not be stored" in res.stderr, res.stderr
            with zipfile.ZipFile(archive) as zf:
                assert zf.testzip() is None
            assert zip_members(archive) == base  # the commit did not happen: the old archive, whole
            ballast.unlink()
            assert run_nczfs("sync", str(m.path)).returncode == 0
        started, acked = ledger(book)
        members = zip_members(archive)
        assert members["base"] == base["base"]
        assert check_store({k: v for k, v in members.items() if k != "base"}, started, acked) == []
        assert acked  # some writes were acknowledged, and they are in the archive


def test_a_full_temp_dir_fails_a_spilled_write_with_enospc_and_keeps_the_old_object(tmp_path, monkeypatch):
    """Pending writes past --write-memory go to a temp file under TMPDIR: that disk full, the write
    fails with ENOSPC, close says so, and the store keeps what it had."""
    with small_fs(tmp_path / "disk", 8) as disk:
        backend = DirectoryBackend(tmp_path / "store")
        backend.mkdir("")
        backend.put("big", b"old contents")
        monkeypatch.setenv("TMPDIR", str(disk))
        with mounted(backend, tmp_path / "mnt", "--write-memory", "4M", log=tmp_path / "log") as m:
            f = open(m.path / "big", "wb")
            code = _errno_of(lambda: [f.write(b"x" * MIB) for _ in range(24)] and f.flush())
            assert code in (errno.ENOSPC, None)
            assert _errno_of(f.close) == errno.ENOSPC
            assert backend.read("big") == b"old contents"
            (m.path / "small").write_bytes(b"fits in memory")
        assert backend.read("small") == b"fits in memory"
        assert "No space left on device" in (tmp_path / "log").read_text()


def test_a_full_cache_dir_never_fails_a_read(s3_server, tmp_path):
    with small_fs(tmp_path / "disk", 4) as disk:
        s3 = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("fullcache"))
        data = os.urandom(12 * MIB)
        s3.put("obj", data)
        with mounted(s3, tmp_path / "mnt", "--cache-dir", str(disk / "cache"), "--cache-dir-size", "1G",
                     log=tmp_path / "log") as m:
            assert (m.path / "obj").read_bytes() == data
            with open(m.path / "obj", "rb") as f:  # its pages only: the whole page cache is other workers' too
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                assert not any(pages_in_memory(f.fileno()))
            assert (m.path / "obj").read_bytes() == data
        log = (tmp_path / "log").read_text()
        assert "No space left on device" in log and "Traceback" not in log, log
