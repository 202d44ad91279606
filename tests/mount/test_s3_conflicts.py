"""Concurrent writers of one S3 prefix: two real mounts (and other S3 clients) on the test
SeaweedFS server. A close over a version the writer did not start from fails with ESTALE, its
data kept beside as ``NAME.nczfs-conflict-<time>``; the other writer's object stays
(docs/SEMANTICS.md, "Concurrent writers")."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.helpers import S3Backend, counts, delta, mounted

pytestmark = pytest.mark.fuse


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("cw"))


@pytest.fixture
def two(s3, tmp_path):
    yield from two_mounts(s3, tmp_path)


def two_mounts(backend, tmp_path: Path):
    """Two mounts of one prefix (a long metadata TTL: what each saw stays what it saw)."""
    with (mounted(backend, tmp_path / "a", "-o", "metadata_ttl=60") as a,
          mounted(backend, tmp_path / "b", "-o", "metadata_ttl=60") as b):
        yield a, b
    for m in (a, b):
        assert "Traceback" not in m.log_text(), m.log_text()


def _conflicts(backend: S3Backend, name: str) -> dict[str, bytes]:
    return {k: backend.read(k) for k in backend.keys() if k.startswith(f"{name}.nczfs-conflict-")}


def _close_fails_estale(f) -> None:
    with pytest.raises(OSError) as err:
        f.close()
    assert err.value.errno == errno.ESTALE, err.value


def test_a_stale_close_fails_with_estale_and_keeps_its_data_beside(two, s3):
    """A opens ``f`` at version v0; B replaces it (v1); A's close must not overwrite v1: ESTALE,
    A's bytes in ``f.nczfs-conflict-<time>``, counted, the log naming the key and both versions."""
    a, b = two
    s3.put("f", b"v0")
    v0 = s3.server.client().head_object(Bucket=s3.bucket, Key=f"{s3.prefix}/f")["ETag"].strip('"')
    fa = open(a.path / "f", "wb")
    fa.write(b"written by A")
    (b.path / "f").write_bytes(b"written by B")
    v1 = s3.server.client().head_object(Bucket=s3.bucket, Key=f"{s3.prefix}/f")["ETag"].strip('"')
    _close_fails_estale(fa)
    assert s3.read("f") == b"written by B"
    assert list(_conflicts(s3, "f").values()) == [b"written by A"]
    assert counts(a.path)["write.conflicts"] == 1 and counts(b.path)["write.conflicts"] == 0
    line = next(line for line in a.log_text().splitlines() if "another client changed" in line)
    assert "'f'" in line and v0 in line and v1 in line and "f.nczfs-conflict-" in line, line


def test_two_creates_of_one_new_name_one_wins_the_other_gets_estale(two, s3):
    a, b = two
    fa = open(a.path / "new", "xb")
    fb = open(b.path / "new", "xb")
    fa.write(b"A made it")
    fb.write(b"B made it")
    fa.close()
    _close_fails_estale(fb)
    assert s3.read("new") == b"A made it"
    assert list(_conflicts(s3, "new").values()) == [b"B made it"]


def test_another_clients_put_in_between_gives_estale(two, s3):
    """Any S3 client's PutObject between the open and the close, not only another mount's."""
    a, _ = two
    s3.put("g", b"old")
    with open(a.path / "g", "rb") as f:
        assert f.read() == b"old"
    fa = open(a.path / "g", "r+b")
    fa.seek(0, os.SEEK_END)
    fa.write(b"+A")
    s3.put("g", b"boto3's")
    _close_fails_estale(fa)
    assert s3.read("g") == b"boto3's"
    assert list(_conflicts(s3, "g").values()) == [b"old+A"]


def test_a_rename_over_a_name_replaces_only_the_version_the_mount_read_there(two, s3):
    """zarr-python rewrites metadata it read through a temp file renamed over it: the rename
    replaces the target only while it is the version this mount read there; else ESTALE, the
    data kept (a plain temp name stays where it was; zarr's ``.partial`` is kept beside)."""
    a, _ = two
    s3.put("t1", b"v0 t1")
    s3.put("t2", b"v0 t2")
    assert (a.path / "t1").read_bytes() == b"v0 t1" and (a.path / "t2").read_bytes() == b"v0 t2"
    (a.path / "tmp1").write_bytes(b"A's t1")
    partial = a.path / ("t2." + "0" * 32 + ".partial")
    partial.write_bytes(b"A's t2")
    s3.put("t1", b"other t1")
    s3.put("t2", b"other t2")
    for src, dst in (("tmp1", "t1"), (partial.name, "t2")):
        with pytest.raises(OSError) as err:
            os.rename(a.path / src, a.path / dst)
        assert err.value.errno == errno.ESTALE
    assert s3.read("t1") == b"other t1" and s3.read("t2") == b"other t2"
    assert s3.read("tmp1") == b"A's t1"
    assert list(_conflicts(s3, "t2").values()) == [b"A's t2"]
    assert counts(a.path)["write.conflicts"] == 2
    s3.put("t3", b"seen")
    assert (a.path / "t3").read_bytes() == b"seen"
    (a.path / "tmp3").write_bytes(b"A's t3")
    os.rename(a.path / "tmp3", a.path / "t3")  # the version it read: replaced
    assert s3.read("t3") == b"A's t3"


