"""Content (the buffer of a file being written): sequential writes are kept as written and
joined once; any other change works on one bytearray; what getvalue returns is bytes."""

from __future__ import annotations

import pytest

from nczfs.handles import Content


async def test_one_write_is_handed_on_as_it_came():
    c = Content(dirty=True)
    data = b"x" * 1000
    await c.write(0, data)
    assert await c.getvalue() is data  # no copy of a FUSE write's bytes


async def test_sequential_writes_are_joined_once_per_version():
    c = Content(dirty=True)
    for i in range(5):
        await c.write(i * 3, b"abc")
    v = await c.getvalue()
    assert v == b"abc" * 5 and type(v) is bytes
    assert await c.getvalue() is v
    await c.write(15, b"d")
    assert await c.getvalue() == b"abc" * 5 + b"d"
    assert v == b"abc" * 5


@pytest.mark.parametrize("change, expected", [
    (("write", 1, b"XY"), b"aXYdef"),  # inside
    (("write", 8, b"Z"), b"abcdef\0\0Z"),  # past the end: a hole
    (("truncate", 2), b"ab"),
    (("truncate", 8), b"abcdef\0\0"),
    (("truncate", 0), b""),
])
async def test_other_changes_keep_what_was_handed_out(change, expected):
    c = Content(dirty=True)
    await c.write(0, b"abc")
    await c.write(3, b"def")
    before = await c.getvalue()
    if change[0] == "write":
        await c.write(change[1], change[2])
    else:
        await c.truncate(change[1])
    assert before == b"abcdef"
    after = await c.getvalue()
    assert after == expected and type(after) is bytes and c.size == len(expected)
    await c.write(len(expected), b"!")  # and appending goes on from there
    assert await c.getvalue() == expected + b"!"


async def test_reads_between_appends():
    c = Content(dirty=True)
    out = b""
    for i in range(20):
        piece = bytes([65 + i]) * 7
        await c.write(len(out), piece)
        out += piece
        assert await c.read(max(0, len(out) - 10), 10) == out[-10:]
    assert await c.read(3, 1000) == out[3:]
    assert await c.read(len(out), 5) == b""
    assert await c.getvalue() == out


async def test_spilling_keeps_every_part(tmp_path):
    c = Content(dirty=True, spill_threshold=8, spill_dir=str(tmp_path))
    await c.write(0, b"abc")
    await c.write(3, b"de")
    before = await c.getvalue()
    await c.write(5, b"fghijkl")  # past the threshold: moves to a temp file
    assert c.spilled
    assert before == b"abcde"
    assert await c.getvalue() == b"abcdefghijkl"
    assert await c.read(4, 3) == b"efg"
    c.close()
