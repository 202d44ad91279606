"""Datasets made by the real writers (the netCDF4 wheel = netCDF-C 4.10.1, Debian ncgen 4.9.0,
xarray in both Zarr formats), cross-read through views by readers that cannot read them as
stored: Debian ncdump 4.9.0 (netcdf-4.9 view), the netCDF4 wheel (netcdf-4.10), xarray (xarray)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess

import numpy as np
import pytest

from nczfs.nczarr.metadata.masks import cf_attributes
from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.helpers import DirectoryBackend, mounted
from tests.nczarr.util import netcdf4_summary, summary

pytestmark = [pytest.mark.fuse, pytest.mark.skipif(shutil.which("ncgen") is None, reason="needs Debian netcdf-bin")]

netCDF4 = pytest.importorskip("netCDF4")
xr = pytest.importorskip("xarray")

CDL = """netcdf ncgen {
dimensions: time = 3 ; lat = 2 ;
variables:
  float temp(time, lat) ; temp:units = "K" ; temp:valid = 0s, 400s ;
  double lat(lat) ;
// global attributes:
  :source = "ncgen 4.9.0" ; :version = 3 ;
data:
  temp = 1, 2, 3, 4, 5, 6 ;
  lat = 10, 20 ;
group: sub {
  dimensions: n = 4 ;
  variables: int count(time, n) ;
  data: count = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 ;
  }
}
"""


def nc_url(path) -> str:
    return f"file://{path}#mode=nczarr,file"


def write_wheel(path) -> None:
    with netCDF4.Dataset(nc_url(path), "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 2)
        nc.source = "netCDF4 wheel"
        nc.setncattr("version", np.int16(3))
        t = nc.createVariable("temp", "f4", ("time", "lat"))
        t.units = "K"
        t[0:3, :] = np.arange(1, 7, dtype="f4").reshape(3, 2)
        nc.createVariable("lat", "f8", ("lat",))[:] = [10.0, 20.0]
        nc.createVariable("names", str, ("lat",))  # NC_STRING: no 4.9.0 reader handles it
        g = nc.createGroup("sub")
        g.createDimension("n", 4)
        g.createVariable("count", "i4", ("time", "n"))[:] = np.arange(12).reshape(3, 4)


def xarray_dataset():
    return xr.Dataset({"temp": (("time", "lat"), np.arange(1, 7, dtype="f4").reshape(3, 2), {"units": "K"})},
                      coords={"lat": [10.0, 20.0]}, attrs={"source": "xarray"})


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("cross") / "src"
    root.mkdir()
    write_wheel(root / "wheel.file")
    cdl = root.parent / "ncgen.cdl"
    cdl.write_text(CDL)
    subprocess.run(["ncgen", "-4", "-o", nc_url(root / "ncgen.file"), str(cdl)], check=True)
    for fmt in (2, 3):
        enc = {"temp": {"compressors": None}, "lat": {"compressors": None}}
        xarray_dataset().to_zarr(root / f"xr{fmt}.zarr", zarr_format=fmt, encoding=enc, consolidated=False)
    return root


@pytest.fixture(scope="module")
def views(source, tmp_path_factory):
    base = tmp_path_factory.mktemp("crossmnt")
    with contextlib.ExitStack() as stack:
        yield {view: stack.enter_context(mounted(DirectoryBackend(source), base / view, "--read-only", "--present", view))
               for view in ("netcdf-4.10", "netcdf-4.9", "xarray")}


def ncdump(url: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ncdump", url], capture_output=True, text=True)


def test_debian_ncdump_4_9_0_reads_what_the_netcdf4_wheel_wrote(views, source):
    direct = ncdump(nc_url(source / "wheel.file"))
    assert "_nczarr" in direct.stdout or direct.returncode != 0  # as stored: no NCZarr for 4.9.0
    res = ncdump(nc_url(views["netcdf-4.9"].path / "wheel.file"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    # no NCZarr key shows (4.9.0 reads chars without _nczarr_maxstrlen, which it would print)
    assert "_nczarr" not in out and "_NCZARR" not in out
    for line in ("\ttime = 3 ;", "\tlat = 2 ;", "\tfloat temp(time, lat) ;", '\t\ttemp:units = "K" ;',
                 '\t\t:source = "netCDF4 wheel" ;', "\t\t:version = 3s ;", "  \tint count(time, n) ;",
                 " temp =\n  1, 2,\n  3, 4,\n  5, 6 ;", " lat = 10, 20 ;"):
        assert line in out, line
    # its NC_STRING variable as chars along names_strlen (4.9.0 has no strings)
    assert "\tchar names(lat, names_strlen) ;" in out


@pytest.mark.parametrize("name", ["ncgen.file", "xr2.zarr", "xr3.zarr"])
def test_netcdf4_wheel_reads_ncgen_and_xarray_datasets_with_named_dims(views, source, name):
    path = views["netcdf-4.10"].path / name
    stored = read_dataset(StoreObjects(DirectoryStore(str(source / name), read_only=True)))
    for g in stored.root.walk():  # the mask as netCDF readers are shown it (masks.py; NaN: none)
        for v in g.variables:
            v.attributes = cf_attributes(v, stored.flavor, view=True)
    assert netcdf4_summary(path) == summary(stored)
    with netCDF4.Dataset(nc_url(path)) as nc:
        assert [d.name for d in nc["temp"].get_dims()] == ["time", "lat"]
        assert nc["temp"][:].ravel().tolist() == [1, 2, 3, 4, 5, 6] and nc["temp"].units == "K"
        if name == "ncgen.file":
            assert nc["sub"]["count"][:].ravel().tolist() == list(range(12))
            assert nc["temp"].getncattr("valid").dtype == np.int16  # typed as ncgen wrote it


@pytest.mark.parametrize("name", ["ncgen.file", "xr3.zarr"])
def test_debian_ncdump_4_9_0_reads_ncgen_and_zarr_v3_datasets(views, name):
    res = ncdump(nc_url(views["netcdf-4.9"].path / name))
    assert res.returncode == 0, res.stderr
    assert "\tfloat temp(time, lat) ;" in res.stdout
    assert " temp =\n  1, 2,\n  3, 4,\n  5, 6 ;" in res.stdout


@pytest.mark.parametrize("name", ["wheel.file", "ncgen.file"])
def test_xarray_reads_netcdf_c_datasets_with_their_dimension_names(views, name):
    m = views["xarray"].path / name
    ds = xr.open_zarr(m, consolidated=False)
    assert ds["temp"].dims == ("time", "lat") and ds["temp"].values.ravel().tolist() == [1, 2, 3, 4, 5, 6]
    assert ds["temp"].attrs["units"] == "K"
    sub = xr.open_zarr(m, group="sub", consolidated=False)
    assert sub["count"].dims == ("time", "n") and int(sub["count"].sum()) == sum(range(12))
