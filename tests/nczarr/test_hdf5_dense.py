"""Dense attribute storage in the HDF5 writer (nczfs.nczarr.ncfile.hdf5.dense): the lookup3
checksum, version-2 object headers, the fractal heap and the two version-2 B-trees, each read back
through h5py's low-level API (HDF5 2.0) and by Debian's h5dump (HDF5 1.10)."""

from __future__ import annotations

import struct

import h5py
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from h5py import h5, h5a, h5o, h5p

from nczfs.nczarr.ncfile.hdf5 import dense, messages as m, types as t
from nczfs.nczarr.ncfile.hdf5.checksum import lookup3
from nczfs.nczarr.ncfile.hdf5.writer import Attr, Chunk, Dataset, Group, layout
from tests.nczarr.hdf5util import check_file, h5dump, materialize


def _int(name: str, value: int) -> Attr:
    return Attr(name, t.integer(4, True), (), struct.pack("<i", value))


def _file(tmp_path, root: Group, chunks: dict | None = None):
    lay = layout(root)
    path = materialize(lay, chunks or {}, tmp_path / "d.h5")
    return h5py.File(path, "r"), path, lay


def test_lookup3_is_the_checksum_and_name_hash_hdf5_writes(tmp_path):
    assert lookup3(b"") == 0xDEADBEEF  # Jenkins' own vectors (lookup3.c, driver5)
    assert lookup3(b"Four score and seven years ago") == 0x17770551
    assert lookup3(b"Four score and seven years ago", 1) == 0xCD628161
    path = tmp_path / "lib.h5"
    with h5py.File(path, "w", libver="latest", track_order=True) as f:
        for i in range(20):  # past the library's compact storage: dense, as here
            f.attrs[f"attribute{i}"] = i
        root = h5o.get_info(f.id).addr
    raw = path.read_bytes()
    assert raw[root:root + 4] == b"OHDR"
    width = 1 << (raw[root + 5] & 3)
    end = root + 6 + width + int.from_bytes(raw[root + 6:root + 6 + width], "little")
    assert struct.unpack_from("<I", raw, end)[0] == lookup3(raw[root:end])
    leaf = raw.index(b"BTLF\x00\x08")  # the name index: each record's last 4 bytes, its name's hash
    hashes = {struct.unpack_from("<I", raw, leaf + 6 + 17 * i + 13)[0] for i in range(20)}
    assert hashes == {lookup3(f"attribute{i}".encode()) for i in range(20)}


def test_a_large_attribute_moves_its_object_to_a_version_2_header_naming_dense_storage(tmp_path):
    big = Attr("big", t.integer(1, False), (70000,), bytes(range(256)) * 273 + bytes(112))
    a = np.arange(4, dtype="<i2")
    v = Dataset("v", t.integer(2, True), (4,), chunks=(4,), stored=[Chunk((0,), 8, "c")], attrs=[big, _int("n", 1)])
    small = Dataset("s", t.integer(2, True), (4,), attrs=[_int("n", 2)])
    f, path, _ = _file(tmp_path, Group("", attrs=[big], groups=[Group("g", [big])], datasets=[v, small]),
                       {"c": a.tobytes()})
    for obj in (f["/"], f["g"], f["v"]):
        info = h5o.get_info(obj.id)
        assert info.hdr.version == 2 and info.hdr.mesg.present & (1 << dense.ATTRIBUTE_INFO), obj.name
        assert obj.id.get_create_plist().get_attr_creation_order() == h5p.CRT_ORDER_TRACKED | h5p.CRT_ORDER_INDEXED
        assert obj.attrs["big"].tobytes() == big.data
    assert h5o.get_info(f["v"].id).hdr.nmesgs == 5  # dataspace, datatype, fill, layout, attribute info
    assert h5o.get_info(f["s"].id).hdr.version == 1  # the others keep version 1
    assert sorted(f) == ["g", "s", "v"] and np.array_equal(f["v"][...], a) and f["s"].attrs["n"] == 2
    assert check_file(path) == 1
    h5dump(path)


