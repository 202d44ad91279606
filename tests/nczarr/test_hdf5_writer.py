"""The HDF5 writer (nczfs.nczarr.ncfile.hdf5): each structure it emits, read back by h5py (HDF5 2.0,
its low-level API for the chunk index) and by Debian's h5dump (HDF5 1.10)."""

from __future__ import annotations

import struct
import zlib

import h5py
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nczfs.nczarr.ncfile.hdf5 import messages as m, types as t
from nczfs.nczarr.ncfile.hdf5.writer import Attr, Chunk, Dataset, Group, layout
from tests.nczarr.hdf5util import h5dump, materialize


def _chunked(name: str, a: np.ndarray, chunks: tuple[int, ...], encode=lambda b: b, skip=(), **kw) -> tuple[Dataset, dict]:
    """A chunked dataset of ``a`` (full-size edge chunks), its chunks ``encode``d, ``skip`` missing."""
    grid = [-(-s // c) for s, c in zip(a.shape, chunks)]
    stored, data = [], {}
    for idx in np.ndindex(*grid):
        if idx in skip:
            continue
        block = np.zeros(chunks, a.dtype)
        part = a[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))]
        block[tuple(slice(0, s) for s in part.shape)] = part
        raw = encode(block.tobytes())
        stored.append(Chunk(idx, len(raw), (name, idx)))
        data[(name, idx)] = raw
    dtype = t.floating(a.itemsize, a.dtype.byteorder == ">") if a.dtype.kind == "f" else \
        t.integer(a.itemsize, a.dtype.kind == "i", a.dtype.byteorder == ">")
    return Dataset(name, dtype, a.shape, chunks=chunks, stored=stored, **kw), data


def _file(tmp_path, root: Group, chunks: dict):
    path = materialize(layout(root), chunks, tmp_path / "t.h5")
    return h5py.File(path, "r"), path


@pytest.mark.parametrize("dt", ["<i1", "<u1", ">i2", "<u2", "<i4", ">u4", "<i8", "<u8", "<f4", ">f4", "<f8", ">f8"])
def test_datatypes_read_back(tmp_path, dt):
    a = (np.arange(30) - 7).astype(dt).reshape(5, 6)
    ds, data = _chunked("v", a, (2, 4))
    f, path = _file(tmp_path, Group("", datasets=[ds]), data)
    assert f["v"].dtype == np.dtype(dt)
    np.testing.assert_array_equal(f["v"][...], a)
    h5dump(path)


def test_chunk_index_many_levels(tmp_path):
    """5000 chunks: a B-tree of three levels (64 children a node); missing chunks read as fill."""
    a = np.arange(10000, dtype="<i4")
    missing = {(3,), (64,), (4095,), (4999,)}
    ds, data = _chunked("v", a, (2,), skip=missing, fill=struct.pack("<i", -9))
    f, path = _file(tmp_path, Group("", datasets=[ds]), data)
    expect = a.copy()
    for (i,) in missing:
        expect[2 * i:2 * i + 2] = -9
    np.testing.assert_array_equal(f["v"][...], expect)
    dsid = f["v"].id
    assert dsid.get_num_chunks() == 5000 - len(missing)
    info = dsid.get_chunk_info_by_coord((8,))
    assert info.chunk_offset == (8,) and info.filter_mask == 0 and info.size == 8
    mask, raw = dsid.read_direct_chunk((8,))
    assert mask == 0 and raw == data[("v", (4,))]
    assert dsid.get_chunk_info_by_coord((6,)).byte_offset is None
    h5dump(path, "-H")


def test_deflate_and_shuffle_chunks_as_given(tmp_path):
    a = np.linspace(0, 1, 21 * 13).reshape(21, 13)

    def shuffle_zlib(raw: bytes) -> bytes:
        return zlib.compress(np.frombuffer(raw, "u1").reshape(-1, 8).T.tobytes())

    ds, data = _chunked("v", a, (8, 5), shuffle_zlib, filters=[(m.SHUFFLE, [8]), (m.DEFLATE, [1])])
    ds2, data2 = _chunked("w", a, (21, 13), zlib.compress, filters=[(m.DEFLATE, [6])])
    f, path = _file(tmp_path, Group("", datasets=[ds, ds2]), {**data, **data2})
    np.testing.assert_array_equal(f["v"][...], a)
    np.testing.assert_array_equal(f["w"][...], a)
    assert f["v"].shuffle and f["v"].compression == "gzip" and f["v"].chunks == (8, 5)
    info = f["v"].id.get_chunk_info(0)
    assert f["v"].id.read_direct_chunk(info.chunk_offset)[1] == data[("v", (0, 0))]
    h5dump(path)


def test_unlimited_scalar_and_contiguous(tmp_path):
    a = np.arange(7, dtype=">i2")
    grow, data = _chunked("grow", a, (3,), maxshape=(t.UNLIMITED,))
    scalar = Dataset("s", t.floating(8), (), stored=[Chunk((), 8, "s")])
    empty = Dataset("e", t.integer(4, True), (3,), fill=struct.pack("<i", 5))
    nothing = Dataset("n", t.floating(4), (4,), maxshape=(t.UNLIMITED,), chunks=(4,))
    data["s"] = struct.pack("<d", 2.5)
    f, path = _file(tmp_path, Group("", datasets=[grow, scalar, empty, nothing]), data)
    assert f["grow"].maxshape == (None,)
    np.testing.assert_array_equal(f["grow"][...], a)
    assert f["s"][()] == 2.5 and f["s"].shape == ()
    np.testing.assert_array_equal(f["e"][...], [5, 5, 5])
    np.testing.assert_array_equal(f["n"][...], [0, 0, 0, 0])
    h5dump(path)


