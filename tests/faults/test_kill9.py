"""kill -9 of the daemon while a program writes through the mount, on every backend; and (long
part) many kills at random moments, and during zip commits.

After each kill: nothing the writer was told was stored (its ``close`` returned 0) is lost,
nothing half-written is in the store (nor visible through the next mount), and on S3 no
multipart upload outlives the next mount. ``nczfs umount`` of the dead mount exits 0, or 1
naming what it left (staged zip writes, open uploads).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from nczfs.fs.early_upload import EARLY_FROM_BYTES
from nczfs.fuse.control import read_control
from nczfs.store.directory.store import TMP_MARK
from tests.faults.tools import (HOLD_SHORT_OF_END, check_store, kill_daemon, ledger, stale_umount, start_writer,
                                wait_for_acks)
from tests.helpers import NCZFS, ZipBackend, counts, mounted
from tests.ziputil import zip_members

pytestmark = pytest.mark.fuse

LONG = os.environ.get("NCZFS_FAULTS_LONG") == "1"
def long_only(fn):
    """The long part: run with NCZFS_FAULTS_LONG=1, and given an hour."""
    return pytest.mark.skipif(not LONG, reason="the long fault-injection runs: NCZFS_FAULTS_LONG=1")(
        pytest.mark.timeout(3600)(fn))

MIB = 1024 * 1024
#: small and middling files; a 40 MiB one on S3 goes up in parts while it is written (early upload)
SIZES = [200_000, 3 * MIB, 64_000, 40 * MIB]


def _objects(backend) -> dict[str, bytes]:
    return {k: backend.read(k) for k in backend.keys() if TMP_MARK not in k}


def _uploads(backend) -> list:
    client = backend.server.client()
    return client.list_multipart_uploads(Bucket=backend.bucket, Prefix=backend.prefix + "/").get("Uploads", [])


def test_the_writer_holds_its_big_file_where_parts_are_going_up():
    """The kill at the big file meets an open multipart upload only if the writer holds it past
    the size from which a file goes up in parts while it is written."""
    assert max(SIZES) - HOLD_SHORT_OF_END > EARLY_FROM_BYTES


def _wait_for_big_write(path: Path, writer: subprocess.Popen, timeout: float = 60) -> None:
    """Until the writer has begun its 40 MiB file (and had a moment to send some of it)."""
    deadline = time.monotonic() + timeout
    while not any(line.startswith("start ") and line.endswith(f" {40 * MIB}")
                  for line in (path.read_text().splitlines() if path.exists() else [])):
        assert writer.poll() is None and time.monotonic() < deadline, "the writer never began its big file"
        time.sleep(0.02)


def _wait_for_parts(mnt: Path, writer: subprocess.Popen, timeout: float = 60) -> None:
    """Until the big file's first parts went up (its multipart upload is open)."""
    deadline = time.monotonic() + timeout
    while counts(mnt).get("UploadPart", 0) < 1:
        assert writer.poll() is None and time.monotonic() < deadline, "no part of the big file was sent"
        time.sleep(0.02)


def kill_during_writes(backend, tmp_path: Path, at_big: bool, delay: float) -> dict[str, bytes]:
    """One round: mount, write, kill -9, check the store; returns what the store holds."""
    mnt, book = tmp_path / "mnt", tmp_path / f"ledger-{time.monotonic_ns()}"
    before = _objects(backend)
    with mounted(backend, mnt) as m:
        pid = read_control(str(m.path))["pid"]
        # at_big: the writer holds its big file short of its end (HOLD_SHORT_OF_END), past the size from
        # which it goes up in parts while written (EARLY_FROM_BYTES), once its first parts went
        # up, so the kill lands while its multipart upload is open (not after the upload ended)
        writer = start_writer(m.path, book, SIZES, files=40, hold=30 if at_big else 0)
        if at_big:
            _wait_for_big_write(book, writer)
            _wait_for_parts(m.path, writer)
        else:
            wait_for_acks(book, 2, writer)
        time.sleep(delay)
        kill_daemon(pid)
        if at_big:
            writer.kill()  # it holds for 30 s more; what it acknowledged is in its ledger
        writer.wait(timeout=60)
        stale_umount(m.path)
    started, acked = ledger(book)
    objects = _objects(backend)
    assert check_store(objects, started, acked, before) == []
    return objects


def test_kill_9_during_writes_loses_nothing_acknowledged_and_shows_nothing_half_written(backend, tmp_path):
    at_big = backend.name == "s3"  # a multipart upload open at the kill
    objects = kill_during_writes(backend, tmp_path, at_big=at_big, delay=0.2 if at_big else 0.05)
    if at_big:
        assert _uploads(backend), "the kill was meant to land while a big file was being sent"
    with mounted(backend, tmp_path / "mnt") as m:  # the next mount: the same files, no temp files
        assert sorted(os.listdir(m.path)) == sorted(objects)
        for name, data in objects.items():
            assert (m.path / name).read_bytes() == data, name
        if backend.name == "s3":
            assert not _uploads(backend)  # aborted by this mount
    if isinstance(backend, ZipBackend):
        assert zip_members(backend.archive) == objects  # committed whole by that mount's unmount
        with zipfile.ZipFile(backend.archive) as zf:
            assert zf.testzip() is None


@long_only
def test_many_kills_at_random_moments(backend, tmp_path):
    rng = random.Random(32)
    for round_ in range(12):
        kill_during_writes(backend, tmp_path, at_big=backend.name == "s3" and round_ % 2 == 0,
                           delay=rng.uniform(0, 1.5))
    with mounted(backend, tmp_path / "mnt"):
        if backend.name == "s3":
            assert not _uploads(backend)


@long_only
def test_many_kills_during_zip_commits(tmp_path):
    """``nczfs sync`` commits while kill -9 lands at random moments of it: the archive is always
    whole (old or new), and the next mount holds every acknowledged write."""
    rng = random.Random(7)
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("c/base", os.urandom(MIB) * 24)
    backend = ZipBackend(archive)
    for round_ in range(15):
        before = zip_members(archive)
        book = tmp_path / f"ledger-{round_}"
        with mounted(backend, tmp_path / "mnt") as m:
            pid = read_control(str(m.path))["pid"]
            writer = start_writer(m.path, book, [2 * MIB, 300_000], files=6, every=3)
            writer.wait(timeout=120)
            sync = subprocess.Popen([*NCZFS, "sync", str(m.path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0, 0.6))
            kill_daemon(pid)
            sync.wait(timeout=60)
            stale_umount(m.path)
        with zipfile.ZipFile(archive) as zf:
            assert zf.testzip() is None
        started, acked = ledger(book)
        with mounted(backend, tmp_path / "mnt"):
            pass  # replays and commits what was staged
        assert check_store(zip_members(archive), started, acked, before) == []
