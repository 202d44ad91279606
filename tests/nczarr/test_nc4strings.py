"""NC_STRING in NAME.nc4 made without a mount: Zarr v2 and v3 variable-length strings, numpy
unicode and NCZarr's fixed-width strings as HDF5 variable-length UTF-8 strings (each chunk's
references followed by the global heap collections of its strings), read by the netCDF4 wheel,
h5py, xarray's ``netcdf4`` and ``h5netcdf`` engines and Debian's ncdump as the store reads;
pure Zarr's fixed-width bytes stay chars."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from nczfs.nczarr.ncfile import nc4source
from nczfs.nczarr.ncfile.nc4source import string_piece
from tests.nczarr.hdf5util import check_file, h5dump
from tests.nczarr.nc4util import write_nc4

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

NAMES = np.array([["Zürich", "Ålen", ""], ["a", "bb", "c"], ["x", "y", "z"]], dtype="<U6")


def _make(root, fmt: int) -> None:
    """xarray's str as variable-length and (v2) fixed-width unicode strings, empty strings, the
    chunk (1, 1) removed (the fill value), a scalar string, and bytes (``|S3``)."""
    ds = xr.Dataset({"vlen": (("y", "x"), NAMES.astype(object)), "fixed": (("y", "x"), NAMES),
                     "one": ((), "ünï"), "raw": (("y",), np.array([b"ab", b"cde", b""], dtype="S3"))})
    enc = {"vlen": {"chunks": (2, 2)}, "fixed": {"chunks": (2, 2)}}
    ds.to_zarr(root / "s.zarr", zarr_format=fmt, consolidated=False, encoding=enc)
    for v in ("vlen", "fixed"):
        os.remove(root / "s.zarr" / v / ("1.1" if fmt == 2 else "c/1/1"))


@pytest.mark.parametrize("fmt", [2, 3])
def test_strings_are_nc_string_every_reader_reads_as_the_store(tmp_path, fmt):
    _make(tmp_path, fmt)
    f, path = write_nc4(tmp_path, "s.zarr", tmp_path / "s.nc4")
    assert f.left_out == [] and sorted(f.decoded) == ["/fixed", "/one", "/raw", "/vlen"]
    want = xr.open_zarr(tmp_path / "s.zarr", consolidated=False).load()
    assert want["vlen"].values[2, 2] == "" and want["raw"].dtype == "S3"
    for engine in ("netcdf4", "h5netcdf"):
        with xr.open_dataset(path, engine=engine) as got:
            xr.testing.assert_identical(got.load(), want)
    with netCDF4.Dataset(path) as nc:
        assert nc["vlen"].dtype == str and nc["vlen"].dimensions == ("y", "x") and nc["one"].dtype == str
        assert nc["vlen"][...].tolist() == want["vlen"].values.tolist() == nc["fixed"][...].tolist()
        assert nc["raw"].dimensions == ("y", "string3") and nc["one"][...] == "ünï"
    with h5py.File(path, "r") as h5:
        tid = h5["vlen"].id.get_type()
        assert tid.get_class() == h5py.h5t.STRING and tid.is_variable_str() and tid.get_cset() == h5py.h5t.CSET_UTF8
        assert h5["vlen"].chunks == (2, 2) and h5["vlen"].compression is None  # netCDF-C: no filter on vlen
        assert h5["vlen"].asstr()[...].tolist() == want["vlen"].values.tolist()
        assert h5["vlen"].id.get_num_chunks() == 4  # the missing one as a chunk of the fill value
    assert check_file(path) == len(f.layout.pieces)
    dump = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0 and not dump.stderr and '"Zürich", "Ålen", _,' in dump.stdout, dump.stderr
    assert "string vlen(y, x)" in dump.stdout
    h5dump(path)


def test_nczarr_fixed_width_strings_are_nc_string_and_pure_zarr_bytes_chars(tmp_path):
    """netCDF-C writes NC_STRING as NCZarr ``|S<n>``: NC_STRING again, its string attributes
    (of one value too) NC_STRING, its text attributes char; xarray's bytes: chars."""
    with netCDF4.Dataset(f"file://{tmp_path / 'n.zarr'}#mode=nczarr,file", "w") as nc:
        nc.createDimension("y", 3)
        nc.createVariable("s", str, ("y",))[:] = np.array(["ab", "", "cdé"], dtype=object)
        nc.setncattr_string("one", "é")
        nc.setncattr_string("two", ["x", "yy"])
        nc.setncattr("text", "plain")
    f, path = write_nc4(tmp_path, "n.zarr", tmp_path / "n.nc4")
    assert f.left_out == []
    with netCDF4.Dataset(path) as nc:
        assert nc["s"].dtype == str and nc["s"][...].tolist() == ["ab", "", "cdé"]
        assert (nc.one, nc.two, nc.text) == ("é", ["x", "yy"], "plain")
    head = subprocess.run(["ncdump", "-h", str(path)], capture_output=True, text=True, timeout=60).stdout
    assert 'string :one = "é" ;' in head and 'string :two = "x", "yy" ;' in head and '\t\t:text = "plain" ;' in head


