"""Small files whose bytes the daemon holds at their open go to the kernel's page cache then
(``pyfuse3.notify_store``, the open answered with keep_cache): their reads send no READ.
docs/PERFORMANCE.md, "pages at open"; docs/SEMANTICS.md's row."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.helpers import DirectoryBackend, S3Backend, counts, delta, mounted

pytestmark = pytest.mark.fuse


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("p"))


def _clean(m) -> None:
    text = m.log_text()
    assert "Traceback" not in text, text


def _walk(path, n: int, content) -> None:
    for i in range(n):
        with open(path / str(i), "rb") as f:
            assert f.read() == content(i), i


@pytest.mark.parametrize("ro", [False, True])
def test_small_objects_fetched_ahead_are_read_without_a_read_request(s3, tmp_path, ro):
    """A walk of 100 small objects: those the sibling prefetch fetched before their open are
    given to the kernel at the open, and read with no READ; every object reads its own bytes."""
    for i in range(100):
        s3.put(f"walk/{i}", bytes([i]) * (4096 + i))
    with mounted(s3, tmp_path / "mnt", *(["--read-only"] if ro else [])) as m:
        os.listdir(m.path / "walk")
        before = counts(m.path)
        _walk(m.path / "walk", 100, lambda i: bytes([i]) * (4096 + i))
        d = delta(before, counts(m.path))
    _clean(m)
    assert d["fuse.open"] == 101, d  # and the control file's (counts)
    assert d.get("fuse.pages-stored", 0) >= 80, d
    assert 100 <= d["fuse.read"] + d["fuse.pages-stored"] <= 103, d  # the control file's reads too
    assert d["GetObject"] == 100, d


def test_a_walk_of_a_directory_s_small_files_sends_no_read_for_those_read_ahead(tmp_path):
    backend = DirectoryBackend(tmp_path / "backing")
    backend.put_many({f"d/{i}": b"%06d" % i * 680 for i in range(300)})
    with mounted(backend, tmp_path / "mnt") as m:
        before = counts(m.path)
        _walk(m.path / "d", 300, lambda i: b"%06d" % i * 680)
        d = delta(before, counts(m.path))
    _clean(m)
    assert d.get("fuse.pages-stored", 0) >= 200, d
    assert d["fuse.read"] <= 300 - d["fuse.pages-stored"] + 3, d


def test_an_object_another_client_rewrites_reads_whole_as_its_open_pinned_it(s3, tmp_path):
    """Objects fetched ahead, then rewritten by another client (longer) before the reader opens
    them: read as the version the open pinned, whole, never the old version's pages with the new
    one's tail; opened again once the mount knows the new version, read whole as that."""
    old = lambda i: bytes([i]) * 4096  # noqa: E731
    new = lambda i: b"N" * 6000  # noqa: E731
    for i in range(40):
        s3.put(f"w/{i}", old(i))
    with mounted(s3, tmp_path / "mnt") as m:
        w = m.path / "w"
        os.listdir(w)
        _walk(w, 20, old)  # the next ones are fetched ahead
        time.sleep(0.3)
        before = counts(m.path)["fuse.pages-stored"]
        opened = open(w / "20", "rb")  # fetched ahead: given to the kernel at its open
        stored = counts(m.path)["fuse.pages-stored"] - before
        for i in range(20, 30):
            s3.put(f"w/{i}", new(i))
        assert opened.read() == old(20)
        opened.close()
        for i in range(21, 30):
            got = (w / str(i)).read_bytes()
            assert got in (old(i), new(i)), (i, len(got))
        time.sleep(1.5)  # the metadata TTL: the next lookups see the new versions
        for i in range(20, 30):
            assert (w / str(i)).read_bytes() == new(i), i
    _clean(m)
    assert stored == 1, stored


def test_concurrent_readers_of_one_small_file_never_hang(s3, tmp_path):
    """Many threads open, read and close one small object at once, its pages dropped now and
    then (so reads reach the daemon while others open it): the kernel's page locks never make
    the daemon wait for itself."""
    s3.put("one/0", b"a" * 4096)
    s3.put("one/1", b"b" * 4096)
    with mounted(s3, tmp_path / "mnt", "--read-only") as m:
        p = m.path / "one"
        failures: list[object] = []

        def reader(n: int) -> None:
            try:
                for r in range(150):
                    for name, want in (("0", b"a" * 4096), ("1", b"b" * 4096)):
                        fd = os.open(p / name, os.O_RDONLY)
                        try:
                            if (n + r) % 5 == 0:
                                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                            assert os.pread(fd, 8192, 0) == want
                        finally:
                            os.close(fd)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=reader, args=(n,), daemon=True) for n in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        hung = [t for t in threads if t.is_alive()]
        assert not hung, "readers hung: the daemon waits on a page lock"
        assert not failures, failures
        assert counts(m.path)["fuse.pages-stored"] > 0
    _clean(m)
