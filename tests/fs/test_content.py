"""Content (the buffer of a file being written): sequential writes are kept as written and
joined once; any other change works on one bytearray; what getvalue returns is bytes."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from nczfs.fs.content import Content, WriteMemory


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


async def test_files_spill_once_the_mounts_write_memory_is_used_up(tmp_path):
    memory = WriteMemory(10)
    a = Content(dirty=True, spill_dir=str(tmp_path), memory=memory)
    b = Content(dirty=True, spill_dir=str(tmp_path), memory=memory)
    await a.write(0, b"aaaaaa")
    await b.write(0, b"bbb")
    assert memory.used() == 9 and not a.spilled and not b.spilled
    await a.write(1, b"AA")  # no growth: stays in memory
    await b.write(3, b"BB")  # 11 bytes would be held: the growing file goes to a temp file
    assert b.spilled and not a.spilled
    assert memory.used() == 6 and memory.peak == 9 and memory.spills == 1
    assert await a.getvalue() == b"aAAaaa" and await b.getvalue() == b"bbbBB"
    c = Content(dirty=True, spill_dir=str(tmp_path), memory=memory)
    await c.truncate(5)  # growing by a truncate counts too
    assert c.spilled and await c.read(0, 10) == b"\0" * 5
    a.close()
    d = Content(dirty=True, spill_dir=str(tmp_path), memory=memory)
    await d.write(0, b"d" * 10)  # a's bytes are free again
    assert not d.spilled and memory.used() == 10
    del d
    assert memory.used() == 0  # a content dropped without close() no longer counts
    b.close()
    c.close()


async def test_content_loaded_whole_spills_if_the_budget_is_used_up(tmp_path):
    memory = WriteMemory(10)
    a = Content(b"x" * 8, dirty=False, spill_dir=str(tmp_path), memory=memory)
    await a.fit()
    assert not a.spilled and memory.peak == 8
    b = Content(b"y" * 8, dirty=False, spill_dir=str(tmp_path), memory=memory)
    await b.fit()
    assert b.spilled and not a.spilled and memory.used() == 8
    assert await b.getvalue() == b"y" * 8
    c = Content(b"z" * 20, dirty=False, spill_threshold=16, spill_dir=str(tmp_path))
    await c.fit()  # past its own threshold, budget or not
    assert c.spilled and await c.read(15, 10) == b"z" * 5
    for x in (a, b, c):
        x.close()


async def test_operations_wait_for_a_spill_under_way(tmp_path, monkeypatch):
    """A write, read or join arriving while the content moves to its temp file waits for it:
    nothing is lost and nothing sees a half-moved content."""
    from nczfs.fs import content

    release = trio.Event()
    real = content._spill_file

    def slow_spill_file(spill_dir, pieces):
        trio.from_thread.run(release.wait)
        return real(spill_dir, pieces)

    monkeypatch.setattr(content, "_spill_file", slow_spill_file)
    c = Content(dirty=True, spill_threshold=8, spill_dir=str(tmp_path))
    await c.write(0, b"abcdef")
    seen = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(c.write, 6, b"ghij")  # past the threshold: spills, held at the barrier
        await trio.testing.wait_all_tasks_blocked()
        assert not c.spilled and c.in_memory == 6

        async def later_write():
            await c.write(10, b"kl")

        async def reader():
            seen["read"] = await c.read(0, 100)

        nursery.start_soon(later_write)
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert "read" not in seen
        release.set()
    assert c.spilled
    assert await c.getvalue() == b"abcdefghijkl"
    assert seen["read"] in (b"abcdef", b"abcdefghij", b"abcdefghijkl")  # old or new bytes, never a gap
    c.close()


async def test_a_failed_spill_keeps_the_content_in_memory(tmp_path):
    c = Content(dirty=True, spill_threshold=4, spill_dir=str(tmp_path / "missing"))
    await c.write(0, b"abc")
    with pytest.raises(OSError):
        await c.write(3, b"def")  # the temp file cannot be made
    assert not c.spilled and await c.getvalue() == b"abc"


@pytest.mark.parametrize("where", ["pieces", "bytearray", "temp file"])
async def test_a_reader_sees_the_content_as_it_was_when_opened(where, tmp_path):
    """open_reader: what an upload reads part by part. Later writes do not reach it."""
    c = Content(dirty=True, spill_threshold=8 if where == "temp file" else 1 << 20, spill_dir=str(tmp_path))
    for piece in (b"abc", b"", b"defg", b"hij"):
        await c.write(c.size, piece)
    if where == "bytearray":
        await c.write(1, b"B")  # not at the end: one bytearray from now on
    f, size = await c.open_reader()
    want = b"aBcdefghij" if where == "bytearray" else b"abcdefghij"
    assert c.spilled == (where == "temp file")
    if where != "temp file":  # a temp file is the same file: it would show later writes
        await c.write(c.size, b"later")
        await c.write(0, b"X")
    with f:
        assert size == 10 and f.read() == want
        f.seek(2)
        assert f.read(5) == want[2:7] and f.tell() == 7
        f.seek(-2, 2)
        assert f.read(10) == want[-2:] and f.read(1) == b""
    c.close()


def test_a_pieces_reader_reads_any_range_across_pieces():
    import random

    from nczfs.fs.content import PiecesReader

    rnd = random.Random(5)
    pieces = [rnd.randbytes(rnd.randint(0, 50)) for _ in range(30)]
    whole = b"".join(pieces)
    f = PiecesReader(pieces)
    for _ in range(500):
        start, n = rnd.randint(0, len(whole) + 10), rnd.randint(-1, 200)
        assert f.seek(start) == start
        assert f.read(n) == (whole[start:] if n < 0 else whole[start : start + n])
    buf = bytearray(7)
    f.seek(3)
    assert f.readinto(buf) == 7 and bytes(buf) == whole[3:10]
    with pytest.raises(ValueError):
        f.seek(-1)
