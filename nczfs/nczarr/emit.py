"""Write the dataset model back out as the metadata objects of one flavor (a *view*).

``emit(ds, view)`` returns ``{key: bytes}`` for every metadata object of the view (keys
relative to the dataset root) and the arrays it had to leave out, each with its reason.
Chunks are never rewritten: for arrays read from Zarr v3, :func:`v3_chunk_prefix` says where
their chunks live. Views (NCZARR_FORMATS.md section 8):

* ``netcdf-4.10``: V2-ZA, what netCDF-C 4.9.3 and later read;
* ``netcdf-4.9.1``: V2-LC (lower-case keys inside ``.zgroup``/``.zarray``), what 4.9.1/4.9.2 read;
* ``netcdf-4.9``: V2-UC (upper-case keys), what 4.8.1 and 4.9.0 read (Debian's 4.9.0 ignores
  compressors and byte order, so compressed and big-endian arrays are left out there);
* ``xarray``: pure Zarr v2 with ``_ARRAY_DIMENSIONS`` on every array, no NCZarr keys.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from nczfs.nczarr import jsontext
from nczfs.nczarr.model import NC_TYPES, Attribute, Dataset, Group, Variable

_V3_DTYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
              "int64": "i8", "uint64": "u8", "float32": "f4", "float64": "f8", "bool": "b1"}
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


@dataclass
class V2Array:
    """How an array appears in Zarr v2 terms (translated from v3 where needed)."""

    dtype: str
    order: str
    compressor: dict | None
    filters: list[dict] | None
    separator: str


def v3_to_v2(var: Variable) -> V2Array | str:
    """The v2 form of an array read from Zarr v3, or why it has none."""
    base = _V3_DTYPES.get(var.dtype)
    if base is None:
        return f"data_type {var.dtype} has no Zarr v2 equivalent here"
    codecs = list(var.codecs)
    order = "C"
    if codecs and codecs[0].get("name") == "transpose":
        perm = (codecs.pop(0).get("configuration") or {}).get("order")
        if list(perm or []) != list(reversed(range(len(var.shape)))):
            return f"transpose order {perm} is neither C nor F"
        order = "F"
    if not codecs or codecs[0].get("name") != "bytes":
        return f"codecs {[c.get('name') for c in var.codecs]} do not start with 'bytes' (e.g. sharding)"
    codecs.pop(0)
    endian = ">" if var.big_endian else "<"
    dtype = ("|" if base[1] == "1" else endian) + base
    mapped = []
    for c in codecs:
        name, conf = c.get("name"), dict(c.get("configuration") or {})
        if name == "gzip":
            mapped.append({"id": "gzip", "level": conf.get("level", 5)})
        elif name == "zstd":
            if conf.get("checksum"):
                return "zstd with checksum has no numcodecs v2 equivalent"
            mapped.append({"id": "zstd", "level": conf.get("level", 0)})
        elif name == "blosc":
            shuffle = _BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), conf.get("shuffle"))
            mapped.append({"id": "blosc", "cname": conf.get("cname", "lz4"), "clevel": conf.get("clevel", 5),
                           "shuffle": shuffle, "blocksize": conf.get("blocksize", 0)})
        elif name == "crc32c":
            mapped.append({"id": "crc32c"})
        elif isinstance(name, str) and name.startswith("numcodecs."):
            mapped.append({"id": name[len("numcodecs."):], **conf})
        else:
            return f"codec {name!r} has no Zarr v2 equivalent"
    compressor = mapped[-1] if mapped else None
    return V2Array(dtype, order, compressor, mapped[:-1] or None, var.dimension_separator)


def v3_chunk_prefix(var: Variable, encoding_name: str = "default") -> str:
    """What v3 puts before the chunk indices: ``c/`` or ``c.`` (default encoding), else nothing."""
    return f"c{var.dimension_separator}" if encoding_name == "default" else ""


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


def hide_reason(var: Variable, view: str, from_v3: bool) -> str | None:
    """Why a reader of ``view`` cannot handle ``var`` (None if it can)."""
    if from_v3:
        v2 = v3_to_v2(var)
        if isinstance(v2, str):
            return v2
    if view == "xarray":
        return None
    if var.nctype is None:
        return f"dtype {var.dtype} has no netCDF type"
    if var.shape == []:
        return "zero-rank Zarr array (netCDF-C drops or misreads it)"
    order = v3_to_v2(var).order if from_v3 else var.order  # type: ignore[union-attr]
    if order == "F":
        return "order F (netCDF-C ignores it and returns transposed data)"
    if view == "netcdf-4.9":
        if var.nctype == "string":
            return "string type (netCDF-C 4.9.0 has no NC_STRING in NCZarr)"
        if var.scalar:
            return "scalar (netCDF-C 4.9.0 crashes re-opening NCZarr scalars)"
        v2 = v3_to_v2(var) if from_v3 else None
        compressor = v2.compressor if isinstance(v2, V2Array) else var.compressor
        filters = v2.filters if isinstance(v2, V2Array) else var.filters
        if compressor or filters:
            return "compressed (Debian's netCDF-C 4.9.0 ignores compressors and returns the raw bytes)"
        if var.big_endian:
            return "big-endian (netCDF-C 4.9.0 ignores the byte order)"
    return None


def _prune(ds: Dataset, view: str) -> list[tuple[str, str]]:
    """Remove the arrays ``view`` cannot show from the model; return (path, reason) for each."""
    hidden = []
    from_v3 = ds.flavor == "zarr-v3"
    for g in ds.root.walk():
        keep = []
        for v in g.variables:
            reason = hide_reason(v, view, from_v3)
            if reason is None:
                keep.append(v)
            else:
                hidden.append((_join(g.path, v.name), reason))
        g.variables = keep
    return hidden


def _join(gpath: str, name: str) -> str:
    return f"{gpath.strip('/')}/{name}".lstrip("/")


def dumps_for(view: str) -> Callable[[Any], bytes]:
    """How ``view`` writes JSON: as netCDF-C does for its readers, standard JSON for zarr-python."""
    return jsontext.dumps_zarr if view == "xarray" else jsontext.dumps_netcdf


def _zarray(var: Variable, from_v3: bool, view: str) -> dict:
    if from_v3:
        v2 = v3_to_v2(var)
        assert isinstance(v2, V2Array)
        dtype, order, compressor, filters, sep = v2.dtype, v2.order, v2.compressor, v2.filters, v2.separator
    else:
        dtype, order, compressor, filters, sep = (var.dtype, var.order, var.compressor, var.filters or None,
                                                  var.dimension_separator)
    if var.nctype == "char" and view != "xarray":
        dtype = "<U1" if view == "netcdf-4.9" else ">S1"  # one byte per char either way
    elif view == "xarray" and len(dtype) == 3 and dtype[0] in "<>" and dtype[2] == "1":
        dtype = "|" + dtype[1:]  # netCDF-C writes <i1/<u1, which zarr-python 3 refuses
    fill = _xarray_v3_fill(var, dtype) if from_v3 and view == "xarray" else _fill(var)
    out = {"zarr_format": 2, "shape": var.shape, "chunks": var.chunks, "dtype": dtype,
           "fill_value": fill, "order": order, "compressor": compressor, "filters": filters}
    if sep != ".":
        out["dimension_separator"] = sep
    return out


def _fill(var: Variable) -> Any:
    return _json_number(var.fill_value) if isinstance(var.fill_value, float) else var.fill_value


def _xarray_v3_fill(var: Variable, dtype: str) -> Any:
    """xarray masks Zarr v2 data with ``fill_value`` but Zarr v3 data only with the ``_FillValue``
    attribute (base64 of the value's bytes): the v2 form takes that attribute, or no fill."""
    attr = next((a for a in var.attributes if a.name == "_FillValue"), None)
    if attr is None:
        return None
    if attr.nctype != "char":
        return _json_number(attr.value[0])
    try:
        raw = base64.b64decode(attr.value, validate=True)
        dt = np.dtype(dtype)
        if dt.kind == "f" and len(raw) == 8:
            dt = np.dtype("<f8")  # xarray encodes float fills as float64
        value = np.frombuffer(raw, dtype=dt)
    except (ValueError, TypeError):
        return None
    return _json_number(value[0].item()) if value.size == 1 else None


def _types(attrs: list[Attribute], view: str, key: str, dropped: list[tuple[str, str]]) -> tuple[dict, dict]:
    """(attribute values, NCZarr type strings) as ``view`` writes them."""
    values, types = {}, {}
    for a in attrs:
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


def emit(ds: Dataset, view: str) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """The metadata objects of ``view`` for ``ds`` ({key: bytes}), and what was left out."""
    from_v3 = ds.flavor == "zarr-v3"
    hidden = _prune(ds, view)
    _dumps = dumps_for(view)
    out: dict[str, bytes] = {}
    for g in ds.root.walk():
        prefix = g.path.strip("/")
        gkey = (prefix + "/") if prefix else ""
        values, types = _types(g.attributes, view, gkey + ".zattrs", hidden)
        group_meta = {"arrays": [v.name for v in g.variables], "groups": [s.name for s in g.groups]}
        zgroup: dict = {"zarr_format": 2}
        if view == "netcdf-4.10":
            zattrs = dict(values)
            zattrs["_nczarr_group"] = {"dimensions": _dims_json(g, True), **group_meta}
            if g is ds.root:
                zattrs["_nczarr_superblock"] = {"version": "2.0.0"}
            zattrs["_nczarr_attr"] = {"types": {**types, **{k: "|J0" for k in zattrs if k.startswith("_nczarr_")},
                                                "_nczarr_attr": "|J0"}}
        elif view in ("netcdf-4.9", "netcdf-4.9.1"):
            up = view == "netcdf-4.9"
            k = (lambda s: s.upper()) if up else (lambda s: s)
            if g is ds.root:
                zgroup[k("_nczarr_superblock")] = {"version": "2.0.0"}
            zgroup[k("_nczarr_group")] = {"dims": _dims_json(g, False), "vars": group_meta["arrays"],
                                          "groups": group_meta["groups"]}
            zattrs = dict(values)
            if values:
                zattrs[k("_nczarr_attr")] = {"types": types}
        else:
            zattrs = dict(values)
        out[gkey + ".zgroup"] = _dumps(zgroup)
        if zattrs or view in ("netcdf-4.10", "netcdf-4.9.1"):
            out[gkey + ".zattrs"] = _dumps(zattrs)
        for v in g.variables:
            akey = gkey + v.name + "/"
            attrs = v.attributes
            if view != "xarray" or from_v3:  # netCDF-C wants it of the variable's type; v3: in fill_value
                attrs = [a for a in attrs if a.name != "_FillValue" or (a.nctype == v.nctype and not from_v3)]
            values, types = _types(attrs, view, akey + ".zattrs", hidden)
            zarray = _zarray(v, from_v3, view)
            names = [r.rpartition("/")[2] for r in v.dimrefs] if not v.scalar else (["_scalar_"] if v.shape else [])
            zattrs = dict(values)
            if view != "netcdf-4.9" or g is ds.root:
                zattrs["_ARRAY_DIMENSIONS"] = names
            if view == "netcdf-4.10":
                ncz = {"dimension_references": v.dimrefs, "storage": "chunked"}
                if v.scalar:
                    ncz["scalar"] = 1
                zattrs["_nczarr_array"] = ncz
                zattrs["_nczarr_attr"] = {"types": {**types, "_nczarr_array": "|J0", "_nczarr_attr": "|J0"}}
            elif view in ("netcdf-4.9", "netcdf-4.9.1"):
                k = (lambda s: s.upper()) if view == "netcdf-4.9" else (lambda s: s)
                zarray[k("_nczarr_array")] = {"dimrefs": v.dimrefs, "storage": "scalar" if v.scalar else "chunked"}
                if types:
                    zattrs[k("_nczarr_attr")] = {"types": types}
            out[akey + ".zarray"] = _dumps(zarray)
            if zattrs or view in ("netcdf-4.10", "netcdf-4.9.1"):
                out[akey + ".zattrs"] = _dumps(zattrs)
    if ds.consolidated:
        meta = {k: jsontext.loads(b) for k, b in out.items()}
        out[".zmetadata"] = _dumps({"zarr_consolidated_format": 1, "metadata": meta})
    return out, hidden


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
