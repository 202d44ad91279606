"""Checks of one metadata object's content: JSON, the Zarr v2 / v3 schema, NCZarr keys.

:func:`check_object` looks at one object alone (what can be decided without the rest of the
store); :func:`dimension_refs` and :func:`group_dims` give what the cross-object check
(every dimension reference names a declared dimension of matching size) needs.
Every function returns reasons (``[]`` = valid); callers add the key.
"""

from __future__ import annotations

import functools
import math
import re
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from nczfs.nczarr import jsontext
from nczfs.nczarr.spelling import alias, attr_type, dim_items, dim_spec, nczarr_key

V2_OBJECTS = {".zgroup", ".zarray", ".zattrs", ".zmetadata"}
V1_OBJECTS = {".nczarr", ".nczgroup", ".nczvar", ".nczarray", ".nczattr", ".nczattrs"}
METADATA_NAMES = V2_OBJECTS | V1_OBJECTS | {"zarr.json"}

V3_DATA_TYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", "string", "bytes", "fixed_length_utf32",
    "variable_length_bytes", "null_terminated_bytes", "raw_bytes", "structured",
    "numpy.datetime64", "numpy.timedelta64",
}
V3_CODECS = {"bytes", "endian", "transpose", "gzip", "zstd", "blosc", "crc32c", "sharding_indexed",
             "vlen-utf8", "vlen-bytes"}
_RAW_BITS = re.compile(r"^r\d+$")
_SPECIAL_FILLS = {"nan", "nanf", "infinity", "infinityf", "-infinity", "-infinityf"}


def is_metadata_key(key: str) -> bool:
    return key.rpartition("/")[2] in METADATA_NAMES


@functools.cache
def numcodecs_ids() -> frozenset[str]:
    """Codec ids numcodecs knows, built in or registered by installed packages (looked up once)."""
    from numcodecs.registry import codec_registry

    return frozenset(codec_registry) | {e.name for e in entry_points(group="numcodecs.codecs")}


def codecs_known() -> bool:
    """Has :func:`numcodecs_ids` run (its first call imports numcodecs: 0.1-0.2 s)?"""
    return numcodecs_ids.cache_info().currsize > 0


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


#: the most elements an array or a chunk may hold: readers index them with 64-bit signed
#: integers (numpy, zarr-python; netCDF-C's size_t products overflow past it too)
MAX_ELEMENTS = 2**63 - 1


def extent_error(what: str, dims: list[int]) -> str | None:
    """Why an array (or chunk) of ``dims`` (non-negative integers) cannot be held by any reader."""
    total = 1
    for n in dims:
        total *= n
        if n > MAX_ELEMENTS or total > MAX_ELEMENTS:
            shown = repr(dims) if len(repr(dims)) <= 80 else repr(dims)[:77] + "..."
            return f"{what} {shown} holds more than 2**63-1 elements, which no reader can index"
    return None


def parse(data: bytes) -> tuple[Any, list[str]]:
    try:
        return jsontext.loads(data), []
    except ValueError as exc:
        return None, [f"not valid JSON ({exc})"]


def stale_tail_prefix(data: bytes, previous: bytes | None) -> bytes | None:
    """The JSON text at the start of ``data`` if the rest is the previous object's old tail.

    netCDF-C (4.10.1 at least) rewrites a shorter object by opening it O_RDWR without O_TRUNC,
    on local disk too: the file is then the new JSON followed by the end of the old one.
    netCDF-C's own reader ignores that tail, so such a file is what netCDF-C meant to write.
    """
    if previous is None or len(previous) != len(data):
        return None
    try:
        _, cut = jsontext.loads_prefix(data)
    except ValueError:
        return None
    return bytes(data[:cut]) if cut < len(data) and data[cut:] == previous[cut:] else None


def check_object(key: str, data: bytes) -> list[str]:
    """Reasons why ``data`` is not valid content for metadata object ``key`` ([] if valid)."""
    value, errors = parse(data)
    if errors:
        return errors
    return check_value(key.rpartition("/")[2], value)


def check_value(name: str, value: Any) -> list[str]:
    if not isinstance(value, dict):
        return ["not a JSON object"]
    check = {
        ".zgroup": check_zgroup, ".zarray": check_zarray, ".zattrs": check_zattrs,
        ".zmetadata": check_zmetadata, "zarr.json": check_zarr_json,
        ".nczarr": check_superblock, ".nczgroup": check_ncz_group, ".nczvar": check_ncz_array,
        ".nczarray": check_ncz_array, ".nczattr": check_ncz_attr, ".nczattrs": check_ncz_attr,
    }.get(name)
    return check(value) if check else []


# -- Zarr v2 ---------------------------------------------------------------------------------


def check_zgroup(d: dict) -> list[str]:
    errors = [] if d.get("zarr_format") == 2 else [f"zarr_format must be 2, not {d.get('zarr_format')!r}"]
    return errors + check_nczarr_keys(d)


