"""The data types zarr-python 3 writes that netCDF has not, through each view, read by its reader:
bool as byte with flag_values/flag_meanings, datetime64/timedelta64 as int64 with CF units that
cftime decodes (nanoseconds as microseconds where nothing is lost), variable-length strings as
NC_STRING (4.10) or fixed chars (4.9), fixed-length bytes as strings or
char arrays; complex and structured arrays hidden, named by ``nczfs inspect``."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, mounted, run_nczfs
from tests.mount.test_view_recode import debian_read

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

VALUES = {
    "flags": np.array([True, False, True]),
    "time": np.array(["2020-01-01T00:00:00", "2020-01-02T12:00:00", "NaT"], dtype="datetime64[s]"),
    "time_ns": np.array(["2020-01-01T00:00:00.000001", "2020-01-02", "2021-06-30T01:02:03"], dtype="datetime64[ns]"),
    "time_ns_exact": np.array(["2020-01-01T00:00:00.000000001", "2020-01-02", "NaT"], dtype="datetime64[ns]"),
    "lag": np.array([1, 2, 36], dtype="timedelta64[h]"),
    "names": np.array(["a", "bcd", "é"], dtype=object),
    "codes": np.array([b"ab", b"c", b"xyz"], dtype="S3"),
    "cplx": np.array([1 + 2j, 3, 4j], dtype="c8"),
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("dtypes")
    g = zarr.open_group(str(root / "types.zarr"), mode="w", zarr_format=3)
    for name, data in VALUES.items():
        a = g.create_array(name, shape=data.shape, chunks=(2,), dtype=str if data.dtype == object else data.dtype,
                           dimension_names=["n"])
        a[:] = data
    return root


def test_the_wheel_decodes_times_flags_and_strings_through_netcdf_4_10(source, tmp_path):
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "netcdf-4.10") as m:
        with netCDF4.Dataset(f"file://{m.path}/types.zarr#mode=nczarr,file") as nc:
            assert nc["flags"][:].tolist() == [1, 0, 1] and nc["flags"].flag_meanings == "false true"
            t = nc["time"]
            assert t.units == "seconds since 1970-01-01" and t.calendar == "proleptic_gregorian"
            dates = netCDF4.num2date(t[:], t.units, t.calendar, only_use_cftime_datetimes=False)
            assert [str(d) for d in dates[:2]] == ["2020-01-01 00:00:00", "2020-01-02 12:00:00"] and dates.mask[2]
            ns = nc["time_ns"]
            assert ns.units == "microseconds since 1970-01-01"  # every value a whole microsecond
            assert str(netCDF4.num2date(ns[0], ns.units, only_use_cftime_datetimes=False)) == "2020-01-01 00:00:00.000001"
            assert nc["time_ns_exact"].units == "nanoseconds since 1970-01-01"  # 1 ns would be lost
            assert nc["lag"].units == "hours" and nc["lag"][:].tolist() == [1, 2, 36]
            assert nc["names"][:].tolist() == ["a", "bcd", "é"] and nc["codes"][:].tolist() == ["ab", "c", "xyz"]
            assert "cplx" not in nc.variables
        assert "hides 'types.zarr/cplx': dtype complex64 has no netCDF type" in m.log_text()
    res = run_nczfs("inspect", str(source / "types.zarr"))
    assert "cplx" in res.stdout and "complex64" in res.stdout, res.stdout


def test_debian_ncdump_reads_strings_as_chars_through_netcdf_4_9(source, tmp_path):
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "netcdf-4.9") as m:
        with debian_read(m.path / "types.zarr", tmp_path) as nc:
            nc.set_auto_chartostring(False)
            names = ["".join(c.decode("utf-8", "replace") for c in row.compressed()) for row in nc["names"][:]]
            assert nc["names"].dimensions == ("n", "names_strlen") and nc["names"].ncattrs() == []
            assert [n.encode("utf-8", "replace") for n in names][:2] == [b"a", b"bcd"]
            assert nc["names"].shape == (3, 3) and nc["codes"].shape == (3, 3)
            assert nc["time"][:2].tolist() == [1577836800, 1577966400] and nc["flags"][:].tolist() == [1, 0, 1]


def test_xarray_reads_every_type_through_the_xarray_view_as_it_reads_the_store(source, tmp_path):
    direct = xr.open_zarr(source / "types.zarr", consolidated=False)
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "xarray") as m:
        shown = xr.open_zarr(m.path / "types.zarr", consolidated=False, zarr_format=2)
        for name in VALUES:
            assert shown[name].values.tolist() == direct[name].values.tolist(), name


def test_consolidated_zarr_v3_metadata_gives_a_zmetadata_in_v2_views(tmp_path):
    """A v3 ``zarr.json`` holding ``consolidated_metadata`` is shown with a ``.zmetadata``: xarray's
    ``consolidated=True`` and netCDF-C's ``mode=...,consolidated`` work through the views, and it
    follows writes to the store."""
    src = tmp_path / "src"
    ds = xr.Dataset({"v": (("t",), np.arange(4.0))}, attrs={"title": "cons"})
    ds.to_zarr(src / "c.zarr", zarr_format=3, consolidated=True)
    with mounted(DirectoryBackend(src), tmp_path / "mx", "--present", "xarray") as m:
        assert (m.path / "c.zarr" / ".zmetadata").is_file()
        opened = xr.open_zarr(m.path / "c.zarr", consolidated=True, zarr_format=2)
        assert opened["v"].values.tolist() == [0.0, 1.0, 2.0, 3.0] and opened.attrs["title"] == "cons"
    with mounted(DirectoryBackend(src), tmp_path / "mn", "--present", "netcdf-4.10", "-o", "metadata_ttl=0") as m:
        with netCDF4.Dataset(f"file://{m.path}/c.zarr#mode=nczarr,file,consolidated") as nc:
            assert nc["v"][:].tolist() == [0.0, 1.0, 2.0, 3.0] and nc.title == "cons"
        g = zarr.open_group(str(src / "c.zarr"), mode="r+", zarr_format=3)
        g.attrs["title"] = "changed"
        zarr.consolidate_metadata(str(src / "c.zarr"), zarr_format=3)
        with netCDF4.Dataset(f"file://{m.path}/c.zarr#mode=nczarr,file,consolidated") as nc:
            assert nc.title == "changed"
