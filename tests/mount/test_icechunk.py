"""Icechunk repositories mounted for real: xarray writing, committing and time travelling through
the mount, tags and snapshots read-only, conflicts, POSIX tools, Debian's ncdump through a view,
and the same on S3 storage (SeaweedFS)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import is_mounted, mounted, run_nczfs
from tests.mount.test_view_recode import debian_read

pytestmark = pytest.mark.fuse

icechunk = pytest.importorskip("icechunk")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
icechunk.set_logs_filter("error")

T1 = np.arange(12, dtype="<f4").reshape(3, 4)


@dataclass
class IcechunkBackend:
    """A repository in a local directory, or under a prefix of a bucket on SeaweedFS."""

    storage: object  # a function making the icechunk Storage
    source: str
    mount_args: tuple[str, ...] = ()

    def repo(self):
        return icechunk.Repository.open(self.storage())

    def dataset(self, branch="main", **kw) -> "xr.Dataset":
        session = self.repo().readonly_session(branch=branch, **kw) if kw else self.repo().readonly_session(branch=branch)
        return xr.open_zarr(session.store, consolidated=False).load()

    def messages(self, branch="main") -> list[str]:
        return [s.message for s in self.repo().ancestry(branch=branch)]

    def commit(self, ds: "xr.Dataset", message: str, **kw) -> str:
        session = self.repo().writable_session("main")
        ds.to_zarr(session.store, zarr_format=3, consolidated=False, **kw)
        return session.commit(message)


def v1_dataset() -> "xr.Dataset":
    return xr.Dataset({"t": (("x", "y"), T1, {"units": "K"})}, coords={"x": [10, 20, 30]}, attrs={"title": "ice"})


def made(backend: IcechunkBackend) -> IcechunkBackend:
    """v1 (tagged) as xarray writes it into Icechunk, then v2 (t times 10) on main."""
    icechunk.Repository.create(backend.storage())
    snap = backend.commit(v1_dataset(), "v1", mode="w")
    backend.repo().create_tag("v1", snap)
    backend.commit(v1_dataset().assign(t=v1_dataset().t * 10), "v2", mode="w")
    return backend


@pytest.fixture
def local(tmp_path) -> IcechunkBackend:
    path = tmp_path / "repo"
    return made(IcechunkBackend(lambda: icechunk.local_filesystem_storage(str(path)), f"icechunk://{path}"))


@pytest.fixture
def on_s3(s3_server) -> IcechunkBackend:
    bucket, prefix = s3_server.shared_bucket, s3_server.new_prefix("icemnt")

    def storage():
        from tests.s3server import ADMIN

        return icechunk.s3_storage(bucket=bucket, prefix=prefix, endpoint_url=s3_server.endpoint, allow_http=True,
                                   region="us-east-1", access_key_id=ADMIN[0], secret_access_key=ADMIN[1],
                                   force_path_style=True)

    return made(IcechunkBackend(storage, f"icechunk+s3://{bucket}/{prefix}", ("--endpoint-url", s3_server.endpoint)))


def sync(mnt: Path) -> subprocess.CompletedProcess:
    return run_nczfs("sync", str(mnt))


def test_xarray_writes_commits_and_travels_in_time_through_the_mount(local, tmp_path):
    with mounted(local, tmp_path / "mnt", "-o", "commit_message=added u") as m:
        ds = xr.open_zarr(m.path, consolidated=False)
        assert ds.t.values.tolist() == (T1 * 10).tolist() and ds.title == "ice"
        xr.Dataset({"u": (("x",), np.array([1.5, 2.5, 3.5]))}).to_zarr(m.path, mode="a", zarr_format=3, consolidated=False)
        assert local.messages()[0] == "v2"  # not before the sync
        assert sync(m.path).returncode == 0
        assert local.messages()[:2] == ["added u", "v2"]
        assert local.dataset().u.values.tolist() == [1.5, 2.5, 3.5]
        # the history, hidden from the root's listing
        assert ".icechunk" not in os.listdir(m.path)
        hist = m.path / ".icechunk"
        assert sorted(os.listdir(hist)) == ["branches", "snapshots", "tags"]
        assert os.listdir(hist / "tags") == ["v1"] and os.listdir(hist / "branches") == ["main"]
        assert sorted(os.listdir(hist / "snapshots")) == sorted(s.id for s in local.repo().ancestry(branch="main"))
        old = xr.open_zarr(hist / "tags" / "v1", consolidated=False)
        assert old.t.values.tolist() == T1.tolist() and "u" not in old
        diff = subprocess.run(["diff", "-r", str(hist / "tags" / "v1"), str(m.path)], capture_output=True, text=True)
        assert diff.returncode == 1 and f"Only in {m.path}: u" in diff.stdout and "t/c/0/0 differ" in diff.stdout
        assert f"Only in {m.path}: .icechunk" not in diff.stdout
        same = subprocess.run(["diff", "-r", str(hist / "branches" / "main"), str(m.path)], capture_output=True, text=True)
        assert same.returncode == 0, same.stdout
        with pytest.raises(OSError) as info:
            (hist / "tags" / "v1" / "t" / "zarr.json").write_bytes(b"{}")
        assert info.value.errno == errno.EROFS


def test_an_fsync_of_the_root_and_the_unmount_each_make_one_commit(local, tmp_path):
    with mounted(local, tmp_path / "mnt") as m:
        xr.Dataset({"t": (("x", "y"), T1 + 1)}).to_zarr(m.path, mode="r+", zarr_format=3, consolidated=False)
        fd = os.open(m.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        assert len(local.messages()) == 4 and local.dataset().t.values.tolist() == (T1 + 1).tolist()
        with open(m.path / "t" / "c" / "0" / "0", "r+b") as f:  # an fsync of a file commits too (as on zip)
            f.write(np.full(4, -1, "<f4").tobytes())
            f.flush()
            os.fsync(f.fileno())
            assert len(local.messages()) == 5
        xr.Dataset({"t": (("x", "y"), T1 + 2)}).to_zarr(m.path, mode="r+", zarr_format=3, consolidated=False)
    assert not is_mounted(m.path)
    messages = local.messages()
    assert len(messages) == 6 and messages[0].startswith("nczfs: writes on ")
    assert local.dataset().t.values.tolist() == (T1 + 2).tolist()


def test_a_tag_or_a_snapshot_mounts_read_only(local, tmp_path):
    snap = local.repo().lookup_tag("v1")
    for opt in ("tag=v1", f"snapshot={snap}"):
        with mounted(local, tmp_path / "mnt", "-o", opt) as m:
            assert xr.open_zarr(m.path, consolidated=False).t.values.tolist() == T1.tolist()
            with pytest.raises(OSError) as info:
                (m.path / "t" / "c" / "0" / "0").write_bytes(b"x")
            assert info.value.errno == errno.EROFS
            assert sorted(os.listdir(m.path / ".icechunk" / "snapshots")) == sorted(
                s.id for s in local.repo().ancestry(tag="v1"))


def test_a_conflicting_commit_elsewhere_fails_the_sync_and_loses_nothing(local, tmp_path):
    with mounted(local, tmp_path / "mnt") as m:
        xr.Dataset({"t": (("x", "y"), T1 + 100)}).to_zarr(m.path, mode="r+", zarr_format=3, consolidated=False)
        local.commit(xr.Dataset({"t": (("x", "y"), T1 - 100)}), "elsewhere", mode="r+")
        for _ in range(2):
            res = sync(m.path)
            assert res.returncode == 1
        assert "not committed" in m.log_text() and "conflict" in m.log_text() and "nczfs sync again" in m.log_text()
        assert xr.open_zarr(m.path, consolidated=False).t.values.tolist() == (T1 + 100).tolist()
        res = run_nczfs("umount", str(m.path))
        assert res.returncode == 1 and "not unmounted" in res.stderr and is_mounted(m.path)
        assert local.dataset().t.values.tolist() == (T1 - 100).tolist()
        subprocess.run(["fusermount3", "-u", str(m.path)], check=True)  # the daemon keeps them on a branch
        deadline = time.monotonic() + 30
        while "kept on branch" not in m.log_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    kept = [b for b in local.repo().list_branches() if b.startswith("nczfs-unmerged-main-")]
    assert len(kept) == 1 and f"kept on branch {kept[0]!r}" in m.log_text()
    assert local.dataset(branch=kept[0]).t.values.tolist() == (T1 + 100).tolist()


def test_posix_tools_copy_a_zarr_store_in_and_stray_files_hold_the_commit_back(local, tmp_path):
    src = tmp_path / "copy.zarr"
    xr.Dataset({"w": (("k",), np.arange(6.0))}).to_zarr(src, zarr_format=3, consolidated=False, encoding={"w": {"chunks": (2,)}})
    with mounted(local, tmp_path / "mnt") as m:
        subprocess.run(["cp", "-r", str(src), str(m.path / "copy")], check=True)
        (m.path / "README").write_text("not zarr\n")
        (m.path / "bad").mkdir()
        with pytest.raises(OSError) as info:  # metadata validation, as on every backend
            (m.path / "bad" / "zarr.json").write_bytes(b'{"zarr_format": 3}')
        assert info.value.errno == errno.EINVAL
        with pytest.raises(OSError) as info:  # Zarr v2 metadata: Icechunk holds none
            (m.path / "bad" / ".zgroup").write_bytes(b'{"zarr_format": 2}')
        assert info.value.errno == errno.EINVAL
        (m.path / "bad").rmdir()
        assert sync(m.path).returncode == 1 and "README" in m.log_text()
        os.unlink(m.path / "README")
        assert sync(m.path).returncode == 0
        assert subprocess.run(["diff", "-r", str(src), str(m.path / "copy")]).returncode == 0
        shutil.rmtree(m.path / "copy")
        assert not (m.path / "copy").exists()
        assert sync(m.path).returncode == 0
    messages = local.messages()
    assert len(messages) == 5  # the copy, then its removal
    session = local.repo().readonly_session(snapshot_id=list(local.repo().ancestry(branch="main"))[1].id)
    assert xr.open_zarr(session.store, group="copy", consolidated=False).w.values.tolist() == list(np.arange(6.0))


def test_ncdump_the_wheel_and_xarray_read_a_repository_xarray_wrote_through_their_views(local, tmp_path):
    with mounted(local, tmp_path / "m49", "--present", "netcdf-4.9") as m:
        with debian_read(m.path, tmp_path) as nc:
            assert nc["t"][:].tolist() == (T1 * 10).tolist() and nc["t"].units == "K"
            assert nc["x"][:].tolist() == [10, 20, 30] and nc.title == "ice"
        with debian_read(m.path / ".icechunk" / "tags" / "v1", tmp_path) as nc:
            assert nc["t"][:].tolist() == T1.tolist()
    netCDF4 = pytest.importorskip("netCDF4")
    with mounted(local, tmp_path / "m410", "--read-only", "--present", "netcdf-4.10") as m:
        with netCDF4.Dataset(f"file://{m.path}#mode=nczarr,file") as nc:  # the pip wheel's netCDF-C
            assert nc["t"][:].tolist() == (T1 * 10).tolist() and nc.title == "ice"
    with mounted(local, tmp_path / "mxa", "--read-only", "--present", "xarray") as m:
        assert xr.open_zarr(m.path, consolidated=False, zarr_format=2).t.values.tolist() == (T1 * 10).tolist()


def test_a_repository_on_s3_mounts_writes_and_commits(on_s3, tmp_path):
    with mounted(on_s3, tmp_path / "mnt", *on_s3.mount_args) as m:
        assert xr.open_zarr(m.path, consolidated=False).t.values.tolist() == (T1 * 10).tolist()
        assert xr.open_zarr(m.path / ".icechunk" / "tags" / "v1", consolidated=False).t.values.tolist() == T1.tolist()
        xr.Dataset({"t": (("x", "y"), T1 + 7)}).to_zarr(m.path, mode="r+", zarr_format=3, consolidated=False)
        assert sync(m.path).returncode == 0
        assert on_s3.dataset().t.values.tolist() == (T1 + 7).tolist() and len(on_s3.messages()) == 4


def test_a_repository_shows_a_netcdf_classic_file_with_nc_files(local, tmp_path):
    """-o nc_files over an Icechunk mount: the root dataset's .nc file holds the branch's values."""
    netCDF4 = pytest.importorskip("netCDF4")
    with mounted(local, tmp_path / "mnt", "--read-only", "--nc-files") as m:
        files = sorted(p.name for p in m.path.iterdir() if p.name.endswith(".nc"))
        assert len(files) == 1, files
        with netCDF4.Dataset(m.path / files[0]) as nc:
            assert nc["t"][:].tolist() == (T1 * 10).tolist() and nc.title == "ice"


def test_a_repository_shows_a_netcdf4_file_with_nc_files_netcdf4(local, tmp_path):
    """-o nc_files=netcdf4 over an Icechunk mount: the root dataset's .nc4 file holds the
    branch's values; h5dump finds no fault."""
    import subprocess

    netCDF4 = pytest.importorskip("netCDF4")
    with mounted(local, tmp_path / "mnt", "--read-only", "--nc-files=netcdf4") as m:
        files = sorted(p.name for p in m.path.iterdir() if p.name.endswith((".nc", ".nc4")))
        assert len(files) == 1 and files[0].endswith(".nc4"), files
        with netCDF4.Dataset(m.path / files[0]) as nc:
            assert nc["t"][:].tolist() == (T1 * 10).tolist() and nc.title == "ice"
        res = subprocess.run(["h5dump", str(m.path / files[0])], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "error" not in (res.stdout + res.stderr).lower(), res.stderr


def test_chunks_read_in_turn_are_handed_to_the_page_cache_at_their_open(on_s3, tmp_path):
    """zarr reading an array of small chunks through a read-only mount of a repository on S3:
    the chunks fetched ahead in bursts reach the kernel's page cache at their open, those still
    on their way once they arrive (the open waits for what its read would wait for), so hardly
    any is read with a READ request; every value reads back."""
    from tests.helpers import counts, delta

    session = on_s3.repo().writable_session("main")
    a = zarr.create_array(session.store, name="small", shape=(200 * 1024,), chunks=(1024,), dtype="f4",
                          compressors=None, zarr_format=3)
    a[:] = np.arange(200 * 1024, dtype="f4")
    session.commit("small chunks")
    with mounted(on_s3, tmp_path / "mnt", "--read-only") as m:
        os.listdir(m.path / "small" / "c")
        before = counts(m.path)
        got = zarr.open_array(zarr.storage.LocalStore(m.path / "small", read_only=True), mode="r")[:]
        d = delta(before, counts(m.path))
    assert got.tolist() == np.arange(200 * 1024, dtype="f4").tolist()
    assert d.get("fuse.pages-stored", 0) >= 190, d
    assert d.get("fuse.read", 0) <= 12, d  # the first chunks and zarr.json, the control file
