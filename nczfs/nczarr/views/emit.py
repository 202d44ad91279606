"""Write the dataset model back out as the metadata objects of one flavor (a *view*).

``emit(ds, view)`` returns ``{key: bytes}`` for every metadata object of the view (keys
relative to the dataset root) and the arrays it had to leave out, each with its reason.
Chunks are never rewritten: for arrays read from Zarr v3, :func:`nczfs.nczarr.chunks.v2form.v3_chunk_prefix` says where
their chunks live. Views (NCZARR_FORMATS.md section 8):

* ``netcdf-4.10``: V2-ZA, what netCDF-C 4.9.3 and later read;
* ``netcdf-4.9.1``: V2-LC (lower-case keys inside ``.zgroup``/``.zarray``), what 4.9.1/4.9.2 read;
* ``netcdf-4.9``: V2-UC (upper-case keys), what 4.8.1 and 4.9.0 read (Debian's 4.9.0 ignores
  compressors and byte order, so compressed and big-endian arrays are left out there);
* ``xarray``: pure Zarr v2 with ``_ARRAY_DIMENSIONS`` on every array, no NCZarr keys.

Before writing, :mod:`nczfs.nczarr.views.viewshape` readies the model for the view (what it hides,
where its reader puts dimensions) and :mod:`nczfs.nczarr.views.viewarrays` plans recoded chunks.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import numpy as np

from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.chunks.v2form import TIME_UNITS, V2Array, v2_form
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.masks import V2Mask, cf_typed, strings_as_written, v2_mask
from nczfs.nczarr.metadata.model import NC_TYPES, Attribute, Dataset, Group, Variable
from nczfs.nczarr.views.viewarrays import netcdf_dtype, recode
from nczfs.nczarr.views.viewshape import (
    Layouts,
    array_path,
    prune,
    pure_zarr_dims_as_read,
    scalars_on_a_dimension,
    strings_as_chars,
)


def attr_dtype(nctype: str, view: str) -> str | None:
    if nctype == "char":
        return "<U1" if view == "netcdf-4.9" else ">S1"
    if nctype == "string":
        return None if view == "netcdf-4.9" else "|S128"
    kind, size = NC_TYPES[nctype]
    return f"<{kind}{size}"


def json_value(attr: Attribute) -> Any:
    if attr.nctype == "char":
        return attr.value
    values = [_json_number(v) for v in attr.value] if attr.nctype != "string" else list(attr.value)
    return values[0] if len(values) == 1 else values


def _json_number(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
    return v


def type_attributes(var: Variable, view: str, plan: Recode | str | None) -> list[Attribute]:
    """What netCDF views add to an array of a type netCDF has not, in CF's terms (where the array
    has no attribute of that name): bool as byte with flag_values/flag_meanings, times as int64
    counts with units (and calendar) that cftime and netCDF4.num2date decode, NaT as _FillValue;
    bool also with ``dtype = "bool"``, xarray's netCDF convention that restores bool."""
    if view == "xarray":
        return []
    out = []
    if var.is_bool:  # xarray's netCDF convention restores bool from dtype; CF tools read the flags
        out += [Attribute("dtype", "char", "bool"), Attribute("flag_values", "byte", [0, 1]),
                Attribute("flag_meanings", "char", "false true")]
    elif var.dtype in ("numpy.datetime64", "numpy.timedelta64"):
        unit = TIME_UNITS.get(var.dtype_config.get("unit", ""), "")
        if isinstance(plan, Recode) and plan.divide == 1000:
            unit = "microseconds"
        if var.dtype == "numpy.datetime64":
            out += [Attribute("units", "char", f"{unit} since 1970-01-01"),
                    Attribute("calendar", "char", "proleptic_gregorian")]
        else:
            out.append(Attribute("units", "char", unit))
        if var.fill_value == np.iinfo("i8").min:
            out.append(Attribute("_FillValue", "int64", [var.fill_value]))
    have = {a.name for a in var.attributes}
    return [a for a in out if a.name not in have]


def dumps_for(view: str) -> Callable[[Any], bytes]:
    """How ``view`` writes JSON: as netCDF-C does for its readers, standard JSON for zarr-python."""
    return jsontext.dumps_zarr if view == "xarray" else jsontext.dumps_netcdf


