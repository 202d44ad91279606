"""Types a netCDF reader lacks keep their meaning (issue 43): strings and bool written by xarray
at its defaults (Zarr v2: ``|O`` with vlen-utf8, ``<U<n>``, ``|b1``; Zarr v3: ``string``,
``fixed_length_utf32``, ``bool``), read back decoded through ``NAME.nc`` (xarray's netcdf4
engine, Debian's ncdump) and the netCDF views (the netCDF4 wheel, xarray through the wheel and
with its zarr engine), compared with xarray reading the store directly."""

from __future__ import annotations

import subprocess
import warnings

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, S3Backend, mounted
from tests.mount.test_view_recode import debian_read

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
xr = pytest.importorskip("xarray")

#: what xarray writes at its defaults: variable-length str (object), fixed str (<U3), bool
DATA = {
    "names": np.array(["a", "bcd", "é", ""], dtype=object),
    "fixed": np.array(["ab", "c", "xyz", "é"]),
    "flags": np.array([True, False, True, False]),
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("decoded")
    ds = xr.Dataset({name: (("n",), data) for name, data in DATA.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr's warnings on v3 strings
        ds.to_zarr(root / "v2.zarr", zarr_format=2, consolidated=False)
        ds.to_zarr(root / "v3.zarr", zarr_format=3, consolidated=False)
    return root


def direct(source, name):
    return xr.open_zarr(source / name, consolidated=False)


def assert_decoded_equal(got, want, path):
    """Every variable decoded to the same values, strings as str and bool as bool."""
    for name in DATA:
        assert name in got.variables, f"{path}: {name} vanished"
        g, w = got[name].values, want[name].values
        assert g.tolist() == w.tolist(), f"{path}: {name}: {g.tolist()} != {w.tolist()}"
        if w.dtype == bool:
            assert g.dtype == bool, f"{path}: {name} is {g.dtype}, not bool"
        else:
            assert all(isinstance(x, str) for x in g.ravel()), f"{path}: {name} is {g.dtype}, not str"


def backend_of(kind, source, request):
    """The datasets of ``source`` on a directory, or copied to S3 (SeaweedFS on 127.0.0.1)."""
    if kind == "directory":
        return DirectoryBackend(source)
    server = request.getfixturevalue("s3_server")
    backend = S3Backend(server, server.shared_bucket, server.new_prefix())
    backend.put_many({str(p.relative_to(source)): p.read_bytes() for p in source.rglob("*") if p.is_file()})
    return backend


@pytest.mark.parametrize("kind", ["directory", "s3"])
@pytest.mark.parametrize("name", ["v2.zarr", "v3.zarr"])
def test_nc_files_decode_strings_and_bool_as_xarray_reads_the_store(source, tmp_path, name, kind, request):
    """Before: the variable-length strings vanished (and v3's fixed strings, v2's bool), bool
    came back int8."""
    with mounted(backend_of(kind, source, request), tmp_path / "m", "--read-only", "--nc-files") as m:
        nc = m.path / f"{name}.nc"
        with xr.open_dataset(nc, engine="netcdf4") as got:
            assert_decoded_equal(got, direct(source, name), nc)
        res = subprocess.run(["ncdump", str(nc)], capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert 'names =\n  "a",\n  "bcd",\n  "\\303\\251",\n  "" ;' in res.stdout, res.stdout
        assert 'flags:dtype = "bool" ;' in res.stdout and 'names:_Encoding = "utf-8" ;' in res.stdout


@pytest.mark.parametrize("view", ["netcdf-4.10", "netcdf-4.9.1"])
@pytest.mark.parametrize("name", ["v2.zarr", "v3.zarr"])
def test_netcdf_views_decode_strings_and_bool_as_xarray_reads_the_store(source, tmp_path, name, view):
    """Through the netCDF4 wheel (NC_STRING) and xarray over it: strings as str, bool as bool.
    xarray's zarr engine reads the same view's strings as the bytes netCDF-C is shown (fixed
    width, UTF-8): decoded, they are the same; its bool is bool, false not masked (Zarr v3's fill
    false is no mask: shown as no fill_value, which netCDF-C reads missing chunks of as 0 too)."""
    want = direct(source, name)
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", view) as m:
        url = f"file://{m.path / name}#mode=nczarr,file"
        with netCDF4.Dataset(url) as nc:
            assert nc["names"][:].tolist() == DATA["names"].tolist()
            assert nc["fixed"][:].tolist() == DATA["fixed"].tolist()
            assert nc["flags"].getncattr("dtype") == "bool"
        if view == "netcdf-4.10":  # the wheel reads 4.9.1's spelling of NCZarr too, xarray over it
            with xr.open_dataset(url, engine="netcdf4") as got:
                assert_decoded_equal(got, want, url)
        zarr_read = xr.open_zarr(m.path / name, consolidated=False, zarr_format=2)
        assert zarr_read["flags"].dtype == bool and zarr_read["flags"].values.tolist() == DATA["flags"].tolist()
        for s in ("names", "fixed"):
            assert [b.decode("utf-8") for b in zarr_read[s].values.tolist()] == want[s].values.tolist()


@pytest.mark.parametrize("name", ["v2.zarr", "v3.zarr"])
def test_debian_ncdump_reads_every_string_through_netcdf_4_9(source, tmp_path, name):
    """Before: v2's strings and bool, v3's fixed strings were hidden from the netcdf-4.9 view."""
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "netcdf-4.9") as m:
        with debian_read(m.path / name, tmp_path) as nc:
            nc.set_auto_chartostring(False)
            for s in ("names", "fixed"):
                rows = [b"".join(c for c in row.compressed()).rstrip(b"\0") for row in nc[s][:]]
                assert [r.decode("utf-8") for r in rows] == DATA[s].tolist(), s
            assert nc["flags"][:].tolist() == [1, 0, 1, 0] and nc["flags"].getncattr("dtype") == "bool"


def test_nc_file_strings_widen_when_a_longer_string_is_written(tmp_path):
    """The width of variable-length strings comes from a scan of their chunks, repeated when one
    changes: a longer string written through the mount is read whole from the rebuilt file."""
    src = tmp_path / "src"
    xr.Dataset({"names": (("n",), DATA["names"])}).to_zarr(src / "s.zarr", zarr_format=2, consolidated=False)
    with mounted(DirectoryBackend(src), tmp_path / "m", "--nc-files", "-o", "metadata_ttl=0") as m:
        with xr.open_dataset(m.path / "s.zarr.nc", engine="netcdf4") as got:
            assert got["names"].values.tolist() == DATA["names"].tolist()
        longer = ["a much longer string", "b", "ç", ""]
        xr.Dataset({"names": (("n",), np.array(longer, dtype=object))}).to_zarr(
            m.path / "s.zarr", mode="r+", consolidated=False)
        with xr.open_dataset(m.path / "s.zarr.nc", engine="netcdf4", cache=False) as got:
            assert got["names"].values.tolist() == longer


def test_a_missing_chunk_of_zarr_v3_bool_reads_false_and_no_false_is_masked(tmp_path):
    """zarr-python writes no chunk that is all fill (false): through the netCDF views it reads as
    false, and xarray's zarr engine masks no false (before: the view's fill_value 0 masked every
    false, which then read as True)."""
    src = tmp_path / "src"
    ds = xr.Dataset({"flags": (("n",), np.array([True, False, False, False]))})
    ds["flags"].encoding["chunks"] = (2,)
    ds.to_zarr(src / "b.zarr", zarr_format=3, consolidated=False)
    assert sorted(p.name for p in (src / "b.zarr" / "flags" / "c").iterdir()) == ["0"]
    want = [True, False, False, False]
    for view in ("netcdf-4.10", "netcdf-4.9"):
        with mounted(DirectoryBackend(src), tmp_path / view, "--read-only", "--present", view) as m:
            zarr_read = xr.open_zarr(m.path / "b.zarr", consolidated=False, zarr_format=2)
            assert zarr_read["flags"].values.tolist() == want, view
            if view == "netcdf-4.10":
                with xr.open_dataset(f"file://{m.path / 'b.zarr'}#mode=nczarr,file", engine="netcdf4") as got:
                    assert got["flags"].values.tolist() == want
            else:
                with debian_read(m.path / "b.zarr", tmp_path) as nc:
                    assert nc["flags"][:].tolist() == [1, 0, 0, 0]
