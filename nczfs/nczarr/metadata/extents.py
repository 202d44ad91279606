"""Checks of an array's shape and chunk shape, common to Zarr v2 and v3 metadata."""

from __future__ import annotations

from typing import Any

#: the most elements an array or a chunk may hold: readers index them with 64-bit signed
#: integers (numpy, zarr-python; netCDF-C's size_t products overflow past it too)
MAX_ELEMENTS = 2**63 - 1


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def extent_error(what: str, dims: list[int]) -> str | None:
    """Why an array (or chunk) of ``dims`` (non-negative integers) cannot be held by any reader."""
    total = 1
    for n in dims:
        total *= n
        if n > MAX_ELEMENTS or total > MAX_ELEMENTS:
            shown = repr(dims) if len(repr(dims)) <= 80 else repr(dims)[:77] + "..."
            return f"{what} {shown} holds more than 2**63-1 elements, which no reader can index"
    return None


def shape_errors(d: dict) -> list[str]:
    """What is wrong with ``d["shape"]`` (nothing if it is absent)."""
    if "shape" not in d:
        return []
    shape = d["shape"]
    if not (isinstance(shape, list) and all(is_int(n) and n >= 0 for n in shape)):
        return [f"shape {shape!r} is not a list of non-negative integers"]
    err = extent_error("shape", shape)
    return [err] if err else []


def chunk_errors(shape: Any, chunks: Any, what: str) -> list[str]:
    """What is wrong with a chunk shape ``chunks`` (named ``what``) of an array of ``shape``. A
    chunk length is positive, or 0 along an axis of length 0 (no chunk lies there): zarr-python
    writes ``chunks=(0,)`` for an empty array when asked to, and reads it."""
    if not (isinstance(chunks, list) and all(is_int(n) and n >= 0 for n in chunks)):
        return [f"{what} {chunks!r} is not a list of positive integers"]
    if isinstance(shape, list) and len(shape) != len(chunks):
        return [f"shape has rank {len(shape)} but {what} rank {len(chunks)}"]
    if any(n == 0 and not (isinstance(shape, list) and shape[i] == 0) for i, n in enumerate(chunks)):
        return [f"{what} {chunks!r} is not a list of positive integers (0 only along an axis of length 0)"]
    err = extent_error(what, chunks)
    return [err] if err else []
