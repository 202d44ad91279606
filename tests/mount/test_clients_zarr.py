"""zarr-python 3 writing and reading Zarr v2 and v3 *through the mount*, checked in the backend.

zarr's LocalStore writes ``<key>.<uuid>.partial`` and renames it into place (or, for
exclusive creates, ``os.link`` + ``unlink``), deletes arrays/groups with ``shutil.rmtree``
and overwrites chunks and metadata in place: all of that must leave exactly the
expected objects in the backend.
"""

from __future__ import annotations

import asyncio
import os

import numpy as np
import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype

from tests.helpers import counts, delta, mounted
from tests.mount.clientutil import assert_no_temporaries, backend_json, backend_zarr_stores

pytestmark = [
    pytest.mark.fuse,
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore:.*vlen-utf8.*:UserWarning"),
]

DS = "ds.zarr"

#: (path in the dataset, dtype, shape, chunks, compressed)
ARRAYS = [
    ("f8", "float64", (6, 6), (4, 4), True),
    ("g1/i8", "int64", (9,), (4,), True),
    ("g1/g2/i1", "int8", (7, 5), (3, 2), False),
    ("g1/g2/u2", "uint16", (7, 5), (3, 2), True),
    ("g1/g2/i4", "int32", (9, 4), (4, 4), False),
    ("g1/g2/f4", "float32", (6, 6), (4, 4), False),
    ("g1/g2/b", "bool", (6,), (2,), True),
]

GROUP_ATTRS = {
    "": {"title": "zarr through nczfs", "n": 7, "pi": 3.25, "names": ["a", "b"], "nested": {"k": [1, 2]}},
    "g1": {"level": 1},
    "g1/g2": {"level": 2, "empty": []},
}


