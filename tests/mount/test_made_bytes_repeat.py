"""A chunk a mount makes (decoded and deflated for ``NAME.nc4`` or a view) is a function of the
stored chunk: made again, by this daemon or by another one, it is the same bytes. A file's size
is summed from sizes made once and kept (in memory, and in ``--cache-dir`` across mounts), so a
chunk made again a few bytes longer fails its read (ESTALE), and one of the same length but other
bytes would mix two streams in one reader's file. An encoder that is not a function of its input
(ISA-L's, docs/PERFORMANCE.md) was seen to be so in the daemon only, not in one process: this
test mounts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.helpers import DirectoryBackend, counts, mounted
from tests.mount.test_nc_files import tree
from tests.nczarr.nc4util import write_nc4
from tests.nczarr.test_nc4reencode import V2_CHAINS

pytestmark = pytest.mark.fuse

zarr = pytest.importorskip("zarr")

#: the chains whose chunks are decoded and deflated, 1,000 chunks of 16 x 16 each
CHAINS = ("delta", "gzip", "lz4", "scaled")
SHAPE = (400, 640)


def _make(root) -> None:
    g = zarr.open_group(str(root / "m.zarr"), mode="w", zarr_format=2)
    base = np.arange(SHAPE[0] * SHAPE[1]).reshape(SHAPE) % 97
    for name in CHAINS:
        filters, compressor = V2_CHAINS[name]
        a = (base / 10.0) if name == "scaled" else base.astype("<f8" if name == "gzip" else "<i4")
        arr = g.create_array(name, shape=SHAPE, chunks=(16, 16), dtype=a.dtype, filters=filters,
                             compressors=compressor, fill_value=0)
        arr[:] = a
        arr.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]


def test_chunks_made_by_two_daemons_are_the_bytes_made_in_process(tmp_path):
    """4,000 chunks made for the first ``stat`` of ``m.zarr.nc4`` and read; a remount with the
    same cache dir (their sizes kept) makes them again for the read: both reads are, byte for
    byte, the file made without a mount."""
    made = tmp_path / "made"
    made.mkdir()
    _make(made)
    _, want = write_nc4(made, "m.zarr", tmp_path / "m.nc4")
    expect = want.read_bytes()
    backend = DirectoryBackend(tmp_path / "backing")
    backend.root.mkdir()
    backend.put_many({f"m.zarr/{k}": v for k, v in tree(made / "m.zarr").items()})
    args = ("--read-only", "-o", "nc_files=netcdf4", "--cache-dir", str(tmp_path / "cache"))
    for mount in ("first", "remount"):
        with mounted(backend, tmp_path / "mnt", *args) as m:
            assert os.stat(m.path / "m.zarr.nc4").st_size == len(expect), mount
            assert (m.path / "m.zarr.nc4").read_bytes() == expect, mount
            assert counts(m.path)["ncfiles.chunks-decoded"] == 4000, mount
        assert "Traceback" not in m.log_text() and "made again" not in m.log_text(), mount
