"""Concurrent writers of one GCS or Azure prefix: two real mounts (and the emulator's own client)
on fake-gcs-server (generation preconditions, through tests/gcsserver.py's adapter) and Azurite
(If-Match, If-None-Match: *). A close over a version the writer did not start from fails with
ESTALE, its data kept beside as ``NAME.nczfs-conflict-<time>``; the other writer's object stays
(docs/SEMANTICS.md, "Concurrent writers"), as on S3 (tests/mount/test_s3_conflicts.py)."""

from __future__ import annotations

import os

import pytest

from tests.helpers import CloudBackend, counts, mounted
from tests.mount import test_s3_conflicts as on_s3
from tests.mount.test_s3_conflicts import _close_fails_estale, _conflicts, _spent_by_mode

pytestmark = pytest.mark.fuse


@pytest.fixture
def two(cloud, tmp_path):
    yield from on_s3.two_mounts(cloud, tmp_path)


def test_a_stale_close_fails_with_estale_and_keeps_its_data_beside(two, cloud):
    """A opens ``f`` at version v0; B replaces it (v1); A's close must not overwrite v1: ESTALE,
    A's bytes in ``f.nczfs-conflict-<time>``, counted, the log naming the key and both versions."""
    a, b = two
    cloud.put("f", b"v0")
    v0 = cloud.etag("f")
    fa = open(a.path / "f", "wb")
    fa.write(b"written by A")
    (b.path / "f").write_bytes(b"written by B")
    v1 = cloud.etag("f")
    _close_fails_estale(fa)
    assert cloud.read("f") == b"written by B"
    assert list(_conflicts(cloud, "f").values()) == [b"written by A"]
    assert counts(a.path)["write.conflicts"] == 1 and counts(b.path)["write.conflicts"] == 0
    assert counts(a.path)["write.overwrite-checked"] == 1
    line = next(line for line in a.log_text().splitlines() if "another client changed" in line)
    assert "'f'" in line and v0 in line and v1 in line and "f.nczfs-conflict-" in line, line


def test_two_creates_of_one_new_name_one_wins_the_other_gets_estale(two, cloud):
    """As on S3 (tests/mount/test_s3_conflicts.py), on GCS and Azure."""
    on_s3.test_two_creates_of_one_new_name_one_wins_the_other_gets_estale(two, cloud)


def test_another_clients_put_in_between_gives_estale(two, cloud):
    """As on S3 (tests/mount/test_s3_conflicts.py), on GCS and Azure."""
    on_s3.test_another_clients_put_in_between_gives_estale(two, cloud)


def test_a_rename_over_a_name_replaces_only_the_version_the_mount_read_there(two, cloud):
    """As on S3 (tests/mount/test_s3_conflicts.py), on GCS and Azure."""
    on_s3.test_a_rename_over_a_name_replaces_only_the_version_the_mount_read_there(two, cloud)


def test_an_unlink_removes_only_the_version_the_mount_saw(cloud, tmp_path):
    """As on S3 (tests/mount/test_s3_conflicts.py), on GCS (google-cloud-storage's
    ``ifGenerationMatch``) and Azure (azure-storage-blob's ``If-Match``)."""
    on_s3.test_an_unlink_removes_only_the_version_the_mount_saw(cloud, tmp_path)


def test_a_server_ignoring_delete_conditions_is_found_and_unlinks_remove_whatever_is_there(gcs, tmp_path):
    """fake-gcs-server itself (1.54) ignores a DELETE's ``ifGenerationMatch`` (tests/gcsserver.py
    checks it in front of it unless told not to): the probe at mount time finds out (a delete of
    its probe object on a version it is not is carried out), says so once, ``nczfs stats`` shows
    ``write.deletes-checked 0``, and an unlink removes whatever version is there (writes stay checked)."""
    gcs.server.honour_delete_conditions = False
    try:
        gcs.put("d", b"v0")
        with mounted(gcs, tmp_path / "a", "-o", "metadata_ttl=60") as a:
            assert (a.path / "d").read_bytes() == b"v0"
            gcs.put("d", b"another client's")
            os.unlink(a.path / "d")
            stats = counts(a.path)
            assert stats["write.deletes-checked"] == 0 and stats["write.overwrite-checked"] == 1
    finally:
        gcs.server.honour_delete_conditions = True
    assert not gcs.exists("d") and not [k for k in gcs.keys() if ".nczfs-probe-" in k]
    warned = [line for line in a.log_text().splitlines() if "ignores conditional deletes" in line]
    assert len(warned) == 1 and "ifGenerationMatch" in warned[0], warned


def test_a_single_writer_never_conflicts_and_pays_what_it_did(cloud, tmp_path):
    """The condition rides on the PUT the write makes anyway; the requests the same work costs
    with conditions and with ``-o overwrite=last_writer_wins`` (docs/SEMANTICS.md says where
    they differ: a rename over a stored name is a read and a conditional PUT, not a copy)."""
    spent = _spent_by_mode(lambda mode: CloudBackend(cloud.server, cloud.bucket, cloud.scheme, cloud.mount_args,
                                                     prefix=f"w-{mode}"), tmp_path)
    print(cloud.name, spent)
    checked, plain = spent["checked"], spent["last_writer_wins"]
    # the one rename of a stored file over a stored name: a GET and a PUT where a COPY was
    assert checked.get("PUT", 0) == plain.get("PUT", 0) + 1 and checked.get("COPY", 0) == plain.get("COPY", 0) - 1
    assert checked.get("GET", 0) == plain.get("GET", 0) + 1
    assert checked.get("HEAD", 0) <= plain.get("HEAD", 0), spent


def test_overwrite_last_writer_wins_keeps_the_old_behaviour(cloud, tmp_path):
    """As on S3 (tests/mount/test_s3_conflicts.py), on GCS and Azure."""
    on_s3.test_overwrite_last_writer_wins_keeps_the_old_behaviour(cloud, tmp_path)


def test_a_server_ignoring_generation_conditions_falls_back_to_last_writer_wins(gcs, tmp_path):
    """fake-gcs-server behind an adapter that drops ``x-goog-if-generation-match`` (as a server
    ignoring it would): the mount's probe finds out, says so once, and the last close wins."""
    gcs.server.honour_conditions = False
    try:
        with mounted(gcs, tmp_path / "a") as a:
            gcs.put("f", b"v0")
            fa = open(a.path / "f", "wb")
            fa.write(b"A")
            gcs.put("f", b"other")
            fa.close()
            assert counts(a.path)["write.overwrite-checked"] == 0
    finally:
        gcs.server.honour_conditions = True
    assert gcs.read("f") == b"A" and not _conflicts(gcs, "f")
    warned = [line for line in a.log_text().splitlines() if "ignores conditional writes" in line]
    assert len(warned) == 1 and "x-goog-if-generation-match" in warned[0], warned
    assert not [k for k in gcs.keys() if ".nczfs-probe-" in k]
