"""The classic files made from datasets, without a mount: headers byte for byte as netCDF-C
writes them, values as zarr-python reads the store, any byte range the same as the whole."""

from __future__ import annotations

import random

import numpy as np
import pytest
import trio

from nczfs.toolbox.errors import KeyNotFound
from nczfs.nczarr.chunks.sharding import IndexCache
from nczfs.nczarr.metadata.read import read_dataset
from nczfs.nczarr.ncfile import classicread
from nczfs.nczarr.ncfile.classicfile import file_names, group_file, v3_encodings
from nczfs.nczarr.ncfile.classicheader import Attr, Dim, Var, layout
from nczfs.store.values import ByteRange
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.threads import ThreadedStore
from tests.nczarr.util import Below

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")
from tests.mount.test_view_sharding import write_sharded  # noqa: E402  (every sharding form)


def stored_chunk(store, val, idx) -> bytes | None:
    """Chunk ``idx`` of ``val`` as stored (a sharded array's: its byte range of its shard)."""
    if val.sharding is None:
        try:
            return store.get(val.key_of(idx))
        except KeyNotFound:
            return None
    key = val.key_of(val.sharding.locate(idx)[0])
    try:
        info = store.stat(key)
    except KeyNotFound:
        return None
    loc = trio.run(val.shards.locate_in, ThreadedStore(store), IndexCache(), idx, key, info)
    return None if loc is None else store.get(key, ByteRange(loc.start, loc.end))


def render(gf, store, start=0, end=None) -> bytes:
    """Bytes start..end of the file, its chunks read from ``store`` (a SyncStore)."""
    end = gf.layout.size if end is None else end
    runs = classicread.runs(gf, start, end)
    got = []
    for run in runs:
        val = gf.values[run.var]
        e0, e1 = run.elements(val.itemsize)
        chunks = {}
        for idx in classicread.chunks_needed(val, e0, e1):
            raw = stored_chunk(store, val, idx)
            chunks[idx] = None if raw is None else val.decode(raw)
        got.append(chunks)
    return classicread.assemble(gf, start, end, runs, got)


def files_of(root, name):
    store = DirectoryStore(str(root))
    objects = Below(store, name)
    ds = read_dataset(objects)
    enc = v3_encodings(ds, objects.get)
    return store, ds, {fname: group_file(ds, g, name, enc) for fname, g in file_names(ds, name).items()}


# -- headers: what netCDF-C writes for the same definitions ----------------------------------------

def _definitions(int_type: str):
    dims = [Dim("time", 3, True), Dim("x", 3), Dim("yy", 5)]
    gattrs = [Attr("title", "char", b"hello"), Attr("n", int_type, np.asarray([1, 2], ">" + {"short": "i2", "int64": "i8"}[int_type]).tobytes())]
    vars_ = [Var("a", "short", [1, 2], [Attr("units", "char", b"m")]), Var("t", "double", [0]), Var("r", "byte", [0, 1])]
    return dims, gattrs, vars_


def _wheel_file(path, fmt, int_type):
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.set_fill_off()
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createDimension("yy", 5)
        nc.title = "hello"
        nc.setncattr("n", np.array([1, 2], dtype={"short": "i2", "int64": "i8"}[int_type]))
        nc.createVariable("a", "i2", ("x", "yy")).units = "m"
        nc.createVariable("t", "f8", ("time",))[:] = [1, 2, 3]
        nc.createVariable("r", "i1", ("time", "x"))
    return path.read_bytes()


@pytest.mark.parametrize("fmt,version,int_type", [
    ("NETCDF3_CLASSIC", 1, "short"), ("NETCDF3_64BIT_OFFSET", 2, "short"), ("NETCDF3_64BIT_DATA", 5, "int64")])
def test_header_is_the_one_netcdf_c_writes(tmp_path, fmt, version, int_type):
    raw = _wheel_file(tmp_path / "w.nc", fmt, int_type)
    lay = layout(*_definitions(int_type), oldest=version)
    assert lay.version == version
    assert raw[:len(lay.header)] == lay.header
    assert len(raw) == lay.size
    assert lay.recsize == 12  # t's 8 bytes and r's 3, padded