def _zarray(var: Variable, from_v3: bool, view: str, mask: V2Mask, plan: Recode | None = None) -> dict:
    v2 = v2_form(var, from_v3)
    dtype, chunks, order, compressor, filters = _chunks_as_shown(v2, view, plan)
    shape, chunks, dtype, sep = _typed_for(var, view, var.shape, chunks, dtype, v2.separator)
    fill = _json_number(mask.fill) if isinstance(mask.fill, float) else mask.fill
    if not shape and view != "xarray":  # a zero-rank Zarr array, shown as an NCZarr scalar
        shape, chunks = [1], [1]
    out = {"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype,
           "fill_value": fill, "order": order, "compressor": compressor, "filters": filters}
    if sep != ".":
        out["dimension_separator"] = sep
    return out


def _chunks_as_shown(v2: V2Array, view: str, plan: Recode | None) -> tuple[str, list[int], str, dict | None,
                                                                          list[dict] | None]:
    """(dtype, chunks, order, compressor, filters) of the chunks ``view`` shows: as stored, or recoded."""
    if plan is not None:
        return (plan.shown_dtype, list(plan.shown_chunks), "C", plan.shown_codecs.compressor,
                list(plan.shown_codecs.filters) or None)
    dtype = v2.dtype if view == "xarray" else netcdf_dtype(v2.dtype)
    return dtype, v2.chunks, v2.order, v2.compressor, v2.filters


def _typed_for(var: Variable, view: str, shape: list[int], chunks: list[int], dtype: str,
               sep: str) -> tuple[list[int], list[int], str, str]:
    """(shape, chunks, dtype, separator) in the types ``view``'s reader takes."""
    if view == "netcdf-4.9" and var.nctype == "string":  # 4.9.0 has no strings: chars along a length
        width = np.dtype(dtype).itemsize
        return [*(shape or [1]), width], [*(chunks or [1]), width], "<U1", "."
    if var.nctype == "char":  # one byte per char in every flavor; zarr-python 3 refuses <U1 and >S1
        dtype = {"netcdf-4.9": "<U1", "xarray": "|S1"}.get(view, ">S1")
    elif view == "xarray" and len(dtype) == 3 and dtype[0] in "<>" and dtype[1] in "iub" and dtype[2] == "1":
        dtype = "|" + dtype[1:]  # netCDF-C writes <i1/<u1, which zarr-python 3 refuses
    return shape, chunks, dtype, sep


#: netCDF-C 4.9.0's type for an untyped JSON integer: the first of these that holds it (zsync.c mininttype)
_SMALLEST_INT = (("byte", -(2**7), 2**7 - 1), ("ubyte", 0, 2**8 - 1), ("short", -(2**15), 2**15 - 1),
                 ("ushort", 0, 2**16 - 1), ("int", -(2**31), 2**31 - 1), ("uint", 0, 2**32 - 1),
                 ("int64", -(2**63), 2**63 - 1), ("uint64", 0, 2**64 - 1))


def _as_read_by(a: Attribute, view: str) -> Attribute:
    """An untyped (pure Zarr) attribute as ``view``'s reader would type it reading the store
    itself: 4.9.0 gives integers the smallest type that holds them (4.10 and nczfs: int first).
    A list of strings, which netCDF-C reads as JSON text, is shown as netCDF-C writes one (an
    ``NC_STRING`` attribute of several values) where the reader has strings."""
    if view in ("netcdf-4.10", "netcdf-4.9.1"):
        return strings_as_written(a)
    if view == "netcdf-4.9" and a.raw is not None and a.nctype in ("int", "uint", "int64", "uint64"):
        for nctype, lo, hi in _SMALLEST_INT:
            if all(lo <= v <= hi for v in a.value):
                return Attribute(a.name, nctype, a.value, a.raw)
    return a


def _types(attrs: list[Attribute], view: str, key: str, dropped: list[tuple[str, str]]) -> tuple[dict, dict]:
    """(attribute values, NCZarr type strings) as ``view`` writes them; the xarray view shows
    untyped (pure Zarr) attributes as they are stored."""
    values, types = {}, {}
    for a in attrs:
        if view == "xarray" and a.raw is not None:
            values[a.name] = a.raw
            continue
        a = _as_read_by(a, view)
        dtype = attr_dtype(a.nctype, view)
        if dtype is None:
            if len(a.value) != 1:
                dropped.append((f"{key}:{a.name}", f"{a.nctype} attribute with {len(a.value)} values"))
                continue
            values[a.name], types[a.name] = a.value[0], attr_dtype("char", view)
            continue
        values[a.name], types[a.name] = json_value(a), dtype
    return values, types


