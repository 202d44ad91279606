"""The Python API: ``nczfs.mounted`` (a real mount, no fork of the caller) and
``nczfs.open_view`` (the views and validation in process, no FUSE), driven by zarr and xarray."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

import nczfs
from tests.helpers import is_mounted
from tests.test_cli import dirs  # noqa: F401 - the fixture: src and mnt folders

xr = pytest.importorskip("xarray")


@pytest.fixture
def v1(corpus, tmp_path):
    """netCDF-C 4.8.0's NCZarr V1 flavor: neither zarr-python nor xarray reads it as stored."""
    dst = tmp_path / "v1.file"
    shutil.copytree(corpus / "handmade" / "v1.file", dst)
    return dst


def test_open_view_serves_a_view_to_xarray_and_zarr_without_fuse(v1):
    with pytest.raises(Exception):
        xr.open_zarr(v1, consolidated=False)  # as stored: no .zgroup, no .zarray
    store = nczfs.open_view(str(v1), present="xarray", read_only=True)
    try:
        ds = xr.open_zarr(store, consolidated=False)
        assert ds["v"].dims == ("x", "y")
        np.testing.assert_array_equal(ds["v"].values, [[1, 2, 3], [4, 5, 6]])
        assert ds["v"].attrs["units"] == "m" and int(ds.attrs["n"]) == 7
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # zarr warns of objects that are not Zarr: none in the view
            group = zarr.open_group(store, mode="r")
            assert sorted(group.array_keys()) == ["v"] and list(group.group_keys()) == ["g"]
        np.testing.assert_array_equal(group["g/w"][:], [[1, 2], [3, 4]])
        assert sorted(sync(_collect(store.list()))) == [".zattrs", ".zgroup", "g/.zgroup", "g/w/.zarray",
                                                        "g/w/.zattrs", "g/w/0.0", "v/.zarray", "v/.zattrs", "v/0.0"]
        assert store.problems() == []
        assert str(v1) not in open("/proc/self/mounts").read()  # nothing mounted
    finally:
        store.close()


def test_open_view_validates_and_stores_writes(corpus, tmp_path):
    root = tmp_path / "z.file"
    shutil.copytree(corpus / "handmade" / "zarr.file", root)
    store = nczfs.open_view(str(root))
    try:
        proto = default_buffer_prototype()
        with pytest.raises(nczfs.NczfsError, match="bad/.zarray"):
            sync(store.set("bad/.zarray", proto.buffer.from_bytes(b'{"zarr_format": 2, "shape": "x"}')))
        assert not (root / "bad" / ".zarray").exists()
        a = zarr.create_array(store, name="new", shape=(4,), chunks=(2,), dtype="i4", zarr_format=2)
        a[:] = np.arange(4)
        assert sync(store.exists("new/.zarray")) and not sync(store.exists("new"))
        assert sorted(sync(_collect(store.list_dir("new/")))) == [".zarray", ".zattrs", "0", "1"]
        assert sorted(sync(_collect(store.list_prefix("new/")))) == ["new/.zarray", "new/.zattrs", "new/0", "new/1"]
    finally:
        store.close()
    assert (root / "new" / ".zarray").is_file()
    np.testing.assert_array_equal(zarr.open_array(root / "new", mode="r")[:], np.arange(4))


def test_open_view_writable_opens_read_only_for_zarr_mode_r_and_xarray(tmp_path):
    """zarr's ``open_group(store, mode="r")`` asks a writable store for a read-only copy
    (``with_read_only``); xarray's ``open_zarr`` does the same."""
    root = tmp_path / "ocean.file"
    shutil.copytree(Path(nczfs.__file__).parent / "samples" / "ocean.file", root)
    store = nczfs.open_view(str(root), present="xarray")
    try:
        assert not store.read_only
        group = zarr.open_group(store, mode="r")
        assert group.store.read_only and group.store is not store
        assert "sst" in group.array_keys()
        with pytest.raises(ValueError, match="read-only"):
            group.attrs["x"] = 1
        with pytest.raises(ValueError, match="read-only"):
            sync(group.store.set("x/.zattrs", default_buffer_prototype().buffer.from_bytes(b"{}")))
        ds = xr.open_zarr(store, consolidated=False)
        np.testing.assert_array_equal(ds["sst"].values, group["sst"][:])
        group.store.close()  # a copy's close leaves the view open
        assert sync(store.exists("sst/.zarray"))
    finally:
        store.close()
    assert not (root / "x").exists()
    ro = nczfs.open_view(str(root), read_only=True)
    try:
        with pytest.raises(ValueError, match="read_only=True"):
            ro.with_read_only(False)
    finally:
        ro.close()


async def _collect(it):
    return [x async for x in it]


