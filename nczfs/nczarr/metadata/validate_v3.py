"""Checks of a Zarr v3 ``zarr.json`` alone (see :mod:`nczfs.nczarr.metadata.validate`)."""

from __future__ import annotations

import re
from typing import Any

from nczfs.nczarr.metadata.codecids import numcodecs_ids
from nczfs.nczarr.metadata.extents import chunk_errors, shape_errors

V3_DATA_TYPES = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "complex64", "complex128", "string", "bytes", "fixed_length_utf32",
    "variable_length_bytes", "null_terminated_bytes", "raw_bytes", "structured",
    "numpy.datetime64", "numpy.timedelta64",
}
V3_CODECS = {"bytes", "endian", "transpose", "gzip", "zstd", "blosc", "crc32c", "sharding_indexed",
             "vlen-utf8", "vlen-bytes"}
_RAW_BITS = re.compile(r"^r\d+$")
_REQUIRED = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")


def check_zarr_json(d: dict) -> list[str]:
    if d.get("zarr_format") != 3:
        return [f"zarr_format must be 3, not {d.get('zarr_format')!r}"]
    node = d.get("node_type")
    if node == "group":
        return [] if isinstance(d.get("attributes", {}), dict) else ["attributes must be an object"]
    if node != "array":
        return [f"node_type must be 'group' or 'array', not {node!r}"]
    errors = [f"required key {k!r} is missing" for k in _REQUIRED if k not in d]
    for check in (shape_errors, _data_type, _chunk_grid, _key_encoding, _codecs, _dimension_names):
        errors.extend(check(d))
    if not isinstance(d.get("attributes", {}), dict):
        errors.append("attributes must be an object")
    return errors


def _data_type(d: dict) -> list[str]:
    if "data_type" not in d:
        return []
    dt = d["data_type"]
    name = dt.get("name") if isinstance(dt, dict) else dt
    if isinstance(name, str) and (name in V3_DATA_TYPES or _RAW_BITS.match(name)):
        return []
    return [f"data_type {dt!r} is not a known Zarr v3 data type"]


def _chunk_grid(d: dict) -> list[str]:
    if "chunk_grid" not in d:
        return []
    grid = d["chunk_grid"]
    if not isinstance(grid, dict) or grid.get("name") != "regular":
        return [f"chunk_grid {grid!r} is not a regular grid"]
    conf = grid.get("configuration")
    chunks = conf.get("chunk_shape") if isinstance(conf, dict) else None
    return chunk_errors(d.get("shape"), chunks, "chunk_shape")


def _key_encoding(d: dict) -> list[str]:
    if "chunk_key_encoding" not in d:
        return []
    enc = d["chunk_key_encoding"]
    if (isinstance(enc, dict) and enc.get("name") in ("default", "v2")
            and isinstance(enc.get("configuration", {}), dict)
            and enc.get("configuration", {}).get("separator", "/") in ("/", ".")):
        return []
    return [f"chunk_key_encoding {enc!r} is not 'default' or 'v2' with separator '/' or '.'"]


def _codecs(d: dict) -> list[str]:
    if "codecs" not in d:
        return []
    codecs = d["codecs"]
    if not isinstance(codecs, list) or not codecs:
        return ["codecs must be a non-empty list"]
    ids = numcodecs_ids()
    return [e for e in (_codec_error(c, ids) for c in codecs) if e]


def _codec_error(c: Any, ids: frozenset[str]) -> str | None:
    if isinstance(c, dict) and not isinstance(c.get("configuration", {}), dict):
        return f"codec {c!r}: configuration must be an object"
    name = c.get("name") if isinstance(c, dict) else c
    if isinstance(name, str) and (name in V3_CODECS or (name.startswith("numcodecs.") and name[10:] in ids)):
        return None
    return f"codec {name!r} is not a known Zarr v3 codec"


def _dimension_names(d: dict) -> list[str]:
    names, shape = d.get("dimension_names"), d.get("shape")
    if names is None or (isinstance(names, list) and all(n is None or isinstance(n, str) for n in names)
                         and (not isinstance(shape, list) or len(names) == len(shape))):
        return []
    return [f"dimension_names {names!r} is not one name (or null) per axis"]
