"""Attribute and fill values as netCDF-C reads them from JSON: their inferred types and values."""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

#: attribute names netCDF-C never shows (``_nczarr_*`` in any case is hidden too)
HIDDEN_ATTRS = {"_ARRAY_DIMENSIONS", "_NCProperties"}

SPECIAL_FLOATS = {"nan": math.nan, "nanf": math.nan, "infinity": math.inf, "infinityf": math.inf,
                   "-infinity": -math.inf, "-infinityf": -math.inf}


def is_hidden_attr(name: str) -> bool:
    return name in HIDDEN_ATTRS or name.lower().startswith("_nczarr_")


def _fits(values: list[int], lo: int, hi: int) -> bool:
    return all(lo <= v <= hi for v in values)


def infer_type(value: Any) -> str:
    """The type netCDF-C 4.10 gives an attribute with no NCZarr type (zutil.c:604-695)."""
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(value, list) and any(isinstance(v, (list, dict)) or v is None for v in value):
        return "char"
    if isinstance(first, bool):
        return "ubyte"
    if isinstance(first, int):
        ints = [int(v) for v in (value if isinstance(value, list) else [value]) if isinstance(v, (int, float))]
        for nctype, lo, hi in (("int", -(2**31), 2**31 - 1), ("uint", 0, 2**32 - 1),
                               ("int64", -(2**63), 2**63 - 1), ("uint64", 0, 2**64 - 1)):
            if _fits(ints, lo, hi):
                return nctype
        return "double"
    if isinstance(first, float):
        return "double"
    return "char"


def _number(v: Any) -> Any:
    if isinstance(v, str) and v.lower() in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[v.lower()]
    if isinstance(v, bool):
        return int(v)
    return v


def attr_value(nctype: str, raw: Any) -> Any:
    """The value of an attribute of ``nctype``: a str for char, else a list."""
    if nctype == "char":
        return _text(raw)
    values = raw if isinstance(raw, list) else [raw]
    if nctype == "string":
        return [v if isinstance(v, str) else json.dumps(v) for v in values]
    return [_typed_number(nctype, v) for v in values]


def _text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list) and raw and all(isinstance(s, str) for s in raw) and len(raw) == 1:
        return raw[0]
    return json.dumps(raw)


def _typed_number(nctype: str, v: Any) -> int | float:
    v = _number(v)
    if not isinstance(v, (int, float)):
        raise ValueError(f"{v!r} is not a number")
    if nctype in ("float", "double"):
        return float(v)
    if isinstance(v, float) and not v.is_integer():
        raise ValueError(f"{v!r} is not an integer")
    return int(v)


def fill_value(nctype: str | None, raw: Any) -> Any:
    if isinstance(raw, list):  # NCZarr V1 wrote one-element lists
        raw = raw[0] if raw else None
    if raw is None or nctype in (None, "char", "string"):
        return raw
    return _number(raw)


def int_list(v: Any) -> TypeGuard[list[int]]:
    """Is ``v`` a list of non-negative integers (a shape)?"""
    return isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
