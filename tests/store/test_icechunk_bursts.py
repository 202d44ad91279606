"""Reads of an Icechunk tree asked for together from trio go to Icechunk as one call
(:mod:`nczfs.store.icechunk.bursts`), each reader getting its own bytes or its own error."""

from __future__ import annotations

import pytest
import trio

from nczfs.store.icechunk import bursts
from nczfs.store.icechunk.store import IcechunkStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.values import ByteRange
from nczfs.toolbox.errors import KeyNotFound
from tests.store.test_icechunk import GROUP, array_meta, commit_elsewhere, local_repo, reopen

CHUNKS = {f"v/c/{i}": bytes([65 + i]) * (100 + i) for i in range(8)}


@pytest.fixture
async def ice(tmp_path):
    path = tmp_path / "repo"
    local_repo(path)
    commit_elsewhere(path, {"zarr.json": GROUP, "v/zarr.json": array_meta((90,), (10,), "uint8"), **CHUNKS})
    s = ThreadedStore(IcechunkStore(reopen(path), where=str(path)))
    yield s
    await s.close()


def sent(ice) -> tuple[int, int]:
    counts = ice.counters()
    return counts["icechunk.read-bursts"], counts["icechunk.reads-in-bursts"]


async def read_together(ice, asks):
    """Every read of ``asks`` started in one round; each one's bytes or exception, in order."""
    out: list = [None] * len(asks)

    async def one(i, key, rng):
        try:
            out[i] = await ice.get_version(key, rng, None)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[i] = exc

    async with trio.open_nursery() as nursery:
        for i, (key, rng) in enumerate(asks):
            nursery.start_soon(one, i, key, rng)
    return out


async def test_small_reads_asked_for_together_are_sent_as_one_call(ice):
    """Before: each read crossed to the asyncio loop and back alone (a call, a future and two
    wake-ups a read; the daemon's CPU per small chunk, docs/PERFORMANCE.md)."""
    await ice.list_dir("v/c")  # the sizes of the chunks: small
    got = await read_together(ice, [(key, ByteRange(0, 8 << 20)) for key in CHUNKS])
    assert got == list(CHUNKS.values())
    assert sent(ice) == (1, len(CHUNKS))


async def test_each_reader_of_a_burst_gets_its_own_answer_or_error(ice):
    await ice.list_dir("v/c")
    await ice.stat("v/zarr.json")
    whole = await ice.get("v/zarr.json")
    asks = [("v/c/1", ByteRange(1, 4)), ("v/c/8", ByteRange(0, 10)), ("v/c/2", ByteRange(101, 200)),
            ("v/c/3", ByteRange(500, 600)), ("v/zarr.json", ByteRange(5, 1 << 20)), ("v/c/4", ByteRange(103, 104))]
    got = await read_together(ice, asks)
    assert got[0] == b"BBB"
    assert isinstance(got[1], KeyNotFound) and "v/c/8" in str(got[1])  # a chunk not written: no such file
    assert got[2] == b"C"  # the last byte
    assert got[3] == b""  # past the end (Icechunk answers it with the last byte)
    assert got[4] == whole[5:]
    assert got[5] == b"E"
    assert sent(ice) == (1, len(asks) - 1)  # v/c/8, never listed (size unknown), went alone


async def test_what_one_call_for_many_reads_cannot_answer_is_read_alone(ice):
    """Icechunk's get_partial_values answers a missing chunk and a failure alike (None): each
    such read is tried alone, which tells them apart."""
    tree = ice.impl.tree
    got = tree.bridge.run(tree._get_many, [("v/c/0", ByteRange(0, 2)), ("v/c/8", ByteRange(0, 2)),
                                           ("nope/c/0", ByteRange(0, 2)), ("v/c/1", None)])
    assert got[0] == b"AA" and got[3] == CHUNKS["v/c/1"]
    assert isinstance(got[1], KeyNotFound) and isinstance(got[2], KeyNotFound)


async def test_large_objects_and_unknown_sizes_are_read_alone(ice, monkeypatch):
    monkeypatch.setattr(bursts, "BURST_BELOW", 101)
    await ice.list_dir("v/c")  # v/c/0 and v/c/1 are small, the others larger
    got = await read_together(ice, [(key, ByteRange(0, 1000)) for key in CHUNKS])
    assert got == list(CHUNKS.values())
    assert sent(ice) == (1, 2)


async def test_reads_whose_readers_all_left_do_not_hold_up_the_next(ice):
    await ice.list_dir("v/c")
    with trio.move_on_after(0):  # cancelled before the burst is sent
        await read_together(ice, [(key, ByteRange(0, 10)) for key in CHUNKS])
    with trio.fail_after(10):
        assert await read_together(ice, [("v/c/0", ByteRange(0, 3)), ("v/c/7", ByteRange(0, 3))]) == [b"AAA", b"HHH"]


async def test_chunk_directories_list_the_sessions_writes_and_deletes(tmp_path):
    """Chunk directories are listed from the array's chunk coordinates (one call, where Icechunk's
    listing costs a Python future a name): the session's uncommitted chunks are in them, its
    deleted ones not, and a directory of no chunk is empty."""
    path = tmp_path / "repo"
    local_repo(path)
    commit_elsewhere(path, {"zarr.json": GROUP, "m/zarr.json": array_meta((4, 4), (2, 2)),
                            "m/c/0/0": b"a" * 16, "m/c/1/1": b"b" * 16})
    s = ThreadedStore(IcechunkStore(reopen(path), where=str(path)))
    try:
        await s.set("m/c/1/0", b"c" * 16)
        await s.delete("m/c/0/0")
        assert [(e.name, e.is_dir) for e in await s.list_dir("m/c")] == [("1", True)]
        assert [(e.name, e.info.size) for e in await s.list_dir("m/c/1")] == [("0", 16), ("1", 16)]
        assert await s.list_dir("m/c/0") == [] and not await s.dir_exists("m/c/0")
        assert await s.list_dir("m/c/x") == [] and await s.list_dir("m/c/1/1/2") == []
        assert (await s.entry("m/c/1")).is_dir and (await s.entry("m/c/1/0")).info.size == 16
    finally:
        await s.close()


async def test_a_large_chunk_is_handed_on_uncopied_and_get_gives_bytes(tmp_path):
    """Before: every chunk read was copied out of Icechunk's buffer into bytes (8 MiB: 2.3 ms)."""
    path = tmp_path / "repo"
    local_repo(path)
    big = bytes(range(256)) * 8192  # 2 MiB
    commit_elsewhere(path, {"zarr.json": GROUP, "b/zarr.json": array_meta((1 << 19,), (1 << 19,)), "b/c/0": big})
    s = ThreadedStore(IcechunkStore(reopen(path), where=str(path)))
    try:
        view = await s.get_version("b/c/0", ByteRange(0, 8 << 20), None)
        assert isinstance(view, memoryview) and view.readonly and view == big
        assert bytes(await s.get_version("b/c/0", ByteRange(1 << 20, 8 << 20), None)) == big[1 << 20:]
        whole = await s.get("b/c/0")
        assert type(whole) is bytes and whole == big
    finally:
        await s.close()
