"""The mask rule and the CF attributes' types (nczfs/nczarr/metadata/masks.py), on the views and the
classic files built from one model (kernel-free). The mounted, decoded comparisons are in
tests/mount/test_decoded.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nczfs.nczarr.metadata.masks import cf_attributes, v2_mask, view_mask
from nczfs.nczarr.metadata.model import Attribute, Variable
from nczfs.nczarr.ncfile.classicfile import group_file
from nczfs.nczarr.views.emit import emit
from tests.nczarr.util import read_objects


def v3(data_type: str, fill, attrs: dict) -> dict:
    return {"zarr.json": {"zarr_format": 3, "node_type": "group"},
            "v/zarr.json": {"zarr_format": 3, "node_type": "array", "shape": [2], "data_type": data_type,
                            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
                            "chunk_key_encoding": {"name": "default"}, "fill_value": fill,
                            "codecs": [{"name": "bytes"}], "dimension_names": ["n"], "attributes": attrs}}


def v2(dtype: str, fill, attrs: dict) -> dict:
    return {".zgroup": {"zarr_format": 2},
            "v/.zarray": {"zarr_format": 2, "shape": [2], "chunks": [2], "dtype": dtype, "fill_value": fill,
                          "order": "C", "compressor": None, "filters": None},
            "v/.zattrs": {"_ARRAY_DIMENSIONS": ["n"], **attrs}}


def nc_attrs(objs: dict) -> dict:
    """{name: (type, values)} of the variable in the classic file."""
    var = group_file(read_objects(objs), "/").layout.vars[0]
    out = {}
    for a in var.attrs:
        out[a.name] = (a.nctype, a.data.decode() if a.nctype == "char" else
                       np.frombuffer(a.data, dtype=np.dtype(_BE[a.nctype])).tolist())
    return out


_BE = {"byte": ">i1", "short": ">i2", "int": ">i4", "int64": ">i8", "float": ">f4", "double": ">f8"}


def view_attrs(objs: dict, view: str = "netcdf-4.10") -> tuple[dict, dict, dict]:
    """(.zattrs values, their NCZarr types, .zarray) of the variable in ``view``."""
    out, _ = emit(read_objects(objs), view)
    zattrs = json.loads(out["v/.zattrs"])
    return zattrs, zattrs.get("_nczarr_attr", {}).get("types", {}), json.loads(out["v/.zarray"])


def test_zarr_v3_fill_value_alone_is_no_mask():
    """xarray's time coordinate: int64, fill_value 0, no _FillValue: the first time (0) is a value."""
    objs = v3("int64", 0, {"units": "hours since 2000-01-01", "calendar": "noleap"})
    assert "_FillValue" not in nc_attrs(objs)
    for view in ("netcdf-4.10", "netcdf-4.9", "xarray"):  # a v2 fill_value 0 would be xarray's mask;
        zattrs, _, zarray = view_attrs(objs, view)  # null reads 0 in missing chunks in netCDF-C too
        assert "_FillValue" not in zattrs and zarray["fill_value"] is None, view


def test_zarr_v3_fill_attribute_is_the_mask_and_fill_value_what_a_missing_chunk_holds():
    """xarray's packed int16: _FillValue -32768 (a plain number), fill_value 0."""
    objs = v3("int16", 0, {"_FillValue": -32768, "scale_factor": 0.01, "add_offset": 273.15,
                           "valid_range": [-32000, 32000], "actual_min": 250.5})
    assert nc_attrs(objs)["_FillValue"] == ("short", [-32768])
    gf = group_file(read_objects(objs), "/")
    assert gf.values[0].fill == b"\0\0"  # a missing chunk reads 0 (273.15 K), not missing
    zattrs, types, zarray = view_attrs(objs)  # (as missing_value: a missing chunk's 0 is no mask)
    assert zattrs["missing_value"] == -32768 and types["missing_value"] == "<i2" and zarray["fill_value"] is None
    assert types["valid_range"] == "<i2" and types["actual_min"] == "<f8"  # packed: actual_* unpacked
    assert nc_attrs(objs)["valid_range"] == ("short", [-32000, 32000])


