"""The mask rule: which value a CF reader takes as missing, the same on every path.

* **Zarr v2**: the array's ``fill_value`` is the mask (xarray reads it as ``_FillValue``).
* **NCZarr** (Zarr v2 written by netCDF-C): the typed ``_FillValue`` attribute netCDF-C writes
  beside ``fill_value``; without one, the type's default fill, which netCDF readers take as missing
  by themselves (shown without a ``_FillValue``, as netCDF-C shows it).
* **Zarr v3**: the mask is the ``_FillValue`` attribute alone (a number, or the base64 of the
  value's bytes, as xarray writes it); ``fill_value`` is only what a missing chunk holds.

A view or file shows the mask as a ``_FillValue`` attribute of the variable's type (and, in a
Zarr v2 view read by zarr-python, as ``fill_value``); a missing chunk still reads as the stored
``fill_value``. Booleans are never masked (a false fill would hide every false value). What
the netCDF views leave out: :func:`view_mask`.

For netCDF readers (views, ``.nc`` files), the CF attributes that must have the variable's type
(``_FillValue``, ``missing_value``, ``valid_*``, ``flag_values``, ``flag_masks``; ``actual_*``
unless the variable is packed) get it where the store's JSON lost it, as long as their values fit
that type (:func:`cf_attributes`). A pure Zarr list of strings, which netCDF-C reads as JSON
text, is given the readers that have strings as the ``NC_STRING`` attribute netCDF-C writes for
one (:func:`strings_as_written`; the classic formats have none). ``nczfs inspect`` shows the
dataset as the paths do (:mod:`nczfs.nczarr.inspected`).
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from nczfs.nczarr.metadata.attrvalues import SPECIAL_FLOATS, attr_value
from nczfs.nczarr.metadata.model import NC_TYPES, Attribute, Variable

#: attributes CF types as the variable (its packed type)
CF_TYPED = frozenset({"missing_value", "valid_min", "valid_max", "valid_range", "flag_values", "flag_masks"})
#: attributes CF types as the variable unless it is packed (then as its unpacked data)
CF_DATA_TYPED = frozenset({"actual_min", "actual_max", "actual_range"})
PACKING = ("scale_factor", "add_offset")


def cf_type(name: str, raw: Any, var_type: str | None, packed: bool) -> str | None:
    """The type an untyped attribute ``name`` must have on a variable of ``var_type``, if CF says
    so and its JSON values fit it; None otherwise (the type is inferred from the JSON)."""
    if var_type not in NC_TYPES or not (name in CF_TYPED or (name in CF_DATA_TYPED and not packed)):
        return None
    values = raw if isinstance(raw, list) else [raw]
    return var_type if values and all(_fits(v, var_type) for v in values) else None


def _fits(v: Any, nctype: str) -> bool:
    kind, size = NC_TYPES[nctype]
    if isinstance(v, str):
        return kind == "f" and v.lower().lstrip("+-") in ("nan", "infinity", "inf")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if kind == "f":
        return size == 8 or not math.isfinite(v) or abs(v) <= float(np.finfo("f4").max)
    if isinstance(v, float) and not v.is_integer():
        return False
    info = np.iinfo(f"{kind}{size}")
    return info.min <= int(v) <= info.max


def decode_fill(raw: Any, nctype: str | None) -> list | None:
    """xarray's Zarr v3 ``_FillValue`` (base64 of the value's bytes; a float's as float64) as
    the value of a ``nctype`` attribute; None if it is no such thing."""
    if not isinstance(raw, str) or nctype not in NC_TYPES or raw.lower() in SPECIAL_FLOATS:
        return None
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    kind, size = NC_TYPES[nctype]
    if kind == "f" and len(data) == 8:
        size = 8
    if len(data) != size:
        return None
    value = np.frombuffer(data, dtype=f"<{kind}{size}")[0].item()
    return [float(value) if kind == "f" else int(value)]


def mask(var: Variable, flavor: str) -> Attribute | None:
    """The ``_FillValue`` a CF reader masks ``var`` with, typed as ``var`` (None: no mask)."""
    if var.is_bool or var.nctype is None:
        return None
    attr = next((a for a in var.attributes if a.name == "_FillValue"), None)
    if attr is None or attr.nctype != var.nctype:
        fill = var.fill_value
        if flavor != "zarr-v2" or var.nctype not in NC_TYPES or not isinstance(fill, (int, float)) \
                or isinstance(fill, bool):
            return None
        attr = Attribute("_FillValue", var.nctype, [fill])
    return attr


def view_mask(var: Variable, flavor: str) -> Attribute | None:
    """The mask a netCDF view shows: :func:`mask`, but, of pure Zarr, for NaN (missing to every
    reader by itself, while as ``_FillValue`` it would stop netCDF-C's readers from taking the
    type's default fill as missing) and a Zarr v2 ``fill_value`` of 0 of an array xarray cannot
    read (no ``_ARRAY_DIMENSIONS``, or one that clashes: zarr-python's default for every array it
    makes, which netCDF-C reading the store takes as no mask either). A scalar with
    ``_ARRAY_DIMENSIONS: []`` is one xarray reads: its 0 is the mask xarray wrote."""
    got = mask(var, flavor)
    if got is None and flavor == "zarr-v2":
        return string_mask(var)
    if got is None or flavor not in ("zarr-v2", "zarr-v3"):  # NCZarr: the typed attribute netCDF-C wrote
        return got
    if NC_TYPES.get(got.nctype, ("",))[0] == "f" and math.isnan(got.value[0]):
        return None
    return None if got.value == [0] and got not in var.attributes and not var.named_dims else got


def string_fill(var: Variable) -> str | None:
    """A pure Zarr v2 string array's ``fill_value`` as text (``|S``: the base64 of its bytes, to
    their first NUL; ``<U`` and ``|O``: as it is); None if it has none or is no string array."""
    fill, kind = var.fill_value, var.dtype.lstrip("<>|")[:1]
    if var.nctype != "string" or not isinstance(fill, str) or kind not in ("S", "U", "O"):
        return None
    if kind != "S":
        return fill
    try:
        return base64.b64decode(fill, validate=True).split(b"\0")[0].decode("utf-8", "surrogateescape")
    except (binascii.Error, ValueError):
        return None


def string_mask(var: Variable) -> Attribute | None:
    """The mask of a pure Zarr v2 string array: its ``fill_value`` (:func:`string_fill`), which
    xarray masks with, as a string ``_FillValue`` (None: no fill, or an array xarray cannot read)."""
    text = string_fill(var)
    return None if text is None or not var.named_dims else Attribute("_FillValue", "string", [text])


def as_missing_value(var: Variable) -> Attribute | None:
    """A Zarr v3 mask a v2 view shows as ``missing_value`` (None: as ``_FillValue``): where a
    missing chunk holds 0 (zarr-python writes no chunk of all 0s) and the mask is another value,
    a v2 ``fill_value`` or ``_FillValue`` would be read for missing chunks too; ``missing_value``
    masks as they do, while ``fill_value`` stays ``null`` (a missing chunk reads 0). Not where the
    array has a ``missing_value`` of another value."""
    got = view_mask(var, "zarr-v3")
    if got is None or var.fill_value not in (0, None) or isinstance(var.fill_value, bool) or got.value == [0]:
        return None
    other = next((a for a in var.attributes if a.name == "missing_value"), None)
    if other is not None and other.value != got.value:
        return None
    return Attribute("missing_value", got.nctype, got.value)


def cf_attributes(var: Variable, flavor: str, view: bool = False) -> list[Attribute]:
    """``var``'s attributes as a netCDF reader must see them: the CF attributes in the variable's
    type where the store's JSON lost it, the mask (:func:`mask`; in a ``view``, :func:`view_mask`)
    as the last, ``_FillValue``."""
    is_packed = any(a.name in PACKING for a in var.attributes)
    out = []
    for a in var.attributes:
        if a.name == "_FillValue":
            continue
        nctype = cf_type(a.name, a.raw, var.nctype, is_packed) if a.raw is not None else None
        out.append(Attribute(a.name, nctype, attr_value(nctype, a.raw)) if nctype not in (None, a.nctype) else a)
    fill = view_mask(var, flavor) if view else mask(var, flavor)
    return out if fill is None else [*out, fill]


def strings_as_written(a: Attribute) -> Attribute:
    """A pure Zarr attribute holding a list of strings (typed as JSON text, as netCDF-C reads it)
    as the ``string`` attribute of several values netCDF-C writes for one; else ``a``."""
    if isinstance(a.raw, list) and len(a.raw) > 1 and all(isinstance(s, str) for s in a.raw):
        return Attribute(a.name, "string", list(a.raw), a.raw)
    return a
