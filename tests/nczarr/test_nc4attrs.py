"""Large and many attributes in NAME.nc4 (dense attribute storage: a fractal heap and two
version-2 B-trees named by an Attribute Info message): attributes of 100 KiB and 1 MiB, text and
numeric, and 2,000 attributes on a variable and the root group, read value-equal to the store by
h5py, xarray's netcdf4 and h5netcdf engines and Debian's ncdump; h5dump reports no error. Beyond
what dense storage holds here (16 MiB an object) an attribute is left out, named."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.nczarr.hdf5util import check_file, h5dump
from tests.nczarr.nc4util import write_nc4

h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")

MANY = {f"a{i}": i for i in range(2000)}


def make_large_attrs(path: Path) -> None:
    """A dataset whose root and variable ``v`` each have attributes of 100 KiB and 1 MiB (text and
    numeric) and 2,000 more; its coordinate ``x`` one of 100 KiB."""
    big = {"text_100k": "t" * (100 << 10), "text_1m": "é" * (1 << 19), "nums_100k": np.arange(100 << 8, dtype="f4"),
           "nums_1m": np.arange(1 << 17, dtype="i8") - 7}
    ds = xr.Dataset({"v": (("x",), np.arange(3, dtype="i4"), {**big, **MANY, "units": "m"})},
                    coords={"x": ("x", np.arange(3.0), {"note": "n" * 100_000})},
                    attrs={"title": "large", **big, **MANY})
    ds.to_zarr(path, zarr_format=2, consolidated=False, encoding={"v": {"compressors": None}})
    sub = xr.Dataset({"w": (("y",), np.arange(2, dtype="f8"))}, attrs={"text_100k": "s" * (100 << 10), **MANY})
    sub.to_zarr(path, group="sub", zarr_format=2, consolidated=False)


def same_attrs(got: dict, want: dict) -> None:
    """``got`` holds ``want``'s attributes (in its order) with equal values."""
    assert [k for k in got if k in want] == list(want), (list(got)[:8], list(want)[:8])
    for k, w in want.items():
        g = got[k]
        g = g.decode() if isinstance(g, bytes) else g
        if isinstance(w, str):
            assert g == w, k
        else:
            assert np.array_equal(np.asarray(g).ravel(), np.asarray(w).ravel()), k


def check_large_attrs(path: Path, store: Path) -> None:
    """Every reader reads ``path`` (the NAME.nc4 of :func:`make_large_attrs`' store) as xarray
    reads the store."""
    want = xr.open_zarr(store, consolidated=False)
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(path, engine=engine) as got:
            same_attrs(got.attrs, want.attrs)
            same_attrs(got["v"].attrs, want["v"].attrs)
            same_attrs(got["x"].attrs, want["x"].attrs)
            assert got["v"].dims == ("x",) and list(got["v"].values) == [0, 1, 2], engine
        with xr.open_dataset(path, engine=engine, group="sub") as got:
            same_attrs(got.attrs, xr.open_zarr(store, group="sub", consolidated=False).attrs)
    with h5py.File(path, "r") as f:
        same_attrs(dict(f.attrs), want.attrs)
        same_attrs(dict(f["v"].attrs), want["v"].attrs)
    res = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "\t\tv:a1999 = 1999 ;" in res.stdout and ':text_100k = "' + "t" * (100 << 10) + '"' in res.stdout
    assert "\t\tx:note = \"nnnnnnnn" in res.stdout and "v:nums_1m = -7, -6, -5" in res.stdout
    assert 'group: sub {' in res.stdout and ':text_100k = "sss' in res.stdout
    h5dump(path, "-A")
    res = subprocess.run(["h5ls", "-r", "-v", str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "error" not in (res.stdout + res.stderr).lower(), res.stderr
    assert res.stdout.count("Attribute: a1999 {1}") == 3  # the root, v and sub
    check_file(path)


def test_large_and_many_attributes_read_equal_through_every_reader(tmp_path):
    make_large_attrs(tmp_path / "a.zarr")
    f, path = write_nc4(tmp_path, "a.zarr", tmp_path / "a.nc4")
    assert f.left_out == []
    check_large_attrs(path, tmp_path / "a.zarr")
    copy = tmp_path / "copy.nc4"  # netCDF-C's own netCDF-4 file of what it read: the same ncdump
    res = subprocess.run(["nccopy", "-k", "nc4", str(path), str(copy)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    dumps = [subprocess.run(["ncdump", str(p)], capture_output=True, text=True, timeout=300).stdout for p in (path, copy)]
    assert dumps[0].split("\n", 1)[1] == dumps[1].split("\n", 1)[1]


def test_an_attribute_beyond_dense_storage_is_logged_once_naming_it_and_inspect_notes_it(tmp_path, caplog):
    import logging

    import netCDF4
    import trio

    from nczfs.nczarr.ncfile.ncversions import build_files
    from nczfs.store.directory.store import DirectoryStore
    from nczfs.store.threads import ThreadedStore
    from tests.helpers import run_nczfs

    ds = xr.Dataset({"v": (("x",), np.arange(3, dtype="i4"), {"units": "m"})},
                    attrs={"big": "b" * (17 << 20), "title": "t", "text": "t" * 100_000})
    ds.to_zarr(tmp_path / "a.zarr", zarr_format=2, consolidated=False, encoding={"v": {"compressors": None}})
    f, path = write_nc4(tmp_path, "a.zarr", tmp_path / "a.nc4")
    assert [w.split(": ")[0] for w in f.left_out] == ["/:big"] and "16 MiB" in f.left_out[0]
    with netCDF4.Dataset(path) as nc:
        assert nc.title == "t" and nc.text == "t" * 100_000 and nc["v"].units == "m" and list(nc["v"][:]) == [0, 1, 2]
        assert "big" not in nc.ncattrs()
    store, logged = ThreadedStore(DirectoryStore(str(tmp_path))), set()
    with caplog.at_level(logging.INFO, logger="nczfs.nczarr.ncfile.ncversions"):
        for _ in range(2):  # rebuilt (a TTL over): logged once
            files = trio.run(build_files, store, "a.zarr", "a.zarr", logged, None, False, True)
            assert list(files) == ["a.zarr.nc4"]
    lines = [r.getMessage() for r in caplog.records if "leaves out" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("a.zarr.nc4 leaves out /:big: "), lines
    res = run_nczfs("inspect", str(tmp_path / "a.zarr"))
    assert res.returncode == 0, res.stderr
    notes = [line for line in res.stdout.splitlines() if line.startswith("// nc4 file a.zarr.nc4 leaves out")]
    assert len(notes) == 1 and notes[0].startswith("// nc4 file a.zarr.nc4 leaves out /:big: ") \
        and "16 MiB" in notes[0], notes