@pytest.mark.parametrize("fill,expect", [("AAAAAAAA+H8=", "nan"), ("AAAAAAAA8D8=", 1.0), ("AADAfw==", "nan")])
def test_xarrays_base64_fill_is_decoded_to_the_variables_type(fill, expect):
    objs = v3("float32", "NaN", {"_FillValue": fill})
    attr = read_objects(objs).root.variables[0].attributes[0]
    assert attr.nctype == "float" and (np.isnan(attr.value[0]) if expect == "nan" else attr.value == [expect])
    assert read_objects(objs).notes == []
    nctype, values = nc_attrs(objs)["_FillValue"]
    assert nctype == "float" and (np.isnan(values[0]) if expect == "nan" else values == [expect])
    # NaN is missing by itself: the netCDF views show no _FillValue that would unmask netCDF-C's default fill
    assert ("_FillValue" in view_attrs(objs)[0]) == (expect != "nan")


def test_zarr_v2_fill_value_is_the_mask_on_every_netcdf_path():
    """xarray's packed int16 in Zarr v2: the mask lives in fill_value alone."""
    objs = v2("<i2", -32768, {"scale_factor": 0.01, "add_offset": 273.15, "missing_value": -32767})
    assert nc_attrs(objs)["_FillValue"] == ("short", [-32768])
    for view in ("netcdf-4.10", "netcdf-4.9.1", "netcdf-4.9"):
        zattrs, types, zarray = view_attrs(objs, view)
        assert zattrs["_FillValue"] == -32768 and zarray["fill_value"] == -32768, view
    _, types, _ = view_attrs(objs)
    assert types["_FillValue"] == types["missing_value"] == "<i2"


def test_cf_attributes_take_the_variables_type_only_where_their_values_fit():
    objs = v2("<f4", "NaN", {"actual_min": 1.5, "valid_max": 1e300, "flag_values": [0, 1], "units": "K"})
    got = nc_attrs(objs)
    assert got["actual_min"][0] == "float" and got["flag_values"][0] == "float"
    assert got["valid_max"][0] == "double"  # out of float's range: left as the JSON reads
    objs = v2("|i1", None, {"flag_values": [0, 1, 2], "valid_range": [0, 300]})
    got = nc_attrs(objs)
    assert got["flag_values"] == ("byte", [0, 1, 2]) and got["valid_range"][0] == "int"
    assert "_FillValue" not in got


def test_a_bool_is_never_masked():
    assert "_FillValue" not in nc_attrs(v3("bool", False, {}))
    assert "_FillValue" not in view_attrs(v3("bool", False, {}))[0]


def test_the_views_leave_out_a_nan_mask_and_a_zero_fill_xarray_cannot_read():
    """A NaN _FillValue would unmask netCDF-C's default fill; a v2 fill_value 0 is zarr-python's
    default, which the netCDF4 wheel reading the store does not take as a mask either."""
    for objs in (v2("<i4", 0, {}), v2("<f4", "NaN", {})):
        objs["v/.zattrs"].pop("_ARRAY_DIMENSIONS")  # an array xarray cannot read (zarr-python's own)
        zattrs, _, _ = view_attrs(objs)
        assert "_FillValue" not in zattrs
        assert "_FillValue" in nc_attrs(objs)  # the .nc file masks as xarray reads the store
    zattrs, types, _ = view_attrs(v2("<i4", 0, {"_FillValue": 0}))  # said as an attribute: shown
    assert zattrs["_FillValue"] == 0 and types["_FillValue"] == "<i4"
    zattrs, types, _ = view_attrs(v2("<i4", 0, {}))  # xarray reads it (_ARRAY_DIMENSIONS): its mask
    assert zattrs["_FillValue"] == 0 and types["_FillValue"] == "<i4"


def test_a_v2_scalar_xarray_wrote_keeps_its_zero_mask_in_the_views():
    """xarray writes a scalar's ``_FillValue`` 0 as ``fill_value: 0`` with ``_ARRAY_DIMENSIONS:
    []``; without that list it is zarr-python's default fill, no mask."""
    objs = v2("<i4", 0, {})
    objs["v/.zarray"].update(shape=[], chunks=[])
    objs["v/.zattrs"]["_ARRAY_DIMENSIONS"] = []
    assert read_objects(objs).root.variables[0].named_dims
    for view in ("netcdf-4.10", "netcdf-4.9.1", "netcdf-4.9"):
        zattrs, types, zarray = view_attrs(objs, view)
        assert zattrs["_FillValue"] == 0 and zarray["fill_value"] == 0, view
    objs["v/.zattrs"].pop("_ARRAY_DIMENSIONS")
    assert "_FillValue" not in view_attrs(objs)[0]


