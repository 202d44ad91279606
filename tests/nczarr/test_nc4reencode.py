"""Chunks whose codecs are no HDF5 filter's bytes, in NAME.nc4 made without a mount: decoded
and deflated (zlib level 1, HDF5's deflate filter) so that the file stays compressed, read by
the netCDF4 wheel and h5py as zarr-python reads the store; ``-o transcode=none`` stores them
unfiltered instead, ``off`` leaves them out."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from tests.nczarr.hdf5util import check_file, h5dump
from tests.nczarr.nc4util import nc4_of, write_nc4

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

#: Zarr v2 chains (filters, compressor) with no HDF5 filter's bytes
V2_CHAINS = {
    "gzip": ([], numcodecs.GZip(level=5)),
    "lz4": ([], numcodecs.LZ4()),
    "delta": ([numcodecs.Delta(dtype="<i4")], numcodecs.Zlib(level=1)),
    "scaled": ([numcodecs.FixedScaleOffset(offset=0, scale=10, dtype="<f8", astype="<i4")], numcodecs.Zlib()),
    "blosc": ([], numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)),
    "fortran": ([], numcodecs.Zlib()),  # order F: transposed
}


def _values(name: str) -> np.ndarray:
    a = np.arange(40 * 30).reshape(40, 30) % 97
    return (a / 10.0) if name == "scaled" else a.astype("<f8" if name in ("gzip", "blosc") else "<i4")


def _make(root) -> None:
    g = zarr.open_group(str(root / "r2.zarr"), mode="w", zarr_format=2)
    for name, (filters, compressor) in V2_CHAINS.items():
        a = _values(name)
        arr = g.create_array(name, shape=a.shape, chunks=(16, 16), dtype=a.dtype, filters=filters,
                             compressors=compressor, order="F" if name == "fortran" else "C", fill_value=0)
        arr[:] = a
        arr.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    g3 = zarr.open_group(str(root / "r3.zarr"), mode="w", zarr_format=3)
    for name, codecs in (("zstd", [zarr.codecs.ZstdCodec(level=3)]),
                         ("crc", [zarr.codecs.BytesCodec(), zarr.codecs.Crc32cCodec()])):
        g3.create_array(name, shape=(40, 30), chunks=(16, 16), dtype="<i4", dimension_names=["y", "x"],
                        serializer=codecs[0] if name == "crc" else "auto",
                        compressors=codecs[1:] if name == "crc" else codecs)[:] = _values("delta")


@pytest.mark.parametrize("name", ["r2.zarr", "r3.zarr"])
def test_other_chains_are_deflated_and_read_as_the_store(tmp_path, name):
    _make(tmp_path)
    f, path = write_nc4(tmp_path, name, tmp_path / "f.nc4")
    zg = zarr.open_group(str(tmp_path / name), mode="r")
    assert f.left_out == [] and sorted(f.decoded) == sorted(f"/{v}" for v in zg.array_keys())
    with h5py.File(path, "r") as h5, netCDF4.Dataset(path) as nc:
        for var in zg.array_keys():
            want = zg[var][...]
            ds = h5[var]
            assert ds.compression == "gzip" and ds.compression_opts == 1 and ds.chunks == (16, 16), var
            assert np.array_equal(ds[...], want) and np.array_equal(nc[var][...], want), var
            sizes = [ds.id.get_chunk_info(i).size for i in range(ds.id.get_num_chunks())]
            assert len(sizes) == 6 and sum(sizes) < want.nbytes / 2, (var, sizes)  # compressed
            raw = zlib.decompress(ds.id.read_direct_chunk((16, 0))[1])
            assert raw == np.ascontiguousarray(want[16:32, 0:16]).tobytes(), var  # C order, one chunk
    assert check_file(path) == len(f.layout.pieces)
    h5dump(path)


def test_transcode_none_stores_them_unfiltered_and_off_leaves_them_out(tmp_path):
    _make(tmp_path)
    f, path = write_nc4(tmp_path, "r2.zarr", tmp_path / "f.nc4", transcode="none")
    assert f.unsized == [] and nc4_of(tmp_path, "r2.zarr", sized=False).unsized  # sizes known from shapes
    zg = zarr.open_group(str(tmp_path / "r2.zarr"), mode="r")
    with h5py.File(path, "r") as h5:
        for var in zg.array_keys():
            assert h5[var].compression is None and np.array_equal(h5[var][...], zg[var][...]), var
    off = nc4_of(tmp_path, "r2.zarr", transcode="off")
    assert sorted(w.split(":")[0] for w in off.left_out) == sorted(f"/{v}" for v in V2_CHAINS)
    assert "-o transcode=off" in off.left_out[0]


def test_a_chunk_that_cannot_be_decoded_leaves_its_variable_out(tmp_path):
    """A stored chunk that does not decode: its size in the file cannot be known, so its
    variable is left out, with the chunk and the codec's complaint; the others read."""
    _make(tmp_path)
    (tmp_path / "r2.zarr" / "lz4" / "1.1").write_bytes(b"not lz4 at all")
    f, path = write_nc4(tmp_path, "r2.zarr", tmp_path / "f.nc4")
    assert [w.split(":")[0] for w in f.left_out] == ["/lz4"]
    assert "'r2.zarr/lz4/1.1' cannot be made" in f.left_out[0] and "cannot be decoded" in f.left_out[0]
    with netCDF4.Dataset(path) as nc:
        assert "lz4" not in nc.variables and np.array_equal(nc["gzip"][...], _values("gzip"))
