"""Views written from the model (kernel-free): Zarr v3 codec mapping, per-view dtypes and keys."""

from __future__ import annotations

import json
import math

import pytest

from nczfs.nczarr.chunks.v2form import V2Array, v3_to_v2
from nczfs.nczarr.metadata.model import Variable
from nczfs.nczarr.views.emit import emit
from tests.nczarr.util import read_objects


def v3var(codecs, dtype="int32", big=False, shape=(4, 6)) -> Variable:
    return Variable("a", "int", dtype, list(shape), [2, 3], [], big_endian=big, dimension_separator="/", codecs=codecs)


@pytest.mark.parametrize("codecs,compressor,filters,order", [
    ([{"name": "bytes", "configuration": {"endian": "little"}}], None, None, "C"),
    ([{"name": "bytes"}, {"name": "gzip", "configuration": {"level": 4}}], {"id": "gzip", "level": 4}, None, "C"),
    ([{"name": "bytes"}, {"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle",
                                                             "typesize": 4, "blocksize": 0}}],
     {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0}, None, "C"),
    ([{"name": "transpose", "configuration": {"order": [1, 0]}}, {"name": "bytes"},
      {"name": "numcodecs.delta", "configuration": {"dtype": "<i4"}}, {"name": "zstd", "configuration": {"level": 1}}],
     {"id": "zstd", "level": 1}, [{"id": "delta", "dtype": "<i4"}], "F"),
])
def test_v3_codecs_map_to_numcodecs_v2(codecs, compressor, filters, order):
    v2 = v3_to_v2(v3var(codecs))
    assert v2 == V2Array("<i4", order, compressor, filters, "/", [2, 3])


@pytest.mark.parametrize("codecs,reason", [
    ([{"name": "sharding_indexed", "configuration": {}}], "is not one views read"),
    ([{"name": "sharding_indexed", "configuration": {"chunk_shape": [2, 2]}}], "do not divide shards [2, 3]"),
    ([{"name": "sharding_indexed", "configuration": {"chunk_shape": [1, 1], "index_codecs": [{"name": "gzip"}]}}],
     "a shard index with codecs ['gzip']"),
    ([{"name": "bytes"}, {"name": "zstd", "configuration": {"checksum": True}}], "checksum"),
    ([{"name": "transpose", "configuration": {"order": [0, 1]}}, {"name": "bytes"}], "neither C nor F"),
    ([{"name": "bytes"}, {"name": "magic"}], "codec 'magic'"),
])
def test_v3_arrays_without_a_v2_form_say_why(codecs, reason):
    out = v3_to_v2(v3var(codecs))
    assert isinstance(out, str) and reason in out


def test_big_endian_v3_becomes_a_big_endian_v2_dtype():
    assert v3_to_v2(v3var([{"name": "bytes", "configuration": {"endian": "big"}}], "float64", big=True)).dtype == ">f8"


ZA = {
    ".zgroup": {"zarr_format": 2},
    ".zattrs": {"title": "t", "strs": ["a", "bc"], "_nczarr_superblock": {"version": "2.0.0"},
                "_nczarr_group": {"dimensions": {"x": 2, "t": {"size": 3, "unlimited": 1}}, "arrays": ["c", "s"], "groups": []},
                "_nczarr_attr": {"types": {"title": ">S1", "strs": "|S128"}}},
    "c/.zarray": {"zarr_format": 2, "shape": [3, 2], "chunks": [3, 2], "dtype": ">S1", "fill_value": None, "order": "C",
                  "compressor": None, "filters": None},
    "c/.zattrs": {"_nczarr_array": {"dimension_references": ["/t", "/x"]}},
    "s/.zarray": {"zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "<f8", "fill_value": None, "order": "C",
                  "compressor": None, "filters": None},
    "s/.zattrs": {"_nczarr_array": {"dimension_references": [], "scalar": 1}},
}


def test_netcdf_4_9_view_uses_u1_chars_fixed_dims_scalars_on_a_dimension_and_hides_strings():
    """4.9.0 crashes on NCZarr scalars, its own too: one is shown along a dimension _scalar_ of 1."""
    out, hidden = emit(read_objects(ZA), "netcdf-4.9")
    zgroup = json.loads(out[".zgroup"])
    assert zgroup["_NCZARR_GROUP"] == {"dims": {"x": 2, "t": 3, "_scalar_": 1}, "vars": ["c", "s"], "groups": []}
    assert json.loads(out["c/.zarray"])["dtype"] == "<U1"
    assert json.loads(out["c/.zarray"])["_NCZARR_ARRAY"] == {"dimrefs": ["/t", "/x"], "storage": "chunked"}
    assert json.loads(out["s/.zarray"])["_NCZARR_ARRAY"] == {"dimrefs": ["/_scalar_"], "storage": "chunked"}
    assert json.loads(out["s/.zattrs"])["_ARRAY_DIMENSIONS"] == ["_scalar_"]
    assert (".zattrs:strs", "string attribute with 2 values") in hidden
    assert json.loads(out[".zattrs"]) == {"title": "t", "_NCZARR_ATTR": {"types": {"title": "<U1"}}}