def _dims_json(g: Group, unlimited: bool) -> dict:
    return {d.name: {"size": d.size, "unlimited": 1} if (d.unlimited and unlimited) else d.size for d in g.dims}


def emit(ds: Dataset, view: str, reader: bool = True, transcode: str = "auto", facts: dict[str, dict] | None = None,
         layouts: Layouts | None = None) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """The metadata objects of ``view`` for ``ds`` ({key: bytes}), and what was left out.

    ``reader``: as shown to the view's reader (chunks it cannot take as stored are shown otherwise,
    said in ``layouts``); else as the view's flavor stores ``ds`` (a translation back into it),
    where such arrays are left out. ``facts``: by path, what scans of arrays' chunks found (see
    :func:`nczfs.nczarr.views.viewarrays.recode`)."""
    from_v3 = ds.flavor == "zarr-v3"
    facts = facts or {}
    layouts = layouts if layouts is not None else Layouts()
    hidden = prune(ds, view, reader, transcode, facts)
    if reader:
        pure_zarr_dims_as_read(ds, view)
    if reader and view == "netcdf-4.9":
        scalars_on_a_dimension(ds, hidden)
        strings_as_chars(ds, from_v3, facts, hidden, layouts)

    def plan_for(v: Variable, g: Group) -> Recode | str | None:
        return recode(v, view, from_v3, transcode, facts.get(array_path(g.path, v.name))) if reader else None

    writer = _Writer(ds, view, hidden, layouts, plan_for)
    for g in ds.root.walk():
        writer.group(g)
    return writer.objects(), hidden


class _Writer:
    """The metadata objects of one view, written group by group, array by array."""

    def __init__(self, ds: Dataset, view: str, hidden: list[tuple[str, str]], layouts: Layouts,
                 plan_for: Callable[[Variable, Group], Recode | str | None]):
        self.ds, self.view, self.hidden, self.layouts, self.plan_for = ds, view, hidden, layouts, plan_for
        self.from_v3 = ds.flavor == "zarr-v3"
        self.dumps = dumps_for(view)
        self.out: dict[str, bytes] = {}

    def put(self, prefix: str, name: str, meta: dict, zattrs: dict) -> None:
        self.out[prefix + name] = self.dumps(meta)
        if zattrs or self.view in ("netcdf-4.10", "netcdf-4.9.1"):
            self.out[prefix + ".zattrs"] = self.dumps(zattrs)

    def group(self, g: Group) -> None:
        prefix = g.path.strip("/")
        gkey = (prefix + "/") if prefix else ""
        values, types = _types(g.attributes, self.view, gkey + ".zattrs", self.hidden)
        self.put(gkey, ".zgroup", *_group_objects(g, g is self.ds.root, self.view, values, types))
        for v in g.variables:
            self.array(v, g, gkey + v.name + "/")

    def array(self, v: Variable, g: Group, akey: str) -> None:
        path = array_path(g.path, v.name)
        plan = self.plan_for(v, g)
        mask = v2_mask(v, self.ds.flavor, self.view)
        attrs = _array_attributes(v, self.view, mask, plan)
        values, types = _types(attrs, self.view, akey + ".zattrs", self.hidden)
        if isinstance(plan, Recode):
            self.layouts.recodes[path] = plan
        if self.from_v3 and (sh := v2_form(v, True).sharding) is not None:
            self.layouts.shardings[path] = (sh, list(v.shape), v.dimension_separator)
        self.put(akey, ".zarray", *_array_objects(v, g is self.ds.root, self.view, self.from_v3, plan, mask,
                                                     values, types))

    def objects(self) -> dict[str, bytes]:
        if self.ds.consolidated:
            meta = {k: jsontext.loads(b) for k, b in self.out.items()}
            self.out[".zmetadata"] = self.dumps({"zarr_consolidated_format": 1, "metadata": meta})
        return self.out


def _nczarr_key(view: str) -> Callable[[str], str]:
    """How ``view`` spells NCZarr's keys (netCDF-C 4.9.0: upper case)."""
    return (lambda s: s.upper()) if view == "netcdf-4.9" else (lambda s: s)


