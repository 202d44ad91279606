"""Views (``--present``): every flavor shown as what one reader reads, checked with that reader.

netcdf-4.10 -> the netCDF4 wheel (netCDF-C 4.10.1); netcdf-4.9 -> Debian ncdump 4.9.0;
netcdf-4.9.1 -> the bytes (lower-case V2 keys) read back by nczfs's own reader; xarray -> xarray.
One read-only mount per view over a folder holding every hand-made flavor, corpus datasets and
Zarr v3 stores written by zarr-python and xarray.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from nczfs.nczarr.metadata.cdl import to_cdl
from nczfs.nczarr.metadata.read import StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.helpers import DirectoryBackend, mounted, run_nczfs
from tests.nczarr.test_read import FULL
from tests.nczarr.util import HANDMADE_NCZARR, netcdf4_summary, summary, unzip

pytestmark = pytest.mark.fuse

netCDF4 = pytest.importorskip("netCDF4")
zarr = pytest.importorskip("zarr")
xr = pytest.importorskip("xarray")

FLAVORS = [*HANDMADE_NCZARR, "zarr"]
V = np.arange(1, 7, dtype="i4").reshape(2, 3)
W = np.arange(1, 5, dtype="f4").reshape(2, 2)


def write_v3(root) -> None:
    """Zarr v3 stores: '/'-separated chunk keys with zstd; '.'-separated; sharded; strings."""
    g = zarr.open_group(str(root / "v3.zarr"), mode="w", zarr_format=3)
    g.attrs["title"] = "v3"
    a = g.create_array("t", shape=(4, 6), chunks=(2, 3), dtype="<i2", compressors=zarr.codecs.ZstdCodec(level=3),
                       dimension_names=["time", "lat"], fill_value=-1)
    a[:] = np.arange(24, dtype="i2").reshape(4, 6)
    a.attrs["units"] = "K"
    b = g.create_array("dot", shape=(5,), chunks=(2,), dtype="f8", chunk_key_encoding={"name": "default", "separator": "."},
                       dimension_names=["n"], compressors=None)
    b[:] = np.linspace(0, 1, 5)
    s = g.create_array("sharded", shape=(8,), chunks=(2,), shards=(4,), dtype="i4", dimension_names=["m"])
    s[:] = np.arange(8)
    sub = g.create_group("sub")
    c = sub.create_array("c", shape=(3,), chunks=(3,), dtype="u1", dimension_names=["k"], compressors=None)
    c[:] = [7, 8, 9]


def write_hidden_cases(root) -> None:
    """Pure Zarr v2 with arrays netCDF-C cannot handle next to one it can."""
    g = zarr.open_group(str(root / "mixed.zarr"), mode="w", zarr_format=2)
    ok = g.create_array("ok", shape=(3,), chunks=(3,), dtype="i4", compressors=None)
    ok[:] = [1, 2, 3]
    ok.attrs["_ARRAY_DIMENSIONS"] = ["n"]
    g.create_array("names", shape=(3,), chunks=(3,), dtype="<U2").attrs["_ARRAY_DIMENSIONS"] = ["n"]
    g.create_array("flags", shape=(3,), chunks=(3,), dtype="bool").attrs["_ARRAY_DIMENSIONS"] = ["n"]
    g.create_array("cplx", shape=(3,), chunks=(3,), dtype="c8").attrs["_ARRAY_DIMENSIONS"] = ["n"]
    g.create_array("zero", shape=(), chunks=(), dtype="f8")
    f = g.create_array("fortran", shape=(2, 3), chunks=(2, 3), dtype="i4", order="F", compressors=None)
    f.attrs["_ARRAY_DIMENSIONS"] = ["a", "b"]
    f[:] = [[1, 2, 3], [4, 5, 6]]


#: corpus zips (netcdf-c/) -> folder name in the mounted source
CORPUS_ZIPS = {"ref_oldformat.zip": "za_oldformat.file", "history/1a45ee025/ref_oldformat.zip": "v1_dtypes.file",
               "ref_quotes_orig.zip": "quotes.zarr", "ref_byte.zarr.zip": "byte.zarr",
               "ref_byte_fill_value_null.zarr.zip": "byte_null.zarr"}
CORPUS_NAMES = ["v1_oldformat.file", "oldkeys.file", *CORPUS_ZIPS.values(), "consolidated.zarr"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    from tests.conftest import CORPUS

    root = tmp_path_factory.mktemp("views") / "src"
    root.mkdir()
    for name in FLAVORS:
        shutil.copytree(CORPUS / "handmade" / f"{name}.file", root / f"{name}.file")
    old = unzip(CORPUS / "netcdf-c" / "history" / "d95389955" / "ref_oldformat.zip", root / "tmp1")
    shutil.move(old, root / "v1_oldformat.file")
    keys = unzip(CORPUS / "netcdf-c" / "ref_oldkeys.file.zip", root / "tmp2")
    shutil.move(keys, root / "oldkeys.file")
    for i, (zip_name, name) in enumerate(CORPUS_ZIPS.items()):
        shutil.move(unzip(CORPUS / "netcdf-c" / zip_name, root / f"tmpc{i}"), root / name)
    shutil.copytree(CORPUS / "netcdf-c" / "ref_data.zarr", root / "consolidated.zarr")
    write_v3(root)
    write_hidden_cases(root)
    xarray_v3_dataset().to_zarr(root / "xr3time.zarr", zarr_format=3, consolidated=False)
    return root


def xarray_v3_dataset():
    """What xarray writes to Zarr v3 by default: a time coordinate (int64 + units), float fills as
    base64 _FillValue attributes, zstd."""
    return xr.Dataset(
        {"t2m": (("time", "lat"), np.array([[1.5, np.nan], [3.0, 4.0], [5.0, 6.0]], dtype="f4"), {"units": "K"})},
        coords={"time": np.array(["2020-01-01", "2020-01-02", "2020-01-03"], dtype="datetime64[ns]"),
                "lat": [10.0, 20.0]})


@pytest.fixture(scope="module")
def views(source, tmp_path_factory):
    """view -> mount path; each view mounted once (read-only) for the module."""
    import contextlib

    base = tmp_path_factory.mktemp("viewmnt")
    with contextlib.ExitStack() as stack:
        out = {}
        for view in ("netcdf-4.10", "netcdf-4.9", "netcdf-4.9.1", "xarray"):
            m = stack.enter_context(mounted(DirectoryBackend(source), base / view, "--read-only", "--present", view))
            out[view] = m
        yield out


def stored(source, name):
    return read_dataset(StoreObjects(DirectoryStore(str(source / name), read_only=True)))


def nc_url(path) -> str:
    return f"file://{path}#mode=nczarr,file"


@pytest.mark.parametrize("name", FLAVORS)
def test_netcdf_4_10_view_gives_the_netcdf4_wheel_named_dims_types_and_values(views, source, name):
    path = views["netcdf-4.10"].path / f"{name}.file"
    assert netcdf4_summary(path) == summary(stored(source, f"{name}.file"))
    with netCDF4.Dataset(nc_url(path)) as nc:
        assert (nc["v"][:] == V).all() and (nc["g"]["w"][:] == W).all()


def test_netcdf_4_10_view_reads_real_netcdf_c_4_8_and_4_9_2_datasets(views, source):
    for name in ("v1_oldformat.file", "oldkeys.file"):
        path = views["netcdf-4.10"].path / name
        assert netcdf4_summary(path) == summary(stored(source, name)), name
    with netCDF4.Dataset(nc_url(views["netcdf-4.10"].path / "oldkeys.file")) as nc:
        assert nc["v"][:].ravel().tolist() == list(range(48))
        assert [d.name for d in nc["v"].get_dims()] == ["d0", "d1", "d2"]


@pytest.mark.skipif(shutil.which("ncdump") is None, reason="needs Debian netcdf-bin")
@pytest.mark.parametrize("name", FLAVORS)
def test_netcdf_4_9_view_gives_debian_ncdump_4_9_0_the_full_header_and_data(views, source, name):
    path = views["netcdf-4.9"].path / f"{name}.file"
    res = subprocess.run(["ncdump", nc_url(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    header = res.stdout[: res.stdout.index("data:")].rstrip() + "\n"
    expected = to_cdl(stored(source, f"{name}.file"), name)
    if name == "zarr":  # pure Zarr: as 4.9.0 reads the store itself (dimensions in the root, smallest ints)
        expected = subprocess.run(["ncdump", "-h", f"file://{source}/{name}.file#mode=zarr,file"],
                                  capture_output=True, text=True).stdout
    assert header == expected[: expected.index("\n\ngroup:")] + "\n"
    assert " v =\n  1, 2, 3,\n  4, 5, 6 ;" in res.stdout
    assert "   w =\n  1, 2,\n  3, 4 ;" in res.stdout
    assert "group: g {\n  dimensions:\n" in res.stdout or name == "zarr"


@pytest.mark.parametrize("name", FLAVORS)
def test_netcdf_4_9_1_view_is_lower_case_v2_inside_zgroup_and_zarray(views, name):
    m = views["netcdf-4.9.1"].path / f"{name}.file"
    zgroup = json.loads((m / ".zgroup").read_bytes())
    assert zgroup["_nczarr_superblock"] == {"version": "2.0.0"} and "_nczarr_group" in zgroup
    assert "_nczarr_array" in json.loads((m / "v" / ".zarray").read_bytes())
    ds = read_dataset(StoreObjects(DirectoryStore(str(m), read_only=True)))
    assert ds.flavor == "V2-LC"
    if name != "zarr":
        assert summary(ds) == FULL


@pytest.mark.parametrize("name", [*FLAVORS, "v1_oldformat.file"])
def test_xarray_view_is_pure_zarr_with_array_dimensions_everywhere(views, name):
    m = views["xarray"].path / (name if name.endswith(".file") else f"{name}.file")
    for zattrs in m.rglob(".zattrs"):
        assert "_nczarr" not in zattrs.read_text().lower(), zattrs
    for zarray in m.rglob(".zarray"):
        assert "_ARRAY_DIMENSIONS" in json.loads((zarray.parent / ".zattrs").read_bytes())
    assert not list(m.rglob(".ncz*"))
    ds = xr.open_zarr(m, consolidated=False)
    if name in FLAVORS:
        assert ds["v"].dims == ("x", "y") and ds["v"].values.tolist() == V.tolist()
        assert ds["v"].attrs["units"] == "m"
        g = xr.open_zarr(m, group="g", consolidated=False)
        assert g["w"].dims == ("x", "z") and g["w"].values.tolist() == W.tolist()


def test_zarr_v3_store_appears_as_zarr_v2_in_netcdf_views(views):
    m = views["netcdf-4.10"]
    root = m.path / "v3.zarr"
    assert sorted(os.listdir(root / "t")) == [".zarray", ".zattrs", "0", "1"]
    assert sorted(os.listdir(root / "t" / "0")) == ["0", "1"]
    zarray = json.loads((root / "t" / ".zarray").read_bytes())
    assert (zarray["dtype"], zarray["compressor"]["id"], zarray["dimension_separator"]) == ("<i2", "zstd", "/")
    assert sorted(os.listdir(root / "dot")) == [".zarray", ".zattrs", "0", "1", "2"]
    assert not (root / "zarr.json").exists()
    # a sharded array (shards of 4, inner chunks of 2) by its inner chunks, each its byte range
    assert sorted(os.listdir(root / "sharded")) == [".zarray", ".zattrs", "0", "1", "2", "3"]
    assert json.loads((root / "sharded" / ".zarray").read_bytes())["chunks"] == [2]
    with netCDF4.Dataset(nc_url(root)) as nc:
        assert nc.title == "v3"
        assert [d.name for d in nc["t"].get_dims()] == ["time", "lat"]
        assert nc["t"][:].tolist() == np.arange(24).reshape(4, 6).tolist() and nc["t"].units == "K"
        assert np.allclose(nc["dot"][:], np.linspace(0, 1, 5))
        assert nc["sub"]["c"][:].tolist() == [7, 8, 9]
        assert nc["sharded"][:].tolist() == list(range(8))


def test_zarr_v3_store_reads_in_the_xarray_view_as_zarr_v2(views):
    ds = xr.open_zarr(views["xarray"].path / "v3.zarr", consolidated=False, zarr_format=2)
    assert ds["t"].dims == ("time", "lat") and int(ds["t"].sum()) == sum(range(24))


def test_arrays_a_reader_cannot_handle_are_hidden_with_one_log_line_each(views):
    """A zero-rank array is shown as an NCZarr scalar, an F-order one recoded to C order (netCDF-C
    ignores the order and read it transposed), numpy's unicode as UTF-8 strings, bool as byte:
    those are shown, the rest hidden."""
    m = views["netcdf-4.10"]
    with netCDF4.Dataset(nc_url(m.path / "mixed.zarr")) as nc:
        assert sorted(nc.variables) == ["flags", "fortran", "names", "ok", "zero"] and nc["ok"][:].tolist() == [1, 2, 3]
        assert nc["fortran"][:].tolist() == [[1, 2, 3], [4, 5, 6]] and nc["zero"].shape == ()
    log = m.log_text()
    assert log.count("view netcdf-4.10 hides 'mixed.zarr/cplx': dtype <c8 has no netCDF type") == 1, log
    assert sorted(os.listdir(m.path / "mixed.zarr")) == [".zattrs", ".zgroup", "flags", "fortran", "names", "ok", "zero"]


def test_synthesised_objects_have_stable_sizes(views):
    for view, m in views.items():
        for p in m.path.rglob(".z*"):
            if p.is_file():
                assert p.stat().st_size == len(p.read_bytes()), (view, p)
                assert p.stat().st_size == len(p.read_bytes()), (view, p)


# ------------------------------------------------------------------------------- writes


def test_view_is_recomputed_when_the_stored_metadata_changes(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(__import__("tests.conftest", fromlist=["CORPUS"]).CORPUS / "handmade" / "v2uc.file", src)
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--present", "netcdf-4.10", "-o", "metadata_ttl=0") as m:
        before = json.loads((m.path / "v" / ".zattrs").read_bytes())
        assert before["units"] == "m"
        zattrs = json.loads((src / "v" / ".zattrs").read_bytes())  # another writer changes the store
        zattrs["units"] = "kilometres"
        (src / "v" / ".zattrs").write_text(json.dumps(zattrs))
        after = (m.path / "v" / ".zattrs").read_bytes()
        assert json.loads(after)["units"] == "kilometres"
        assert (m.path / "v" / ".zattrs").stat().st_size == len(after)


def test_writes_through_a_view_of_another_flavor_refuse_metadata_and_pass_chunks(tmp_path):
    from tests.conftest import CORPUS

    src = tmp_path / "src"
    shutil.copytree(CORPUS / "handmade" / "v2uc.file", src)
    before = {p: p.read_bytes() for p in src.rglob(".z*")}
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        with pytest.raises(OSError) as exc:
            (m.path / "v" / ".zattrs").write_text('{"units": "km"}')
        assert exc.value.errno == errno.EROFS
        (m.path / "v" / "0.0").write_bytes(np.arange(10, 16, dtype="<i4").tobytes())
        log = m.log_text()
    assert {p: p.read_bytes() for p in src.rglob(".z*")} == before
    assert np.frombuffer((src / "v" / "0.0").read_bytes(), "<i4").tolist() == list(range(10, 16))
    assert "the netcdf-4.10 view shows this V2-UC dataset translated" in log


def test_writes_through_a_view_of_the_same_flavor_pass_through(tmp_path, monkeypatch):
    from tests.mount.test_clients_netcdf import open_for_update

    src = tmp_path / "src"
    src.mkdir()
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        url = nc_url(m.path / "new.file")
        with netCDF4.Dataset(url, "w") as nc:  # a new dataset, written by 4.10.1 (V2-ZA)
            nc.createDimension("x", 2)
            nc.createVariable("a", "i4", ("x",))[:] = [5, 6]
        with open_for_update(url, monkeypatch) as nc:
            nc["a"].units = "m"
        with netCDF4.Dataset(url) as nc:
            assert nc["a"][:].tolist() == [5, 6] and nc["a"].units == "m"
    assert stored(src, "new.file").flavor == "V2-ZA"


def test_bad_present_option_is_a_usage_error(tmp_path):
    (tmp_path / "mnt").mkdir()
    res = run_nczfs("mount", str(tmp_path), str(tmp_path / "mnt"), "-o", "present=netcdf-5")
    assert res.returncode == 2 and "present=netcdf-5: must be one of" in res.stderr


@pytest.mark.parametrize("name", CORPUS_NAMES)
def test_corpus_datasets_open_in_the_reader_of_every_view(views, source, name):
    from nczfs.nczarr.views.emit import emit

    model = stored(source, name)
    # netcdf-4.10: the netCDF4 wheel sees what nczfs reads
    assert netcdf4_summary(views["netcdf-4.10"].path / name) == summary(stored(source, name))
    # netcdf-4.9: Debian ncdump 4.9.0 opens it and declares exactly the arrays the view keeps
    _, hidden = emit(stored(source, name), "netcdf-4.9")
    hidden_paths = {p for p, _ in hidden if ":" not in p}
    res = subprocess.run(["ncdump", "-h", nc_url(views["netcdf-4.9"].path / name)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for g in model.root.walk():
        for v in g.variables:
            path = f"{g.path.strip('/')}/{v.name}".lstrip("/")
            declared = re.search(rf"\t{v.nctype} {re.escape(v.name)}[ (]", res.stdout) is not None
            assert declared == (path not in hidden_paths), (path, res.stdout)
    # xarray: every root array with its netCDF dimension names
    ds = xr.open_zarr(views["xarray"].path / name, consolidated=False)
    for v in model.root.variables:
        assert ds[v.name].dims == tuple(r.rpartition("/")[2] for r in v.dimrefs), v.name


def test_xarray_reads_an_xarray_zarr_v3_store_through_the_xarray_view_as_it_reads_it_directly(views, source):
    direct = xr.open_zarr(source / "xr3time.zarr", consolidated=False).load()
    shown = xr.open_zarr(views["xarray"].path / "xr3time.zarr", consolidated=False, zarr_format=2).load()
    xr.testing.assert_identical(shown, direct)
    assert str(shown["time"].values[0]).startswith("2020-01-01")  # day 0 is data, not fill


@pytest.mark.skipif(shutil.which("ncdump") is None, reason="needs Debian netcdf-bin")
def test_netcdf4_wheel_updates_a_v2uc_dataset_through_the_4_10_view_and_it_stays_v2uc(tmp_path, monkeypatch):
    from tests.conftest import CORPUS
    from tests.mount.test_clients_netcdf import open_for_update

    src = tmp_path / "src"
    shutil.copytree(CORPUS / "handmade" / "v2uc.file", src)
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        url = nc_url(m.path)
        with open_for_update(url, monkeypatch) as nc:
            nc.ncattrs(), nc["v"].ncattrs(), nc["g"]["w"].ncattrs()  # netCDF-C drops unread attributes
            nc["v"].long_name = "values"
            nc["v"][0, 0] = 42
            nc.history = "edited by 4.10.1"
        log = m.log_text()
    assert "written through the netcdf-4.10 view: stored as V2-UC in v/.zattrs" in log
    assert "_nczarr" not in "".join(p.read_text() for p in src.rglob(".z*"))  # no lower-case keys: still V2-UC
    res = subprocess.run(["ncdump", nc_url(src)], capture_output=True, text=True)  # Debian 4.9.0, as stored
    assert res.returncode == 0, res.stderr
    assert '\t\tv:long_name = "values" ;' in res.stdout and '\t\t:history = "edited by 4.10.1" ;' in res.stdout
    assert " v =\n  42, 2, 3,\n  4, 5, 6 ;" in res.stdout and "\t\t:n = 7LL ;" in res.stdout


def test_a_write_back_that_would_lose_information_is_refused(tmp_path):
    from tests.conftest import CORPUS

    src = tmp_path / "src"
    shutil.copytree(CORPUS / "handmade" / "zarr.file", src)
    with mounted(DirectoryBackend(src), tmp_path / "mnt", "--present", "netcdf-4.10") as m:
        shown = json.loads((m.path / "v" / ".zattrs").read_bytes())
        lossless = {**shown, "title": "t", "_nczarr_attr": {"types": {**shown["_nczarr_attr"]["types"], "title": ">S1"}}}
        (m.path / "v" / ".zattrs").write_text(json.dumps(lossless))  # a text attribute: pure Zarr holds it
        before = (src / "v" / ".zattrs").read_bytes()
        assert json.loads(before)["title"] == "t" and "_nczarr" not in before.decode()
        lossy = {**lossless, "count": 3, "_nczarr_attr": {"types": {**lossless["_nczarr_attr"]["types"], "count": "<i2"}}}
        with pytest.raises(OSError) as exc:  # a short attribute: pure Zarr would read it back as int
            (m.path / "v" / ".zattrs").write_text(json.dumps(lossy))
        assert exc.value.errno == errno.EROFS
        log = m.log_text()
    assert (src / "v" / ".zattrs").read_bytes() == before
    assert "cannot be translated back: the zarr-v2 flavor cannot hold it as written" in log


@pytest.mark.skipif(shutil.which("ncdump") is None, reason="needs Debian netcdf-bin")
def test_views_over_a_zip_archive(tmp_path):
    """A 4.9.2 (V2-LC) zip: Debian 4.9.0 reads it fully through netcdf-4.9, 4.10.1 through netcdf-4.10."""
    from tests.conftest import CORPUS

    archive = tmp_path / "ref_oldkeys.file.zip"
    shutil.copy(CORPUS / "netcdf-c" / "ref_oldkeys.file.zip", archive)
    for view in ("netcdf-4.9", "netcdf-4.10"):
        with mounted(DirectoryBackend(tmp_path), tmp_path / view, "--read-only", "--present", view,
                     source=str(archive)) as m:
            if view == "netcdf-4.9":
                res = subprocess.run(["ncdump", nc_url(m.path)], capture_output=True, text=True)
                assert res.returncode == 0, res.stderr
                assert "\tint v(d0, d1, d2) ;\n\t\tv:_FillValue = -1 ;" in res.stdout and "_nczarr" not in res.stdout
                assert " v =\n  0, 1, 2, 3, 4, 5," in res.stdout
            else:
                with netCDF4.Dataset(nc_url(m.path)) as nc:
                    assert nc["v"].dimensions == ("d0", "d1", "d2") and nc["v"][:].ravel().tolist() == list(range(48))
