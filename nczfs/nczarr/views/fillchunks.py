"""Chunks a view makes where the store has none, so that a chunk never written reads through the
view as it reads from the store (PresentingStore lists, stats and serves them).

A chunk the writer never stored (zarr-python writes none that is all fill) holds the stored
array's fill value to a reader of the store (Zarr v3 ``fill_value``, Zarr v2 ``fill_value``;
``null``: zeros, NaT for times). A reader of a view fills it with the view's Zarr v2
``fill_value``, which the mask rule (:func:`nczfs.nczarr.metadata.masks.v2_mask`) sometimes has to
make the mask: xarray's Zarr v2 reader masks bytes by the ``fill_value`` alone, and a Zarr v3
mask beside a fill value that is not zero has no other place. netCDF-C fills a missing chunk
with the ``fill_value`` too (``null``: zeros; the ``_FillValue`` attribute changes nothing, 4.9.0
and 4.10.1 alike), a char array char by char. Where the two differ, and only there, the view
shows every chunk the store lacks as a chunk it makes (:class:`FillChunks`): the store's fill in
the view's dtype, layout and codecs, as the view would show a stored chunk of it (recoded where
the view recodes the array), the same bytes for each. docs/SEMANTICS.md, "Chunks never written".
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from nczfs.nczarr.chunks.recode import Codecs, Recode
from nczfs.nczarr.chunks.v2form import v2_form
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.masks import mask
from nczfs.nczarr.metadata.model import Dataset
from nczfs.nczarr.views.viewshape import Layouts, array_path
from nczfs.store.keys import join

#: the readers whose rule for a missing chunk's value this module knows
ZARR, NETCDF = "zarr-python", "netCDF-C"
#: chunks of one array a view makes at most (listed by every listing of its folder); beyond,
#: none (the array reads as today, said in the log)
MAX_MADE = 1 << 20
#: how the version of a made chunk starts (no stored object has it: a write naming it means
#: "the chunk the store does not have", ViewWrites._stored_condition)
MADE_VERSION = "nczfs-fill-"


def missing_value(dtype: str, fill: Any, reader: str) -> np.ndarray | None:
    """One element (0-d) of what ``reader`` reads for a missing chunk of a Zarr v2 array of
    ``dtype`` whose ``fill_value`` (as JSON) is ``fill``; None if not known here. netCDF-C reads
    ``|S1``, ``>S1`` and ``<U1`` as chars (one byte: the fill's first), wider ``S`` as strings
    whose fill is their text; zarr-python a ``|S`` fill as base64."""
    try:
        dt = np.dtype(dtype)
        if reader == NETCDF and dt.kind in "SU":
            width = 1 if dtype[1:] in ("S1", "U1") else dt.itemsize
            text = jsontext.encode(fill) if isinstance(fill, str) else b""
            return np.array(text[:width], dtype=f"S{width}")
        if fill is None:  # zeros (zarr-python: NaT for times, "" for objects)
            return np.array("NaT", dtype=dt) if dt.kind in "Mm" and reader == ZARR else \
                np.array("", dtype=dt) if dt.kind == "O" else np.zeros((), dtype=dt)
        return _zarr_value(dt, fill)
    except (TypeError, ValueError, OverflowError, binascii.Error):
        return None


def _zarr_value(dt: np.dtype, fill: Any) -> np.ndarray | None:
    """A (not null) JSON ``fill_value`` as an element of ``dt``, as zarr-python reads it."""
    if dt.kind == "S":
        return np.array(base64.b64decode(fill, validate=True), dtype=dt) if isinstance(fill, str) else None
    if dt.kind in "UO":
        return np.array(fill, dtype=dt) if isinstance(fill, str) else None
    if dt.kind == "c" and isinstance(fill, list) and len(fill) == 2:
        return np.array(complex(_float(dt, fill[0]), _float(dt, fill[1])), dtype=dt)
    if dt.kind == "f":
        return np.array(_float(dt, fill), dtype=dt)
    if dt.kind in "Mm":
        if fill == "NaT":
            return np.array("NaT", dtype=dt)
        return np.array(fill, dtype=dt) if isinstance(fill, int) and not isinstance(fill, bool) else None
    if dt.kind in "biu" and isinstance(fill, (bool, int, float)) and float(fill).is_integer():
        with np.errstate(over="raise"):
            return np.array(int(fill), dtype=dt)
    return None


def _float(dt: np.dtype, v: Any) -> float:
    """A float ``fill_value``: a number, ``NaN``/``Infinity``/``-Infinity``, or Zarr v3's hex of its bytes."""
    if isinstance(v, str) and v.startswith("0x"):
        raw = bytes.fromhex(v[2:])
        return float(np.frombuffer(raw, dtype=np.dtype(f">f{len(raw)}"))[0])
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"{v!r} is no float")
    return float(v)