def test_the_oldest_format_that_holds_the_file_is_chosen():
    assert layout(*_definitions("short")).version == 1
    dims, gattrs, vars_ = _definitions("short")
    dims.append(Dim("big", 2**31 - 1))
    vars_.insert(1, Var("huge", "byte", [3]))
    lay = layout(dims, gattrs, vars_)
    assert lay.version == 2 and lay.vars[2].begin > 2**31  # offsets past 2 GiB: CDF-2
    dims[3].size = 2**31 - 1
    vars_.insert(1, Var("huger", "int", [3]))  # 8 GiB: a variable CDF-2 cannot hold
    assert layout(dims, gattrs, vars_).version == 5
    dims, gattrs, vars_ = _definitions("int64")
    assert layout(dims, gattrs, vars_).version == 5  # an int64 attribute


# -- values: the datasets the mount tests use, rendered without a mount ------------------------------

def make_cf(path) -> None:
    """A CF dataset as the netCDF4 wheel writes NCZarr: unlimited time, packed shorts (zlib), a
    fixed-width string, 64-bit integers, a chunk never written (fill values), a sub-group."""
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file", "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 5)
        nc.createDimension("lon", 7)
        nc.Conventions = "CF-1.8"
        nc.title = "packed temperatures"
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "standard"
        lat = nc.createVariable("lat", "f4", ("lat",))
        lat.units = "degrees_north"
        lat[:] = np.linspace(-10, 10, 5)
        temp = nc.createVariable("temp", "i2", ("time", "lat", "lon"), chunksizes=(2, 3, 4), zlib=True,
                                 shuffle=False, fill_value=-999)
        temp.scale_factor = 0.01
        temp.add_offset = 273.15
        temp.units = "K"
        for i in range(5):
            t[i] = i
            temp[i] = np.arange(35).reshape(5, 7) * 7 + i * 100
        temp[4, 4, 6] = np.ma.masked
        nc.createVariable("count", "i8", ("lat",))[:] = np.arange(5) * 2**40
        nc.createVariable("station", str, ("lat",))[:] = np.array(["a", "bb", "ccc", "dddd", "e"], dtype=object)
        nc.createVariable("c", "S1", ("lon",))[:] = np.array(list("abcdefg"), dtype="S1")
        nc.createVariable("sparse", "f4", ("lat", "lon"), chunksizes=(2, 2))[0:2, 0:2] = 1.5
        g = nc.createGroup("g")
        g.createDimension("z", 3)
        g.source = "sub-group"
        g.createVariable("w", "f4", ("lat", "z"))[:] = np.arange(15).reshape(5, 3)


def make_v3(path) -> None:
    """Zarr v3 by zarr-python: zstd, a scalar, dimension names, bool (shown as byte), an array of a
    type netCDF lacks, a sharded one."""
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    g.attrs["title"] = "v3"
    a = g.create_array("a", shape=(6, 4), chunks=(4, 3), dtype="float64", dimension_names=["y", "x"],
                       compressors=zarr.codecs.ZstdCodec(level=1), fill_value=-1.0)
    a[:4, :] = np.arange(16).reshape(4, 4) / 3
    u = g.create_array("u", shape=(4,), chunks=(3,), dtype="uint16", dimension_names=["x"])
    u[:] = [1, 2, 65535, 7]
    s = g.create_array("s", shape=(), dtype="int32")
    s[...] = 42
    g.create_array("flag", shape=(4,), chunks=(4,), dtype="bool", dimension_names=["x"])[:] = [True, False, True, True]
    g.create_array("cplx", shape=(4,), chunks=(4,), dtype="complex64", dimension_names=["x"])[:] = 1j
    when = g.create_array("when", shape=(4,), chunks=(2,), dtype="datetime64[s]", dimension_names=["x"])
    when[:] = np.array(["2000-01-01", "2000-01-02", "1969-12-31T23:59:59", "2024-02-29"], dtype="datetime64[s]")
    g.create_array("sharded", shape=(4,), chunks=(2,), shards=(4,), dtype="int16", dimension_names=["x"])[:] = 3


