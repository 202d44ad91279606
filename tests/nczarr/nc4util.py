"""Helpers of the netCDF-4 file tests: a store's NAME.nc4 written out without a mount."""

from __future__ import annotations

import os
from pathlib import Path

import trio

from nczfs.toolbox.errors import NczfsError
from nczfs.nczarr.metadata.read import read_dataset
from nczfs.nczarr.ncfile.classicfile import v3_encodings
from nczfs.nczarr.ncfile.nc4file import Nc4File, Options, nc4_file
from nczfs.nczarr.ncfile.nc4shards import inner_chunks
from nczfs.nczarr.ncfile.nc4source import Source
from nczfs.store.directory.store import DirectoryStore
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


def made(root: Path, src: Source) -> bytes:
    """The chunk ``src`` in the file (addresses of strings relative to its start)."""
    if src.fill is not None:
        return src.decode(b"")
    data = (root / src.key).read_bytes()
    if src.length is not None:
        data = data[src.start:src.start + src.length]
    return src.decode(data) if src.recode is not None else data


def nc4_of(root: Path, name: str, plugins: bool = False, transcode: str = "auto", sized: bool = True) -> Nc4File:
    """The netCDF-4 file of the dataset in folder ``root/name`` (sharded arrays' shard indexes
    read as the mount does; chunks not passed through made for their sizes, unless not ``sized``)."""
    store = DirectoryStore(str(root))
    objects = Below(store, name)
    ds = read_dataset(objects)
    enc = v3_encodings(ds, objects.get)
    inner = trio.run(inner_chunks, ThreadedStore(store), ds, name, enc)
    f = nc4_file(ds, name, enc, sizes_of(root, name), inner, Options(plugins, transcode))
    if not f.unsized or not sized:
        return f
    lengths: dict[tuple, int | str] = {}
    for src in f.unsized:
        try:
            lengths[_ident(src)] = len(made(root, src))
        except NczfsError as exc:
            lengths[_ident(src)] = f"chunk {src.key!r} cannot be made: {exc}"
    f = nc4_file(read_dataset(objects), name, enc, sizes_of(root, name), inner,
                 Options(plugins, transcode, lambda src: lengths.get(_ident(src))))
    assert not f.unsized
    return f


def _ident(src: Source) -> tuple:
    """What a chunk's size is known by, but for its version (as the mount's made chunks)."""
    return src.stored("").ident(src.maker)


def write_nc4(root: Path, name: str, out: Path, plugins: bool = False,
              transcode: str = "auto") -> tuple[Nc4File, Path]:
    """The file written to ``out``, its chunks read from the store's files."""
    f = nc4_of(root, name, plugins, transcode)
    buf = bytearray(f.size)
    buf[:len(f.layout.meta)] = f.layout.meta
    for p in f.layout.pieces:
        data = p.source.place(made(root, p.source), p.offset, 0, p.size)
        assert len(data) == p.size, p
        buf[p.offset:p.offset + p.size] = data
    out.write_bytes(bytes(buf))
    return f, out