def shown_value(value: np.ndarray, plan: Recode | None, codecs: Codecs) -> np.ndarray:
    """A stored element ``value`` as the view shows it (recoded by ``plan``, if the view recodes)."""
    if plan is None:
        return value
    rank = len(plan.chunks)
    one = np.full((1,) * rank, value, dtype=np.dtype(plan.dtype))
    data = codecs.for_items(one.dtype.itemsize).encode(one if one.dtype.kind == "O" else one.tobytes())
    small = dataclasses.replace(plan, chunks=(1,) * rank, shown_chunks=(1,) * rank, shown_codecs=Codecs())
    return small.shown_array(data).reshape(())


def reads_alike(stored: np.ndarray, viewed: np.ndarray) -> bool:
    """Do the stored element (as shown) and what the view's reader fills read the same, raw? (A
    char array shown for strings: each of the string's chars the view's one.)"""
    if stored.dtype.kind == "O" or viewed.dtype.kind == "O":
        return str(stored.item() or "") == str(viewed.item() or "")
    if stored.dtype.kind in "fc" and viewed.dtype.kind in "fc":
        return bool(np.array_equal(stored.astype(viewed.dtype), viewed, equal_nan=True))
    a, b = stored.tobytes(), viewed.tobytes()
    return len(b) > 0 and len(a) % len(b) == 0 and a == b * (len(a) // len(b))


def masked(value: np.ndarray, masks: list) -> bool:
    """Is the number (or time) ``value`` surely missing to a CF reader masking with ``masks``
    (JSON numbers): NaN, NaT, or one of them? (Strings and bool: never said.)"""
    kind = value.dtype.kind
    if kind in "Mm":
        return bool(np.isnat(value)) or int(value.view("i8")) in [m for m in masks if isinstance(m, int)]
    if kind not in "fciu" or (kind in "fc" and np.isnan(value)):
        return kind in "fc"
    for m in masks:
        try:
            if value == np.array(_float(value.dtype, m) if kind in "fc" else int(m), dtype=value.dtype):
                return True
        except (TypeError, ValueError, OverflowError):
            continue
    return False


def view_masks(view: str, zarray: dict, zattrs: dict) -> list:
    """The values ``view``'s reader masks with (JSON): xarray's Zarr v2 reader the ``fill_value``
    and a ``_FillValue`` attribute; netCDF-C's readers ``_FillValue`` and ``missing_value``."""
    names = ("_FillValue",) if view == "xarray" else ("_FillValue", "missing_value")
    found = [zarray.get("fill_value")] if view == "xarray" else []
    for name in names:
        got = zattrs.get(name)
        found.extend(got if isinstance(got, list) else [got])
    return [m for m in found if m is not None]


@dataclass(frozen=True, eq=False)
class FillChunks:
    """The chunks a view makes for one array: every chunk of its grid (as the view names them,
    ``separator`` between indices; rank 0: ``0``) the store lacks, each ``value`` in the stored
    ``dtype`` and ``chunks``, encoded with the stored ``codecs``, then as the view shows a stored
    chunk (``plan``: recoded)."""

    grid: tuple[int, ...]
    separator: str
    dtype: str
    chunks: tuple[int, ...]
    codecs: Codecs
    value: Any
    plan: Recode | None = None
    #: what the view's reader would fill a missing chunk with (said in the log)
    viewed: Any = None

    @functools.cached_property
    def token(self) -> str:
        """The made chunk in one string (its cache key; the same for arrays making the same bytes)."""
        fields = [self.dtype, self.chunks, str(self.codecs), repr(self.value), self.plan.token if self.plan else None]
        return json.dumps(fields, default=str)

    @functools.cached_property
    def version(self) -> str:
        return MADE_VERSION + hashlib.md5(self.token.encode()).hexdigest()

    def make(self) -> bytes:
        """The made chunk (CPU work: off the trio thread)."""
        full = np.full(self.chunks, self.value, dtype=np.dtype(self.dtype))
        data = self.codecs.for_items(full.dtype.itemsize).encode(full if full.dtype.kind == "O" else full.tobytes())
        return self.plan.apply(data) if self.plan is not None else data

    def _parts(self, rel: str) -> list[int] | None:
        """The chunk indices (or a nested folder's) ``rel`` names below the array, if in the grid."""
        if not self.grid:
            return [] if rel == "0" else None
        parts = rel.split(self.separator)
        if not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts) or len(parts) > len(self.grid):
            return None
        index = [int(p) for p in parts]
        return index if all(i < n for i, n in zip(index, self.grid)) else None

    def holds(self, rel: str) -> bool:
        """Is ``rel`` (below the array) the name of a chunk of the grid?"""
        index = self._parts(rel)
        return index is not None and len(index) == len(self.grid)

    def is_folder(self, rel: str) -> bool:
        """Is ``rel`` a folder of nested chunk names (separator ``/``)?"""
        index = self._parts(rel) if rel else []
        return self.separator == "/" and index is not None and len(index) < len(self.grid)

    def names(self, rel: str) -> Iterator[tuple[str, bool]]:
        """(name, is a folder) of each chunk (or nested folder) in folder ``rel`` below the array."""
        if not self.grid:
            yield from ([("0", False)] if not rel else [])
            return
        if self.separator == "/":
            depth = len(self._parts(rel) or []) if rel else 0
            if (not rel or self.is_folder(rel)) and depth < len(self.grid):
                yield from ((str(i), depth < len(self.grid) - 1) for i in range(self.grid[depth]))
            return
        if not rel:
            for index in itertools.product(*(range(n) for n in self.grid)):
                yield self.separator.join(map(str, index)), False