def test_a_string_or_char_fill_attribute_passes_as_it_is():
    """netCDF-C's NC_STRING and char variables keep their typed _FillValue in the views."""
    for nctype, value in (("string", ["none"]), ("char", "-")):
        fill = Attribute("_FillValue", nctype, value)
        var = Variable("v", nctype, "|S4", [2], [2], ["/n"], attributes=[fill])
        assert view_mask(var, "V2-ZA") is fill and cf_attributes(var, "V2-ZA", view=True) == [fill]


def test_an_nczarr_nan_fill_attribute_stays_in_the_views():
    """netCDF-C wrote it, typed: its readers see it as they see the store (tst_nans)."""
    objs = v2("<f8", "NaN", {"_FillValue": "NaN", "_nczarr_attr": {"types": {"_FillValue": "<f8"}}})
    objs[".zattrs"] = {"_nczarr_superblock": {"version": "2.0.0"},
                       "_nczarr_group": {"dimensions": {"n": 2}, "arrays": ["v"], "groups": []}}
    objs["v/.zattrs"]["_nczarr_array"] = {"dimension_references": ["/n"], "storage": "chunked"}
    assert read_objects(objs).flavor == "V2-ZA"
    zattrs, types, _ = view_attrs(objs)
    assert zattrs["_FillValue"] == "NaN" and types["_FillValue"] == "<f8"


def test_a_v3_mask_other_than_a_missing_chunks_zero_is_shown_as_missing_value():
    """zarr-python writes no chunk of all 0s: as the v2 fill_value (or netCDF-C's _FillValue) the
    mask would be read for that chunk too, its 0s decoded missing."""
    objs = v3("int16", 0, {"_FillValue": -1, "units": "K"})
    for view in ("netcdf-4.10", "netcdf-4.9"):
        zattrs, types, zarray = view_attrs(objs, view)
        assert zarray["fill_value"] is None and "_FillValue" not in zattrs and zattrs["missing_value"] == -1, view
    assert view_attrs(objs)[1]["missing_value"] == "<i2"
    assert nc_attrs(objs)["_FillValue"] == ("short", [-1])  # the .nc file reads a missing chunk as 0 itself
    # a missing_value of another value: the mask stays the fill
    _, _, zarray = view_attrs(v3("int16", 0, {"_FillValue": -1, "missing_value": -2}), "xarray")
    assert zarray["fill_value"] == -1


def test_the_xarray_view_keeps_a_v3_mask_named_fill_value_beside_a_null_fill():
    """zarr-python reads a missing chunk of a null fill_value as 0 and xarray masks a _FillValue
    attribute: the mask keeps the name xarray reads from the store (before: missing_value)."""
    zattrs, _, zarray = view_attrs(v3("int16", 0, {"_FillValue": -1, "units": "K"}), "xarray")
    assert zarray["fill_value"] is None and zattrs["_FillValue"] == -1 and "missing_value" not in zattrs


def test_a_list_of_strings_is_an_nc_string_attribute_where_the_reader_has_strings():
    """netCDF-C writes an NC_STRING attribute of several values as a JSON list typed ``|S128``;
    netCDF-C 4.9.0 has no strings: JSON text there."""
    objs = v2("<f4", "NaN", {"names": ["abcd", "efgh"], "one": ["x"]})
    for view in ("netcdf-4.10", "netcdf-4.9.1"):
        zattrs, types, _ = view_attrs(objs, view)
        assert zattrs["names"] == ["abcd", "efgh"] and types["names"] == "|S128", view
        assert zattrs["one"] == "x" and types["one"] == ">S1", view
    zattrs = json.loads(emit(read_objects(objs), "netcdf-4.9")[0]["v/.zattrs"])
    assert json.loads(zattrs["names"]) == ["abcd", "efgh"] and zattrs["_NCZARR_ATTR"]["types"]["names"] == "<U1"


