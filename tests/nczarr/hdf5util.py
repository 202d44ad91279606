"""Helpers of the HDF5 writer's tests: a file made from a layout and the chunks' bytes."""

from __future__ import annotations

import subprocess
from pathlib import Path

from nczfs.nczarr.hdf5.writer import Layout


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
