"""``NAME.nc4`` on Google Cloud Storage (fake-gcs-server), Azure Blob (Azurite) and web-server
mounts: the netCDF4 wheel and h5py (xarray's ``netcdf4`` and ``h5netcdf`` engines) read the file
as xarray reads the store, for chunks passed through (zlib, shuffle) and chunks re-encoded as
deflate (lz4, gzip, delta, ...)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import mounted, run_nczfs
from tests.mount.test_nc_files import tree

pytestmark = pytest.mark.fuse

h5py = pytest.importorskip("h5py")
netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """p2.zarr (xarray's, chunks passed through) and r2.zarr (chains re-encoded as deflate)."""
    from tests.nczarr import test_nc4reencode
    from tests.nczarr.test_nc4file import make_passthrough

    root = tmp_path_factory.mktemp("nc4cloud")
    make_passthrough(root / "p2.zarr", 2)
    test_nc4reencode._make(root)
    shutil.rmtree(root / "r3.zarr")
    for name in ("p2.zarr", "r2.zarr"):  # a web server lists nothing: its tree is the consolidated metadata's
        zarr.consolidate_metadata(str(root / name))
    return root


def _reads_as_the_store(local: Path, mnt: Path) -> None:
    from tests.nczarr.test_nc4file import _xarray_same

    _xarray_same(local, "p2.zarr", mnt / "p2.zarr.nc4", [])
    zg = zarr.open_group(str(local / "r2.zarr"), mode="r")
    with h5py.File(mnt / "r2.zarr.nc4", "r") as h5, netCDF4.Dataset(mnt / "r2.zarr.nc4") as nc:
        for var in zg.array_keys():
            want = zg[var][...]
            assert h5[var].compression == "gzip", var  # re-encoded as deflate
            assert np.array_equal(h5[var][...], want) and np.array_equal(nc[var][...], want), var


def _in_a_process_of_its_own(local: Path, mnt: Path) -> None:
    """:func:`_reads_as_the_store` in another process: h5py holds the GIL through a call into
    HDF5, and the GCS emulator's adapter (tests/gcsserver.py) answers the mount from a thread of
    this one."""
    code = f"from pathlib import Path; from tests.mount.test_nc4_cloud import _reads_as_the_store; " \
           f"_reads_as_the_store(Path({str(local)!r}), Path({str(mnt)!r}))"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[2])
    assert got.returncode == 0, got.stderr[-3000:]


def _clean(log: str) -> None:
    assert "Traceback" not in log and " ERROR " not in log, log


def test_nc4_files_on_gcs_and_azure_read_as_the_store(cloud, local, tmp_path):
    for key, data in tree(local).items():
        cloud.put(key, data)
    with mounted(cloud, tmp_path / "mnt", "--read-only", "-o", "nc_files=netcdf4") as m:
        _in_a_process_of_its_own(local, m.path)
    _clean(m.log_text())


def test_nc4_files_on_a_web_server_read_as_the_store(web_server, local, tmp_path):
    """A web server mount is one dataset (its consolidated metadata is the tree): its file is
    named after the source, at the mount's root."""
    site = web_server.root / "nc4site"
    shutil.copytree(local, site, dirs_exist_ok=True)
    for name in ("p2.zarr", "r2.zarr"):
        mnt, log = tmp_path / name, tmp_path / f"{name}.log"
        mnt.mkdir()
        res = run_nczfs("mount", f"{web_server.url}/nc4site/{name}", str(mnt), "--log-file", str(log),
                        "-o", "nc_files=netcdf4")
        assert res.returncode == 0, res.stderr
        try:
            (mnt / f"{name}.nc4").stat()
            (tmp_path / "files").mkdir(exist_ok=True)
            (tmp_path / "files" / f"{name}.nc4").symlink_to(mnt / f"{name}.nc4")
        except BaseException:
            assert run_nczfs("umount", str(mnt)).returncode == 0
            raise
    try:
        _in_a_process_of_its_own(local, tmp_path / "files")
    finally:
        for name in ("p2.zarr", "r2.zarr"):
            assert run_nczfs("umount", str(tmp_path / name)).returncode == 0
    for name in ("p2.zarr", "r2.zarr"):
        _clean((tmp_path / f"{name}.log").read_text())