def test_netcdf_4_9_1_view_writes_lower_case_scalars_and_strings():
    out, hidden = emit(read_objects(ZA), "netcdf-4.9.1")
    assert hidden == []
    assert json.loads(out["s/.zarray"])["_nczarr_array"] == {"dimrefs": [], "storage": "scalar"}
    assert json.loads(out["s/.zattrs"])["_ARRAY_DIMENSIONS"] == ["_scalar_"]
    assert json.loads(out[".zattrs"])["_nczarr_attr"]["types"]["strs"] == "|S128"


def test_view_round_trips_through_the_reader():
    ds = read_objects(ZA)
    for view, flavor in (("netcdf-4.10", "V2-ZA"), ("netcdf-4.9.1", "V2-LC")):
        out, _ = emit(read_objects(ZA), view)
        again = read_objects({k: json.loads(v) for k, v in out.items()})
        assert again.flavor == flavor and again.problems == []
        assert [(a.name, a.nctype, a.value) for a in again.root.attributes] == \
               [(a.name, a.nctype, a.value) for a in ds.root.attributes]


def test_cli_validate_reports_stale_consolidated_metadata(tmp_path):
    from tests.helpers import run_nczfs

    (tmp_path / ".zgroup").write_text('{"zarr_format": 2}')
    (tmp_path / ".zattrs").write_text('{"title": "new"}')
    meta = {"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, ".zattrs": {"title": "old"},
                                                        "gone/.zarray": {"zarr_format": 2, "shape": [1], "chunks": [1],
                                                                         "dtype": "<i4", "fill_value": 0, "order": "C",
                                                                         "compressor": None, "filters": None}}}
    (tmp_path / ".zmetadata").write_text(json.dumps(meta))
    res = run_nczfs("validate", str(tmp_path))
    assert res.returncode == 1
    assert ".zmetadata: the entry for .zattrs differs from the stored object (stale)" in res.stdout
    assert ".zmetadata: entry gone/.zarray names no stored object" in res.stdout


def test_cli_validate_notes_what_netcdf_cannot_show_but_passes_valid_zarr(tmp_path):
    from tests.helpers import run_nczfs

    (tmp_path / ".zgroup").write_text('{"zarr_format": 2}')
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / ".zarray").write_text(json.dumps({"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": "<U2",
                                                        "fill_value": "", "order": "C", "compressor": None, "filters": None}))
    res = run_nczfs("validate", str(tmp_path))
    assert res.returncode == 0, res.stdout
    assert res.stdout == "note: s/.zarray: dtype '<U2' has no netCDF type\n"
    assert "// note: s/.zarray: dtype '<U2' has no netCDF type" in run_nczfs("inspect", str(tmp_path)).stdout


def test_a_base64_zarr_v3_fill_is_read_as_the_variables_type():
    objs = {"zarr.json": {"zarr_format": 3, "node_type": "group"},
            "t/zarr.json": {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": "float32",
                            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                            "chunk_key_encoding": {"name": "default"}, "fill_value": "NaN", "codecs": [{"name": "bytes"}],
                            "dimension_names": ["n"], "attributes": {"_FillValue": "AADAfw==", "units": "K"}}}
    ds = read_objects(objs)
    fill = next(a for a in ds.root.variables[0].attributes if a.name == "_FillValue")
    assert ds.problems == ds.notes == [] and fill.nctype == "float" and math.isnan(fill.value[0])
    out, _ = emit(read_objects(objs), "netcdf-4.10")  # a NaN mask is missing by itself
    assert "_FillValue" not in json.loads(out["t/.zattrs"])
    assert json.loads(out["t/.zarray"])["fill_value"] == "NaN"
    out, _ = emit(read_objects(objs), "xarray")  # xarray masks v2 data with fill_value: the attribute moves there
    assert "_FillValue" not in json.loads(out["t/.zattrs"]) and json.loads(out["t/.zarray"])["fill_value"] == "NaN"
