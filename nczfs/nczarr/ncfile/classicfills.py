"""What a classic file holds for a variable's mask and its missing chunks (the mask rule:
:mod:`nczfs.nczarr.metadata.masks`): the ``_FillValue`` of chars, and one element of a missing
chunk as zarr-python reads it."""

from __future__ import annotations

from typing import Any

import numpy as np

from nczfs.nczarr.metadata.masks import bytes_mask, string_fill
from nczfs.nczarr.metadata.model import Variable
from nczfs.nczarr.ncfile.classicheader import Attr


def char_fill(var: Variable, nctype: str, width: int) -> Attr | None:
    """A char variable's _FillValue from the array's fill value, if it is one char."""
    fill = var.fill_value
    if nctype != "char" or width or not isinstance(fill, str) or len(fill.encode("utf-8", "replace")) != 1:
        return None
    return Attr("_FillValue", "char", fill.encode("utf-8", "replace"))


def chars_mask(var: Variable, flavor: str) -> Attr | str | None:
    """Fixed-width bytes' mask (:func:`bytes_mask`) as their chars' ``_FillValue``, as xarray
    writes it to a classic file (xarray masks the strings its chars make equal to it); why not, for
    a mask of more than one char (netCDF-C and xarray write one: beyond the format); None: no mask."""
    text = bytes_mask(var, flavor)
    if text is None:
        return None
    mask = text[0].encode("utf-8", "surrogateescape")
    return Attr("_FillValue", "char", mask) if len(mask) <= 1 else f"a mask of {len(mask)} chars ({mask!r}): a char's is one"


def missing_fill(var: Variable, flavor: str, dtype: str, text: str, width: int) -> bytes:
    """One element of a missing chunk, in the file's ``dtype`` (``text``: xarray's strings held as
    UTF-8 chars of ``width``; a pure Zarr v2 ``|S`` ``fill_value`` is the base64 of its bytes)."""
    if text and isinstance(var.fill_value, str):
        return var.fill_value.encode("utf-8")[:width].ljust(width, b"\0")
    if width and flavor == "zarr-v2" and (held := string_fill(var)) is not None:
        return held.encode("utf-8", "surrogateescape")[:width].ljust(width, b"\0")
    return _fill_bytes(var.nctype or "string", dtype, var.fill_value)


def _fill_bytes(nctype: str, dtype: str, fill: Any) -> bytes:
    """One element of the value Zarr gives a missing chunk (zarr-python: ``fill_value``, else 0)."""
    dt = np.dtype(dtype)
    if dt.kind == "S":
        if isinstance(fill, str) and len(fill) == dt.itemsize and nctype == "char":
            return fill.encode("latin-1", "replace")
        return bytes(dt.itemsize)
    try:
        with np.errstate(over="raise", invalid="raise"):
            return np.asarray(fill if isinstance(fill, (int, float)) else 0, dtype=dt).tobytes()
    except (OverflowError, ValueError, FloatingPointError, TypeError):
        return bytes(dt.itemsize)
