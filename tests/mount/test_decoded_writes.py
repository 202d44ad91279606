"""The other side of the pipe (issue 43): a CF dataset written through a view by each writer
(xarray through `xarray`, the netCDF4 wheel through `netcdf-4.10`, Debian's ncgen through
`netcdf-4.9`) decodes, read back through every other path (the store directly, the views, the
`.nc` file), to what the writer meant: a packed short with a fill, a NaN-masked float, a time."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, mounted
from tests.mount.test_view_recode import nc_url

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")

TAS = [1.5, np.nan, 3.0, 0.0]
P = [250.0, np.nan, 300.0, 273.15]
TIMES = pd.date_range("2000-01-01", periods=4, freq="h").values

CDL = """netcdf ds {
dimensions:
    time = 4 ;
variables:
    int64 time(time) ;
        time:units = "hours since 2000-01-01" ;
    float tas(time) ;
        tas:_FillValue = NaNf ;
    short p(time) ;
        p:_FillValue = -32768s ;
        p:scale_factor = 0.01 ;
        p:add_offset = 273.15 ;
data:
    time = 0, 1, 2, 3 ;
    tas = 1.5, _, 3, 0 ;
    p = -2315, _, 2685, 0 ;
}
"""


def write_xarray(path):
    ds = xr.Dataset({"tas": (("time",), np.array(TAS, "f4")), "p": (("time",), np.array(P))}, coords={"time": TIMES})
    ds.p.encoding = {"dtype": "int16", "scale_factor": 0.01, "add_offset": 273.15, "_FillValue": -32768}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=2, consolidated=False)


def write_wheel(path):
    with netCDF4.Dataset(nc_url(path), "w") as nc:
        nc.createDimension("time", 4)
        t = nc.createVariable("time", "i8", ("time",))
        t.units = "hours since 2000-01-01"
        t[:] = [0, 1, 2, 3]
        nc.createVariable("tas", "f4", ("time",), fill_value=np.float32(np.nan))[:] = TAS
        p = nc.createVariable("p", "i2", ("time",), fill_value=np.int16(-32768))
        p.scale_factor, p.add_offset = 0.01, 273.15
        p[:] = np.ma.masked_invalid(P)


def write_ncgen(path, tmp_path):
    (tmp_path / "ds.cdl").write_text(CDL)
    subprocess.run(["ncgen", "-o", nc_url(path), str(tmp_path / "ds.cdl")], check=True, timeout=60)


WRITERS = {"xarray": ("xarray", write_xarray), "wheel": ("netcdf-4.10", write_wheel),
           "ncgen": ("netcdf-4.9", write_ncgen)}


def assert_means(ds, path):
    """What every writer meant, as xarray decodes it."""
    np.testing.assert_allclose(ds["tas"].values, TAS, equal_nan=True, err_msg=path)
    np.testing.assert_allclose(ds["p"].values, P, equal_nan=True, rtol=1e-6, err_msg=path)
    assert (ds["time"].values.astype("datetime64[ns]") == TIMES.astype("datetime64[ns]")).all(), path


@pytest.mark.parametrize("writer", list(WRITERS))
def test_what_a_writer_stores_through_its_view_decodes_the_same_on_every_path(writer, tmp_path):
    view, write = WRITERS[writer]
    src = tmp_path / "src"
    src.mkdir()
    with mounted(DirectoryBackend(src), tmp_path / "w", "--present", view) as m:
        if writer == "ncgen":
            write(m.path / "ds", tmp_path)
        else:
            write(m.path / "ds")
    with xr.open_dataset(src / "ds", engine="zarr", consolidated=False) as direct:
        assert_means(direct, "the store")
    for shown in ("netcdf-4.10", "xarray"):
        with mounted(DirectoryBackend(src), tmp_path / shown, "--read-only", "--present", shown, "--nc-files") as m:
            paths = {f"{shown} view (zarr)": (m.path / "ds", "zarr"), "ds.nc": (m.path / "ds.nc", "netcdf4")}
            if shown == "netcdf-4.10":
                paths["netcdf-4.10 view (wheel)"] = (nc_url(m.path / "ds"), "netcdf4")
            for name, (path, engine) in paths.items():
                with xr.open_dataset(path, engine=engine) as got:
                    assert_means(got, f"{writer} -> {name}")
