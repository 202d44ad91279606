"""nczfs/toolbox/locks.py (a trio lock taken without a checkpoint when free) and nczfs/fuse/trio_loop.py
(pyfuse3's request loop on a lock handed over only at the end of a pass of trio's run loop, and on
a wait for the device that returns at once when a request is queued), and that the daemon's loop
installs them before pyfuse3.main.
The real mounts' request loop is covered by tests/mount/test_reference_mount.py (a request
answered while another waits on the medium)."""

from __future__ import annotations

import os

import pyfuse3
import pytest
import trio
import trio.testing

from nczfs.daemon import controlsock, mount
from nczfs.config.mountconfig import MountConfig
from nczfs.toolbox.locks import Lock
from nczfs.config.source import Source
from nczfs.fuse.trio_loop import AT_ONCE_IN_A_ROW, WAITS, FuseWaits, ReadLock, install, trio_for_pyfuse3


async def test_a_free_lock_is_taken_without_letting_other_tasks_run():
    ran = []
    lock = Lock()

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(50):  # a trio.Lock checkpoints each time: "other" would run at one of them
            async with lock:
                assert lock.locked()
            assert not lock.locked()
        assert ran == []
    assert ran == ["other"]


async def _waiters_of_a_held_lock(names: list[str], cancel: str | None = None) -> list[str]:
    """Start a task per name, one after another, while a lock is held (each parks in turn);
    cancel the one named ``cancel``; release, then try to take it back at once. Returns the
    order in which the lock was had."""
    lock = Lock()
    got: list[str] = []
    scopes: dict[str, trio.CancelScope] = {}

    async def waiter(name: str) -> None:
        with trio.CancelScope() as scopes[name]:
            async with lock:
                got.append(name)
                await trio.sleep(0.01)  # holds it across a checkpoint

    with trio.fail_after(10):  # a waiter never woken fails here, not at pytest's timeout
        async with trio.open_nursery() as nursery:
            async with lock:
                for name in names:
                    nursery.start_soon(waiter, name)
                    await trio.testing.wait_all_tasks_blocked()
                assert got == []  # all wait while it is held
                if cancel:
                    scopes[cancel].cancel()
                    await trio.testing.wait_all_tasks_blocked()
            async with lock:  # released to the first waiter: this one queues behind them
                got.append("releaser")
    assert not lock.locked()
    return got


async def test_a_held_lock_is_handed_to_its_waiters_in_turn():
    assert await _waiters_of_a_held_lock(["a", "b", "c"]) == ["a", "b", "c", "releaser"]


async def test_a_cancelled_waiter_leaves_the_lock_to_the_next():
    assert await _waiters_of_a_held_lock(["a", "b", "c"], cancel="a") == ["b", "c", "releaser"]


async def test_the_read_lock_taken_back_at_once_by_its_releaser_leaves_its_waiter_parked():
    """pyfuse3's loop: a task lets the lock go, answers its request without waiting and takes
    the lock again; the task waiting for it is not woken to queue again each time."""
    lock = ReadLock()
    got: list[str] = []

    async def waiter() -> None:
        async with lock:
            got.append("waiter")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with lock:
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
            for _ in range(20):
                async with lock:  # taken back before any other task runs
                    await trio.sleep(0)  # held across a pass of the run loop
            assert got == [] and lock.handed_over == 0
        assert got == ["waiter"] and lock.handed_over == 1  # once the releaser stopped taking it


async def test_the_read_lock_goes_to_its_waiter_while_its_releaser_waits_elsewhere():
    """A task that lets the lock go and then waits (a fetch) leaves it to the next task at the
    end of the pass, even when nothing else would wake trio's I/O wait."""
    lock = ReadLock()
    await _hand_over_once(lock)
    assert lock.handed_over == 1 and not lock.locked()


def test_the_read_lock_is_handed_over_in_each_trio_run_it_is_taken_in():
    lock = ReadLock()  # as pyfuse3 keeps its lock from one pyfuse3.main to the next
    for runs in (1, 2):
        trio.run(_hand_over_once, lock)
        assert lock.handed_over == runs


async def _hand_over_once(lock: ReadLock) -> None:
    fetched = trio.Event()

    async def other_request() -> None:
        async with lock:
            fetched.set()  # what the first task waits for comes through the second one

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            async with lock:
                nursery.start_soon(other_request)
                await trio.testing.wait_all_tasks_blocked()
            await fetched.wait()


