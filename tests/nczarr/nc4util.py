"""Helpers of the netCDF-4 file tests: a store's NAME.nc4 written out without a mount."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from nczfs.nczarr.nc4file import Nc4File, nc4_file
from nczfs.nczarr.nc4shards import inner_chunks
from nczfs.nczarr.ncfile import v3_encodings
from nczfs.nczarr.read import read_dataset
from nczfs.store.directory import DirectoryStore
from nczfs.store.threads import ThreadedStore
from tests.nczarr.util import Below


def sizes_of(root: Path, name: str) -> dict[str, int]:
    """Every object's size under ``root/name``, by store key (``name/...``)."""
    out = {}
    for folder, _, files in os.walk(root / name):
        for f in files:
            p = Path(folder) / f
            out[p.relative_to(root).as_posix()] = p.stat().st_size
    return out


def nc4_of(root: Path, name: str, facts: dict | None = None, plugins: bool = False) -> Nc4File:
    """The netCDF-4 file of the dataset in folder ``root/name`` (``facts``: as the mount's scans
    of chunks find them, by array path; sharded arrays' shard indexes read as the mount does)."""
    store = DirectoryStore(str(root))
    objects = Below(store, name)
    ds = read_dataset(objects)
    enc = v3_encodings(ds, objects.get)
    inner = trio.run(inner_chunks, ThreadedStore(store), ds, name, enc)
    return nc4_file(ds, name, enc, sizes_of(root, name), facts, inner, plugins)


def write_nc4(root: Path, name: str, out: Path, facts: dict | None = None,
              plugins: bool = False) -> tuple[Nc4File, Path]:
    """The file written to ``out``, its chunks read from the store's files."""
    f = nc4_of(root, name, facts, plugins)
    buf = bytearray(f.size)
    buf[:len(f.layout.meta)] = f.layout.meta
    for p in f.layout.pieces:
        data = (root / p.source.key).read_bytes()
        if p.source.length is not None:
            data = data[p.source.start:p.source.start + p.source.length]
        if p.source.recode is not None:
            data = p.source.decode(data)
        assert len(data) == p.size, p
        buf[p.offset:p.offset + p.size] = data
    out.write_bytes(bytes(buf))
    return f, out
