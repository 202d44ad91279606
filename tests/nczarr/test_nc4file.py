"""NAME.nc4 made from datasets without a mount (nczfs.nczarr.ncfile.nc4file): the netCDF4 wheel
(netCDF-C 4.10.1), Debian's ncdump 4.9.0 and h5dump 1.10, h5py and xarray read the same
dimensions, types, attributes and values as from the store; chunks whose codecs HDF5 reads are
the store's own bytes, others decoded; what cannot be shown is left out with its reason."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

import nczfs
from nczfs.nczarr.ncfile.nc4file import NON_COORD, NOT_A_VARIABLE
from nczfs.nczarr.ncfile.nc4types import provenance
from nczfs.toolbox import version
from tests.nczarr.hdf5util import check_file, h5dump
from tests.nczarr.nc4util import nc4_of, write_nc4

netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")
xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
from tests.mount.test_view_sharding import write_sharded  # noqa: E402
from tests.nczarr.test_ncfile import make_cf, make_v3  # noqa: E402


def make_passthrough(path, fmt: int) -> None:
    """xarray's Zarr with zlib, shuffle + zlib and no compressor, edge chunks, a chunk never
    written, big-endian floats (v2), a dimension without a variable, a zlib scalar (decoded)."""
    codecs = numcodecs if fmt == 2 else zarr.codecs.numcodecs
    zlib, shuffle = codecs.Zlib(level=3), codecs.Shuffle(elementsize=2)
    temp = np.arange(7 * 5, dtype="f4").reshape(7, 5)
    temp[4:, 3:] = np.nan  # the chunk (1, 1) all fill: not written
    ds = xr.Dataset({"temp": (("time", "x"), temp, {"units": "K", "long_name": "temperature"}),
                     "n": (("x",), np.array([1, -2, 3, 4, 5], "i2")),
                     "k": (("x", "band"), np.arange(10, dtype="i8").reshape(5, 2))},
                    coords={"x": np.arange(5) * 10.0, "time": np.arange(7, dtype="i4"), "s": ((), 2.5)},
                    attrs={"title": "passed through", "versions": [1, 2]})
    enc = {"temp": {"compressors": [zlib], "chunks": (4, 3)}, "x": {"compressors": None},
           "n": {"filters": [shuffle], "compressors": [zlib]} if fmt == 2 else {"compressors": [shuffle, zlib]},
           "time": {"compressors": None, "chunks": (3,)}, "k": {"compressors": [zlib], "chunks": (2, 2)},
           "s": {"compressors": [zlib]}}
    if fmt == 2:
        ds["big"] = (("x",), np.array([1.5, 2, 3, 4, 5], ">f4"))
        enc["big"] = {"compressors": [zlib], "dtype": ">f4"}
    ds.to_zarr(path, zarr_format=fmt, encoding=enc, consolidated=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("nc4")
    make_cf(root / "cf.zarr")
    make_v3(root / "v3.zarr")
    make_passthrough(root / "p2.zarr", 2)
    make_passthrough(root / "p3.zarr", 3)
    return root


def _written(corpus, name):
    return write_nc4(corpus, name, corpus / f"{name}.nc4")


def _same_as_store(store, nc) -> int:
    """Every group, dimension, variable, attribute and value of ``store`` in ``nc``."""
    checked = 0
    assert {n: (len(d), d.isunlimited()) for n, d in store.dimensions.items()} == \
        {n: (len(d), d.isunlimited()) for n, d in nc.dimensions.items() if not n.startswith("string")}
    assert {n: store.getncattr(n) for n in store.ncattrs()} == {n: nc.getncattr(n) for n in nc.ncattrs()}
    for name, v in store.variables.items():
        got = nc.variables[name]
        if v.dtype == str:  # NCZarr's strings (|S<n>): NC_STRING, HDF5 variable-length strings
            assert got.dtype == str and got.dimensions == v.dimensions and got.chunking() != "contiguous", name
            assert list(got[...]) == list(v[...]), name
            checked += 1
            continue
        assert (got.dtype, got.dimensions) == (v.dtype, v.dimensions), name
        assert {a: str(v.getncattr(a)) for a in v.ncattrs()} == {a: str(got.getncattr(a)) for a in got.ncattrs()}
        want, have = v[...], got[...]
        assert np.ma.allequal(want, have) and np.array_equal(np.ma.getmaskarray(want), np.ma.getmaskarray(have)), name
        checked += 1
    for gname, sub in store.groups.items():
        checked += _same_as_store(sub, nc.groups[gname])
    return checked


def test_nczarr_as_netcdf_c_reads_the_store(corpus):
    """NCZarr by the netCDF4 wheel: an unlimited dimension, packed zlib shorts with a mask,
    char, int64, chunks never written, a sub-group using its parent's dimension."""
    f, path = _written(corpus, "cf.zarr")
    assert f.left_out == []
    assert f.decoded == ["/station"]
    with netCDF4.Dataset(f"file://{corpus / 'cf.zarr'}#mode=nczarr,file") as store, netCDF4.Dataset(path) as nc:
        assert nc.data_model == "NETCDF4"
        assert _same_as_store(store, nc) == 8
    h5dump(path)


