"""A local directory's small files read ahead of a reader walking them (``nczfs.cache.localahead``),
on a real mount: worker-thread calls counted by ``nczfs stats``, never a stale read of a file
changed through the mount, and what a change behind the mount's back reads as."""

from __future__ import annotations

import os

from tests.helpers import DirectoryBackend, counts, delta, mounted

FILES = 300


def walked(tmp_path) -> DirectoryBackend:
    backend = DirectoryBackend(tmp_path / "backing")
    backend.put_many({f"d/{i}": b"%06d" % i * 680 for i in range(FILES)})  # 4,080 bytes each
    return backend


def test_a_walk_of_small_files_costs_a_worker_call_per_burst_not_two_per_file(tmp_path):
    """Each small file of a walk was a lookup's ``lstat`` and a read's ``pread``, each in a worker
    thread (600 calls here); read ahead, one call reads many files' entries and bytes."""
    with mounted(walked(tmp_path), tmp_path / "mnt") as m:
        before = counts(m.path)
        for i in range(FILES):  # zarr's order: 0, 1, 2, ...
            assert (m.path / "d" / str(i)).read_bytes() == b"%06d" % i * 680
        got = delta(before, counts(m.path))
    assert got.get("store.worker-calls", 0) <= FILES // 5, got
    assert got["ahead.reads"] >= FILES * 2 // 3 and got["ahead.lookups"] >= FILES * 2 // 3, got
    # the kernel's lookups are the same; the reads of files held at their open are not sent
    assert got["fuse.lookup"] >= FILES and got["fuse.read"] + got.get("fuse.pages-stored", 0) >= FILES, got


def test_a_file_changed_through_the_mount_is_read_back_not_what_was_read_ahead(tmp_path):
    with mounted(walked(tmp_path), tmp_path / "mnt") as m:
        d = m.path / "d"
        for i in range(20):
            (d / str(i)).read_bytes()
        (d / "30").write_bytes(b"written through the mount")
        os.rename(d / "31", d / "32")
        os.unlink(d / "33")
        os.truncate(d / "34", 3)
        with open(d / "35", "r+b") as f:
            f.write(b"XY")
        for i in range(20, 40):  # the walk goes on over them
            p = d / str(i)
            want = {30: b"written through the mount", 32: b"%06d" % 31 * 680, 34: b"000", 35: b"XY" + (b"%06d" % 35 * 680)[2:]}
            if i in (31, 33):
                assert not p.exists()
                continue
            assert p.read_bytes() == want.get(i, b"%06d" % i * 680), i
        assert counts(m.path).get("ahead.reads", 0) > 0


def test_a_small_file_changed_behind_the_mount_during_a_walk_reads_as_its_burst_read_it(tmp_path):
    """Read ahead with its neighbours, a file another program rewrites before the reader gets
    to it reads (attributes and bytes) as it was when its burst read it, within 5 s; with
    ``--metadata-ttl 0`` nothing is read ahead and the change is seen."""
    backend = walked(tmp_path)
    with mounted(backend, tmp_path / "mnt") as m:
        for i in range(20):
            (m.path / "d" / str(i)).read_bytes()
        backend.put("d/30", b"rewritten behind the mount")
        assert (m.path / "d" / "30").read_bytes() == b"%06d" % 30 * 680
    with mounted(backend, tmp_path / "mnt0", "--metadata-ttl", "0") as m:
        for i in range(20):
            (m.path / "d" / str(i)).read_bytes()
        backend.put("d/31", b"rewritten behind the mount")
        assert (m.path / "d" / "31").read_bytes() == b"rewritten behind the mount"
        assert "ahead.reads" not in counts(m.path)


def test_a_file_removed_behind_the_mount_after_its_burst_reads_as_read(tmp_path):
    backend = walked(tmp_path)
    with mounted(backend, tmp_path / "mnt") as m:
        for i in range(20):
            (m.path / "d" / str(i)).read_bytes()
        os.unlink(backend.root / "d" / "30")
        assert (m.path / "d" / "30").read_bytes() == b"%06d" % 30 * 680
