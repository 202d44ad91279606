"""Writers of different chunks never conflict: two real mounts of one store, zarr-python rooted
in each, write disjoint chunk sets of one array at the same time (two threads per mount); every
write is conditional (``write.overwrite-checked 1``), none is refused (``write.conflicts 0``),
every chunk object holds the bytes its writer wrote, and a third mount reads the union
(docs/SEMANTICS.md, "Concurrent writers")."""

from __future__ import annotations

import contextlib
import json
import threading

import numpy as np
import pytest

from tests.helpers import counts, mounted
from tests.mount.test_consolidated_conflicts import backend_named

pytestmark = pytest.mark.fuse

zarr = pytest.importorskip("zarr")

ARRAY = "a.zarr"
SHAPE, CHUNK = (16, 16), (2, 4)  # 8 x 4 = 32 chunk objects
ROWS = SHAPE[0] // CHUNK[0]


@pytest.fixture(params=["s3", "gcs", "azure", "directory"])
def shared(request, tmp_path):
    return backend_named(request, tmp_path)


def _expected() -> np.ndarray:
    """Every element its own nonzero value (no chunk equals the fill value, so each is stored)."""
    return np.arange(1, SHAPE[0] * SHAPE[1] + 1, dtype="<i4").reshape(SHAPE)


def _chunk_rows(mount: int, thread: int) -> range:
    """The chunk rows one writer owns: mount 0 the upper half, mount 1 the lower, each half split
    between its two threads row by row (so the four writers interleave over the whole array)."""
    half = ROWS // 2
    return range(mount * half + thread, (mount + 1) * half, 2)


def _writer(root, rows: range, errors: list[BaseException]) -> None:
    """zarr-python rooted in a mount: each chunk of ``rows`` written on its own."""
    try:
        arr = zarr.open_array(str(root / ARRAY), mode="r+", zarr_format=2)
        data = _expected()
        for r in rows:
            for c in range(0, SHAPE[1], CHUNK[1]):
                sel = (slice(r * CHUNK[0], (r + 1) * CHUNK[0]), slice(c, c + CHUNK[1]))
                arr[sel] = data[sel]
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


def test_two_mounts_writing_different_chunks_of_one_array_never_conflict(shared, tmp_path):
    shared.put(f"{ARRAY}/.zarray", json.dumps({
        "zarr_format": 2, "shape": list(SHAPE), "chunks": list(CHUNK), "dtype": "<i4", "compressor": None,
        "fill_value": 0, "order": "C", "filters": None, "dimension_separator": "."}).encode())
    errors: list[BaseException] = []
    with contextlib.ExitStack() as stack:
        mounts = [stack.enter_context(mounted(shared, tmp_path / n, "-o", "metadata_ttl=60")) for n in "ab"]
        writers = [threading.Thread(target=_writer, args=(m.path, _chunk_rows(i, t), errors))
                   for i, m in enumerate(mounts) for t in range(2)]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        stats = [counts(m.path) for m in mounts]
    assert not errors, errors
    assert [s["write.overwrite-checked"] for s in stats] == [1, 1], stats  # the writes were conditional
    assert [s["write.conflicts"] for s in stats] == [0, 0], stats
    for m in mounts:
        assert "Traceback" not in m.log_text() and "another client changed" not in m.log_text(), m.log_text()
    data = _expected()
    chunks = {k for k in shared.keys(ARRAY) if not k.endswith("/.zarray")}
    assert chunks == {f"{ARRAY}/{r}.{c}" for r in range(ROWS) for c in range(SHAPE[1] // CHUNK[1])}, chunks
    for r in range(ROWS):
        for c in range(SHAPE[1] // CHUNK[1]):
            block = data[r * CHUNK[0]:(r + 1) * CHUNK[0], c * CHUNK[1]:(c + 1) * CHUNK[1]]
            assert shared.read(f"{ARRAY}/{r}.{c}") == block.tobytes(), (r, c)
    with mounted(shared, tmp_path / "reader") as reader:
        np.testing.assert_array_equal(zarr.open_array(str(reader.path / ARRAY), mode="r")[...], data)