def make_xarray_v2(path) -> None:
    """Zarr v2 with blosc and a Fortran-order array, as zarr-python writes it for xarray."""
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    a = g.create_array("v", shape=(3, 10), chunks=(2, 4), dtype="<i4",
                       compressors=numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE), fill_value=7)
    a[:] = np.arange(30).reshape(3, 10)
    a.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    a.attrs["long_name"] = "values"
    f = g.create_array("f", shape=(3, 10), chunks=(3, 3), dtype=">f4", order="F")
    f[:] = np.arange(30).reshape(3, 10) * 0.5
    f.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
    names = g.create_array("station", shape=(3,), chunks=(2,), dtype="<U5", fill_value="")
    names[:] = np.array(["Zürich", "Ålen", "a"], dtype="<U5")  # cut to 5 characters: "Züric"
    names.attrs["_ARRAY_DIMENSIONS"] = ["y"]


def compare_with_zarr(nc, root, name, group="/") -> int:
    """Every variable of open classic file ``nc`` against zarr-python reading the store."""
    zg = zarr.open_group(str(root / name), mode="r")
    if group != "/":
        zg = zg[group.strip("/")]
    nc.set_auto_maskandscale(False)
    checked = 0
    for vname, var in nc.variables.items():
        try:
            want = np.asarray(zg[vname][...])
        except ValueError:  # zarr-python 3 refuses netCDF-C's >S1 chars: the wheel reads the store
            with netCDF4.Dataset(f"file://{root / name}#mode=nczarr,file") as direct:
                direct.set_auto_maskandscale(False)
                want = np.asarray((direct[group] if group != "/" else direct)[vname][...])
        got = var[...]
        if want.dtype.kind == "S" and want.dtype.itemsize > 1:
            got = netCDF4.chartostring(got).astype(want.dtype)
        elif want.dtype.kind == "U" and got.dtype.kind != "U":  # UTF-8 chars (the wheel decodes them by _Encoding)
            got = netCDF4.chartostring(got, encoding="utf-8")
        if want.dtype.kind in "mM":  # times: int64 counts of their unit
            want = want.astype("i8")
        assert got.shape == want.shape, vname
        assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), vname
        checked += 1
    return checked


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ncfile")
    make_cf(root / "cf.zarr")
    make_v3(root / "v3.zarr")
    make_xarray_v2(root / "x.zarr")
    write_sharded(root)
    return root


@pytest.mark.parametrize("name,files,formats", [
    ("cf.zarr", ["cf.zarr.nc", "cf.zarr.g.nc"], ["CDF-5", "CDF-1"]),
    ("v3.zarr", ["v3.zarr.nc"], ["CDF-5"]),
    ("x.zarr", ["x.zarr.nc"], ["CDF-1"]),
    ("sharded.zarr", ["sharded.zarr.nc"], ["CDF-1"]),
])
def test_values_are_zarr_pythons(corpus_root, name, files, formats):
    store, ds, gfs = files_of(corpus_root, name)
    assert list(gfs) == files
    assert [gf.format for gf in gfs.values()] == formats
    for fname, gf in gfs.items():
        data = render(gf, store)
        assert len(data) == gf.layout.size
        with netCDF4.Dataset(fname, memory=data) as nc:
            assert compare_with_zarr(nc, corpus_root, name, gf.group) == len(gf.layout.vars)


