"""Arrays read from Zarr v3 in Zarr v2 terms: dtype, order, numcodecs codecs, the innermost
chunks of a sharded array (views show every array as Zarr v2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nczfs.nczarr.chunks import sharding
from nczfs.nczarr.chunks.sharding import Sharding
from nczfs.nczarr.metadata.model import Variable

_V3_DTYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
              "int64": "i8", "uint64": "u8", "float16": "f2", "float32": "f4", "float64": "f8", "bool": "b1",
              "complex64": "c8", "complex128": "c16"}
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
#: numpy units a datetime64/timedelta64 may have, and their CF names
TIME_UNITS = {"D": "days", "h": "hours", "m": "minutes", "s": "seconds", "ms": "milliseconds",
              "us": "microseconds", "ns": "nanoseconds"}


def _v2_base(var: Variable) -> str | None:
    """The numpy dtype (without byte order) of a Zarr v3 data type, if Zarr v2 has one."""
    conf = var.dtype_config
    if var.dtype in ("numpy.datetime64", "numpy.timedelta64"):
        unit, scale = conf.get("unit"), conf.get("scale_factor", 1)
        if unit not in TIME_UNITS and unit not in ("Y", "M", "W") or not isinstance(scale, int) or scale < 1:
            return None
        return ("M8" if var.dtype == "numpy.datetime64" else "m8") + f"[{scale if scale != 1 else ''}{unit}]"
    if var.dtype == "null_terminated_bytes" and isinstance(conf.get("length_bytes"), int):
        return f"S{conf['length_bytes']}"
    if var.dtype == "fixed_length_utf32" and isinstance(conf.get("length_bytes"), int):
        return f"U{conf['length_bytes'] // 4}"
    if var.dtype == "string":
        return "O"
    return _V3_DTYPES.get(var.dtype)


@dataclass
class V2Array:
    """How an array appears in Zarr v2 terms (translated from v3 where needed)."""

    dtype: str
    order: str
    compressor: dict | None
    filters: list[dict] | None
    separator: str
    #: the chunks a view shows (a sharded array: its innermost chunks)
    chunks: list[int] = field(default_factory=list)
    #: a sharded v3 array: how its shards hold those chunks
    sharding: Sharding | None = None


def v3_to_v2(var: Variable) -> V2Array | str:
    """The v2 form of an array read from Zarr v3, or why it has none."""
    base = _v2_base(var)
    if base is None:
        return f"data_type {var.dtype} has no Zarr v2 equivalent here"
    inner = _inner_chunks(var)
    if isinstance(inner, str):
        return inner
    codecs, chunks, sharded, separator = inner
    order = _order(codecs, len(var.shape))
    if order not in ("C", "F"):
        return order
    head = _array_to_bytes(codecs, base)
    if isinstance(head, str):
        return head
    mapped, big = head
    dtype = ("|" if base in ("O", "b1", "i1", "u1") or base[0] == "S" else ">" if big else "<") + base
    for c in codecs:
        got = _v2_codec(c.get("name"), dict(c.get("configuration") or {}))
        if isinstance(got, str):
            return got
        mapped.append(got)
    compressor = mapped[-1] if mapped else None
    return V2Array(dtype, order, compressor, mapped[:-1] or None, separator, chunks, sharded)


def _inner_chunks(var: Variable) -> tuple[list[dict], list[int], Sharding | None, str] | str:
    """(the codecs of the chunks a view shows, their shape, the sharding holding them or None,
    their keys' separator), or why a sharded array cannot be shown by its innermost chunks."""
    codecs = list(var.codecs)
    if not codecs or codecs[0].get("name") != "sharding_indexed":
        return codecs, list(var.chunks), None, var.dimension_separator
    found = sharding.parse(codecs)
    if not isinstance(found, str):
        found = sharding.with_shard_shape(found, tuple(var.chunks))
    if isinstance(found, str):
        return found
    return list(found.codecs), list(found.chunks), found, "."


def _array_to_bytes(codecs: list[dict], base: str) -> tuple[list[dict], bool] | str:
    """The leading array-to-bytes codec (taken off ``codecs``): (its v2 codecs, big-endian?)."""
    if base == "O" and codecs and codecs[0].get("name") == "vlen-utf8":  # the same bytes as numcodecs'
        codecs.pop(0)
        return [{"id": "vlen-utf8"}], False
    if not codecs or codecs[0].get("name") != "bytes":
        return f"codecs {[c.get('name') for c in codecs]} do not start with 'bytes'"
    return [], (codecs.pop(0).get("configuration") or {}).get("endian") == "big"


def _order(codecs: list[dict], rank: int) -> str:
    """"C", or "F" for a leading transpose reversing the axes (taken off ``codecs``), or why
    the array has no v2 order."""
    if not codecs or codecs[0].get("name") != "transpose":
        return "C"
    perm = (codecs.pop(0).get("configuration") or {}).get("order")
    if list(perm or []) != list(reversed(range(rank))):
        return f"transpose order {perm} is neither C nor F"
    return "F"


def _v2_codec(name: Any, conf: dict) -> dict | str:
    """The numcodecs (Zarr v2) configuration of a v3 bytes-to-bytes codec, or why it has none."""
    if name == "gzip":
        return {"id": "gzip", "level": conf.get("level", 5)}
    if name == "zstd":
        if conf.get("checksum"):
            return "zstd with checksum has no numcodecs v2 equivalent"
        return {"id": "zstd", "level": conf.get("level", 0)}
    if name == "blosc":
        shuffle = _BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), conf.get("shuffle"))
        return {"id": "blosc", "cname": conf.get("cname", "lz4"), "clevel": conf.get("clevel", 5),
                "shuffle": shuffle, "blocksize": conf.get("blocksize", 0)}
    if name == "crc32c":
        return {"id": "crc32c"}
    if isinstance(name, str) and name.startswith("numcodecs."):
        return {"id": name[len("numcodecs."):], **conf}
    return f"codec {name!r} has no Zarr v2 equivalent"


def v3_chunk_prefix(var: Variable, encoding_name: str = "default") -> str:
    """What v3 puts before the chunk indices: ``c/`` or ``c.`` (default encoding), else nothing."""
    return f"c{var.dimension_separator}" if encoding_name == "default" else ""


def v2_form(var: Variable, from_v3: bool) -> V2Array:
    if from_v3:
        v2 = v3_to_v2(var)
        assert isinstance(v2, V2Array)
        return v2
    return V2Array(var.dtype, var.order, var.compressor, var.filters or None, var.dimension_separator, list(var.chunks))