def test_a_v2_string_fill_value_is_a_string_mask_in_the_netcdf_views():
    """``|S``: the base64 of its bytes (netCDF-C would take the base64 text as the fill)."""
    for dtype, fill in (("|S4", "AA=="), ("|S4", ""), ("<U4", "")):
        objs = v2(dtype, fill, {})
        zattrs, types, zarray = view_attrs(objs)
        assert zattrs["_FillValue"] == "" and types["_FillValue"] == "|S128", dtype
        assert zarray["fill_value"] == "", dtype
        assert json.loads(emit(read_objects(objs), "xarray")[0]["v/.zarray"])["fill_value"] == fill  # as stored
    objs = v2("|S4", "AA==", {})
    objs["v/.zattrs"].pop("_ARRAY_DIMENSIONS")  # zarr-python's own: no mask
    assert "_FillValue" not in view_attrs(objs)[0]


BYTES = {"name": "null_terminated_bytes", "configuration": {"length_bytes": 4}}
TEXT = {"name": "fixed_length_utf32", "configuration": {"length_bytes": 16}}


@pytest.mark.parametrize(("data_type", "mask", "text"), [(BYTES, "AA==", ""), (BYTES, "", ""), (TEXT, "", ""),
                                                         (BYTES, "YWI=", "ab"), (TEXT, "ab", "ab")])
def test_a_v3_fixed_width_string_mask_is_its_text_in_every_view(data_type, mask, text):
    """xarray writes it as a Zarr v2 ``fill_value`` (``|S``: base64 of the bytes). An empty mask
    (what a missing chunk holds too, ``tst_charfill``, ``tst_string_data``): the netCDF views show
    its text as ``_FillValue`` (before: the base64 text, or no mask for ``<U``), the xarray view as
    the v2 ``fill_value`` (before: ``null``, no mask). Another mask, as for numbers, beside a
    ``null`` fill: ``missing_value`` in the netCDF views, ``_FillValue`` in the xarray view, but for
    bytes, which xarray masks by the ``fill_value`` alone."""
    objs = v3("int8", 0, {"_FillValue": mask})
    objs["v/zarr.json"].update(data_type=data_type, fill_value="")
    for view in ("netcdf-4.10", "netcdf-4.9.1"):
        zattrs, types, zarray = view_attrs(objs, view)
        name = "_FillValue" if not text else "missing_value"
        assert zattrs[name] == text and types[name] == "|S128" and zarray["fill_value"] == (None if text else ""), view
    zattrs, _, zarray = view_attrs(objs, "xarray")
    if not text or data_type is BYTES:
        assert "_FillValue" not in zattrs and zarray["fill_value"] == (mask if data_type is BYTES else "")
    else:
        assert zattrs["_FillValue"] == text and zarray["fill_value"] is None


def test_one_rule_shows_each_views_mask():
    """``v2_mask``: the fill_value and the attribute each view shows, for the kinds of mask."""
    def var(flavor, fill, attrs, dtype="int16"):
        objs = v3(dtype, fill, attrs) if flavor == "zarr-v3" else v2("<i2", fill, attrs)
        return read_objects(objs).root.variables[0]

    shown = {}
    for flavor, fill, attrs in (("zarr-v3", 0, {"_FillValue": -1}), ("zarr-v3", -1, {"_FillValue": -1}),
                                ("zarr-v3", 0, {}), ("zarr-v2", -1, {})):
        v = var(flavor, fill, attrs)
        for view in ("xarray", "netcdf-4.10"):
            m = v2_mask(v, flavor, view)
            shown[(flavor, fill, bool(attrs), view)] = (m.fill, m.attribute and (m.attribute.name, m.attribute.value),
                                                         m.replaces)
    assert shown == {
        ("zarr-v3", 0, True, "xarray"): (None, ("_FillValue", [-1]), ("_FillValue", "missing_value")),
        ("zarr-v3", 0, True, "netcdf-4.10"): (None, ("missing_value", [-1]), ("_FillValue", "missing_value")),
        ("zarr-v3", -1, True, "xarray"): (-1, None, ("_FillValue",)),
        ("zarr-v3", -1, True, "netcdf-4.10"): (-1, ("_FillValue", [-1]), ("_FillValue",)),
        ("zarr-v3", 0, False, "xarray"): (None, None, ("_FillValue",)),
        ("zarr-v3", 0, False, "netcdf-4.10"): (None, None, ("_FillValue",)),
        ("zarr-v2", -1, False, "xarray"): (-1, None, ()),
        ("zarr-v2", -1, False, "netcdf-4.10"): (-1, ("_FillValue", [-1]), ("_FillValue",)),
    }