def test_cf_dataset_keeps_its_record_dimension_and_attributes(corpus_root):
    store, ds, gfs = files_of(corpus_root, "cf.zarr")
    with netCDF4.Dataset("cf.nc", memory=render(gfs["cf.zarr.nc"], store)) as nc:
        assert nc.dimensions["time"].isunlimited() and len(nc.dimensions["time"]) == 5
        assert nc.Conventions == "CF-1.8"
        assert nc["temp"].scale_factor == 0.01 and nc["temp"]._FillValue == -999
        assert nc["temp"].dimensions == ("time", "lat", "lon")
        assert nc["station"].dimensions == ("lat", "string128")
        assert nc.data_model == "NETCDF3_64BIT_DATA"  # for the int64 variable
        with netCDF4.Dataset(f"file://{corpus_root / 'cf.zarr'}#mode=nczarr,file") as direct:
            unpacked = direct["temp"][...]  # masked and scaled, by the wheel from the store
        assert np.ma.is_masked(nc["temp"][4, 4, 6])
        assert np.ma.allclose(nc["temp"][...], unpacked) and (nc["temp"][...].mask == unpacked.mask).all()
    with netCDF4.Dataset("g.nc", memory=render(gfs["cf.zarr.g.nc"], store)) as nc:
        assert nc.source == "sub-group" and nc["w"].dimensions == ("lat", "z")


def test_what_a_file_leaves_out_is_named(corpus_root):
    _, _, gfs = files_of(corpus_root, "v3.zarr")
    assert gfs["v3.zarr.nc"].left_out == ["/cplx: type complex64 has no netCDF type"]


def test_sharded_arrays_are_read_from_their_inner_chunks(corpus_root):
    """Every sharding form (index at the end with crc32c, at the start, nested shards, blosc
    inside, inner chunks never written, a partial last shard): each inner chunk is read from its
    byte range of its shard, the values zarr-python's."""
    store, _, gfs = files_of(corpus_root, "sharded.zarr")
    gf = gfs["sharded.zarr.nc"]
    assert gf.left_out == []
    values = {lay.name: val for lay, val in zip(gf.layout.vars, gf.values)}
    assert values["plain"].chunks == (2, 4) and values["nested"].chunks == (2, 2)
    assert values["start"].key_of((1,)) == "sharded.zarr/start/c/1"  # the shard's key
    zg = zarr.open_group(str(corpus_root / "sharded.zarr"), mode="r")
    with netCDF4.Dataset("s.nc", memory=render(gf, store)) as nc:
        nc.set_auto_maskandscale(False)
        for name in ("plain", "nested", "start", "blosc"):
            assert np.array_equal(nc[name][...], zg[name][...]), name
        assert list(nc["start"][...]) == [0.5, 1.5, 2.5, 3.5, -1, -1, -1, -1, -1]


def test_zarr_v3_times_are_int64_counts_with_cf_units(corpus_root):
    store, _, gfs = files_of(corpus_root, "v3.zarr")
    with netCDF4.Dataset("v3.nc", memory=render(gfs["v3.zarr.nc"], store)) as nc:
        assert nc["when"].dtype == np.int64 and nc["when"].units == "seconds since 1970-01-01"
        assert list(netCDF4.num2date(nc["when"][:], nc["when"].units).astype(str))[:2] == [
            "2000-01-01 00:00:00", "2000-01-02 00:00:00"]
        assert nc["flag"].dtype == np.int8 and list(nc["flag"][:]) == [1, 0, 1, 1]


def test_numpy_unicode_strings_are_utf_8_chars(corpus_root):
    store, _, gfs = files_of(corpus_root, "x.zarr")
    with netCDF4.Dataset("x.nc", memory=render(gfs["x.zarr.nc"], store)) as nc:
        assert nc["station"].dimensions == ("y", "string20") and nc["station"]._Encoding == "utf-8"
        assert list(nc["station"][...]) == ["Züric", "Ålen", "a"]  # decoded by _Encoding


def test_any_byte_range_is_the_whole_files_slice(corpus_root):
    rnd = random.Random(36)
    for name in ("cf.zarr", "v3.zarr", "x.zarr", "sharded.zarr"):
        store, _, gfs = files_of(corpus_root, name)
        for gf in gfs.values():
            whole = render(gf, store)
            for _ in range(150):
                a = rnd.randrange(len(whole) + 1)
                b = rnd.randrange(a, len(whole) + 8)
                assert render(gf, store, a, b) == whole[a:b], (name, a, b)


