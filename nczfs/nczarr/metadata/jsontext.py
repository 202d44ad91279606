"""Metadata JSON as netCDF-C and zarr-python write and read it.

netCDF-C's JSON (``libdispatch/ncjson.c``, 4.9.0 to 4.10.1): objects as ``{"k": v, "k2": w}``,
arrays as ``[a,b]``, strings escaping only ``\\b \\f \\n \\r \\t " \\\\``: every other byte, a
control character or not valid UTF-8 (an attribute netCDF-C was handed as bytes), is written raw,
and no ``\\uXXXX`` escape is decoded on reading (``"\\u00e9"`` reads as ``u00e9``). So metadata
read from a store is parsed leniently (raw control characters; bytes that are not UTF-8 kept as
surrogate escapes, so that they are written back as the same bytes; ``NaN``/``Infinity``), a view
for netCDF-C writes netCDF-C's dialect (an object rewritten unchanged keeps its length), and a view
for zarr-python writes standard JSON.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}
_ESCAPE_TABLE = str.maketrans(_ESCAPES)


def text(data: bytes | bytearray | memoryview) -> str:
    """``data`` as text: UTF-8, with any other byte kept as a surrogate escape."""
    return bytes(data).decode("utf-8", "surrogateescape")


def encode(s: str) -> bytes:
    """The bytes of a string read by :func:`text` (surrogate escapes become their bytes again)."""
    try:
        return s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that came from a \\uXXXX escape
        return s.encode("utf-8", "replace")


#: levels of arrays and objects a metadata object may nest (real ones use a handful): Python's
#: parser recurses once a level (100,000 nested lists raised RecursionError: EIO and a traceback
#: through the mount), and a value nested just below its limit could still fail later, checked or
#: written again from deeper in the stack
MAX_DEPTH = 256
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


def loads(data: bytes | bytearray | memoryview) -> Any:
    """Parse metadata JSON leniently; ValueError (with the reason) if it is not JSON, or nests
    deeper than :data:`MAX_DEPTH`."""
    s = text(data)
    try:
        value = json.loads(s, strict=False)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    _check_depth(s, value)
    return value


def loads_prefix(data: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """The JSON value at the start of ``data`` and the number of bytes it takes (ValueError if none)."""
    s = text(data)
    try:
        value, end = json.JSONDecoder(strict=False).raw_decode(s)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    _check_depth(s[:end], value)
    return value, len(encode(s[:end]))


def _check_depth(s: str, value: Any) -> None:
    if s.count("[") + s.count("{") > MAX_DEPTH and depth(value) > MAX_DEPTH:
        raise ValueError(TOO_DEEP)


def depth(value: Any) -> int:
    """How many levels of lists and dicts ``value`` nests (without recursing)."""
    deepest = 0
    todo = [(value, 1)] if isinstance(value, (list, dict)) else []
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (list, dict)):
                todo.append((child, level + 1))
    return deepest


def _number(v: float) -> str:
    if math.isnan(v):
        return '"NaN"'
    if math.isinf(v):
        return '"Infinity"' if v > 0 else '"-Infinity"'
    return repr(v)


def _netcdf(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append('"' + value.translate(_ESCAPE_TABLE) + '"')
    elif value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if i:
                out.append(", ")
            _netcdf(str(k), out)
            out.append(": ")
            _netcdf(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _netcdf(v, out)
        out.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON")


def dumps_netcdf(value: Any) -> bytes:
    """``value`` as netCDF-C writes JSON (NaN and infinities as the strings netCDF-C reads)."""
    out: list[str] = []
    _netcdf(value, out)
    return encode("".join(out))


def _standard(value: Any) -> Any:
    if isinstance(value, dict):
        return {_clean(str(k)): _standard(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_standard(v) for v in value]
    if isinstance(value, str):
        return _clean(value)
    return value


def _clean(s: str) -> str:
    """Standard JSON is Unicode: a byte that was not UTF-8 becomes U+FFFD."""
    return encode(s).decode("utf-8", "replace")


def dumps_zarr(value: Any) -> bytes:
    """``value`` as zarr-python writes and reads JSON: standard, but for the NaN and Infinity tokens
    Python's json module uses (where a Zarr field wants strings, the caller gives strings)."""
    return json.dumps(_standard(value), ensure_ascii=False).encode("utf-8")


def same(a: Any, b: Any) -> bool:
    """Do two parsed JSON values mean the same (NaN equals NaN; 1 equals 1.0; bools are not numbers)?"""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    items = _same_items(a, b)
    if items is not None:
        return items
    if type(a) in (int, float) and type(b) in (int, float):
        return a == b
    return type(a) is type(b) and a == b


def _same_items(a: Any, b: Any) -> bool | None:
    """For two objects or two arrays: do they hold the same? (None: they are not two of a kind.)"""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return None
