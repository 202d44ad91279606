"""The mask rule: which value a CF reader takes as missing, the same on every path.

* **Zarr v2**: the array's ``fill_value`` is the mask (xarray reads it as ``_FillValue``).
* **NCZarr** (Zarr v2 written by netCDF-C): the typed ``_FillValue`` attribute netCDF-C writes
  beside ``fill_value``; without one, the type's default fill, which netCDF readers take as missing
  by themselves (shown without a ``_FillValue``, as netCDF-C shows it).
* **Zarr v3**: the mask is the ``_FillValue`` attribute alone (a number, or the base64 of the
  value's bytes, as xarray writes it); ``fill_value`` is only what a missing chunk holds.

A file shows the mask as a ``_FillValue`` attribute of the variable's type; a view (Zarr v2)
as :func:`v2_mask` says, one rule for every view: a missing chunk still reads as the stored
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
from dataclasses import dataclass
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
    if flavor == "zarr-v3" and var.dtype in V3_FIXED_STRINGS:
        return v3_string_mask(var)
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


#: Zarr v3's fixed-width strings, whose ``_FillValue`` attribute xarray writes as it writes a Zarr v2
#: ``fill_value``: the base64 of the bytes, the text
V3_FIXED_STRINGS = ("null_terminated_bytes", "fixed_length_utf32")


def v3_string_mask(var: Variable) -> Attribute | None:
    """The mask of a Zarr v3 fixed-width string array: its ``_FillValue`` attribute as text
    (``null_terminated_bytes``: the base64 of its bytes, to their first NUL); None if it has none."""
    value = _one_text(next((a for a in var.attributes if a.name == "_FillValue"), None))
    if value is None:
        return None
    text = _text_of_base64(value) if var.dtype == "null_terminated_bytes" else value
    return None if text is None else Attribute("_FillValue", "string", [text])


def _one_text(attr: Attribute | None) -> str | None:
    """The one text value of a char or string attribute (None: no such attribute)."""
    if attr is None or isinstance(attr.value, str):
        return None if attr is None else attr.value
    return attr.value[0] if len(attr.value) == 1 and isinstance(attr.value[0], str) else None


def _text_of_base64(value: str) -> str | None:
    """The text of base64 bytes, to their first NUL (None: no base64)."""
    try:
        return base64.b64decode(value, validate=True).split(b"\0")[0].decode("utf-8", "surrogateescape")
    except (binascii.Error, ValueError):
        return None


def string_fill(var: Variable) -> str | None:
    """A pure Zarr v2 string array's ``fill_value`` as text (``|S``: the base64 of its bytes, to
    their first NUL; ``<U`` and ``|O``: as it is); None if it has none or is no string array."""
    fill, kind = var.fill_value, var.dtype.lstrip("<>|")[:1]
    if var.nctype != "string" or not isinstance(fill, str) or kind not in ("S", "U", "O"):
        return None
    return fill if kind != "S" else _text_of_base64(fill)


def bytes_mask(var: Variable, flavor: str) -> list | None:
    """The mask of a fixed-width bytes array (Zarr v2 ``|S``: :func:`string_mask`, v3
    ``null_terminated_bytes``: :func:`v3_string_mask`) as the value of a string attribute; None
    if none or no such array."""
    if var.dtype[1:2] == "S":
        got = string_mask(var)
    else:
        got = v3_string_mask(var) if var.dtype == "null_terminated_bytes" and flavor == "zarr-v3" else None
    return None if got is None else got.value


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
    if got is None or var.fill_value not in (0, None, "") or isinstance(var.fill_value, bool) \
            or got.value in ([0], [""]):
        return None
    other = next((a for a in var.attributes if a.name == "missing_value"), None)
    if other is not None and other.value != got.value:
        return None
    return Attribute("missing_value", got.nctype, got.value)


@dataclass(frozen=True)
class V2Mask:
    """How a Zarr v2 view shows an array's mask: its ``fill_value`` (as a value, not yet JSON),
    the attribute that carries the mask (None: none) and the attributes of the array it replaces."""

    fill: Any
    attribute: Attribute | None
    replaces: tuple[str, ...]


def v2_mask(var: Variable, flavor: str, view: str) -> V2Mask:
    """How ``view`` (``xarray``: read by zarr-python, else by netCDF-C) shows ``var``'s mask.

    A Zarr v2 ``fill_value`` is the mask to xarray and what a missing chunk holds to both readers
    (netCDF-C reads ``null`` as 0); netCDF-C masks with the ``_FillValue`` attribute. So the
    ``fill_value`` is the mask where a missing chunk holds it too (or holds a zero, shown as
    ``null``), else what a missing chunk holds; the attribute is the mask (:func:`view_mask`) for
    netCDF-C, and for zarr-python only where the ``fill_value`` cannot be: a Zarr v3 mask beside a
    missing chunk's 0 (:func:`as_missing_value`), ``_FillValue`` to xarray (read beside a ``null``
    ``fill_value``), ``missing_value`` to netCDF-C (which would read a ``_FillValue`` for missing
    chunks). Zarr v2 and NCZarr arrays are zarr-python's own: shown as stored. netCDF-C takes a
    string's fill as its text; netCDF-C 4.9.0, which reads strings as chars, only ``""`` (NUL)."""
    netcdf = view != "xarray"
    if flavor != "zarr-v3" and not netcdf:  # zarr-python's own
        return V2Mask(var.fill_value, None, ())
    shown, fill = view_mask(var, flavor), var.fill_value
    chars = view == "netcdf-4.9" and var.nctype == "string"  # 4.9.0 reads strings as chars
    if chars and shown is not None and len(shown.value[0].encode("utf-8", "surrogateescape")) > 1:
        shown = None  # a char's _FillValue is one char
    if flavor == "zarr-v3":
        fill = None if fill in (0, "", None) else fill
        if chars and shown is not None:  # xarray masks no chars by missing_value; null: a chunk never written
            return V2Mask(fill, shown, ("_FillValue",))  # reads NULs (""), not the _FillValue
        # xarray's Zarr v2 reader masks bytes by the fill_value alone (an attribute is text to it)
        if (missing := as_missing_value(var)) is not None and (netcdf or var.dtype != "null_terminated_bytes"):
            name = "missing_value" if netcdf else "_FillValue"
            return V2Mask(fill, Attribute(name, missing.nctype, missing.value), ("_FillValue", "missing_value"))
        fill = fill if shown is None else shown.value[0]
        if not netcdf:  # a Zarr v2 |S fill_value is the base64 of its bytes, as xarray wrote them
            if shown is not None and var.dtype == "null_terminated_bytes":
                fill = _one_text(next(a for a in var.attributes if a.name == "_FillValue"))
            return V2Mask(fill, None, ("_FillValue",))
    if var.dtype.lstrip("<>|")[:1] == "S" and (text := string_fill(var)) is not None:
        fill = text
    return V2Mask(fill, shown, ("_FillValue",))


