"""Checks of one metadata object's content: JSON, the Zarr v2 / v3 schema, NCZarr keys.

:func:`check_object` looks at one object alone (what can be decided without the rest of the
store); :func:`dimension_refs` and :func:`group_dims` give what the cross-object check
(every dimension reference names a declared dimension of matching size) needs.
Every function returns reasons (``[]`` = valid); callers add the key.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.codecids import numcodecs_ids
from nczfs.nczarr.metadata.extents import MAX_ELEMENTS, chunk_errors, is_int, shape_errors
from nczfs.nczarr.metadata.spelling import alias, attr_type, dim_items, dim_spec, nczarr_key
from nczfs.nczarr.metadata.validate_v3 import check_zarr_json

V2_OBJECTS = {".zgroup", ".zarray", ".zattrs", ".zmetadata"}
V1_OBJECTS = {".nczarr", ".nczgroup", ".nczvar", ".nczarray", ".nczattr", ".nczattrs"}
METADATA_NAMES = V2_OBJECTS | V1_OBJECTS | {"zarr.json"}

_SPECIAL_FILLS = {"nan", "nanf", "infinity", "infinityf", "-infinity", "-infinityf"}


def is_metadata_key(key: str) -> bool:
    return key.rpartition("/")[2] in METADATA_NAMES


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


def _fill_int(dt: np.dtype, fill: Any) -> bool:
    if not (is_int(fill) or (isinstance(fill, float) and fill.is_integer())):
        return False
    info = np.iinfo(dt)
    return info.min <= int(fill) <= info.max


def _fill_float(dt: np.dtype, fill: Any) -> bool:
    if isinstance(fill, str):
        return fill.lower() in _SPECIAL_FILLS
    if not isinstance(fill, (int, float)) or isinstance(fill, bool):
        return False
    if math.isfinite(fill) and dt.itemsize < 8:
        return abs(fill) <= float(np.finfo(dt).max) * (1 + 1e-6)
    return True


_FILL_OK: dict[str, Callable[[np.dtype, Any], bool]] = {
    "b": lambda dt, fill: isinstance(fill, bool) or fill in (0, 1),
    "i": _fill_int, "u": _fill_int, "f": _fill_float,
    "c": lambda dt, fill: isinstance(fill, list) and len(fill) == 2,
    **dict.fromkeys("SUV", lambda dt, fill: isinstance(fill, (str, int))),
    **dict.fromkeys("Mm", lambda dt, fill: is_int(fill) or isinstance(fill, str)),
}  # any other kind (O: objects, e.g. variable-length strings) takes any fill value


def check_fill(dt: np.dtype, fill: Any) -> str | None:
    """Why ``fill`` cannot be the fill value of ``dt`` (None if it can)."""
    if fill is None:
        return None
    if isinstance(fill, list) and len(fill) == 1 and dt.kind in "biuf":  # NCZarr V1 wrote [x]
        fill = fill[0]
    ok = _FILL_OK.get(dt.kind, lambda dt, fill: True)(dt, fill)
    return None if ok else f"fill_value {fill!r} is not representable as {dt.str}"


def check_codec(c: Any, where: str, ids: frozenset[str]) -> str | None:
    if not isinstance(c, dict) or not isinstance(c.get("id"), str):
        return f"{where} {c!r} is not an object with an 'id'"
    if c["id"] not in ids:
        return f"{where} id {c['id']!r} is not a known numcodecs codec"
    return None


#: (key, its default, what it may be, the message's start)
_V2_CHOICES = (
    ("order", "C", ("C", "F"), "order must be 'C' or 'F'"),
    ("dimension_separator", ".", (".", "/"), "dimension_separator must be '.' or '/'"),
)


def check_zarray(d: dict) -> list[str]:
    errors = []
    if d.get("zarr_format") != 2:
        errors.append(f"zarr_format must be 2, not {d.get('zarr_format')!r}")
    errors.extend(f"required key {k!r} is missing" for k in ("shape", "chunks", "dtype") if k not in d)
    errors.extend(shape_errors(d))
    if "chunks" in d:
        errors.extend(chunk_errors(d.get("shape"), d["chunks"], "chunks"))
    errors.extend(_dtype_and_fill(d))
    errors.extend(f"{message}, not {d.get(k)!r}" for k, default, allowed, message in _V2_CHOICES
                  if d.get(k, default) not in allowed)
    errors.extend(_v2_codecs(d))
    return errors + check_nczarr_keys(d)


def _dtype_and_fill(d: dict) -> list[str]:
    if "dtype" not in d:
        return []
    dt, err = _dtype(d["dtype"])
    if dt is None:
        return [err] if err else []
    err = check_fill(dt, d.get("fill_value"))
    return [err] if err else []


def _v2_codecs(d: dict) -> list[str]:
    ids = numcodecs_ids()
    errors = []
    if d.get("compressor") is not None and (err := check_codec(d["compressor"], "compressor", ids)):
        errors.append(err)
    filters = d.get("filters")
    if filters is None:
        return errors
    if not isinstance(filters, list):
        return errors + ["filters must be null or a list"]
    return errors + [e for e in (check_codec(f, "filter", ids) for f in filters) if e]


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
    errors = _ncz_dims(alias(v, "dims", "dimensions"))
    lists: dict[str, list[str]] = {}
    for k in ("vars", "arrays", "groups"):
        members = alias(v, k)
        if members is not None and not (isinstance(members, list) and all(isinstance(n, str) for n in members)):
            errors.append(f"_nczarr_group {k} must be a list of names")
        elif members is not None:
            lists[k] = members
    return errors + _ncz_lists(lists)


def _ncz_dims(dims: Any) -> list[str]:
    if dims is None:
        return []
    errors = [] if isinstance(dims, dict) else ["_nczarr_group dimensions must be an object {name: size}"]
    for name, spec in dim_items(dims):
        size = dim_spec(spec)[0]
        if size is None:
            errors.append(f"dimension {name!r} has no valid size ({spec!r})")
        elif size > MAX_ELEMENTS:
            errors.append(f"dimension {name!r} has size {size}, more than 2**63-1, which no reader can index")
    return errors


def _ncz_lists(lists: dict[str, list[str]]) -> list[str]:
    """The group's member lists must be consistent (whether the members exist is `nczfs validate`'s
    job: writers store a group's metadata before or after its children)."""
    errors: list[str] = []
    for k, members in lists.items():
        errors.extend(f"_nczarr_group {k} holds {name!r}, which is no member name"
                      for name in members if name in ("", ".", "..") or "/" in name)
        errors.extend(f"_nczarr_group {k} lists {name!r} twice"
                      for name in sorted({n for n in members if members.count(n) > 1}))
    arrays = set(lists.get("arrays", []) + lists.get("vars", []))
    errors.extend(f"_nczarr_group lists {name!r} as both an array and a group"
                  for name in sorted(arrays & set(lists.get("groups", []))))
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