def _workload(root: Path) -> None:
    """A single writer: new files, one chmod-ed, each rewritten, appended to, renamed over, and a
    zarr-style temp file."""
    for i in range(20):
        (root / f"w{i}").write_bytes(b"first %d" % i)
    os.chmod(root / "w2", 0o600)  # the object copied onto itself (its metadata): still the version the mount knows
    for i in range(20):
        (root / f"w{i}").write_bytes(b"second %d" % i)
        with open(root / f"w{i}", "ab") as f:
            f.write(b"+")
    (root / "tmp").write_bytes(b"renamed")
    os.rename(root / "tmp", root / "w0")
    (root / ("w1." + "0" * 32 + ".partial")).write_bytes(b"zarr")
    os.rename(root / ("w1." + "0" * 32 + ".partial"), root / "w1")


def test_a_single_writer_pays_no_extra_request_and_never_conflicts(s3_server, tmp_path):
    """The condition rides on the PUT (or copy) the write makes anyway: the same work costs the
    same requests with conditions as with ``-o overwrite=last_writer_wins``."""
    spent = _spent_by_mode(lambda mode: S3Backend(s3_server, s3_server.shared_bucket, s3_server.new_prefix("cw1")),
                           tmp_path)
    assert spent["checked"] == spent["last_writer_wins"], spent


def _spent_by_mode(make, tmp_path: Path) -> dict[str, dict[str, int]]:
    """The requests (by kind) a mount of ``make(mode)`` sent for the single writer's workload,
    with ``-o overwrite=checked`` and with ``last_writer_wins``; no conflict in either."""
    spent = {}
    for mode in ("checked", "last_writer_wins"):
        backend = make(mode)
        with mounted(backend, tmp_path / mode, "-o", f"overwrite={mode}") as m:
            before = counts(m.path)
            _workload(m.path)
            after = counts(m.path)
            assert after["write.overwrite-checked"] == (mode == "checked")
            assert after["write.conflicts"] == 0
        spent[mode] = {k: v for k, v in delta(before, after).items() if k[0].isupper()}
        assert backend.read("w0") == b"renamed" and backend.read("w1") == b"zarr" and backend.read("w5") == b"second 5+"
        assert not [k for k in backend.keys() if "nczfs-conflict" in k]
    return spent


def test_overwrite_last_writer_wins_keeps_the_old_behaviour(s3, tmp_path):
    with mounted(s3, tmp_path / "a", "-o", "overwrite=last_writer_wins") as a:
        s3.put("f", b"v0")
        fa = open(a.path / "f", "wb")
        fa.write(b"A")
        s3.put("f", b"other")
        fa.close()  # no error: the last close wins
        assert s3.read("f") == b"A"
        assert counts(a.path)["write.overwrite-checked"] == 0
    assert not _conflicts(s3, "f")


def test_an_unlink_removes_only_the_version_the_mount_saw(s3, tmp_path):
    """DeleteObject carries ``If-Match`` (SeaweedFS refuses it with 412 while the object is
    another version): an unlink of an object another client replaced since this mount saw it
    fails with ESTALE and the object stays, counted once, the log naming the key and both
    versions; an unchanged one is removed."""
    s3.put("d", b"v0")
    s3.put("e", b"v0")
    with mounted(s3, tmp_path / "a", "-o", "metadata_ttl=60") as a:
        assert (a.path / "d").read_bytes() == b"v0" and (a.path / "e").read_bytes() == b"v0"
        v0 = s3.etag("d")
        s3.put("d", b"another client's")
        v1 = s3.etag("d")
        with pytest.raises(OSError) as err:
            os.unlink(a.path / "d")
        assert err.value.errno == errno.ESTALE
        assert s3.read("d") == b"another client's"
        os.unlink(a.path / "e")
        assert not s3.exists("e")
        stats = counts(a.path)
        assert stats["write.conflicts"] == 1 and stats["write.deletes-checked"] == 1
    line = next(line for line in a.log_text().splitlines() if "unlink is refused" in line)
    assert "'d'" in line and v0 in line and v1 in line, line
