"""Parse kerchunk's parquet form of a reference set into ``{key: bytes | Ref}``.

The form (``kerchunk.df.refs_to_dataframe``, fsspec ``LazyReferenceMapper``) is a directory:
``.zmetadata`` holds ``{"metadata": {key: JSON}, "record_size": N}`` with every metadata key,
and each array ``FIELD`` (a key ``FIELD/.zarray``) has files ``FIELD/refs.R.parq`` whose
columns ``path, offset, size, raw`` describe its chunks in C order, ``record_size`` rows a
file: row ``i`` of file ``R`` is chunk number ``R * record_size + i`` of the chunk grid. A
row holds inline bytes (``raw``), a byte range (``path, offset, size``), the whole target
(``offset = size = 0``), or nothing (no such chunk). Relative paths resolve against the
directory holding the parquet directory, as a JSON's resolve against the JSON's directory.

Everything is read at mount time (fastparquet, the ``parquet`` extra), within the same key
budget as ``gen``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from typing import Any

from nczfs.toolbox.errors import SourceError
from nczfs.store.reference import spec as refspec
from nczfs.store.reference.spec import Ref, UrlResolver, Value, check_tree, checked_key, parse_value


def is_parquet_references(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, ".zmetadata"))


def load_parquet_references(root: str) -> dict[str, Value]:
    try:
        return _load(root)
    except SourceError as exc:
        raise SourceError(f"{root}: {exc}") from exc


def _load(root: str) -> dict[str, Value]:
    try:
        with open(os.path.join(root, ".zmetadata"), "rb") as f:
            doc = json.load(f)
    except OSError as exc:
        raise SourceError(f"cannot read .zmetadata ({exc.strerror})") from None
    except (ValueError, RecursionError) as exc:
        raise SourceError(f".zmetadata is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise SourceError(".zmetadata has no 'metadata' object: not a kerchunk parquet reference set")
    record_size = doc.get("record_size")
    if not isinstance(record_size, int) or isinstance(record_size, bool) or record_size < 1:
        raise SourceError(f".zmetadata: record_size must be a whole number >= 1, not {record_size!r}")
    urls = UrlResolver(os.path.dirname(os.path.abspath(root)))
    refs: dict[str, Value] = {}
    for key, value in doc["metadata"].items():
        refs[checked_key(key)] = parse_value(key, value, None, urls)
    budget = refspec.MAX_KEYS
    for key in list(refs):
        if key == ".zarray" or key.endswith("/.zarray"):
            field = key[: -len(".zarray")].rstrip("/")
            budget -= _add_chunks(root, field, _zarray(key, refs[key]), record_size, urls, refs, budget)
    check_tree(refs)
    return refs


def _zarray(key: str, raw: Value) -> dict[str, Any]:
    try:
        meta = json.loads(raw) if isinstance(raw, bytes) else None
    except ValueError:
        meta = None
    shape, chunks = (meta or {}).get("shape"), (meta or {}).get("chunks")
    if not (isinstance(shape, list) and isinstance(chunks, list) and len(shape) == len(chunks)
            and all(isinstance(n, int) and n >= 0 for n in shape) and all(isinstance(n, int) and n > 0 for n in chunks)):
        raise SourceError(f"{key}: not Zarr v2 array metadata with a shape and chunks")
    return meta  # type: ignore[return-value]  # checked above: a dict with a shape and chunks


def _add_chunks(root: str, field: str, zarray: dict, record_size: int, urls: UrlResolver,
                refs: dict[str, Value], budget: int) -> int:
    """Add the chunk keys of one array; returns how many."""
    grid = [math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"])] or [1]
    total = math.prod(grid)
    if total > budget:
        raise SourceError(f"{field or '/'}: {total} chunks; at most {refspec.MAX_KEYS} keys in all are allowed")
    sep = zarray.get("dimension_separator") or "."
    prefix = f"{field}/" if field else ""
    names = itertools.product(*(range(n) for n in grid))  # C order, as the rows are
    added = 0
    for record in range(math.ceil(total / record_size)):
        path = os.path.join(root, field, f"refs.{record}.parq")
        rows = _rows(path) if os.path.exists(path) else []
        for i, name in enumerate(itertools.islice(names, record_size)):
            if i >= len(rows):
                continue
            key = prefix + sep.join(map(str, name))
            value = _row_value(key, *rows[i], urls)
            if value is not None:
                refs[checked_key(key)] = value
                added += 1
    return added


def _rows(path: str) -> list[tuple[Any, Any, Any, Any]]:
    try:
        import fastparquet
    except ImportError:
        raise SourceError("parquet references need fastparquet (pip install fastparquet into nczfs's environment, or install nczfs with its parquet extra: pip install '.[parquet]')") from None
    try:
        df = fastparquet.ParquetFile(path).to_pandas()
    except Exception as exc:  # fastparquet raises many kinds for a damaged file
        raise SourceError(f"{path}: cannot read parquet ({type(exc).__name__}: {exc})") from None
    cols = [df[c].tolist() if c in df.columns else [None] * len(df) for c in ("path", "offset", "size", "raw")]
    return list(zip(*cols))


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _row_value(key: str, path: Any, offset: Any, size: Any, raw: Any, urls: UrlResolver) -> Value | None:
    if not _missing(raw):
        if not isinstance(raw, (bytes, bytearray)):
            raise SourceError(f"key {key!r}: raw value is {type(raw).__name__}, not bytes")
        return bytes(raw)
    if _missing(path):
        return None  # no such chunk: zarr uses the fill value
    if not isinstance(path, str) or not path:
        raise SourceError(f"key {key!r}: path must be a non-empty string, not {path!r}")
    offset, size = (0 if _missing(v) else v for v in (offset, size))
    if offset == 0 and size == 0:
        return Ref(urls(key, path))
    return parse_value(key, [path, offset, size], None, urls)