def test_many_attributes_are_indexed_by_name_and_by_creation_order(tmp_path):
    names = [f"a{i}" for i in range(2000)]
    attrs = [Attr("text", t.fixed_string(100 * 1024), (), b"x" * 100 * 1024)] + \
        [_int(n, i) for i, n in enumerate(names)]
    f, path, _ = _file(tmp_path, Group("", datasets=[Dataset("v", t.floating(4), (1,), attrs=attrs)]))
    oid = f["v"].id
    assert h5a.get_num_attrs(oid) == 2001
    assert all(h5a.exists(oid, n.encode()) for n in names)  # found by the hash of the name
    assert not h5a.exists(oid, b"a2000")
    got = np.zeros((), "<i4")
    h5a.open(oid, b"a1234").read(got)
    assert got == 1234
    ordered = ["text", *names]
    for i in (0, 1, 999, 2000):  # by creation order, both ways: the type-9 index
        assert h5a.open(oid, index=i, index_type=h5.INDEX_CRT_ORDER, order=h5.ITER_INC).name.decode() == ordered[i]
        assert h5a.open(oid, index=i, index_type=h5.INDEX_CRT_ORDER, order=h5.ITER_DEC).name.decode() == \
            ordered[-1 - i]
    seen = []
    h5a.iterate(oid, lambda n: seen.append(n.decode()), index_type=h5.INDEX_NAME)
    assert seen == sorted(ordered)
    assert list(f["v"].attrs) == ordered
    size = h5o.get_info(oid).meta_size.attr  # the B-trees' nodes and the heap, as HDF5 counts them
    assert size.index_size == 2 * 38 + (6 + 4 + 2001 * 17) + (6 + 4 + 2001 * 13)
    assert size.heap_size == 146 + 256 * 1024
    h5dump(path)


def test_the_heap_holds_attributes_of_a_mebibyte(tmp_path):
    nums = np.arange(1 << 18, dtype="<f4")
    text = ("é" * (1 << 19)).encode()
    strings = lambda ctx: ctx.heap.add(text, len(text)) + ctx.heap.add(b"ab", 2)  # noqa: E731
    attrs = [Attr("nums", t.floating(4), nums.shape, nums.tobytes()), Attr("text", t.fixed_string(len(text), True),
                                                                           (), text),
             Attr("strings", t.vlen_string(), (2,), strings), _int("n", 3)]
    f, path, _ = _file(tmp_path, Group("", attrs=attrs))
    assert np.array_equal(f.attrs["nums"], nums) and f.attrs["text"].decode() == "é" * (1 << 19)
    assert list(f.attrs["strings"]) == ["é" * (1 << 19), "ab"] and f.attrs["n"] == 3
    assert h5o.get_info(f.id).meta_size.attr.heap_size == 146 + (4 << 20)  # its one direct block
    h5dump(path, "-A")


def test_attributes_beyond_dense_storage_are_left_out_naming_them(tmp_path):
    huge = Attr("huge", t.integer(1, False), (dense.MAX_BLOCK,), bytes(dense.MAX_BLOCK))
    big = Attr("big", t.integer(1, False), (70000,), bytes(70000))
    f, path, lay = _file(tmp_path, Group("", attrs=[_int("n", 1), huge],
                                         datasets=[Dataset("v", t.floating(4), (1,), attrs=[big, huge])]))
    assert [d.split(": ")[0] for d in lay.dropped] == ["/:huge", "/v:huge"]
    assert f"{dense.MAX_BLOCK + 48} bytes" in lay.dropped[0]
    assert list(f.attrs) == ["n"] and h5o.get_info(f.id).hdr.version == 1  # the rest fits version 1
    assert list(f["v"].attrs) == ["big"] and h5o.get_info(f["v"].id).hdr.version == 2
    h5dump(path)


def test_a_version_1_header_refuses_a_message_too_large():
    with pytest.raises(m.TooLarge):
        m.object_header([(m.ATTRIBUTE, bytes(70000))])
    assert dense.fits(dense.MAX_ATTRIBUTES, 1000) and not dense.fits(dense.MAX_ATTRIBUTES + 1, 1000)
    assert not dense.fits(1, dense.MAX_BLOCK)


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_any_names_and_sizes_read_back_by_name_and_order(tmp_path_factory, data):
    """Any attribute names (UTF-8, one letter to many) and sizes, one past 64 KiB: each found by
    its name (the hash index) and in creation order."""
    names = data.draw(st.lists(st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=12),
                               min_size=1, max_size=300, unique=True))
    sizes = data.draw(st.lists(st.integers(0, 3000), min_size=len(names), max_size=len(names)))
    attrs = [Attr(n, t.integer(1, False), (s,), bytes([i % 251]) * s) for i, (n, s) in enumerate(zip(names, sizes))]
    attrs.append(Attr("\u00e9big", t.integer(1, False), (70000,), bytes(70000)))
    f, _, _ = _file(tmp_path_factory.mktemp("any"), Group("", attrs=attrs))
    oid = f["/"].id
    assert [a.decode() for a in (h5a.open(oid, index=i, index_type=h5.INDEX_CRT_ORDER).name
                                 for i in range(len(attrs)))] == [a.name for a in attrs]
    for a in attrs:
        got = np.zeros(a.shape, "u1")
        h5a.open(oid, a.name.encode()).read(got)
        assert got.tobytes() == a.data, a.name