def _group_objects(g: Group, root: bool, view: str, values: dict, types: dict) -> tuple[dict, dict]:
    """A group's ``.zgroup`` and ``.zattrs`` as ``view`` writes them."""
    group_meta = {"arrays": [v.name for v in g.variables], "groups": [s.name for s in g.groups]}
    zgroup: dict = {"zarr_format": 2}
    zattrs = dict(values)
    if view == "netcdf-4.10":
        zattrs["_nczarr_group"] = {"dimensions": _dims_json(g, True), **group_meta}
        if root:
            zattrs["_nczarr_superblock"] = {"version": "2.0.0"}
        zattrs["_nczarr_attr"] = {"types": {**types, **{k: "|J0" for k in zattrs if k.startswith("_nczarr_")},
                                            "_nczarr_attr": "|J0"}}
    elif view in ("netcdf-4.9", "netcdf-4.9.1"):
        k = _nczarr_key(view)
        if root:
            zgroup[k("_nczarr_superblock")] = {"version": "2.0.0"}
        zgroup[k("_nczarr_group")] = {"dims": _dims_json(g, False), "vars": group_meta["arrays"],
                                      "groups": group_meta["groups"]}
        if values:
            zattrs[k("_nczarr_attr")] = {"types": types}
    return zgroup, zattrs


def _array_attributes(v: Variable, view: str, mask: V2Mask, plan: Recode | str | None) -> list[Attribute]:
    """The attributes ``view`` shows of ``v``: its mask as ``mask`` (:func:`v2_mask`) says; for
    netCDF readers the CF attributes in the variable's type and those that say what a shown type
    means."""
    attrs = v.attributes if view == "xarray" else cf_typed(v)
    attrs = [a for a in attrs if a.name not in mask.replaces]
    return [*attrs, *([mask.attribute] if mask.attribute is not None else []), *type_attributes(v, view, plan)]


def _array_objects(v: Variable, root: bool, view: str, from_v3: bool, plan: Recode | str | None, mask: V2Mask,
                   values: dict, types: dict) -> tuple[dict, dict]:
    """An array's ``.zarray`` and ``.zattrs`` as ``view`` writes them."""
    zarray = _zarray(v, from_v3, view, mask, plan if isinstance(plan, Recode) else None)
    if not v.shape and view != "xarray":
        v.scalar = True  # a zero-rank Zarr array, shown as an NCZarr scalar
    # a scalar's one element along _scalar_, as netCDF-C writes it (zarr-python needs a name per axis)
    names = [r.rpartition("/")[2] for r in v.dimrefs] if not v.scalar else (["_scalar_"] if zarray["shape"] else [])
    zattrs = dict(values)
    if view != "netcdf-4.9" or root:
        zattrs["_ARRAY_DIMENSIONS"] = names
    if view == "netcdf-4.10":
        ncz: dict[str, Any] = {"dimension_references": v.dimrefs, "storage": "chunked"}
        if v.scalar:
            ncz["scalar"] = 1
        zattrs["_nczarr_array"] = ncz
        zattrs["_nczarr_attr"] = {"types": {**types, "_nczarr_array": "|J0", "_nczarr_attr": "|J0"}}
    elif view in ("netcdf-4.9", "netcdf-4.9.1"):
        k = _nczarr_key(view)
        zarray[k("_nczarr_array")] = {"dimrefs": v.dimrefs, "storage": "scalar" if v.scalar else "chunked"}
        if types:
            zattrs[k("_nczarr_attr")] = {"types": types}
    return zarray, zattrs


def signature(ds: Dataset) -> str:
    """What a dataset means to netCDF, independent of flavor (to check a translation loses nothing)."""
    def var(v: Variable) -> list:
        fill = _json_number(v.fill_value) if isinstance(v.fill_value, float) else v.fill_value
        return [v.name, v.nctype, v.big_endian, v.shape, v.chunks, v.dimrefs, fill, v.order, v.compressor,
                v.filters or None, v.scalar, [(a.name, a.nctype, json_value(a)) for a in v.attributes]]

    def group(g: Group) -> list:
        return [g.name, [(d.name, d.size, d.unlimited) for d in g.dims], [var(v) for v in g.variables],
                [(a.name, a.nctype, json_value(a)) for a in g.attributes], [group(s) for s in g.groups]]

    return json.dumps(group(ds.root), sort_keys=True, default=str)
