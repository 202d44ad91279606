"""Helpers of the HDF5 writer's tests: a file made from a layout and the chunks' bytes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nczfs.nczarr.ncfile.hdf5.writer import Layout


def materialize(lay: Layout, chunks: dict, path: Path) -> Path:
    """Write the file ``lay`` describes, each piece's bytes ``chunks[piece.source]``."""
    buf = bytearray(lay.size)
    buf[:len(lay.meta)] = lay.meta
    for p in lay.pieces:
        data = chunks[p.source]
        assert len(data) == p.size, p
        buf[p.offset:p.offset + p.size] = data
    path.write_bytes(bytes(buf))
    return path


def h5dump(path: Path, *args: str) -> str:
    """h5dump's output; fails the test on an error (exit status or a message)."""
    got = subprocess.run(["h5dump", *args, str(path)], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and "error" not in (got.stdout + got.stderr).lower(), got.stdout[-2000:] + got.stderr
    return got.stdout


def check_file(path: Path) -> int:
    """A check of the file built on h5py's low-level API: every object's header opens, every
    attribute reads, every chunk index entry lies inside the file, after ``meta_end``, apart from
    every other, and reads back as the file's bytes there. The number of chunks checked."""
    import h5py

    raw = path.read_bytes()
    spans: list[tuple[int, int]] = []

    def visit(name: str, obj) -> None:
        for a in obj.attrs:
            obj.attrs[a]  # noqa: B018 - reading it is the check
        if not isinstance(obj, h5py.Dataset):
            return
        dsid = obj.id
        if obj.chunks is None:  # contiguous: its one block of bytes, if stored
            if dsid.get_offset() is not None:
                spans.append((dsid.get_offset(), dsid.get_offset() + dsid.get_storage_size()))
            return
        for i in range(dsid.get_num_chunks()):
            info = dsid.get_chunk_info(i)
            assert info.byte_offset + info.size <= len(raw), (name, info)
            assert dsid.read_direct_chunk(info.chunk_offset)[1] == raw[info.byte_offset:info.byte_offset + info.size]
            spans.append((info.byte_offset, info.byte_offset + info.size))

    with h5py.File(path, "r") as f:
        for a in f.attrs:
            f.attrs[a]  # noqa: B018
        f.visititems(visit)
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "chunks overlap"
    return len(spans)
