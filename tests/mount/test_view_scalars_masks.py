"""Two reads of the fidelity matrix (docs/FIDELITY.md) that issue 43's strings and masks made
worse, each checked with the reader that failed: xarray's zarr engine through ``netcdf-4.10`` on
a zero-rank string (netCDF-C's corpus ``nc_test4_ref_fixedstring`` as xarray stores it), and
xarray through its own view on a Zarr v3 integer whose mask is not the array's fill 0
(``ncdump_ref_tst_utf8``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, mounted

pytestmark = pytest.mark.fuse

xr = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")

MASK = -2147483647


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """xarray's Zarr v2 and v3 of a scalar string beside an array of strings, and an int32 whose
    mask (the ``_FillValue`` attribute xarray writes undecoded) is not Zarr v3's fill 0."""
    root = tmp_path_factory.mktemp("cells")
    ds = xr.Dataset({"v1": ((), np.array("abcd")), "vn": (("n",), np.array(["abcd", "efgh", "ijkl"])),
                     "i": (("x",), np.array([1, MASK, 3], dtype="i4"), {"_FillValue": MASK})})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zarr's warnings on v3 strings
        for zf in (2, 3):
            ds.to_zarr(root / f"v{zf}.zarr", zarr_format=zf, consolidated=False)
    return root


@pytest.mark.parametrize("name", ["v2.zarr", "v3.zarr"])
def test_xarray_opens_a_scalar_string_through_netcdf_4_10(source, tmp_path, name):
    """Before: the scalar's ``.zarray`` had shape [1] and ``_ARRAY_DIMENSIONS`` [] (zarr-python:
    "zip() argument 2 is longer than argument 1"): the whole dataset failed to open."""
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "netcdf-4.10") as m:
        got = xr.open_zarr(m.path / name, consolidated=False, zarr_format=2)
        assert got["v1"].dims == ("_scalar_",) and got["v1"].values.tolist() == [b"abcd"]
        assert [b.decode() for b in got["vn"].values.tolist()] == ["abcd", "efgh", "ijkl"]
        with netCDF4.Dataset(f"file://{m.path / name}#mode=nczarr,file") as nc:  # still a scalar there
            assert nc["v1"].shape == () and nc["v1"][...] == "abcd"


def test_xarray_reads_a_v3_mask_as_fill_value_through_its_view(source, tmp_path):
    """Before: shown as ``missing_value`` (the same mask under another name); a missing chunk still
    reads 0 (zarr-python's ``null`` fill), as from the store."""
    want = xr.open_zarr(source / "v3.zarr", consolidated=False, mask_and_scale=False)
    with mounted(DirectoryBackend(source), tmp_path / "m", "--read-only", "--present", "xarray") as m:
        raw = xr.open_zarr(m.path / "v3.zarr", consolidated=False, mask_and_scale=False)
        assert raw["i"].attrs == want["i"].attrs == {"_FillValue": MASK}
        decoded = xr.open_zarr(m.path / "v3.zarr", consolidated=False)["i"].values
        assert np.array_equal(decoded, xr.open_zarr(source / "v3.zarr", consolidated=False)["i"].values, equal_nan=True)
        assert np.isnan(decoded[1]) and decoded[0] == 1
