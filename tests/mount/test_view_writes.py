"""Writes through views (``--present``) never damage a store, on a directory and an S3 mount.

netCDF-C (the netCDF4 wheel, 4.10.1) rewrites metadata objects in place without O_TRUNC and
ignores what close() returns; netCDF4-python's mode "a" on a ``file://...#mode=`` URL silently
becomes a create with NC_CLOBBER, which deletes the dataset object by object first. Each test
checks the bytes left in the backend, read back by the wheel from a plain copy of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.helpers import mounted
from tests.mount.test_clients_netcdf import open_for_update

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")

DS = "ds.file"


def url(root: Path, name: str = DS) -> str:
    return f"file://{root}/{name}#mode=nczarr,file"


@pytest.fixture
def backend(dir_or_s3):
    return dir_or_s3


def write_wheel_dataset(tmp_path: Path, backend) -> None:
    """A dataset the wheel writes (V2-ZA): an unlimited Time, a 2-D variable, attributes."""
    local = tmp_path / "made"
    local.mkdir()
    with netCDF4.Dataset(url(local), "w") as nc:
        nc.createDimension("Time", None)
        nc.createDimension("x", 3)
        nc.title = "made by the wheel"
        v = nc.createVariable("data", "i4", ("Time", "x"))
        v.units = "m"
        v[0:2, :] = np.arange(6).reshape(2, 3)
    put_tree(local, backend)


def put_tree(local: Path, backend) -> None:
    backend.put_many({str(p.relative_to(local)): p.read_bytes() for p in local.rglob("*") if p.is_file()})


def backend_copy(backend, dest: Path) -> Path:
    """The backend's objects as a plain directory tree (what netCDF-C reads without nczfs)."""
    for key in backend.keys(DS):
        p = dest / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(backend.read(key))
    return dest


def backend_bytes(backend) -> dict[str, bytes]:
    return {k: backend.read(k) for k in backend.keys(DS)}


def assert_metadata_is_json(backend) -> None:
    """Every metadata object in the backend is standard JSON, nothing after it."""
    for key in backend.keys(DS):
        if key.rpartition("/")[2] in (".zgroup", ".zarray", ".zattrs"):
            json.loads(backend.read(key))


def test_wheel_updates_through_its_own_view_keep_the_store_readable(backend, tmp_path, monkeypatch):
    """The defect: the view re-serialised ``.zarray`` with other spacing, netCDF-C rewrote it
    shorter in place, the stale tail broke the object, close() failed, the chunk was lost."""
    write_wheel_dataset(tmp_path, backend)
    with mounted(backend, tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        nc = open_for_update(url(m.path), monkeypatch)
        try:
            nc.setncattr("added", "hello")
            nc["data"].setncattr("added_int", np.int32(7))
            nc["data"][0, 0] = 999
            nc["data"][2, :] = [7, 8, 9]  # appended along the unlimited Time
        finally:
            nc.close()
    assert_metadata_is_json(backend)
    with netCDF4.Dataset(url(backend_copy(backend, tmp_path / "copy"))) as nc:
        assert nc.added == "hello" and nc["data"].added_int == 7 and nc.title == "made by the wheel"
        assert nc["data"][:].tolist() == [[999, 1, 2], [3, 4, 5], [7, 8, 9]]
        assert nc.dimensions["Time"].isunlimited() and len(nc.dimensions["Time"]) == 3


def test_create_with_clobber_through_a_view_of_the_stored_flavor_replaces_the_dataset(backend, tmp_path):
    """The defect: the first unlink (the root ``.zattrs``, holding the superblock) turned the
    dataset into pure Zarr, and every later unlink and write was refused as mixing flavors:
    the dataset was left without its global attributes, and Python saw no error."""
    write_wheel_dataset(tmp_path, backend)
    with mounted(backend, tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        with netCDF4.Dataset(url(m.path), "w") as nc:  # NC_CLOBBER
            nc.createDimension("y", 2)
            nc.fresh = "new"
            nc.createVariable("w", "f8", ("y",))[:] = [0.5, 1.5]
    assert not [k for k in backend.keys(DS) if k.startswith(f"{DS}/data/")]  # the old array is gone
    assert_metadata_is_json(backend)
    copy = backend_copy(backend, tmp_path / "copy")
    assert read_dataset(StoreObjects(DirectoryStore(str(copy / DS)))).flavor == "V2-ZA"
    with netCDF4.Dataset(url(copy)) as nc:
        assert list(nc.variables) == ["w"] and nc["w"][:].tolist() == [0.5, 1.5]
        assert nc.ncattrs() == ["fresh"] and list(nc.dimensions) == ["y"]


def test_create_with_clobber_through_a_translating_view_is_refused_before_anything_changes(backend, tmp_path):
    """Through the netcdf-4.9 view a V2-ZA dataset is shown translated: a create over it is
    refused at its first unlink, the writes netCDF-C goes on with are refused too, the wheel
    raises, and the backend keeps every byte it had."""
    write_wheel_dataset(tmp_path, backend)
    before = backend_bytes(backend)
    with mounted(backend, tmp_path / "mnt", "--present", "netcdf-4.9") as m:
        with pytest.raises(Exception):  # noqa: B017 - RuntimeError or OSError, from create or close
            with netCDF4.Dataset(url(m.path), "w") as nc:
                nc.createDimension("y", 2)
                nc.createVariable("w", "f8", ("y",))[:] = [0.5, 1.5]
        log = m.log_text()
    assert backend_bytes(backend) == before
    assert "was refused, so every write into it is refused" in log


def test_a_refused_metadata_write_reaches_the_writer(backend, tmp_path, monkeypatch):
    """The defect: through the netcdf-4.9 view of a V2-ZA dataset the wheel's setncattr() and
    close() returned without error while the mount log said the write was lost. netCDF-C ignores
    close(): the refusal must come from write()."""
    write_wheel_dataset(tmp_path, backend)
    with mounted(backend, tmp_path / "mnt", "--present", "netcdf-4.9") as m:
        nc = netCDF4.Dataset(url(m.path), "r")  # the wheel reads a V2-UC view as pure Zarr
        nc.close()
        nc = open_for_update(url(m.path), monkeypatch)
        nc["data"].setncattr("added_int", np.int32(7))
        with pytest.raises(RuntimeError, match="Access failure"):
            nc.close()
        log = m.log_text()
    assert "refused" in log
    assert_metadata_is_json(backend)
    with netCDF4.Dataset(url(backend_copy(backend, tmp_path / "copy"))) as nc:
        assert nc["data"][:].tolist() == [[0, 1, 2], [3, 4, 5]] and nc["data"].units == "m"
