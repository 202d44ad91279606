"""The S3 server (SeaweedFS) stopped (SIGSTOP, then SIGCONT) and killed (SIGKILL, then started
again) under a mount that writes and reads.

Asserted: the error comes in bounded time (with ``-o read_timeout=1,retries=1``: a request is
given up after two attempts of a second; the bounds below are generous multiples), nothing
acknowledged is lost, nothing half-written is visible, a write whose answer never came is called
of unknown outcome and never lost, nothing the log calls lost appears later, and no multipart
upload outlives the next mount. The long part (``NCZFS_FAULTS_LONG=1``) runs writers and readers
through many stops and kills, at the default bounds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import threading
import time
from pathlib import Path

import pytest

from nczfs.store.objstore.obprefix import ASYNC_GET_FROM
from nczfs.store.objstore.options import S3Options
from tests.faults.tools import NOT_STORED, UNKNOWN, check_store, ledger, reported, start_writer, wait_for_acks
from tests.helpers import S3Backend, counts, delta, is_mounted, mounted, run_nczfs

pytestmark = pytest.mark.fuse

LONG = os.environ.get("NCZFS_FAULTS_LONG") == "1"
TIGHT = ("-o", "read_timeout=1,retries=1")
#: seconds within which an error must come with TIGHT bounds: a write's two attempts, the HEAD
#: that checks it, botocore's pauses, a lookup's own attempts; about 5 s is expected
BOUND = 30


@pytest.fixture
def s3(s3_server):
    """A prefix of its own on the session's server; the server runs again whatever the test did."""
    backend = S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("fault"))
    yield backend
    if s3_server.proc is not None:
        s3_server.thaw()
    else:
        s3_server.start()


@contextlib.contextmanager
def frozen(server):
    server.freeze()
    try:
        yield
    finally:
        server.thaw()


def _errno_of(fn) -> tuple[int | None, float]:
    t0 = time.monotonic()
    try:
        fn()
    except OSError as exc:
        return exc.errno, time.monotonic() - t0
    return None, time.monotonic() - t0


def _uploads(backend) -> list:
    client = backend.server.client()
    return client.list_multipart_uploads(Bucket=backend.bucket, Prefix=backend.prefix + "/").get("Uploads", [])


def test_writes_meeting_a_stopped_server_fail_in_bounded_time_and_are_never_called_lost(s3, tmp_path):
    s3.put("keep", b"old contents")
    with mounted(s3, tmp_path / "mnt", *TIGHT, "-o", "metadata_ttl=60") as m:
        assert (m.path / "keep").read_bytes() == b"old contents"
        f = open(m.path / "keep", "r+b")
        f.write(b"NEW")
        f.flush()
        g = open(m.path / "synced", "wb")
        g.write(b"fsync first")
        g.flush()  # to the daemon, not in Python's buffer
        before = counts(m.path)
        with frozen(s3.server):
            code, took = _errno_of(f.close)
            assert code == errno.EIO and took < BOUND, (code, took)
            code, took = _errno_of(lambda: os.fsync(g.fileno()))
            assert code == errno.EIO and took < BOUND, (code, took)
            sent = delta(before, counts(m.path)).get("PutObject", 0)  # the control file needs no server
            code, took = _errno_of(g.close)
            assert code == errno.EIO and took < BOUND, (code, took)
            # the close after the unanswered fsync answered at once: no third round of PUTs
            assert delta(before, counts(m.path)).get("PutObject", 0) == sent == 4, delta(before, counts(m.path))
        log = m.log_text()
        assert reported(log, UNKNOWN) == {"keep", "synced"} and not reported(log, NOT_STORED), log
        # thawed, the server carries out what it was sent: the new versions may appear, whole
        deadline = time.monotonic() + 10
        while s3.read("keep") == b"old contents" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert s3.read("keep") in (b"old contents", b"NEW contents")
        assert not s3.exists("synced") or s3.read("synced") == b"fsync first"
        (m.path / "after").write_bytes(b"the mount works again")
        assert s3.read("after") == b"the mount works again"


@pytest.mark.parametrize("size", [100_000, 3 * 1024 * 1024], ids=["small", "large"])
def test_a_cold_read_and_a_lookup_on_a_stopped_server_fail_in_bounded_time(s3, tmp_path, size):
    """A small object's GET goes from a worker thread, a large one's through the store's asyncio
    loop (``gets-on-loop``): both give up within the bounds."""
    s3.put("cold", b"c" * size)
    with mounted(s3, tmp_path / "mnt", *TIGHT, "-o", "metadata_ttl=60") as m:
        assert os.stat(m.path / "cold").st_size == size  # known; its bytes never read
        before = counts(m.path)
        with frozen(s3.server):
            code, took = _errno_of(lambda: (m.path / "cold").read_bytes())
            assert code == errno.EIO and took < BOUND, (code, took)
            code, took = _errno_of(lambda: os.stat(m.path / "never-seen"))
            assert code == errno.EIO and took < BOUND, (code, took)
        assert bool(delta(before, counts(m.path)).get("gets-on-loop")) == (size >= ASYNC_GET_FROM)
        assert (m.path / "cold").read_bytes() == b"c" * size
    assert "Traceback" not in m.log_text()


