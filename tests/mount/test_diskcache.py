"""``--cache-dir`` through real S3 mounts: a remount reads from the directory (no GetObject),
an object rewritten by another client is read fresh. Counters from the control file ``.nczfs``."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import S3Backend, counts, delta, mounted

pytestmark = pytest.mark.fuse


@pytest.fixture
def s3(s3_server) -> S3Backend:
    return S3Backend(s3_server, s3_server.new_bucket("dc"))


def clean(m) -> None:
    text = m.log_text()
    assert "Traceback" not in text and " ERROR " not in text and " WARNING " not in text, text


def written_to_disk(mnt: Path, at_least: int) -> dict[str, int]:
    """The counters once ``at_least`` blocks have been written to the cache dir (they are written
    in the background, after the reads they came from returned)."""
    deadline = time.monotonic() + 30
    while True:
        c = counts(mnt)
        if c.get("diskcache.writes", 0) >= at_least or time.monotonic() > deadline:
            return c
        time.sleep(0.05)


def test_a_remount_reads_from_the_cache_dir_and_a_rewritten_object_fresh(s3, tmp_path):
    import zarr

    blob = bytes(range(256)) * 4096  # 1 MiB
    s3.put("blob", blob)
    with mounted(s3, tmp_path / "mnt") as m:
        z = zarr.open_array(str(m.path / "a.zarr"), mode="w", shape=(100,), chunks=(10,), dtype="i4",
                            zarr_format=2, fill_value=0)
        z[:] = np.arange(100, dtype="i4")
    cache_dir = tmp_path / "cache"
    opts = ("--cache-dir", str(cache_dir), "--cache-dir-size", "64M")

    with mounted(s3, tmp_path / "mnt", *opts) as m:
        before = counts(m.path)
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], np.arange(100))
        assert (m.path / "blob").read_bytes() == blob
        gets = delta(before, counts(m.path)).get("GetObject", 0)
        assert gets >= 12, gets  # ten chunks, the metadata and the blob came from S3
        c = written_to_disk(m.path, gets)
        assert c["diskcache.writes"] >= gets and c.get("diskcache.errors", 0) == 0, c
        assert c["diskcache.bytes-limit"] == 64 * 2**20 and 0 < c["diskcache.bytes-held"] <= 64 * 2**20, c
    clean(m)

    with mounted(s3, tmp_path / "mnt", *opts) as m:
        before = counts(m.path)
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], np.arange(100))
        assert (m.path / "blob").read_bytes() == blob
        d = delta(before, counts(m.path))
        assert d.get("GetObject", 0) == 0 and d.get("diskcache.hits", 0) >= 12, d
    clean(m)

    new = blob[::-1]  # another client rewrites the blob: same size, new content
    s3.put("blob", new)
    with mounted(s3, tmp_path / "mnt", *opts) as m:
        before = counts(m.path)
        assert (m.path / "blob").read_bytes() == new
        assert np.array_equal(zarr.open_array(str(m.path / "a.zarr"), mode="r")[:], np.arange(100))
        d = delta(before, counts(m.path))
        assert d.get("GetObject", 0) == 1, d  # the new blob; the array still from the cache dir
    clean(m)
