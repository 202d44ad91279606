"""Sharded Zarr v3 arrays through views: no netCDF-C release reads sharding, so a view shows a
sharded array as a Zarr v2 array of its innermost chunks, each read from its byte range in its
shard. Checked with each view's reader (the wheel, Debian ncdump, xarray) against zarr-python
reading the store: index at the end and at the start, nested shards, inner chunks never written
(missing files: the fill value), inner codecs the reader lacks (recoded)."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, mounted
from tests.mount.test_view_recode import debian_read

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")
from zarr.codecs import BloscCodec, BytesCodec, ShardingCodec, ShardingCodecIndexLocation, ZstdCodec  # noqa: E402

GRID = np.arange(64, dtype="<i4").reshape(8, 8)


def write_sharded(root) -> dict[str, np.ndarray]:
    """The store (Zarr v3, as xarray/zarr-python write it) and what zarr-python reads of each array."""
    g = zarr.open_group(str(root / "sharded.zarr"), mode="w", zarr_format=3)
    g.attrs["title"] = "sharded"
    a = g.create_array("plain", shape=(8, 8), chunks=(2, 4), shards=(4, 8), dtype="<i4", dimension_names=["y", "x"])
    a[:] = GRID
    nested = ShardingCodec(chunk_shape=(4, 4), codecs=[ShardingCodec(chunk_shape=(2, 2), codecs=[BytesCodec(), ZstdCodec()])])
    n = g.create_array("nested", shape=(8, 8), chunks=(8, 8), serializer=nested, compressors=None, dtype="<i4",
                       dimension_names=["y", "x"])
    n[:] = GRID
    start = ShardingCodec(chunk_shape=(2,), codecs=[BytesCodec()], index_location=ShardingCodecIndexLocation.start)
    s = g.create_array("start", shape=(9,), chunks=(6,), serializer=start, compressors=None, dtype="<f8",
                       dimension_names=["k"], fill_value=-1.0)
    s[0:4] = np.arange(4) + 0.5  # inner chunks 2.. and the second shard are never written
    lz = ShardingCodec(chunk_shape=(4, 4), codecs=[BytesCodec(), BloscCodec(cname="lz4")])
    b = g.create_array("blosc", shape=(8, 8), chunks=(8, 8), serializer=lz, compressors=None, dtype="<i4",
                       dimension_names=["y", "x"])
    b[:] = GRID
    return {name: g[name][...] for name in ("plain", "nested", "start", "blosc")}


@pytest.fixture
def backend(tmp_path):
    """A directory (tests/mount/test_fidelity.py reads the same sharding forms on S3 too)."""
    (tmp_path / "backing").mkdir()
    return DirectoryBackend(tmp_path / "backing")


@pytest.fixture
def sharded(backend, tmp_path):
    made = tmp_path / "made"
    made.mkdir()
    expected = write_sharded(made)
    backend.put_many({str(p.relative_to(made)): p.read_bytes() for p in made.rglob("*") if p.is_file()})
    return expected


def test_the_wheel_reads_sharded_arrays_through_netcdf_4_10(backend, sharded, tmp_path):
    with mounted(backend, tmp_path / "mnt", "--read-only", "--present", "netcdf-4.10") as m:
        root = m.path / "sharded.zarr"
        with netCDF4.Dataset(f"file://{root}#mode=nczarr,file") as nc:
            for name, want in sharded.items():
                nc[name].set_auto_mask(False)
                assert nc[name][:].tolist() == want.tolist(), name
        zarray = json.loads((root / "plain" / ".zarray").read_bytes())
        assert zarray["chunks"] == [2, 4] and zarray.get("dimension_separator", ".") == "."
        assert sorted(os.listdir(root / "plain"))[2:] == [f"{i}.{j}" for i in range(4) for j in range(2)]
        assert sorted(os.listdir(root / "start"))[2:] == ["0", "1"]  # never written: missing (fill value)
        assert (root / "start" / "1").stat().st_size == 16 and not (root / "start" / "2").exists()
        with pytest.raises(OSError) as exc:
            (root / "plain" / "0.0").open("r+b")
        assert exc.value.errno == errno.EROFS


def test_debian_ncdump_and_xarray_read_sharded_arrays_through_their_views(backend, sharded, tmp_path):
    with mounted(backend, tmp_path / "m49", "--read-only", "--present", "netcdf-4.9") as m:
        with debian_read(m.path / "sharded.zarr", tmp_path) as nc:
            for name, want in sharded.items():
                assert nc[name][:].filled(-1).tolist() == want.tolist(), name
    with mounted(backend, tmp_path / "mxa", "--read-only", "--present", "xarray") as m:
        ds = xr.open_zarr(m.path / "sharded.zarr", consolidated=False, zarr_format=2)
        for name, want in sharded.items():
            assert np.nan_to_num(ds[name].values, nan=-1).tolist() == want.tolist(), name
