"""Hostile metadata never crashes the reader, the views or the checks: they either work or
report a clear error (Hypothesis, a few hundred random stores)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nczfs.toolbox.optionvalues import PRESENT_VIEWS as VIEWS
from nczfs.toolbox.errors import InvalidArgument
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.cdl import to_cdl
from nczfs.nczarr.metadata.read import DictObjects, read_dataset
from nczfs.nczarr.metadata.validate import check_object
from nczfs.nczarr.views.emit import emit

scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=5)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
                      max_leaves=8)
KEYS = ["zarr_format", "shape", "chunks", "dtype", "fill_value", "order", "compressor", "filters",
        "dimension_separator", "_nczarr_superblock", "_NCZARR_GROUP", "_nczarr_group", "_nczarr_array",
        "_nczarr_attr", "_ARRAY_DIMENSIONS", "dims", "dimensions", "vars", "arrays", "groups", "dimrefs",
        "dimension_references", "types", "scalar", "storage", "node_type", "data_type", "chunk_grid",
        "codecs", "dimension_names", "attributes", "metadata", "units"]
objects = st.dictionaries(st.sampled_from(KEYS), values | st.sampled_from([2, 3, [2, 3], "<i4", ">S1", "|J0", {}]),
                          max_size=6)
NAMES = [".zgroup", ".zattrs", "v/.zarray", "v/.zattrs", "g/.zgroup", "g/.zattrs", "g/w/.zarray",
         ".nczarr", ".nczgroup", "v/.nczvar", "v/.nczattr", "zarr.json", "v/zarr.json", ".zmetadata"]
stores = st.dictionaries(st.sampled_from(NAMES), objects | st.binary(max_size=8).map(lambda b: b), min_size=1, max_size=8)


ZARRAY = {"zarr_format": 2, "shape": [2, 3], "chunks": [2, 3], "dtype": "<i4", "fill_value": None, "order": "C",
          "compressor": None, "filters": None, "_nczarr_array": {"dimrefs": ["/x", "/y"], "storage": "chunked"}}
V3 = {"zarr_format": 3, "node_type": "array", "shape": [4], "data_type": "int32",
      "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
      "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0,
      "codecs": [{"name": "transpose", "configuration": {"order": [0]}}, {"name": "bytes"}, {"name": "zstd"}],
      "dimension_names": ["n"], "attributes": {"a": 1}}
ROOT = {"zarr_format": 2, "_nczarr_superblock": {"version": "2.0.0"},
        "_nczarr_group": {"dims": {"x": 2, "y": 3}, "vars": ["v"], "groups": ["g"]}}


def mutated(base: dict):
    """A valid object with one key (possibly nested one level) replaced by a random value."""
    def mutate(args):
        key, value, inner = args
        out = json.loads(json.dumps(base))
        if isinstance(out.get(key), dict) and inner is not None:
            out[key][inner] = value
        else:
            out[key] = value
        return out
    return st.tuples(st.sampled_from(sorted(base)), values, st.none() | st.sampled_from(
        ["configuration", "dims", "vars", "dimrefs", "storage", "chunk_shape", "name", "version"])).map(mutate)


structured = st.fixed_dictionaries({
    ".zgroup": mutated(ROOT), "v/.zarray": mutated(ZARRAY),
    "v/.zattrs": mutated({"units": "m", "_nczarr_attr": {"types": {"units": ">S1"}}, "_ARRAY_DIMENSIONS": ["x", "y"]}),
    "g/.zgroup": mutated({"zarr_format": 2, "_nczarr_group": {"dims": {"z": 2}, "vars": [], "groups": []}}),
}) | st.fixed_dictionaries({"zarr.json": st.just({"zarr_format": 3, "node_type": "group"}), "a/zarr.json": mutated(V3)})


def encode(store: dict) -> dict[str, bytes]:
    return {k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in store.items()}


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(stores | structured)
def test_random_metadata_never_crashes_reader_views_or_checks(store):
    raw = encode(store)
    for key, data in raw.items():
        assert isinstance(check_object(key, data), list)
    try:
        ds = read_dataset(DictObjects(raw))
    except InvalidArgument:
        return
    to_cdl(ds, "x")
    for view in VIEWS[1:]:
        out, _ = emit(read_dataset(DictObjects(raw)), view)
        for data in out.values():  # netCDF-C's JSON keeps control characters raw; zarr-python's is strict
            (json.loads if view == "xarray" else jsontext.loads)(data)
