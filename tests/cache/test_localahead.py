"""SmallFilesAhead without a kernel: a local directory's small files read ahead in bursts, over
the directory backend in worker threads (worker calls counted by ``ThreadedStore``), time a fake
clock."""

from __future__ import annotations

import threading

import trio

from nczfs.cache.localahead import SmallFilesAhead
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.threads import ThreadedStore
from nczfs.store.values import ByteRange

FILES = 200


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def medium(tmp_path, files: int = FILES) -> DirectoryStore:
    root = tmp_path / "medium"
    (root / "d").mkdir(parents=True)
    for i in range(files):
        (root / "d" / str(i)).write_bytes(b"%06d" % i * 100)
    return DirectoryStore(str(root))


def ahead_of(store: DirectoryStore, **kw) -> tuple[SmallFilesAhead, ThreadedStore]:
    threaded = ThreadedStore(store)
    return SmallFilesAhead(threaded, **kw), threaded


async def read(s: SmallFilesAhead, key: str) -> bytes:
    """What a FUSE lookup, then a read of the whole file, gets."""
    e = await s.entry(key)
    assert e is not None and e.info is not None
    return await s.get_version(key, ByteRange(0, 4096 + e.info.size), e.info.etag)


async def test_a_walk_of_small_files_costs_a_worker_call_per_burst_not_two_per_file(tmp_path):
    s, threaded = ahead_of(medium(tmp_path), clock=Clock())  # (what is held never expires here)
    for i in range(FILES):  # natural order: 0, 1, 2, ... (the order zarr reads chunks in)
        assert await read(s, f"d/{i}") == b"%06d" % i * 100
        while s.listing:  # the second file's read lists the directory (a reader keeps reading meanwhile)
            await trio.sleep(0.001)
    # without reading ahead: a lookup and a read each (400 worker calls); here 2 files, the
    # listing, and a burst every 32 files
    assert threaded.worker_calls == 2 * 2 + 1 + s.stats["ahead.bursts"] <= 12, (threaded.worker_calls, s.stats)
    assert s.stats["ahead.reads"] == s.stats["ahead.lookups"] == FILES - 2, s.stats
    assert s.held_bytes <= s.budget and not s.pending


async def test_what_is_read_ahead_stays_within_its_budget(tmp_path):
    s, threaded = ahead_of(medium(tmp_path), budget=10 * 600)
    peak = 0
    for i in range(FILES):
        assert await read(s, f"d/{i}") == b"%06d" % i * 100
        peak = max(peak, s.held_bytes + s.pending_bytes)
    assert peak <= 10 * 600 and s.stats["ahead.reads"] > 0


async def test_a_change_through_the_mount_is_read_back_never_what_was_read_ahead(tmp_path):
    store = medium(tmp_path)
    s, _ = ahead_of(store)
    for i in range(20):
        await read(s, f"d/{i}")
    while s.listing or s.pending:  # the listing, then the burst, run beside the reader
        await trio.sleep(0.001)
    assert "d/30" in s.held  # read ahead
    await s.set("d/30", b"new")
    assert await read(s, "d/30") == b"new"
    await s.rename("d/31", "d/32")
    assert await s.entry("d/31") is None and await read(s, "d/32") == b"%06d" % 31 * 100
    await s.delete("d/33")
    assert await s.entry("d/33") is None
    await s.truncate("d/34", 2)
    assert await read(s, "d/34") == b"00"


async def test_a_change_behind_the_mounts_back_reads_as_read_ahead_until_fresh_ends(tmp_path):
    store, clock = medium(tmp_path), Clock()
    s, _ = ahead_of(store, fresh=5.0, clock=clock)
    for i in range(20):
        await read(s, f"d/{i}")
    while s.listing or s.pending:  # the burst, beside the reader, reads d/30 and d/31 at time 0
        await trio.sleep(0.001)
    assert "d/30" in s.held and "d/31" in s.held
    (tmp_path / "medium" / "d" / "30").write_bytes(b"changed behind")
    clock.now = 4.9
    assert await read(s, "d/30") == b"%06d" % 30 * 100  # the version its burst read
    (tmp_path / "medium" / "d" / "31").write_bytes(b"changed behind")
    clock.now = 5.1  # what was read ahead is no longer trusted
    assert await read(s, "d/31") == b"changed behind"