@pytest.mark.fuse
def test_mounted_makes_a_mount_xarray_writes_through_and_unmounts_on_exit(dirs, tmp_path):
    src, mnt = dirs
    data = xr.Dataset({"t": (("x",), np.arange(5, dtype="f4"))})
    with nczfs.mounted(str(src), mnt, log_file=str(tmp_path / "log")) as m:
        assert is_mounted(mnt) and m.path == mnt
        assert m.pid != os.getpid() and os.getppid() != m.pid
        with open(f"/proc/{m.pid}/cmdline", "rb") as f:
            assert b"\0-m\0nczfs\0mount\0" in f.read()  # a new interpreter, not a fork of this one
        data.to_zarr(m.path / "d.zarr", zarr_format=2, consolidated=False)
        assert xr.open_zarr(m.path / "d.zarr", consolidated=False)["t"].values.tolist() == [0, 1, 2, 3, 4]
        assert m.stats()["fuse.write"] >= 1 and m.log == str(tmp_path / "log")
        m.sync()
        pid = m.pid
    assert not is_mounted(mnt) and not os.path.exists(f"/proc/{pid}")
    assert xr.open_zarr(src / "d.zarr", consolidated=False)["t"].values.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.fuse
@pytest.mark.parametrize("present, zarr_format", [("as-stored", 3), ("as-stored", 2), ("xarray", 2)])
def test_to_zarr_mode_w_into_a_folder_of_the_mount_point_replaces_the_store_each_time(dirs, tmp_path, present,
                                                                                       zarr_format):
    """``to_zarr(path, mode="w")`` removes ``path`` itself first: a mount point cannot be removed
    (EBUSY), a folder under it can, so the API's documented place is ``mnt.path / "NAME.zarr"``.
    Through the ``xarray`` view (pure Zarr v2) the group's empty ``.zattrs`` is listed, so that
    the removal takes it too (it was hidden: ENOTEMPTY)."""
    src, mnt = dirs
    first = xr.Dataset({"a": (("x",), np.arange(4.0))})
    second = xr.Dataset({"b": (("y",), np.arange(3, dtype="i4"))}, attrs={"run": 2})
    with nczfs.mounted(str(src), mnt, present=present, log_file=str(tmp_path / "log")) as m:
        first.to_zarr(m.path / "x.zarr", mode="w", zarr_format=zarr_format)
        second.to_zarr(m.path / "x.zarr", mode="w", zarr_format=zarr_format)  # replaces the store: "a" is gone
        assert list(xr.open_zarr(m.path / "x.zarr").data_vars) == ["b"]
    stored = xr.open_zarr(src / "x.zarr")
    assert list(stored.data_vars) == ["b"] and stored.attrs["run"] == 2
    np.testing.assert_array_equal(stored["b"].values, [0, 1, 2])
    assert not (src / "x.zarr" / "a").exists()


@pytest.mark.fuse
def test_to_zarr_mode_w_at_the_mount_point_deletes_what_it_holds_then_fails_ebusy(dirs, tmp_path):
    """Why the docs say to write into a folder: zarr's ``mode="w"`` removes the path itself."""
    src, mnt = dirs
    (src / "keep").mkdir()
    (src / "keep" / "f").write_text("x")
    with nczfs.mounted(str(src), mnt, log_file=str(tmp_path / "log")) as m:
        with pytest.raises(OSError) as err:
            xr.Dataset({"a": (("x",), np.arange(4.0))}).to_zarr(m.path, mode="w")
        assert err.value.errno == errno.EBUSY
    assert list(src.iterdir()) == []


@pytest.mark.fuse
def test_mounted_raises_errors_as_exceptions(dirs, tmp_path):
    src, mnt = dirs
    with pytest.raises(nczfs.MountError, match="is not a directory"):
        with nczfs.mounted(str(tmp_path / "missing"), mnt):
            pass
    with pytest.raises(nczfs.MountError, match="-o frobnicate: unknown mount option"):
        with nczfs.mounted(str(src), mnt, frobnicate=True):
            pass
    (mnt / "x").write_text("")
    with pytest.raises(nczfs.MountError, match="not empty"):
        with nczfs.mounted(str(src), mnt):
            pass
    with nczfs.mounted(str(src), mnt, nonempty=True, read_only=True, log_file=str(tmp_path / "log")) as m:
        with pytest.raises(OSError):
            (m.path / "y").write_text("")
    assert not is_mounted(mnt)


@pytest.mark.fuse
def test_mounted_whose_daemon_died_removes_the_stale_mount_and_says_so(dirs, tmp_path):
    src, mnt = dirs
    with pytest.raises(nczfs.UnmountError, match="the daemon had exited"):
        with nczfs.mounted(str(src), mnt, log_file=str(tmp_path / "log")) as m:
            os.kill(m.pid, signal.SIGKILL)
            m.process.wait()
    assert not is_mounted(mnt)


def test_the_api_names_shadow_no_submodule():
    """``from nczfs import daemon`` is the package serving a mount, not an API name (a name clash
    broke ``from nczfs import mount`` once: the package's lazy attributes answered first)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", "from nczfs import daemon; from nczfs.daemon import mount; "
                          "print(type(daemon).__name__, type(mount).__name__, mount.__name__)"],
                         capture_output=True, text=True, timeout=60)
    assert res.stdout.split() == ["module", "module", "nczfs.daemon.mount"], res.stdout + res.stderr