def test_heap_collections_split_by_objects_and_bytes(tmp_path, monkeypatch):
    """A chunk's strings in several collections (at most HEAP_OBJECTS objects each, and no more
    than HEAP_BYTES unless one string is larger): h5py reads every one."""
    monkeypatch.setattr(nc4source, "HEAP_OBJECTS", 100)
    monkeypatch.setattr(nc4source, "HEAP_BYTES", 64 * 1024)
    values = [f"s{i}" * (i % 7) for i in range(450)] + ["L" * 100_000] + ["é"] * 49
    piece = string_piece([v.encode() for v in values])
    assert piece.count(b"GCOL") == 7  # 100, 100, 100, 100, 50, the large one, then 49
    xr.Dataset({"v": (("n",), np.array(values, dtype=object))}).to_zarr(
        tmp_path / "h.zarr", zarr_format=2, consolidated=False, encoding={"v": {"chunks": (500,)}})
    _, path = write_nc4(tmp_path, "h.zarr", tmp_path / "h.nc4")
    with h5py.File(path, "r") as h5:
        assert h5["v"].asstr()[...].tolist() == values
    h5dump(path)


def test_sharded_strings_by_their_inner_chunks(tmp_path):
    """Zarr v3 strings in shards (an inner chunk and a shard never written): each inner chunk
    its references and heap collections, made from its byte range of its shard."""
    g = zarr.open_group(str(tmp_path / "sh.zarr"), mode="w", zarr_format=3)
    a = g.create_array("s", shape=(10,), chunks=(2,), shards=(4,), dtype=str, dimension_names=["x"], fill_value="")
    a[:7] = np.array(["a", "bé", "", "ccc", "d", "e", "f"])
    f, path = write_nc4(tmp_path, "sh.zarr", tmp_path / "sh.nc4")
    assert f.left_out == [] and f.decoded == ["/s"]
    with netCDF4.Dataset(path) as nc, h5py.File(path, "r") as h5:
        assert nc["s"][...].tolist() == h5["s"].asstr()[...].tolist() == a[...].tolist()
        assert h5["s"].chunks == (2,)
    assert check_file(path) == len(f.layout.pieces)
    h5dump(path)


def test_any_range_of_a_string_chunk_is_placed_as_the_whole():
    """A read of any byte range of a string chunk (the kernel's, cutting references anywhere)
    is that range of the whole chunk placed at its offset in the file."""
    from nczfs.nczarr.chunks.recode import Codecs, Recode
    from nczfs.nczarr.ncfile.nc4source import Source

    values = np.array([f"v{i}" * (i % 5) for i in range(64)], dtype=object)
    src = Source("k", Recode("|O", (64,), "C", Codecs(None, ({"id": "vlen-utf8"},)), "|O", (64,)), vlen=True)
    raw = pytest.importorskip("numcodecs").VLenUTF8().encode(values)
    piece = src.decode(raw)
    at = 123_456
    whole = src.place(piece, at, 0, len(piece))
    refs = np.frombuffer(whole, nc4source._REF, 64)
    assert (refs["address"] >= at + 64 * 16).all() and refs["length"].tolist() == [len(v) for v in values]
    rng = np.random.default_rng(5)
    for lo, hi in [(0, 1), (3, 21), (15, 17), (16, 32), (1000, 1030), (0, len(piece))] + \
            [tuple(sorted(rng.integers(0, len(piece), 2))) for _ in range(200)]:
        assert src.place(piece, at, lo, hi) == whole[lo:hi], (lo, hi)