async def test_a_burst_read_across_a_change_through_the_mount_is_not_kept(tmp_path):
    class Slow(DirectoryStore):
        started, go = threading.Event(), threading.Event()

        def read_small(self, keys, limit):
            got = super().read_small(keys, limit)
            self.started.set()
            self.go.wait(10)
            return got

    root = medium(tmp_path).root
    s, _ = ahead_of(Slow(root))
    await read(s, "d/0")
    await read(s, "d/1")  # a second file: the directory is listed, then a burst starts
    with trio.fail_after(10):
        while not Slow.started.is_set():
            await trio.sleep(0.01)
    await s.set("d/5", b"new")  # while the burst that read the old d/5 is out
    Slow.go.set()
    assert await read(s, "d/5") == b"new"
    assert not s.held and s.stats["ahead.files"] == 0


async def test_files_over_the_size_limit_are_looked_up_but_not_read_ahead(tmp_path):
    s, threaded = ahead_of(medium(tmp_path), size=100)  # every file is 600 bytes
    for i in range(40):
        assert await read(s, f"d/{i}") == b"%06d" % i * 100
    assert s.stats["ahead.reads"] == 0 and threaded.worker_calls >= 80


async def test_reads_match_every_change_made_through_the_mount_in_a_random_walk(tmp_path):
    """Walks over a directory's files (bursts read ahead) mixed at random with writes, renames,
    removals and truncations through the wrapper: every read is the file as last changed."""
    import random

    store = medium(tmp_path, 120)
    s, _ = ahead_of(store, count=16, clock=Clock())
    model = {f"d/{i}": b"%06d" % i * 100 for i in range(120)}
    rng = random.Random(46)
    at = 0
    for step in range(1500):
        key = f"d/{rng.randrange(120)}"
        op = rng.random()
        if op < 0.75:  # the walk goes on (it starts again now and then)
            at = 0 if rng.random() < 0.01 else (at + 1) % 120
            key = f"d/{at}"
            e = await s.entry(key)
            assert (e is None) == (key not in model), (step, key)
            if e is not None and e.info is not None:
                assert await s.get_version(key, ByteRange(0, e.info.size + 4096), e.info.etag) == model[key], (step, key)
        elif op < 0.85:
            model[key] = b"w%d" % step * rng.randrange(1, 300)
            await s.set(key, model[key])
        elif op < 0.9 and key in model:
            other = f"d/{rng.randrange(120)}"
            if other != key:
                await s.rename(key, other)
                model[other] = model.pop(key)
        elif op < 0.95 and key in model:
            await s.delete(key)
            del model[key]
        elif key in model:
            size = rng.randrange(0, 700)
            await s.truncate(key, size)
            model[key] = model[key][:size].ljust(size, b"\0")
    assert s.stats["ahead.reads"] > 100, s.stats


async def test_a_name_made_behind_the_mount_during_a_walk_lists_the_directory_again(tmp_path):
    """The directory's order is listed again when the walk reads a name it lacks, once it is
    older than ``fresh`` (the names after it are then read ahead too), not at every ``fresh``."""
    store, clock = medium(tmp_path), Clock()
    s, threaded = ahead_of(store, clock=clock)
    more = FILES + 60
    for i in range(more):
        clock.now = i * 0.05  # 13 s in all
        if i == 100:  # files made behind the mount, past the end of the walk so far
            for j in range(FILES, more):
                (tmp_path / "medium" / "d" / str(j)).write_bytes(b"%06d" % j * 100)
        assert await read(s, f"d/{i}") == b"%06d" % i * 100
        while s.listing:
            await trio.sleep(0.001)
    assert s.stats["ahead.listings"] == 2, s.stats
    assert s.stats["ahead.reads"] == more - 3, s.stats  # the first two, and the first new name
    assert threaded.worker_calls <= more // 20 + 4, threaded.worker_calls


async def test_reads_far_apart_list_nothing_and_read_nothing_ahead(tmp_path):
    """A reader picking files here and there (not a walk) costs what it did: a lookup and a read."""
    s, threaded = ahead_of(medium(tmp_path), clock=Clock())
    for i in (0, 100, 20, 150, 80, 199, 10):  # each at least 65 names from the last
        assert await read(s, f"d/{i}") == b"%06d" % i * 100
    assert threaded.worker_calls == 14 and not s.stats and not s.listing
