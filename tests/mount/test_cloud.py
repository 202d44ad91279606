"""Google Cloud Storage, Azure Blob and web-server Zarr through real mounts, against the
emulators and web server the tests start (fake-gcs-server, Azurite, nginx)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess

import numpy as np
import pytest

from tests.helpers import counts, mounted, run_nczfs

pytestmark = pytest.mark.fuse


def clean_log(m) -> None:
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text


def test_zarr_written_through_the_mount_lands_in_the_store_and_reads_back(cloud, tmp_path):
    import zarr

    data = np.arange(40 * 40, dtype="f4").reshape(40, 40)
    with mounted(cloud, tmp_path / "mnt") as m:
        z = zarr.create_array(str(m.path / "a.zarr"), shape=(40, 40), chunks=(10, 10), dtype="f4", zarr_format=2,
                              compressors=None)
        z[:] = data
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], data)
        stats = counts(m.path)
    clean_log(m)
    keys = cloud.keys("a.zarr")
    assert len([k for k in keys if not k.endswith(".zarray") and not k.endswith(".zattrs")]) == 16, keys
    assert not [k for k in keys if ".partial" in k]
    assert stats.get("PUT", 0) >= 17, stats
    chunk = np.frombuffer(cloud.read("a.zarr/1.2"), dtype="f4").reshape(10, 10)
    assert np.array_equal(chunk, data[10:20, 20:30])


def test_posix_tools_on_objects_written_by_others(cloud, tmp_path):
    cloud.put("d/x.txt", b"hello")
    cloud.put("d/sub/y.bin", os.urandom(3 * 1024 * 1024 + 7))
    with mounted(cloud, tmp_path / "mnt") as m:
        assert sorted(os.listdir(m.path / "d")) == ["sub", "x.txt"]
        assert (m.path / "d" / "x.txt").read_bytes() == b"hello"
        assert os.stat(m.path / "d" / "sub" / "y.bin").st_size == 3 * 1024 * 1024 + 7
        assert (m.path / "d" / "sub" / "y.bin").read_bytes() == cloud.read("d/sub/y.bin")
        os.rename(m.path / "d" / "x.txt", m.path / "d" / "z.txt")
        shutil.copy(m.path / "d" / "z.txt", m.path / "copy.txt")
        os.unlink(m.path / "d" / "sub" / "y.bin")
        with pytest.raises(FileNotFoundError):
            os.stat(m.path / "nothing")
    clean_log(m)
    assert cloud.keys("") == ["copy.txt", "d/z.txt"]
    assert cloud.read("copy.txt") == b"hello"


def test_a_big_file_is_stored_whole(cloud, tmp_path):
    """Above the multipart threshold (32 MiB): GCS's XML multipart upload, Azure's block list."""
    data = np.random.default_rng(3).integers(0, 255, 40 * 1024 * 1024 + 3, dtype=np.uint8).tobytes()
    (tmp_path / "src.bin").write_bytes(data)
    with mounted(cloud, tmp_path / "mnt") as m:
        subprocess.run(["cp", str(tmp_path / "src.bin"), str(m.path / "big.bin")], check=True)
    clean_log(m)
    assert cloud.read("big.bin") == data


def test_wrong_or_missing_credentials_fail_the_mount_with_one_line(gcs_server, azurite, tmp_path, monkeypatch):
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_KEY", raising=False)
    (tmp_path / "m1").mkdir()
    (tmp_path / "m2").mkdir()
    res = run_nczfs("mount", f"az://{azurite.new_container('nokey')}/p", str(tmp_path / "m1"))
    assert res.returncode != 0 and "Azure storage account" in res.stderr, res.stderr
    res = run_nczfs("mount", "gs://nczfs-bucket/p", str(tmp_path / "m2"), "-o",
                    f"endpoint_url={gcs_server.endpoint},google_application_credentials={tmp_path}/none.json")
    assert res.returncode != 0 and "none.json: no such file" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


# ---------------------------------------------------------------------- web server (read-only)


def test_a_zarr_on_a_web_server_mounts_read_only(web_server, tmp_path):
    import zarr

    from tests.store.test_webzarr import publish

    url = publish(web_server, "mounted.zarr", 3, tmp_path)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "web.log"
    res = run_nczfs("mount", url, str(mnt), "--log-file", str(log))
    assert res.returncode == 0, res.stderr
    try:
        a = zarr.open_array(str(mnt / "temp"), mode="r")
        expect = np.full((10, 10), -1, dtype="i4")
        expect[0:4, :] = np.arange(40, dtype="i4").reshape(4, 10)
        assert np.array_equal(a[:], expect)  # chunks never written: 404 -> ENOENT -> the fill value
        assert sorted(os.listdir(mnt / "temp" / "c" / "2")) == ["0", "1", "2"]
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / "temp" / "c" / "2" / "2")
        with pytest.raises(OSError) as failed:
            (mnt / "new.txt").write_bytes(b"x")
        assert failed.value.errno == errno.EROFS
        assert np.array_equal(zarr.open_array(str(mnt / "g" / "v"), mode="r")[:], np.arange(5.0))
    finally:
        assert run_nczfs("umount", str(mnt)).returncode == 0
    text = log.read_text()
    assert "Traceback" not in text and " ERROR " not in text, text