#: an array's metadata objects, stored and shown: what decides whether a view makes its chunks
_ARRAY_OBJECTS = (".zarray", ".zattrs", "zarr.json", ".nczvar", ".nczarray", ".nczattr", ".nczattrs")
#: arrays a memo of :func:`fill_chunks` holds at most (then it starts again)
MEMO_SIZE = 1 << 14


def fill_chunks(root: str, ds: Dataset, view: str, shown: dict[str, bytes], stored: dict[str, bytes],
                layouts: Layouts, memo: dict | None = None) -> tuple[dict[str, FillChunks], list[tuple[str, str]]]:
    """The arrays of ``ds`` (as shown: after ``emit``) whose missing chunks ``view`` makes, by full
    path; and the arrays that would need it but have too many chunks (path, why). ``shown``,
    ``stored``: the view's and the store's metadata objects (keys relative to ``root``); ``memo``:
    the answers for arrays seen before (a view is rebuilt at every TTL: by their metadata bytes)."""
    out: dict[str, FillChunks] = {}
    skipped = []
    memo = {} if memo is None else memo
    for g in ds.root.walk():
        for var in g.variables:
            path = array_path(g.path, var.name)
            key = (view, ds.flavor, path, *(objects.get(join(path, n)) for objects in (shown, stored) for n in _ARRAY_OBJECTS))
            if key not in memo:
                if len(memo) >= MEMO_SIZE:
                    memo.clear()
                memo[key] = _made(ds, var, path, view, shown, stored, layouts)
            made = memo[key]
            if made is None:
                continue
            if math.prod(made.grid) > MAX_MADE:
                skipped.append((path, f"{math.prod(made.grid)} chunks, more than the {MAX_MADE} a view makes"))
            else:
                out[join(root, path)] = made
    return out, skipped


def _made(ds: Dataset, var: Any, path: str, view: str, shown: dict[str, bytes], stored: dict[str, bytes],
          layouts: Layouts) -> FillChunks | None:
    """``var``'s FillChunks if a chunk the store lacks reads otherwise through the view, else None."""
    metas = _metadata(ds, path, shown, stored)
    if metas is None:
        return None
    zarray, zattrs, fill, grid = metas
    v2 = v2_form(var, ds.flavor == "zarr-v3")
    value = missing_value(v2.dtype, fill, ZARR if ds.flavor in ("zarr-v2", "zarr-v3") else NETCDF)
    viewed = missing_value(str(zarray.get("dtype")), zarray.get("fill_value"), ZARR if view == "xarray" else NETCDF)
    if value is None or viewed is None:
        return None
    codecs = Codecs(v2.compressor, tuple(v2.filters or ()))
    plan = layouts.recodes.get(path)
    try:
        if reads_alike(shown_value(value, plan, codecs), viewed):
            return None
    except Exception:  # noqa: BLE001 - numcodecs or numpy refusing the element: as today
        return None
    stored_mask = mask(var, ds.flavor)
    if masked(value, stored_mask.value if stored_mask is not None else []) \
            and masked(viewed, view_masks(view, zarray, zattrs)):
        return None  # missing to both readers (NaN and the view's mask): decoded alike
    return FillChunks(grid, zarray.get("dimension_separator") or ".", v2.dtype, tuple(v2.chunks or ()), codecs,
                      value, plan, viewed.item())


def _metadata(ds: Dataset, path: str, shown: dict[str, bytes],
              stored: dict[str, bytes]) -> tuple[dict, dict, Any, tuple[int, ...]] | None:
    """(the view's ``.zarray`` and ``.zattrs``, the stored ``fill_value``, the view's chunk grid)
    of the array at ``path`` (None: not known)."""
    meta = shown.get(join(path, ".zarray"))
    stored_meta = stored.get(join(path, "zarr.json" if ds.flavor == "zarr-v3" else ".zarray"))
    if meta is None or stored_meta is None:
        return None
    try:
        zarray, raw = jsontext.loads(meta), jsontext.loads(stored_meta)
        zattrs = jsontext.loads(shown.get(join(path, ".zattrs"), b"{}"))
        grid = tuple(-(-int(n) // int(c)) if c else 0 for n, c in zip(zarray["shape"], zarray["chunks"], strict=True))
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return None
    fill = raw.get("fill_value") if isinstance(raw, dict) else None
    fill = (fill[0] if fill else None) if isinstance(fill, list) and ds.flavor != "zarr-v3" else fill
    return zarray, zattrs if isinstance(zattrs, dict) else {}, fill, grid