def _data(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype == "bool":
        # never a chunk of only False (zarr does not write chunks equal to the fill value)
        return np.array([True, False, True, True, False, True], dtype=bool)[:n].reshape(shape)
    # 1.. so that no chunk is all fill value (0)
    return (np.arange(1, n + 1) % 100 + 1).astype(dtype).reshape(shape)


def _chunk_key(fmt: int, idx: tuple[int, ...]) -> str:
    return ".".join(map(str, idx)) if fmt == 2 else "c/" + "/".join(map(str, idx))


def _chunk_keys(fmt: int, shape, chunks) -> set[str]:
    grid = [range(-(-s // c)) for s, c in zip(shape, chunks)]
    return {_chunk_key(fmt, idx) for idx in np.ndindex(*[len(g) for g in grid])}


def _check_tree(root: zarr.Group, expected: dict[str, np.ndarray], attrs: dict[str, dict], label: str) -> None:
    for gpath, gattrs in attrs.items():
        g = root if gpath == "" else root[gpath]
        assert isinstance(g, zarr.Group), (label, gpath)
        assert dict(g.attrs) == gattrs, (label, gpath)
    assert sorted(root.group_keys()) == ["g1"], label
    assert sorted(root["g1"].group_keys()) == ["g2"], label
    for path, want in expected.items():
        a = root[path]
        assert isinstance(a, zarr.Array), (label, path)
        assert a.dtype == want.dtype, (label, path, a.dtype)
        assert a.shape == want.shape, (label, path)
        got = a[...]
        np.testing.assert_array_equal(got, want, err_msg=f"{label}: {path}")
        assert dict(a.attrs) == {"name": path.rsplit("/", 1)[-1]}, (label, path)


def _check_metadata_keys(backend, fmt: int, expected: dict[str, np.ndarray]) -> None:
    keys = set(backend.keys(DS))
    if fmt == 2:
        for g in ("", "g1/", "g1/g2/"):
            assert f"{DS}/{g}.zgroup" in keys
            assert backend_json(backend, f"{DS}/{g}.zgroup") == {"zarr_format": 2}
            assert backend_json(backend, f"{DS}/{g}.zattrs") == GROUP_ATTRS[g.rstrip("/")]
        assert not any(k.endswith("zarr.json") for k in keys)
    else:
        for g in ("", "g1/", "g1/g2/"):
            meta = backend_json(backend, f"{DS}/{g}zarr.json")
            assert meta["zarr_format"] == 3 and meta["node_type"] == "group"
            assert meta["attributes"] == GROUP_ATTRS[g.rstrip("/")]
        assert not any(k.rsplit("/", 1)[-1] in (".zgroup", ".zarray", ".zattrs") for k in keys)
    for path, dtype, _shape, chunks, compressed in ARRAYS:
        want = expected[path]
        if fmt == 2:
            meta = backend_json(backend, f"{DS}/{path}/.zarray")
            assert meta["shape"] == list(want.shape) and meta["chunks"] == list(chunks), path
            assert np.dtype(meta["dtype"]) == np.dtype(dtype), path
            assert (meta["compressor"] is not None) == compressed, (path, meta["compressor"])
            assert backend_json(backend, f"{DS}/{path}/.zattrs") == {"name": path.rsplit("/", 1)[-1]}
        else:
            meta = backend_json(backend, f"{DS}/{path}/zarr.json")
            assert meta["node_type"] == "array" and meta["shape"] == list(want.shape), path
            assert meta["chunk_grid"]["configuration"]["chunk_shape"] == list(chunks), path
            codecs = [c["name"] for c in meta["codecs"]]
            assert codecs[0] == "bytes", (path, codecs)
            assert (len(codecs) > 1) == compressed, (path, codecs)
            assert meta["attributes"] == {"name": path.rsplit("/", 1)[-1]}
        chunk_keys = {k[len(f"{DS}/{path}/") :] for k in keys if k.startswith(f"{DS}/{path}/")}
        chunk_keys -= {".zarray", ".zattrs", "zarr.json"}
        assert chunk_keys == _chunk_keys(fmt, want.shape, chunks), path
        if not compressed:
            # raw little-endian C-order bytes of the first (interior, so unpadded) chunk
            first = want[tuple(slice(0, c) for c in chunks)]
            raw = backend.read(f"{DS}/{path}/{_chunk_key(fmt, (0,) * len(chunks))}")
            assert raw == first.astype(first.dtype.newbyteorder("<")).tobytes(order="C"), path


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_python_roundtrip_through_mount(mount, fmt):
    backend = mount.backend
    store = zarr.storage.LocalStore(mount.path / DS)
    root = zarr.open_group(store, mode="w", zarr_format=fmt, attributes={"title": "zarr through nczfs"})
    root.attrs.update({"n": 6, "pi": 3.25, "names": ["a", "b"], "nested": {"k": [1, 2]}})
    root.attrs["n"] = 7  # rewrite the group metadata
    g1 = root.create_group("g1", attributes={"level": 1})
    g2 = g1.create_group("g2")
    g2.attrs.update(GROUP_ATTRS["g1/g2"])

    expected: dict[str, np.ndarray] = {}
    for path, dtype, shape, chunks, compressed in ARRAYS:
        a = root.create_array(
            path,
            shape=shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=0,
            compressors="auto" if compressed else None,
            attributes={"name": path.rsplit("/", 1)[-1]},
        )
        want = _data(dtype, shape)
        a[...] = want
        if dtype != "bool":
            # partial update across chunk boundaries (read-modify-write of existing chunks)
            part = tuple(slice(1, min(s, 1 + c)) for s, c in zip(shape, chunks))
            upd = np.full([p.stop - p.start for p in part], 42, dtype=dtype)
            a[part] = upd
            want[part] = upd
            # overwrite of one whole existing chunk
            whole = tuple(slice(0, c) for c in chunks)
            new = want[whole][::-1].copy() if len(shape) == 1 else want[whole] + 1
            a[whole] = new
            want[whole] = new
        else:
            a[1] = True
            want[1] = True
        expected[path] = want

    # grow an array: rewrites its metadata and adds chunks
    i4 = root["g1/g2/i4"]
    extra = np.arange(4 * 4, dtype="int32").reshape(4, 4) + 500
    i4.append(extra, axis=0)
    expected["g1/g2/i4"] = np.concatenate([expected["g1/g2/i4"], extra])

    # read back through the mount with a fresh store
    through_mount = zarr.storage.LocalStore(mount.path / DS, read_only=True)
    _check_tree(zarr.open_group(through_mount, mode="r"), expected, GROUP_ATTRS, "mount")
    # the same bytes straight from the backend
    for label, st in backend_zarr_stores(backend, DS):
        _check_tree(zarr.open_group(st, mode="r", zarr_format=fmt), expected, GROUP_ATTRS, label)
    _check_metadata_keys(backend, fmt, expected)
    assert_no_temporaries(backend)

    # delete an array, then a whole group, through zarr
    del root["g1/g2/u2"]
    assert not [k for k in backend.keys(DS) if k.startswith(f"{DS}/g1/g2/u2/")]
    assert "u2" not in os.listdir(mount.path / DS / "g1" / "g2")
    assert "i1" in root["g1/g2"]
    assert backend.exists(f"{DS}/g1/g2/i1/{'.zarray' if fmt == 2 else 'zarr.json'}")
    del root["g1"]
    assert not [k for k in backend.keys(DS) if k.startswith(f"{DS}/g1/")]
    assert "g1" not in os.listdir(mount.path / DS)
    left = sorted(k[len(DS) + 1 :] for k in backend.keys(DS))
    if fmt == 2:
        assert left == [".zattrs", ".zgroup", "f8/.zarray", "f8/.zattrs", "f8/0.0", "f8/0.1", "f8/1.0", "f8/1.1"]
    else:
        assert left == ["f8/c/0/0", "f8/c/0/1", "f8/c/1/0", "f8/c/1/1", "f8/zarr.json", "zarr.json"]
    for label, st in [("mount", zarr.storage.LocalStore(mount.path / DS, read_only=True))] + backend_zarr_stores(backend, DS):
        g = zarr.open_group(st, mode="r")
        assert list(g.group_keys()) == [], label
        np.testing.assert_array_equal(g["f8"][...], expected["f8"], err_msg=label)
    assert_no_temporaries(backend)


def test_zarr_localstore_exclusive_create_uses_link(mount):
    """``set_if_not_exists`` writes a .partial then ``os.link``s it: new keys appear, existing
    ones are kept (EEXIST from link), and the temporary is always unlinked."""
    backend = mount.backend
    proto = default_buffer_prototype()
    store = zarr.storage.LocalStore(mount.path / DS)

    async def run():
        await store.set("k/existing", proto.buffer.from_bytes(b"old"))
        await store.set_if_not_exists("k/existing", proto.buffer.from_bytes(b"new"))
        await store.set_if_not_exists("k/fresh", proto.buffer.from_bytes(b"fresh"))
        return (await store.get("k/existing", proto)).to_bytes(), (await store.get("k/fresh", proto)).to_bytes()

    assert asyncio.run(run()) == (b"old", b"fresh")
    assert backend.read(f"{DS}/k/existing") == b"old"
    assert backend.read(f"{DS}/k/fresh") == b"fresh"
    assert sorted(backend.keys(DS)) == [f"{DS}/k/existing", f"{DS}/k/fresh"]
    assert sorted(os.listdir(mount.path / DS / "k")) == ["existing", "fresh"]
    assert_no_temporaries(backend)


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_python_strings_and_overwrite_mode(mount, fmt):
    """Variable-length strings, and ``mode="w"`` replacing an existing hierarchy."""
    backend = mount.backend
    path = mount.path / DS
    root = zarr.open_group(zarr.storage.LocalStore(path), mode="w", zarr_format=fmt)
    old = root.create_array("old", shape=(3,), dtype="int16", chunks=(3,))
    old[:] = [1, 2, 3]
    assert backend.exists(f"{DS}/old/{'0' if fmt == 2 else 'c/0'}")

    root = zarr.open_group(zarr.storage.LocalStore(path), mode="w", zarr_format=fmt)
    s = root.create_array("s", shape=(5,), chunks=(2,), dtype=str)
    words = np.array(["alpha", "", "ü-ñ", "delta", "e" * 100], dtype=object)
    s[:] = words
    s[1] = "beta"
    words[1] = "beta"
    assert not [k for k in backend.keys(DS) if k.startswith(f"{DS}/old/")]
    for label, st in [("mount", zarr.storage.LocalStore(path, read_only=True))] + backend_zarr_stores(backend, DS):
        g = zarr.open_group(st, mode="r")
        assert list(g.array_keys()) == ["s"], label
        assert list(g["s"][:]) == list(words), label
    chunk = "0" if fmt == 2 else "c/0"
    assert {k for k in backend.keys(f"{DS}/s")} >= {f"{DS}/s/{chunk}"}
    assert_no_temporaries(backend)


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_python_large_chunks_and_shards(mount, fmt):
    """Chunks of several MiB (many FUSE write/read requests each) and, for v3, a sharded
    array: zarr reads the shard index with a suffix range and inner chunks with byte ranges."""
    backend = mount.backend
    root = zarr.open_group(zarr.storage.LocalStore(mount.path / DS), mode="w", zarr_format=fmt)
    big = root.create_array("big", shape=(1024, 1024), chunks=(512, 1024), dtype="float64", compressors=None)
    want = np.arange(1024 * 1024, dtype="float64").reshape(1024, 1024)
    big[...] = want
    big[100:101, :] = -1.0  # partial update inside a 4 MiB chunk
    want[100, :] = -1.0
    raw = backend.read(f"{DS}/big/{_chunk_key(fmt, (0, 0))}")
    assert len(raw) == 512 * 1024 * 8
    np.testing.assert_array_equal(np.frombuffer(raw, "<f8").reshape(512, 1024), want[:512])

    if fmt == 3:
        sh = root.create_array("sh", shape=(64, 64), shards=(32, 64), chunks=(8, 8), dtype="int32", compressors=None)
        sw = np.arange(64 * 64, dtype="int32").reshape(64, 64)
        sh[...] = sw
        sh[9:11, 9:11] = 0  # rewrite a shard
        sw[9:11, 9:11] = 0
        assert sorted(k for k in backend.keys(f"{DS}/sh") if "/c/" in k) == [f"{DS}/sh/c/0/0", f"{DS}/sh/c/1/0"]

    for label, st in [("mount", zarr.storage.LocalStore(mount.path / DS, read_only=True))] + backend_zarr_stores(backend, DS):
        g = zarr.open_group(st, mode="r")
        np.testing.assert_array_equal(g["big"][...], want, err_msg=label)
        np.testing.assert_array_equal(g["big"][500:520, 3], want[500:520, 3], err_msg=label)
        if fmt == 3:
            np.testing.assert_array_equal(g["sh"][8:16, 8:16], sw[8:16, 8:16], err_msg=label)  # one inner chunk
            np.testing.assert_array_equal(g["sh"][...], sw, err_msg=label)
    assert_no_temporaries(backend)


def test_zarr_python_chunk_larger_than_spill_threshold(backend, tmp_path):
    """A 72 MiB chunk: more than nczfs keeps in memory (with 64 MiB of write memory, a file
    moves to a temp file past 64 MiB), written, partially rewritten (read-modify-write of the
    whole object) and read back."""
    with mounted(backend, tmp_path / "mnt", "-o", "write_memory=64M") as mount:
        before = counts(mount.path)
        _write_rewrite_and_read_a_huge_chunk(mount)
        assert delta(before, counts(mount.path)).get("write.spilled-files", 0) >= 1
    text = mount.log_text()
    assert "Traceback" not in text and " ERROR " not in text, text


def _write_rewrite_and_read_a_huge_chunk(mount) -> None:
    backend = mount.backend
    n = 9 * 1024 * 1024
    root = zarr.open_group(zarr.storage.LocalStore(mount.path / DS), mode="w", zarr_format=3)
    a = root.create_array("huge", shape=(n,), chunks=(n,), dtype="float64", compressors=None)
    want = np.arange(n, dtype="float64")
    a[...] = want
    a[n - 5 :] = -1.0
    want[n - 5 :] = -1.0
    got = zarr.open_group(zarr.storage.LocalStore(mount.path / DS, read_only=True), mode="r")["huge"][...]
    np.testing.assert_array_equal(got, want)
    raw = backend.read(f"{DS}/huge/c/0")
    assert len(raw) == n * 8
    np.testing.assert_array_equal(np.frombuffer(raw, "<f8"), want)
    assert_no_temporaries(backend)