def test_groups_nested_many_and_empty(tmp_path):
    members = [Dataset(f"v{i:02d}", t.integer(1, False), (2,), fill=bytes([i])) for i in range(20)]
    inner = Group("inner", groups=[Group("empty")], datasets=[Dataset("x", t.floating(4), (1,))])
    root = Group("", groups=[inner, Group("b")], datasets=members)
    f, path = _file(tmp_path, root, {})
    assert sorted(f) == sorted(["inner", "b", *(f"v{i:02d}" for i in range(20))])
    assert list(f["inner"]) == ["empty", "x"] and list(f["inner/empty"]) == []
    assert f["v13"][0] == 13
    h5dump(path)


def test_attributes_of_every_kind(tmp_path):
    attrs = [
        Attr("int", t.integer(4, True), (3,), struct.pack("<3i", 1, -2, 3)),
        Attr("dbl", t.floating(8), (), struct.pack("<d", 0.5)),
        Attr("text", t.fixed_string(5, utf8=True), (), "héll".encode()),
        Attr("empty", t.fixed_string(1), None, b""),
        Attr("strings", t.vlen_string(), (2,), lambda ctx: ctx.heap.add(b"ab", 2) + ctx.heap.add("é".encode(), 2)),
    ]
    f, path = _file(tmp_path, Group("", attrs=attrs), {})
    got = f.attrs
    assert list(got["int"]) == [1, -2, 3] and got["dbl"] == 0.5
    assert got["text"].decode() == "héll"
    assert got.get_id("empty").shape is None
    assert list(got["strings"]) == ["ab", "é"]
    h5dump(path)


def test_references_and_compound(tmp_path):
    """A vlen sequence of object references (DIMENSION_LIST's type) and a compound of a
    reference and an int (REFERENCE_LIST's), resolved to the objects' addresses."""
    ref, vref = t.reference(), t.vlen_sequence(t.reference())
    comp = t.compound([("dataset", 0, ref), ("dimension", 8, t.integer(4, True))], 16)
    x = Dataset("x", t.floating(4), (3,), attrs=[
        Attr("REFERENCE_LIST", comp, (1,), lambda ctx: struct.pack("<QI4x", ctx.ref("/g/v"), 0))])
    v = Dataset("v", t.floating(4), (3,), attrs=[
        Attr("DIMENSION_LIST", vref, (1,), lambda ctx: ctx.heap.add(struct.pack("<Q", ctx.ref("/x")), 1))])
    lay = layout(Group("", groups=[Group("g", datasets=[v])], datasets=[x]))
    f = h5py.File(materialize(lay, {}, tmp_path / "r.h5"), "r")
    (target,) = f["g/v"].attrs["DIMENSION_LIST"][0]
    assert f[target].name == "/x"
    back = f["x"].attrs["REFERENCE_LIST"][0]
    assert f[back["dataset"]].name == "/g/v" and back["dimension"] == 0
    assert lay.headers["/x"] == h5py.h5o.get_info(f["x"].id).addr
    h5dump(tmp_path / "r.h5")


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_chunk_grid_reads_back(tmp_path_factory, data):
    """Arrays of 1 to 3 axes, any chunk shape (grids past one B-tree node: two levels), chunks
    missing at random: h5py reads every element, fill where a chunk is missing."""
    rank = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.lists(st.integers(1, 40), min_size=rank, max_size=rank)))
    chunks = tuple(data.draw(st.integers(1, s)) for s in shape)
    dt = data.draw(st.sampled_from(["<i2", ">i4", "<f8", ">f4"]))
    a = np.arange(int(np.prod(shape))).astype(dt).reshape(shape)
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    cells = list(np.ndindex(*grid))
    skip = set(data.draw(st.lists(st.sampled_from(cells), max_size=len(cells) // 2)))
    ds, chunk_data = _chunked("v", a, chunks, zlib.compress, skip=skip, filters=[(m.DEFLATE, [1])],
                              fill=np.asarray(7, dt).tobytes())
    tmp = tmp_path_factory.mktemp("grid")
    f, _ = _file(tmp, Group("", datasets=[ds]), chunk_data)
    want = a.copy()
    for idx in skip:
        want[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, chunks))] = 7
    np.testing.assert_array_equal(f["v"][...], want)
    assert f["v"].id.get_num_chunks() == len(cells) - len(skip)
    f.close()


def test_chunk_index_of_two_axes_over_three_levels(tmp_path):
    """70 x 70 chunks of one element: 4900 keys ordered over both axes in three levels."""
    a = np.arange(70 * 70, dtype="<i2").reshape(70, 70)
    ds, data = _chunked("v", a, (1, 1), skip={(0, 69), (69, 0), (35, 35)})
    f, path = _file(tmp_path, Group("", datasets=[ds]), data)
    want = a.copy()
    want[0, 69] = want[69, 0] = want[35, 35] = 0
    np.testing.assert_array_equal(f["v"][...], want)
    assert f["v"].id.get_chunk_info_by_coord((35, 36)).size == 2
    h5dump(path, "-H")