def cf_attributes(var: Variable, flavor: str, view: bool = False) -> list[Attribute]:
    """``var``'s attributes as a netCDF reader must see them: the CF attributes in the variable's
    type where the store's JSON lost it, the mask (:func:`mask`; in a ``view``, :func:`view_mask`)
    as the last, ``_FillValue``."""
    out = cf_typed(var)
    fill = view_mask(var, flavor) if view else mask(var, flavor)
    return out if fill is None else [*out, fill]


def cf_typed(var: Variable) -> list[Attribute]:
    """``var``'s attributes but ``_FillValue``, the CF attributes in the variable's type where the
    store's JSON lost it."""
    is_packed = any(a.name in PACKING for a in var.attributes)
    out = []
    for a in var.attributes:
        if a.name == "_FillValue":
            continue
        nctype = cf_type(a.name, a.raw, var.nctype, is_packed) if a.raw is not None else None
        out.append(Attribute(a.name, nctype, attr_value(nctype, a.raw)) if nctype not in (None, a.nctype) else a)
    return out


def strings_as_written(a: Attribute) -> Attribute:
    """A pure Zarr attribute holding a list of strings (typed as JSON text, as netCDF-C reads it)
    as the ``string`` attribute of several values netCDF-C writes for one; else ``a``."""
    if isinstance(a.raw, list) and len(a.raw) > 1 and all(isinstance(s, str) for s in a.raw):
        return Attribute(a.name, "string", list(a.raw), a.raw)
    return a