def _xarray_same(corpus, name, path, left_out) -> None:
    z = xr.open_zarr(corpus / name, consolidated=False).drop_vars(left_out).load()
    for engine in ("netcdf4", "h5netcdf"):
        if engine == "h5netcdf" and not _has("h5netcdf"):
            continue
        with xr.open_dataset(path, engine=engine) as got:
            got = got.load()
            for v in got.variables.values():  # the classic files' CF flags of bool
                if v.dtype == bool:
                    v.attrs.pop("flag_values"), v.attrs.pop("flag_meanings")
            xr.testing.assert_identical(got, z)


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("name", ["p2.zarr", "p3.zarr"])
def test_zarr_chunks_are_passed_through(corpus, name):
    f, path = _written(corpus, name)
    assert f.left_out == [] and f.decoded == ["/s"]
    _xarray_same(corpus, name, path, [])
    with h5py.File(path, "r") as h5:
        temp = h5["temp"]
        assert temp.chunks == (4, 3) and temp.compression == "gzip"
        assert h5["n"].shuffle and h5["n"].compression == "gzip"
        assert temp.id.get_num_chunks() == 3  # of 4: the one all fill was never written
        assert temp.id.get_chunk_info_by_coord((4, 3)).byte_offset is None
        key = "temp/0.1" if name == "p2.zarr" else "temp/c/0/1"
        assert temp.id.read_direct_chunk((0, 3))[1] == (corpus / name / key).read_bytes()
        assert h5["band"].attrs["NAME"].decode().startswith(NOT_A_VARIABLE)
        if name == "p2.zarr":
            assert h5["big"].dtype == np.dtype(">f4")
    h5dump(path)


def test_other_codecs_are_decoded_and_the_rest_left_out(corpus):
    """zarr-python's v3 (zstd): decoded and deflated in the file (zlib level 1), a sharded
    array's inner chunks too, a scalar unfiltered; complex left out."""
    f, path = _written(corpus, "v3.zarr")
    assert sorted(f.decoded) == ["/a", "/flag", "/s", "/sharded", "/u", "/when"]
    assert [w.split(":")[0] for w in f.left_out] == ["/cplx"]
    _xarray_same(corpus, "v3.zarr", path, ["cplx"])
    with h5py.File(path, "r") as h5:
        assert h5["a"].compression == "gzip" and h5["a"].compression_opts == 1 and not h5["a"].shuffle
        assert h5["sharded"].compression == "gzip" and h5["s"].shape == () and h5["s"].compression is None
    h5dump(path)
    f = nc4_of(corpus, "v3.zarr", transcode="none")  # as the views' -o transcode=none: unfiltered
    assert f.unsized == [] and nc4_of(corpus, "v3.zarr", sized=False).unsized
    assert [w.split(":")[0] for w in nc4_of(corpus, "v3.zarr", transcode="off").left_out] == \
        ["/a", "/cplx", "/flag", "/s", "/sharded", "/u", "/when"]


