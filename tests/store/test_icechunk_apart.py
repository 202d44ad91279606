"""A branch mount's listings and writes at the same time: Icechunk 1.1's ``list_dir`` of a group
takes the session's read lock twice, and a write queued in between deadlocks the session
(every listing, write and commit after it waits forever). :class:`Apart` keeps them apart."""

from __future__ import annotations

import threading
import time

from nczfs.store.icechunk.rwlock import Apart
from nczfs.store.icechunk.store import IcechunkStore
from tests.store.test_icechunk import GROUP, array_meta, commit_elsewhere, local_repo, reopen

#: seconds the listings and writes go on, and how long they may take to stop after that
BUSY, SPARE = 3.0, 20.0


def hammer(jobs, seconds: float) -> tuple[list[int], list[threading.Thread]]:
    """Run each job in a loop in a thread of its own for ``seconds``: how many times each ran,
    and the threads still running ``SPARE`` seconds later (stuck)."""
    stop = time.monotonic() + seconds
    done = [0] * len(jobs)

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            jobs[i]()
            done[i] += 1

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    deadline = stop + SPARE
    for t in threads:
        t.join(timeout=max(0.0, deadline - time.monotonic()))
    return done, [t for t in threads if t.is_alive()]


def test_listings_and_writes_of_a_branch_mount_at_once_all_finish(tmp_path):
    """Before: the session deadlocked within a second or two (py-spy: the listing threads parked
    in tokio inside ``list_dir``, the writes waiting for the session's write lock); the Zarr
    hierarchy state machine through the mount hung the same way."""
    path = tmp_path / "repo"
    local_repo(path)
    commit_elsewhere(path, {"zarr.json": GROUP, "g/zarr.json": GROUP, "g/h/zarr.json": GROUP,
                            "v/zarr.json": array_meta((64,), (1,), "uint8"),
                            **{f"v/c/{i}": bytes([i]) for i in range(64)}})
    store = IcechunkStore(reopen(path), where=str(path))
    listings = [lambda p=p: store.list_dir(p) for p in ("", "g", "", "v/c")] + [lambda: store.list_prefix("g")]
    writes = [lambda n=n: store.set(f"v/c/{(n * 7 + int(time.monotonic() * 1e6)) % 64}", b"w") for n in range(3)]
    done, stuck = hammer(listings + writes, BUSY)
    assert not stuck, f"{len(stuck)} of {len(done)} threads stuck; runs: {done}"
    assert all(done), f"a job never ran: {done}"  # neither kind starved
    store.sync()
    assert store.commits == 1
    store.close()


def test_apart_never_lets_the_two_kinds_overlap_and_starves_neither():
    apart = Apart()
    inside = [0, 0]
    overlaps = []
    lock = threading.Lock()

    def job(kind: int):
        side = apart.listing if kind == Apart.LISTING else apart.writing

        def run() -> None:
            with side():
                with lock:
                    inside[kind] += 1
                    if inside[1 - kind]:
                        overlaps.append(kind)
                time.sleep(0.0005)
                with lock:
                    inside[kind] -= 1
        return run

    done, stuck = hammer([job(0), job(0), job(1), job(1), job(1)], 1.0)
    assert not stuck and not overlaps
    assert min(sum(done[:2]), sum(done[2:])) > sum(done) / 10, done
