"""The dataset model read from every NCZarr / Zarr flavor, checked against real netCDF-C readers
(Debian ncdump 4.9.0, the netCDF4 wheel's 4.10.1) and the corpus's expected CDL."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import pytest

from nczfs.nczarr.metadata.cdl import to_cdl
from nczfs.nczarr.metadata.read import DictObjects, StoreObjects, read_dataset
from nczfs.store.directory.store import DirectoryStore
from tests.nczarr.util import HANDMADE_NCZARR, netcdf4_summary, read_objects, summary, unzip

#: what every handmade NCZarr flavor holds (handmade/README.md), as netCDF shows it
FULL = {
    "/": {"dims": {"x": 2, "y": 3}, "vars": {"v": ("int", ["/x", "/y"])},
          "attrs": {"": {"n": ("int64", [7])},
                    "v": {"units": ("char", "m"), "scale": ("float", [1.5]), "ids": ("short", [1, 2])}}},
    "/g": {"dims": {"z": 2}, "vars": {"w": ("float", ["/x", "/g/z"])}, "attrs": {}},
}
FLAVORS = {"v1": "V1", "v1dev": "V1-dev", "v2uc": "V2-UC", "v2lc": "V2-LC", "v2lc_allzattrs": "V2-LC",
           "v2za": "V2-ZA", "v2za_min": "V2-ZA", "zarr": "zarr-v2"}


def read_dir(path) -> object:
    return read_dataset(StoreObjects(DirectoryStore(str(path), read_only=True)))


@pytest.mark.parametrize("name", HANDMADE_NCZARR)
def test_every_nczarr_flavor_reads_to_the_full_model(corpus, name):
    ds = read_dir(corpus / "handmade" / f"{name}.file")
    assert ds.flavor == FLAVORS[name]
    assert summary(ds) == FULL
    assert ds.problems == []


def test_pure_zarr_gets_per_group_dims_and_inferred_types_as_netcdf_4_10(corpus):
    ds = read_dir(corpus / "handmade" / "zarr.file")
    assert ds.flavor == "zarr-v2"
    assert summary(ds) == {
        "/": {"dims": {"x": 2, "y": 3}, "vars": {"v": ("int", ["/x", "/y"])},
              "attrs": {"": {"n": ("int", [7])},
                        "v": {"units": ("char", "m"), "scale": ("double", [1.5]), "ids": ("int", [1, 2])}}},
        "/g": {"dims": {"x": 2, "z": 2}, "vars": {"w": ("float", ["/g/x", "/g/z"])}, "attrs": {}},
    }


@pytest.mark.parametrize("name", ["v2za", "v2za_min", "v2lc_allzattrs", "zarr"])
def test_model_equals_what_the_netcdf4_wheel_reads(corpus, name):
    path = corpus / "handmade" / f"{name}.file"
    assert summary(read_dir(path)) == netcdf4_summary(path)


@pytest.mark.skipif(shutil.which("ncdump") is None, reason="needs Debian netcdf-bin")
@pytest.mark.parametrize("name", ["v1dev", "v2uc"])
def test_cdl_equals_debian_ncdump_4_9_0(corpus, name):
    path = corpus / "handmade" / f"{name}.file"
    res = subprocess.run(["ncdump", "-h", f"file://{path}#mode=nczarr,file"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert to_cdl(read_dir(path), name) == res.stdout


def header(cdl: str) -> str:
    """A CDL text without its data: sections (what ncdump -h would print)."""
    out, skipping = [], False
    for line in cdl.splitlines():
        if line.strip() == "data:":
            skipping = True
            if out and out[-1] == "":
                out.pop()
            continue
        if skipping and (line.lstrip().startswith("group:") or line.lstrip().startswith("} // group") or line == "}"):
            skipping = False
            if line.lstrip().startswith("group:"):
                out.append("")
        if not skipping:
            out.append(line)
    return "\n".join(out) + "\n"


CORPUS_CASES = [
    # (zip under netcdf-c/, expected CDL under netcdf-c/, flavor)
    ("ref_oldkeys.file.zip", "ref_oldkeys.cdl", "V2-LC"),
    ("ref_oldformat.zip", "ref_oldformat.cdl", "V2-ZA"),
    ("history/d95389955/ref_oldformat.zip", "history/d95389955/ref_oldformat.cdl", "V1-dev"),
    ("history/1a45ee025/ref_oldformat.zip", "history/1a45ee025/ref_oldformat.cdl", "V1-dev"),
    ("ref_quotes_orig.zip", "ref_quotes.cdl", "zarr-v2"),
]


@pytest.mark.parametrize("zip_name,cdl_name,flavor", CORPUS_CASES)
def test_corpus_datasets_give_the_expected_cdl_header(corpus, tmp_path, zip_name, cdl_name, flavor):
    root = unzip(corpus / "netcdf-c" / zip_name, tmp_path)
    ds = read_dir(root)
    assert ds.flavor == flavor
    expected = header((corpus / "netcdf-c" / cdl_name).read_text())
    name = expected.split()[1]
    assert to_cdl(ds, name) == expected


@pytest.mark.parametrize("zip_name", ["ref_power_901_constants_orig.zip", "HEAD-2ed1b285b/ref_power_901_constants_orig.zip"])
def test_xarray_store_without_root_zgroup_reads_with_named_dims(corpus, tmp_path, zip_name):
    """The expected CDL omits the NaN fill_value, as netCDF-C shows no _FillValue for a Zarr fill."""
    root = unzip(corpus / "netcdf-c" / zip_name, tmp_path)
    if not (root / "FRLAKE").is_dir():
        root = next(p for p in root.iterdir() if (p / "FRLAKE").is_dir())
    ds = read_dir(root)
    assert to_cdl(ds, "ref_power_901_constants") == (corpus / "netcdf-c" / "ref_power_901_constants.cdl").read_text()


def test_consolidated_only_metadata_and_anonymous_dims(corpus):
    ds = read_dir(corpus / "netcdf-c" / "ref_data.zarr")
    assert ds.consolidated and ds.flavor == "zarr-v2"
    v = ds.root.variables[0]
    assert (v.name, v.nctype, v.compressor["id"]) == ("data", "int64", "blosc")
    assert v.dimrefs == [f"/_Anonymous_Dim_{v.shape[0]}"]


ZARRAY = {"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<i4", "fill_value": None,
          "order": "C", "compressor": None, "filters": None}


def test_v1_scalars_one_element_values_and_numeric_types():
    ds = read_objects({
        ".nczarr": {"zarr_format": 2, "nczarr_version": "1.0.0"}, ".zgroup": {"zarr_format": 2},
        ".nczgroup": {"dims": {}, "vars": ["s"], "groups": []},
        "s/.zarray": {**ZARRAY, "shape": [1], "chunks": [1], "fill_value": [-1]},
        "s/.nczvar": {"dimrefs": [], "storage": "scalar"},
        "s/.zattrs": {"a": [2.5], "b": [1, 2]}, "s/.nczattr": {"types": {"a": "6", "b": "7"}},
    })
    s = ds.root.variables[0]
    assert (s.scalar, s.dimrefs, s.fill_value) == (True, [], -1)
    assert [(a.name, a.nctype, a.value) for a in s.attributes] == [("a", "double", [2.5]), ("b", "ubyte", [1, 2])]
    assert "\tint s ;" in to_cdl(ds, "x")


def test_v2za_scalar_unlimited_dim_and_string_types():
    ds = read_objects({
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {"strs": ["a", "bc"], "_nczarr_superblock": {"version": "2.0.0"},
                    "_nczarr_group": {"dimensions": {"t": {"size": 2, "unlimited": 1}}, "arrays": ["s", "u"], "groups": []},
                    "_nczarr_attr": {"types": {"strs": "|S128", "_nczarr_group": "|J0"}}},
        "s/.zarray": {**ZARRAY, "shape": [1], "chunks": [1], "dtype": "<f8"},
        "s/.zattrs": {"_ARRAY_DIMENSIONS": ["_scalar_"],
                      "_nczarr_array": {"dimension_references": [], "scalar": 1, "storage": "chunked"}},
        "u/.zarray": {**ZARRAY, "shape": [2], "chunks": [1], "dtype": ">S1"},
        "u/.zattrs": {"_nczarr_array": {"dimension_references": ["/t"]}},
    })
    assert ds.problems == []
    cdl = to_cdl(ds, "x")
    assert "\tt = UNLIMITED ; // (2 currently)" in cdl
    assert "\tdouble s ;" in cdl and "\tchar u(t) ;" in cdl
    assert '\t\tstring :strs = "a", "bc" ;' in cdl


def test_f_order_big_endian_and_slash_separator_are_kept():
    ds = read_objects({".zgroup": {"zarr_format": 2},
                       "v/.zarray": {**ZARRAY, "dtype": ">f4", "order": "F", "dimension_separator": "/",
                                     "fill_value": "NaN"}})
    v = ds.root.variables[0]
    assert (v.nctype, v.big_endian, v.order, v.dimension_separator) == ("float", True, "F", "/")
    assert math.isnan(v.fill_value)


def test_upper_case_keys_are_hidden_and_used():
    ds = read_objects({
        ".zgroup": {"zarr_format": 2, "_NCZARR_SUPERBLOCK": {"version": "2.0.0"},
                    "_NCZARR_GROUP": {"dims": {"x": 2}, "vars": ["v"], "groups": []}},
        "v/.zarray": {**ZARRAY, "shape": [2], "chunks": [2], "_NCZARR_ARRAY": {"dimrefs": ["x"]}},
        "v/.zattrs": {"c": "hi", "_NCZARR_ATTR": {"types": {"c": "<U1"}}},
    })
    assert ds.flavor == "V2-UC" and ds.problems == []
    assert summary(ds)["/"]["vars"] == {"v": ("int", ["/x"])}
    assert summary(ds)["/"]["attrs"] == {"v": {"c": ("char", "hi")}}


def test_inconsistent_nczarr_metadata_is_listed_as_problems():
    ds = read_objects({
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {"_nczarr_superblock": {"version": "2.0.0"},
                    "_nczarr_group": {"dimensions": {"x": 3}, "arrays": ["v", "gone"], "groups": []}},
        "v/.zarray": ZARRAY,
        "v/.zattrs": {"bad": 1, "_nczarr_array": {"dimension_references": ["/x", "/nope"]},
                      "_nczarr_attr": {"types": {"bad": "|J0"}}},
        "extra/.zarray": ZARRAY, "extra/.zattrs": {"_nczarr_array": {"dimension_references": ["/x", "/x"]}},
    })
    text = "\n".join(ds.problems)
    assert "v/.zattrs: attribute 'bad' typed |J0" in text
    assert "arrays that do not exist: gone" in text
    assert "arrays not listed in _nczarr_group (netCDF-C does not show them): extra" in text
    assert "v/.zarray: dimension /x has size 3, the array 2" in text
    assert "v/.zarray: dimension reference /nope names no declared dimension" in text


def test_zarr_v3_dimension_names_codecs_and_separator():
    ds = read_objects({
        "zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": {"title": "t"}},
        "g/zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": {}},
        "g/v/zarr.json": {
            "zarr_format": 3, "node_type": "array", "shape": [4, 5], "data_type": "int16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2, 5]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "zstd"}],
            "dimension_names": ["time", "lat"], "attributes": {"units": "K"}},
    })
    assert ds.flavor == "zarr-v3"
    v = ds.group("/g").variables[0]
    assert (v.nctype, v.big_endian, v.dimension_separator, v.chunks) == ("short", True, "/", [2, 5])
    assert summary(ds)["/g"]["dims"] == {"time": 4, "lat": 5}
    assert summary(ds)["/g"]["attrs"] == {"v": {"units": ("char", "K")}}


def test_not_zarr_is_a_clear_error(corpus, tmp_path):
    from nczfs.toolbox.errors import InvalidArgument

    (tmp_path / "notzarr.txt").write_text("x")
    with pytest.raises(InvalidArgument, match="not a Zarr or NCZarr store"):
        read_dir(tmp_path)


def test_cli_inspect_prints_cdl_and_flavor(corpus):
    from tests.helpers import run_nczfs

    res = run_nczfs("inspect", str(corpus / "handmade" / "v2uc.file"))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("netcdf v2uc {\ndimensions:\n\tx = 2 ;")
    assert "\n}\n// flavor: V2-UC\n" in res.stdout  # then the .nc files -o nc_files would show


def test_cli_validate_exits_1_listing_every_problem(tmp_path):
    from tests.helpers import run_nczfs

    (tmp_path / ".zgroup").write_text('{"zarr_format": 2}')
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / ".zarray").write_text('{"zarr_format": 2, "shape": [2], "chunks": [0], "dtype": "<q9"}')
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".zattrs").write_text("{not json")
    res = run_nczfs("validate", str(tmp_path))
    assert res.returncode == 1
    assert "a/.zarray: chunks [0] is not a list of positive integers" in res.stdout
    assert "a/.zarray: dtype '<q9' is not a known Zarr v2 dtype" in res.stdout
    assert re.search(r"b/\.zattrs: not valid JSON", res.stdout)
    assert run_nczfs("validate", str(tmp_path / "missing")).returncode == 2


def test_cli_validate_reports_deep_json_and_shapes_no_reader_can_hold(tmp_path):
    """`nczfs validate` reported 0 problems for shapes of 2**70 and 10**400 elements, and a
    RecursionError for JSON nested 100,000 levels deep."""
    from tests.helpers import run_nczfs

    (tmp_path / ".zgroup").write_text('{"zarr_format": 2}')
    for name, shape in (("big", 2**70), ("huge", 10**400), ("fits", 2**62)):
        (tmp_path / name).mkdir()
        (tmp_path / name / ".zarray").write_text(
            '{"zarr_format": 2, "shape": [%d], "chunks": [1000], "dtype": "<i4", "fill_value": null,'
            ' "order": "C", "compressor": null, "filters": null}' % shape)
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / ".zattrs").write_bytes(b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    res = run_nczfs("validate", str(tmp_path))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "big/.zarray: shape [1180591620717411303424] holds more than 2**63-1 elements" in res.stdout
    assert "huge/.zarray: shape [1000000000" in res.stdout and "holds more than 2**63-1 elements" in res.stdout
    assert "fits/.zarray" not in res.stdout
    assert "deep/.zattrs: not valid JSON (nested more than 256 levels deep)" in res.stdout


def test_a_deeply_nested_metadata_object_is_a_problem_for_readers_not_a_crash():
    from nczfs.nczarr.metadata import jsontext

    deep = b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    ds = read_dataset(DictObjects({".zgroup": b'{"zarr_format": 2}', ".zattrs": deep}))
    assert any("nested more than 256 levels deep" in p for p in ds.problems), ds.problems
    at_limit = b"[" * 256 + b"]" * 256
    assert jsontext.depth(jsontext.loads(at_limit)) == 256
    with pytest.raises(ValueError, match="nested more than 256"):
        jsontext.loads(b"[" + at_limit + b"]")


def test_cli_validate_passes_every_valid_handmade_flavor(corpus):
    from tests.helpers import run_nczfs

    for name in [*HANDMADE_NCZARR, "zarr"]:
        res = run_nczfs("validate", str(corpus / "handmade" / f"{name}.file"))
        assert (res.returncode, res.stdout) == (0, ""), name