def test_sharded_arrays_by_their_inner_chunks(tmp_path):
    """Every sharding form (nested, index at the start, blosc inside, inner chunks never written,
    a partial last shard): HDF5 chunks of the inner chunk shape, each a byte range of its shard,
    passed through where the inner codecs are HDF5's (``start``: bytes only), else decoded."""
    want = write_sharded(tmp_path)
    f, path = write_nc4(tmp_path, "sharded.zarr", tmp_path / "sharded.nc4")
    assert f.left_out == [] and sorted(f.decoded) == ["/blosc", "/nested", "/plain"]
    with h5py.File(path, "r") as h5:
        assert h5["plain"].chunks == (2, 4) and h5["nested"].chunks == (2, 2) and h5["start"].chunks == (2,)
        assert h5["start"].id.get_num_chunks() == 2  # of 5: the others never written
        shard = (tmp_path / "sharded.zarr" / "start" / "c" / "0").read_bytes()
        assert h5["start"].id.read_direct_chunk((2,))[1] == np.arange(2, 4, dtype="<f8").__add__(0.5).tobytes()
        assert h5["start"].id.read_direct_chunk((2,))[1] in shard
    with xr.open_dataset(path, engine="netcdf4", mask_and_scale=False) as got:
        for name, values in want.items():
            assert np.array_equal(got[name].values, values), name
    assert check_file(path) == len(f.layout.pieces)
    h5dump(path)


@pytest.mark.parametrize("name", ["cf.zarr", "p2.zarr", "p3.zarr", "v3.zarr"])
def test_ncdump_reads_every_value(corpus, name):
    _, path = _written(corpus, name)
    got = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and not got.stderr, got.stderr
    assert "data:" in got.stdout