@pytest.fixture
def restore_pyfuse3_trio():
    before = pyfuse3.trio
    yield
    pyfuse3.trio = before


def test_pyfuse3_runs_on_trio_with_this_lock(restore_pyfuse3_trio):
    install()
    assert pyfuse3.trio.Lock == WAITS.make_lock and isinstance(pyfuse3.trio.Lock(), ReadLock)
    assert WAITS.lock is not None and WAITS.counters()["fuse.read-lock-handovers"] == 0
    assert pyfuse3.trio.lowlevel.wait_readable == WAITS.wait_readable
    shim = trio_for_pyfuse3()
    for name in ("open_nursery", "from_thread", "ClosedResourceError", "to_thread"):
        assert getattr(shim, name) is getattr(trio, name)
    for name in ("current_task", "current_trio_token", "wait_writable", "checkpoint"):
        assert getattr(shim.lowlevel, name) is getattr(trio.lowlevel, name)
    assert trio.Lock is not Lock and trio.lowlevel.wait_readable is not shim.lowlevel.wait_readable  # trio itself is left alone


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


async def test_a_wait_for_a_queued_request_returns_at_once_a_few_times_in_a_row(pipe):
    """With bytes waiting, AT_ONCE_IN_A_ROW waits return without letting another task run; the
    next goes through trio's run loop, then the count starts again."""
    r, w = pipe
    waits = FuseWaits()
    ran = []

    async def other() -> None:
        ran.append(len(ran))

    os.write(w, b"x")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        for _ in range(AT_ONCE_IN_A_ROW):
            await waits.wait_readable(r)
        assert ran == [] and (waits.at_once, waits.waited) == (AT_ONCE_IN_A_ROW, 0)
        await waits.wait_readable(r)  # through trio: "other" runs now or right after (trio's order)
        assert waits.waited == 1
        await trio.testing.wait_all_tasks_blocked()
        assert ran == [0]
        nursery.start_soon(other)
        await waits.wait_readable(r)
        assert ran == [0] and waits.at_once == AT_ONCE_IN_A_ROW + 1
    assert waits.counters() == {"fuse.next-request-waiting": AT_ONCE_IN_A_ROW + 1, "fuse.next-request-waits": 1,
                                "fuse.read-lock-handovers": 0}


async def test_a_wait_with_nothing_queued_waits_in_trio_until_there_is(pipe):
    r, w = pipe
    waits = FuseWaits()

    async def write_later() -> None:
        await trio.testing.wait_all_tasks_blocked()
        os.write(w, b"x")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(write_later)
            await waits.wait_readable(r)
            assert os.read(r, 1) == b"x"
    assert (waits.at_once, waits.waited) == (0, 1)


async def test_a_closed_device_is_left_to_trios_wait(pipe):
    """Hung up with nothing to read (poll: POLLHUP, no POLLIN): trio's wait, which returns
    (pyfuse3's read then sees the end); a descriptor closed under the wait: trio's error."""
    r, w = pipe
    waits = FuseWaits()
    os.close(w)
    with trio.fail_after(10):
        await waits.wait_readable(r)
    assert (waits.at_once, waits.waited) == (0, 1)
    os.close(r)
    with pytest.raises(OSError):
        await waits.wait_readable(r)


async def test_the_daemon_runs_pyfuse3s_loop_on_this_lock(restore_pyfuse3_trio, monkeypatch, tmp_path):
    """mount._serve, the daemon's trio main, with pyfuse3.main replaced by one that notes the
    lock its loop would take (pyfuse3.init is not called: nothing is mounted)."""
    locks = []

    async def main() -> None:
        locks.append(type(pyfuse3.trio.Lock()))

    class Fs:
        async def flush_all(self, retry_failed: bool = True) -> list[str]:
            return []

    monkeypatch.setattr(pyfuse3, "main", main)
    pyfuse3.trio = trio  # as pyfuse3 has it before nczfs touches it
    config = MountConfig(Source("directory", str(tmp_path), text=str(tmp_path)), str(tmp_path), validate="off")
    listener = controlsock.listen(str(tmp_path / "run"))
    try:
        with trio.fail_after(30):
            assert await mount._serve(Fs(), config, lambda error: None, listener=listener) == []
    finally:
        controlsock.close(listener)
    assert locks == [ReadLock]
    assert pyfuse3.trio.lowlevel.wait_readable == WAITS.wait_readable