def test_nczfs_mount_against_a_stopped_server_fails_in_bounded_time(s3, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with frozen(s3.server):
        t0 = time.monotonic()
        res = run_nczfs("mount", s3.source, str(mnt), *s3.mount_args, *TIGHT, timeout=120)
        took = time.monotonic() - t0
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "cannot reach S3" in res.stderr, res.stderr
    assert took < BOUND and not is_mounted(mnt)


def test_writes_meeting_a_killed_server_are_not_stored_stay_so_and_leave_no_upload(s3, tmp_path):
    """Killed, the server refuses connections: the writes are certainly not stored (the log says
    so), and stay so once it runs again; a big file sent in parts while written leaves an upload
    that the next mount aborts."""
    s3.put("keep", b"old contents")
    book = tmp_path / "ledger"
    with mounted(s3, tmp_path / "mnt", *TIGHT) as m:
        writer = start_writer(m.path, book, [300_000, 40 * 1024 * 1024], files=4, every=100)
        wait_for_acks(book, 1, writer)
        f = open(m.path / "keep", "r+b")
        f.write(b"NEW")
        f.flush()  # to the daemon, which now holds the file's new content
        while "start f001" not in book.read_text():
            time.sleep(0.02)
        time.sleep(1.0)  # some of the big file's parts are on their way
        s3.server.kill()
        try:
            code, took = _errno_of(f.close)
            assert code == errno.EIO and took < BOUND, (code, took)
            writer.wait(timeout=120)
        finally:
            s3.server.start()
        log = m.log_text()
        assert "keep" in reported(log, NOT_STORED), log
        time.sleep(2)  # nothing held anywhere carries it out later
        assert s3.read("keep") == b"old contents"
    started, acked = ledger(book)
    objects = {k: s3.read(k) for k in s3.keys()}
    assert check_store({k: v for k, v in objects.items() if k != "keep"}, started, acked) == []
    with mounted(s3, tmp_path / "mnt"):
        assert not _uploads(s3)


# ---------------------------------------------------------------------- the long part


@pytest.mark.skipif(not LONG, reason="the long fault-injection runs: NCZFS_FAULTS_LONG=1")
@pytest.mark.timeout(3600)
def test_writers_and_readers_through_many_stops_and_kills_at_the_default_bounds(s3, tmp_path):
    """Eight rounds: a writer and a reader run while the server is stopped for 0-40 s or killed;
    every error comes within (retries + 1) x read_timeout and the pauses of the attempts that
    were under way, and the store passes the checks after each round."""
    rng = random.Random(33)
    for round_ in range(8):
        s3 = S3Backend(s3.server, s3.bucket, s3.server.new_prefix("faultlong"))  # a store of its own
        s3.put("r", os.urandom(3 * 1024 * 1024))
        book = tmp_path / f"ledger-{round_}"
        errors: list[float] = []
        with mounted(s3, tmp_path / "mnt", "-o", "metadata_ttl=0") as m:
            writer = start_writer(m.path, book, [100_000, 2 * 1024 * 1024, 40 * 1024 * 1024], files=30, pause=0.1)
            stop = threading.Event()

            def read() -> None:
                while not stop.is_set():
                    err, took = _errno_of(lambda: (m.path / "r").read_bytes())
                    if err is not None:
                        errors.append(took)

            reader = threading.Thread(target=read)
            reader.start()
            time.sleep(rng.uniform(0.5, 3))
            if round_ % 3 == 2:
                s3.server.kill()
                time.sleep(rng.uniform(0, 10))
                s3.server.start()
            else:
                with frozen(s3.server):
                    time.sleep(rng.uniform(0, 40))
            writer.wait(timeout=600)
            stop.set()
            reader.join(timeout=120)
            log = m.log_text()
        lost = reported(log, NOT_STORED)
        started, acked = ledger(book)
        snapshot = {k: s3.read(k) for k in s3.keys() if k != "r"}
        assert check_store(snapshot, started, acked) == [], round_
        time.sleep(5)
        for name in lost:  # nothing reported lost appears later
            assert s3.exists(name) is False or s3.read(name) == snapshot.get(name), name
        per_request = (S3Options.retries + 1) * S3Options.read_timeout  # the default bounds' worst case
        assert all(t < 2 * per_request + 15 for t in errors), errors  # a lookup and a read
        with mounted(s3, tmp_path / "mnt", log=tmp_path / f"again-{round_}.log") as again:
            assert not _uploads(s3), log + again.log_text()