def test_ncproperties_as_netcdf_c_writes_it(corpus):
    """The root's _NCProperties: a scalar ASCII string of exactly its characters, version=2
    first: ncdump -s shows it (without it, no provenance line), readers hide it as netCDF-C's."""
    _, path = _written(corpus, "p2.zarr")
    got = subprocess.run(["ncdump", "-s", "-h", str(path)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and not got.stderr, got.stderr
    assert ':_NCProperties = "version=2,nczfs=' in got.stdout and ":_IsNetcdf4 = 1 ;" in got.stdout
    with h5py.File(path, "r") as h5:
        attr = h5py.h5a.open(h5.id, b"_NCProperties")
        t = attr.get_type()
        value = h5.attrs["_NCProperties"]
        assert attr.get_space().get_simple_extent_type() == h5py.h5s.SCALAR
        assert (t.get_class(), t.get_strpad(), t.get_cset()) == (h5py.h5t.STRING, h5py.h5t.STR_NULLTERM,
                                                                   h5py.h5t.CSET_ASCII)
        assert t.get_size() == len(value) and value.decode().split(",")[0] == "version=2"
    with netCDF4.Dataset(path) as nc:
        assert "_NCProperties" not in nc.ncattrs()


def test_a_variable_named_as_a_dimension_it_is_not_the_coordinate_of(tmp_path):
    ds = xr.Dataset({"x": (("y",), np.arange(3.0)), "v": (("x",), np.arange(2, dtype="i4"))})
    ds.to_zarr(tmp_path / "n.zarr", zarr_format=2, consolidated=False,
               encoding={"x": {"compressors": None}, "v": {"compressors": None}})
    f, path = write_nc4(tmp_path, "n.zarr", tmp_path / "n.nc4")
    with h5py.File(path, "r") as h5:
        assert NON_COORD + "x" in h5 and h5["x"].attrs["NAME"].decode().startswith(NOT_A_VARIABLE)
    with netCDF4.Dataset(path) as nc:
        assert nc["x"].dimensions == ("y",) and list(nc["x"][:]) == [0, 1, 2]
        assert len(nc.dimensions["x"]) == 2


def test_size_is_known_from_the_listing_alone(corpus):
    f = nc4_of(corpus, "p2.zarr")
    chunks = [p for p in f.layout.pieces]
    assert f.size == len(f.layout.meta) + sum(p.size for p in chunks)
    assert all(a.offset + a.size == b.offset for a, b in zip(chunks, chunks[1:]))


@pytest.mark.parametrize("name", ["cf.zarr", "p2.zarr", "p3.zarr", "v3.zarr"])
def test_every_object_and_chunk_index_entry_checks_out(corpus, name):
    f, path = _written(corpus, name)
    assert check_file(path) == len(f.layout.pieces)
    assert min((p.offset for p in f.layout.pieces), default=f.size) >= len(f.layout.meta)
    h5ls = subprocess.run(["h5ls", "-r", "-v", str(path)], capture_output=True, text=True, timeout=120)
    assert h5ls.returncode == 0 and "error" not in (h5ls.stdout + h5ls.stderr).lower(), h5ls.stderr


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_list_of_strings_attribute_is_an_nc_string_attribute(tmp_path, fmt):
    """As netCDF-C writes one (netCDF-C reading the store gives JSON text)."""
    ds = xr.Dataset({"v": ("x", np.array([1.0, 2.0]), {"names": ["ab", "cd"]})}, attrs={"attn": ["abcd", "efgh"]})
    ds.to_zarr(tmp_path / "s.zarr", zarr_format=fmt, consolidated=False)
    _, path = write_nc4(tmp_path, "s.zarr", tmp_path / "s.nc4")
    with netCDF4.Dataset(path) as nc:
        assert nc.attn == ["abcd", "efgh"] and nc["v"].names == ["ab", "cd"]
    with xr.open_dataset(path, engine="netcdf4") as got:
        assert list(got.attrs["attn"]) == ["abcd", "efgh"]
    h5dump(path)


#: the shared corpus' datasets netCDF-C 4.10.1 itself reads as their writers meant (not V1, V2-UC)
CORPUS_DATASETS = ["v2za.file", "v2lc_allzattrs.file", "v2za_min.file", "zarr.file"]


@pytest.fixture(scope="module")
def shared_corpus(tmp_path_factory):
    from tests.mount.test_nc_files import copy_corpus

    root = tmp_path_factory.mktemp("nc4corpus")
    copy_corpus(root, CORPUS_DATASETS)
    return root


def _close(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    return np.allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-6, equal_nan=True)


def _same_raw(store, nc, path="/") -> int:
    """The same dimensions, variables (type, dimensions, raw values) and attributes, but those the
    mask rule adds or types as their variable (``_FillValue``, ``valid_range``: float32 here)."""
    checked = 0
    assert {n: (len(d), d.isunlimited()) for n, d in store.dimensions.items()} == \
        {n: (len(d), d.isunlimited()) for n, d in nc.dimensions.items()}, path
    want = {n: store.getncattr(n) for n in store.ncattrs() if n != "_NCZARR_ATTR"}
    assert want.keys() == set(nc.ncattrs()) and all(_close(v, nc.getncattr(n)) for n, v in want.items()), path
    store.set_auto_maskandscale(False)
    nc.set_auto_maskandscale(False)
    for name, v in store.variables.items():
        got = nc.variables[name]
        assert (got.dtype, got.dimensions) == (v.dtype, v.dimensions), (path, name)
        attrs = {a: v.getncattr(a) for a in v.ncattrs() if a != "_FillValue"}
        assert all(_close(x, got.getncattr(a)) for a, x in attrs.items()), (path, name)
        assert set(got.ncattrs()) - set(attrs) <= {"_FillValue"}, (path, name)
        assert np.array_equal(np.asarray(v[...]), np.asarray(got[...]), equal_nan=v.dtype.kind == "f"), (path, name)
        checked += 1
    for gname, sub in store.groups.items():
        checked += _same_raw(sub, nc.groups[gname], f"{path}{gname}/")
    return checked


def test_the_shared_corpus_reads_as_netcdf_c_reads_the_stores(shared_corpus):
    names = sorted(p.name for p in shared_corpus.iterdir() if p.is_dir())
    assert len(names) == 10
    for name in names:
        f, path = _written(shared_corpus, name)
        assert f.left_out == [], name
        with netCDF4.Dataset(f"file://{shared_corpus / name}#mode=nczarr,file") as store, \
                netCDF4.Dataset(path) as nc:
            assert _same_raw(store, nc) >= 1, name
        res = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and not res.stderr, (name, res.stderr)
        h5dump(path)
        assert check_file(path) == len(f.layout.pieces)


def make_plugin_chunks(root) -> None:
    """zarr-python's defaults: Zarr v2 blosc (lz4, byte shuffle; zstd, bit shuffle), v3 zstd."""
    a = np.arange(6 * 7, dtype="<f8").reshape(6, 7) / 7
    g = zarr.open_group(str(root / "b2.zarr"), mode="w", zarr_format=2)
    for name, codec in (("lz4", numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE)),
                        ("zstd", numcodecs.Blosc("zstd", 3, numcodecs.Blosc.BITSHUFFLE))):
        arr = g.create_array(name, shape=a.shape, chunks=(4, 4), dtype="<f8", compressors=codec)
        arr[:] = a
        arr.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    g3 = zarr.open_group(str(root / "z3.zarr"), mode="w", zarr_format=3)
    g3.create_array("v", shape=a.shape, chunks=(4, 4), dtype="<f8", dimension_names=["y", "x"],
                    compressors=zarr.codecs.ZstdCodec(level=3))[:] = a


@pytest.mark.parametrize("name,filters", [("b2.zarr", {"lz4": 32001, "zstd": 32001}), ("z3.zarr", {"v": 32015})])
def test_blosc_and_zstd_as_registered_filters_for_readers_with_plugins(tmp_path, name, filters):
    """With ``plugins``: blosc and zstd chunks passed through as HDF5 filters 32001 and 32015;
    the netCDF4 wheel (its plugins) and h5py with hdf5plugin read them as the store holds them;
    Debian's ncdump, without the plugins, fails with netCDF-C's error for an unknown filter."""
    hdf5plugin = pytest.importorskip("hdf5plugin")
    make_plugin_chunks(tmp_path)
    f, path = write_nc4(tmp_path, name, tmp_path / "f.nc4", plugins=True)
    assert f.decoded == [] and f.left_out == []
    zg = zarr.open_group(str(tmp_path / name), mode="r")
    assert hdf5plugin.PLUGIN_PATH
    with h5py.File(path, "r") as h5:
        for var, fid in filters.items():
            assert h5[var]._filters.keys() == {str(fid)}
            assert np.array_equal(h5[var][...], zg[var][...])
            assert h5[var].id.read_direct_chunk((0, 0))[1] == (tmp_path / name / var / (
                "0.0" if name == "b2.zarr" else "c/0/0")).read_bytes()
    with netCDF4.Dataset(path) as nc:
        for var in filters:
            assert np.array_equal(nc[var][...], zg[var][...])
    res = subprocess.run(["ncdump", str(path)], capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "HDF5_PLUGIN_PATH"})
    assert res.returncode != 0 and "filter" in res.stderr.lower(), res.stderr
    assert nc4_of(tmp_path, name).decoded == sorted(f"/{v}" for v in filters)  # without: decoded


def test_inspect_names_the_nc4_file_and_what_it_leaves_out(corpus):
    from tests.helpers import run_nczfs

    res = run_nczfs("inspect", str(corpus / "v3.zarr"))
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("// nc4 file")]
    size = nc4_of(corpus, "v3.zarr").size
    assert lines == [f"// nc4 file: v3.zarr.nc4 (netCDF-4, {size} bytes)",
                     "// nc4 file v3.zarr.nc4 leaves out /cplx: type <c8 has no netCDF-4 form here"]


def test_ncproperties_names_this_nczfs_version(monkeypatch):
    """The version in _NCProperties is nczfs.__version__ (as the mount logs it), escaped."""
    assert nczfs.__version__ == version.VERSION
    monkeypatch.setattr(version, "VERSION", "1.2=3,dev")
    provenance.cache_clear()
    try:
        assert provenance().data == b"version=2,nczfs=1.2\\=3\\,dev"
    finally:
        provenance.cache_clear()