def _dtype(dtype: Any) -> tuple[np.dtype | None, str | None]:
    try:
        if isinstance(dtype, list):
            return np.dtype([tuple(f) for f in dtype]), None
        if isinstance(dtype, str) and dtype:
            return np.dtype(dtype), None
    except (TypeError, ValueError):
        pass
    return None, f"dtype {dtype!r} is not a known Zarr v2 dtype"


def check_fill(dt: np.dtype, fill: Any) -> str | None:
    """Why ``fill`` cannot be the fill value of ``dt`` (None if it can)."""
    if fill is None:
        return None
    if isinstance(fill, list) and len(fill) == 1 and dt.kind in "biuf":  # NCZarr V1 wrote [x]
        fill = fill[0]
    kind = dt.kind
    if kind == "b":
        ok = isinstance(fill, bool) or fill in (0, 1)
    elif kind in "iu":
        ok = _int(fill) or (isinstance(fill, float) and fill.is_integer())
        if ok:
            info = np.iinfo(dt)
            ok = info.min <= int(fill) <= info.max
    elif kind == "f":
        ok = (isinstance(fill, (int, float)) and not isinstance(fill, bool)) or (
            isinstance(fill, str) and fill.lower() in _SPECIAL_FILLS)
        if ok and isinstance(fill, (int, float)) and math.isfinite(fill) and dt.itemsize < 8:
            ok = abs(fill) <= float(np.finfo(dt).max) * (1 + 1e-6)
    elif kind == "c":
        ok = isinstance(fill, list) and len(fill) == 2
    elif kind in "SUV":
        ok = isinstance(fill, (str, int))
    elif kind in "Mm":
        ok = _int(fill) or isinstance(fill, str)
    else:  # O (object, e.g. variable-length strings)
        ok = True
    return None if ok else f"fill_value {fill!r} is not representable as {dt.str}"


def check_codec(c: Any, where: str, ids: frozenset[str]) -> str | None:
    if not isinstance(c, dict) or not isinstance(c.get("id"), str):
        return f"{where} {c!r} is not an object with an 'id'"
    if c["id"] not in ids:
        return f"{where} id {c['id']!r} is not a known numcodecs codec"
    return None


def check_zarray(d: dict) -> list[str]:
    errors = []
    if d.get("zarr_format") != 2:
        errors.append(f"zarr_format must be 2, not {d.get('zarr_format')!r}")
    for k in ("shape", "chunks", "dtype"):
        if k not in d:
            errors.append(f"required key {k!r} is missing")
    shape, chunks = d.get("shape"), d.get("chunks")
    if "shape" in d and not (isinstance(shape, list) and all(_int(n) and n >= 0 for n in shape)):
        errors.append(f"shape {shape!r} is not a list of non-negative integers")
    elif "shape" in d and (err := extent_error("shape", shape)):
        errors.append(err)
    if "chunks" in d and not (isinstance(chunks, list) and all(_int(n) and n > 0 for n in chunks)):
        errors.append(f"chunks {chunks!r} is not a list of positive integers")
    elif isinstance(shape, list) and isinstance(chunks, list) and len(shape) != len(chunks):
        errors.append(f"shape has rank {len(shape)} but chunks rank {len(chunks)}")
    elif "chunks" in d and (err := extent_error("chunks", chunks)):
        errors.append(err)
    dt = None
    if "dtype" in d:
        dt, err = _dtype(d["dtype"])
        if err:
            errors.append(err)
    if dt is not None:
        err = check_fill(dt, d.get("fill_value"))
        if err:
            errors.append(err)
    if d.get("order", "C") not in ("C", "F"):
        errors.append(f"order must be 'C' or 'F', not {d.get('order')!r}")
    if d.get("dimension_separator", ".") not in (".", "/"):
        errors.append(f"dimension_separator must be '.' or '/', not {d.get('dimension_separator')!r}")
    ids = numcodecs_ids()
    if d.get("compressor") is not None:
        err = check_codec(d["compressor"], "compressor", ids)
        if err:
            errors.append(err)
    filters = d.get("filters")
    if filters is not None:
        if not isinstance(filters, list):
            errors.append("filters must be null or a list")
        else:
            errors.extend(e for e in (check_codec(f, "filter", ids) for f in filters) if e)
    return errors + check_nczarr_keys(d)


def check_zattrs(d: dict) -> list[str]:
    errors = check_nczarr_keys(d)
    dims = d.get("_ARRAY_DIMENSIONS")
    if dims is not None and not (isinstance(dims, list) and all(isinstance(n, str) for n in dims)):
        errors.append(f"_ARRAY_DIMENSIONS {dims!r} is not a list of names")
    holder = nczarr_key("_nczarr_attr", d)
    if isinstance(holder, dict):
        errors.extend(check_attr_types(alias(holder, "types") or {}))
    return errors