def test_inspect_names_the_files_and_what_they_leave_out(corpus_root):
    from tests.helpers import run_nczfs

    res = run_nczfs("inspect", str(corpus_root / "v3.zarr"))
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stdout.splitlines() if line.startswith("// nc file")]
    assert lines[0].startswith("// nc file: v3.zarr.nc (CDF-5, ")
    assert "// nc file v3.zarr.nc leaves out /cplx: type complex64 has no netCDF type" in lines
    res = run_nczfs("inspect", str(corpus_root / "cf.zarr"))
    assert "// nc file: cf.zarr.g.nc (CDF-1, " in res.stdout


def test_a_group_with_attributes_but_no_arrays_has_a_file_of_its_attributes(tmp_path):
    """What netCDF-C writes for a dataset of global attributes alone (``tst_solar_1``'s
    ``/solar_system/Earth``); a group with neither arrays nor attributes has no file."""
    from nczfs.nczarr.metadata.read import DictObjects

    objs = {".zgroup": b'{"zarr_format": 2}', ".zattrs": b"{}",
            "a/.zgroup": b'{"zarr_format": 2}', "a/.zattrs": b'{"title": "attrs only", "n": [1, 2]}',
            "a/b/.zgroup": b'{"zarr_format": 2}',
            "a/b/v/.zarray": b'{"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<i4", "fill_value": null,'
                             b' "order": "C", "compressor": null, "filters": null}',
            "a/b/v/.zattrs": b'{"_ARRAY_DIMENSIONS": ["x"]}'}
    ds = read_dataset(DictObjects(objs))
    assert file_names(ds, "d") == {"d.nc": "/", "d.a.nc": "/a", "d.a.b.nc": "/a/b"}
    with netCDF4.Dataset(tmp_path / "w.nc", "w", format="NETCDF3_CLASSIC") as nc:
        nc.title, nc.n = "attrs only", [1, 2]
    assert render(group_file(ds, "/a", "d", {}), None) == (tmp_path / "w.nc").read_bytes()


def test_a_pure_zarr_dimension_of_length_0_is_the_record_dimension(tmp_path):
    """xarray stores netCDF's unlimited dimension with no records as a length of 0 (netCDF-C
    4.10 takes one as unlimited): the classic file holds its variables, with 0 records
    (``tst_perdimspecs``, ``tst_special_atts3`` as xarray stores them)."""
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"tas": (("time", "lat"), np.zeros((0, 2), "f4")), "time": ("time", np.zeros(0))},
                    coords={"lat": [1.0, 2.0]})
    ds.to_zarr(tmp_path / "z.zarr", zarr_format=2, consolidated=False)
    store, _, gfs = files_of(tmp_path, "z.zarr")
    gf = gfs["z.zarr.nc"]
    assert gf.left_out == []
    (tmp_path / "z.nc").write_bytes(render(gf, store))
    with netCDF4.Dataset(tmp_path / "z.nc") as nc:
        assert nc.dimensions["time"].isunlimited() and len(nc.dimensions["time"]) == 0
        assert nc["tas"].shape == (0, 2) and list(nc["lat"][:]) == [1.0, 2.0]


def test_xarrays_empty_bytes_mask_is_the_char_arrays_fill(tmp_path):
    """A Zarr v2 ``|S`` array's ``fill_value`` (base64 of a NUL) is xarray's mask: the file's chars
    get ``_FillValue = ""``, so a chunk never written decodes missing (``tst_charfill``)."""
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"s": ("x", np.array([b"ab", b"", b"cd"], "S2")), "e": ("y", np.array([b"", b""], "S2"))})
    ds.to_zarr(tmp_path / "z.zarr", zarr_format=2, consolidated=False, encoding={"s": {"_FillValue": b""},
                                                                                  "e": {"_FillValue": b""}})
    store, _, gfs = files_of(tmp_path, "z.zarr")
    (tmp_path / "z.nc").write_bytes(render(gfs["z.zarr.nc"], store))
    with xr.open_dataset(tmp_path / "z.nc", engine="netcdf4") as got, xr.open_zarr(tmp_path / "z.zarr") as want:
        for v in ("s", "e"):
            assert list(got[v].isnull().values) == list(want[v].isnull().values) == [x == b"" for x in ds[v].values]