def check_zmetadata(d: dict) -> list[str]:
    errors = []
    if d.get("zarr_consolidated_format") != 1:
        errors.append(f"zarr_consolidated_format must be 1, not {d.get('zarr_consolidated_format')!r}")
    meta = d.get("metadata")
    if not isinstance(meta, dict):
        return errors + ["'metadata' must be an object of {key: metadata}"]
    for key, value in meta.items():
        name = key.rpartition("/")[2]
        if name not in (".zgroup", ".zarray", ".zattrs"):
            errors.append(f"metadata entry {key!r} is not a .zgroup, .zarray or .zattrs")
            continue
        errors.extend(f"metadata entry {key!r}: {e}" for e in check_value(name, value))
    return errors


# -- NCZarr keys (in any placement) ----------------------------------------------------------


def check_nczarr_keys(d: dict) -> list[str]:
    errors = []
    for k, v in d.items():
        low = k.lower()
        if low == "_nczarr_superblock":
            errors.extend(check_superblock(v))
        elif low == "_nczarr_group":
            errors.extend(check_ncz_group(v))
        elif low == "_nczarr_array":
            errors.extend(check_ncz_array(v))
        elif low in ("_nczarr_attr", "_nczarr_attrs"):
            errors.extend(check_ncz_attr(v))
    return errors


def check_superblock(v: Any) -> list[str]:
    return [] if isinstance(v, dict) else ["the NCZarr superblock must be an object"]


def check_ncz_group(v: Any) -> list[str]:
    if not isinstance(v, dict):
        return ["_nczarr_group must be an object"]
    errors = []
    dims = alias(v, "dims", "dimensions")
    if dims is not None:
        if not isinstance(dims, dict):
            errors.append("_nczarr_group dimensions must be an object {name: size}")
        for name, spec in dim_items(dims):
            size = dim_spec(spec)[0]
            if size is None:
                errors.append(f"dimension {name!r} has no valid size ({spec!r})")
            elif size > MAX_ELEMENTS:
                errors.append(f"dimension {name!r} has size {size}, more than 2**63-1, which no reader can index")
    lists: dict[str, list[str]] = {}
    for k in ("vars", "arrays", "groups"):
        members = alias(v, k)
        if members is not None and not (isinstance(members, list) and all(isinstance(n, str) for n in members)):
            errors.append(f"_nczarr_group {k} must be a list of names")
        elif members is not None:
            lists[k] = members
    # the lists themselves must be consistent (whether the members exist is `nczfs validate`'s
    # job: writers store a group's metadata before or after its children)
    for k, members in lists.items():
        for name in members:
            if name in ("", ".", "..") or "/" in name:
                errors.append(f"_nczarr_group {k} holds {name!r}, which is no member name")
        for name in sorted({n for n in members if members.count(n) > 1}):
            errors.append(f"_nczarr_group {k} lists {name!r} twice")
    arrays = set(lists.get("arrays", []) + lists.get("vars", []))
    for name in sorted(arrays & set(lists.get("groups", []))):
        errors.append(f"_nczarr_group lists {name!r} as both an array and a group")
    return errors


def check_ncz_array(v: Any) -> list[str]:
    if not isinstance(v, dict):
        return ["_nczarr_array must be an object"]
    refs = alias(v, "dimrefs", "dimension_references")
    if refs is not None and not (isinstance(refs, list) and all(isinstance(r, str) and r for r in refs)):
        return [f"dimension references {refs!r} are not a list of dimension names"]
    storage = alias(v, "storage")
    if storage is not None and storage not in ("scalar", "contiguous", "compact", "chunked"):
        return [f"storage {storage!r} is not scalar, contiguous, compact or chunked"]
    return []


def check_ncz_attr(v: Any) -> list[str]:
    if not isinstance(v, dict):
        return ["_nczarr_attr must be an object"]
    types = alias(v, "types", "attribute_types")
    if types is None:
        return []
    return check_attr_types(types)


def check_attr_types(types: Any) -> list[str]:
    if not isinstance(types, dict):
        return ["attribute types must be an object {name: type}"]
    errors = []
    for name, t in types.items():
        if isinstance(t, str) and t.upper().startswith("|J"):
            if not name.lower().startswith("_nczarr_"):
                errors.append(f"user attribute {name!r} typed {t} (netCDF-C refuses JSON-typed user attributes)")
        elif t == "json" and name.lower().startswith("_nczarr_"):
            continue
        elif attr_type(t) is None:
            errors.append(f"attribute {name!r} has type {t!r}, which is no netCDF type")
    return errors


# -- Zarr v3 ---------------------------------------------------------------------------------


def check_zarr_json(d: dict) -> list[str]:
    if d.get("zarr_format") != 3:
        return [f"zarr_format must be 3, not {d.get('zarr_format')!r}"]
    node = d.get("node_type")
    if node == "group":
        return [] if isinstance(d.get("attributes", {}), dict) else ["attributes must be an object"]
    if node != "array":
        return [f"node_type must be 'group' or 'array', not {node!r}"]
    errors = []
    for k in ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"):
        if k not in d:
            errors.append(f"required key {k!r} is missing")
    shape = d.get("shape")
    if "shape" in d and not (isinstance(shape, list) and all(_int(n) and n >= 0 for n in shape)):
        errors.append(f"shape {shape!r} is not a list of non-negative integers")
    elif "shape" in d and (err := extent_error("shape", shape)):
        errors.append(err)
    dt = d.get("data_type")
    name = dt.get("name") if isinstance(dt, dict) else dt
    if "data_type" in d and not (isinstance(name, str) and (name in V3_DATA_TYPES or _RAW_BITS.match(name))):
        errors.append(f"data_type {dt!r} is not a known Zarr v3 data type")
    grid = d.get("chunk_grid")
    if "chunk_grid" in d:
        conf = grid.get("configuration") if isinstance(grid, dict) else None
        chunks = conf.get("chunk_shape") if isinstance(conf, dict) else None
        if not isinstance(grid, dict) or grid.get("name") != "regular":
            errors.append(f"chunk_grid {grid!r} is not a regular grid")
        elif not (isinstance(chunks, list) and all(_int(n) and n > 0 for n in chunks)):
            errors.append(f"chunk_shape {chunks!r} is not a list of positive integers")
        elif isinstance(shape, list) and len(chunks) != len(shape):
            errors.append(f"shape has rank {len(shape)} but chunk_shape rank {len(chunks)}")
        elif err := extent_error("chunk_shape", chunks):
            errors.append(err)
    enc = d.get("chunk_key_encoding")
    if "chunk_key_encoding" in d and not (isinstance(enc, dict) and enc.get("name") in ("default", "v2")
                                          and isinstance(enc.get("configuration", {}), dict)
                                          and enc.get("configuration", {}).get("separator", "/") in ("/", ".")):
        errors.append(f"chunk_key_encoding {enc!r} is not 'default' or 'v2' with separator '/' or '.'")
    codecs = d.get("codecs")
    if "codecs" in d:
        if not isinstance(codecs, list) or not codecs:
            errors.append("codecs must be a non-empty list")
        else:
            ids = numcodecs_ids()
            for c in codecs:
                if isinstance(c, dict) and not isinstance(c.get("configuration", {}), dict):
                    errors.append(f"codec {c!r}: configuration must be an object")
                    continue
                cname = c.get("name") if isinstance(c, dict) else c
                known = isinstance(cname, str) and (
                    cname in V3_CODECS or (cname.startswith("numcodecs.") and cname[10:] in ids))
                if not known:
                    errors.append(f"codec {cname!r} is not a known Zarr v3 codec")
    names = d.get("dimension_names")
    if names is not None and not (isinstance(names, list) and all(n is None or isinstance(n, str) for n in names)
                                  and (not isinstance(shape, list) or len(names) == len(shape))):
        errors.append(f"dimension_names {names!r} is not one name (or null) per axis")
    if not isinstance(d.get("attributes", {}), dict):
        errors.append("attributes must be an object")
    return errors


# -- what the cross-object check needs -------------------------------------------------------


def dimension_refs(value: Any) -> list[str] | None:
    """The dimension references an object's NCZarr array metadata makes (None if none)."""
    if not isinstance(value, dict):
        return None
    ncz = nczarr_key("_nczarr_array", value)
    if ncz is None and ("dimrefs" in value or "dimension_references" in value):
        ncz = value  # a V1 .nczvar / .nczarray
    if not isinstance(ncz, dict):
        return None
    if alias(ncz, "scalar") or alias(ncz, "storage") == "scalar":
        return []
    refs = alias(ncz, "dimrefs", "dimension_references")
    if not isinstance(refs, list):
        return None
    return [r if r.startswith("/") else "/" + r for r in refs if isinstance(r, str)]


def group_dims(*objects: Any) -> dict[str, tuple[int, bool]] | None:
    """``{name: (size, unlimited)}`` from the first object holding NCZarr group metadata."""
    for value in objects:
        if not isinstance(value, dict):
            continue
        ncz = nczarr_key("_nczarr_group", value)
        if ncz is None and ("dims" in value or "dimensions" in value):
            ncz = value  # a V1 .nczgroup
        if isinstance(ncz, dict):
            out = {}
            for name, spec in dim_items(alias(ncz, "dims", "dimensions")):
                size, unlimited = dim_spec(spec)
                if size is not None:
                    out[name] = (size, unlimited)
            return out
    return None
