"""WrapperStore forwards everything (it passes the conformance suite); FaultyStore fails on demand."""

from __future__ import annotations

import errno

import pytest

from nczfs.errors import BackendError, KeyNotFound, to_errno
from nczfs.store.memory import MemoryStore
from nczfs.store.wrapper import FaultyStore, WrapperStore
from nczfs.threads import ThreadedStore
from tests.store import test_memory


class TestWrapperConformance(test_memory.TestMemoryStore):
    uploads_in_parts = False  # offered only by a wrapper that says so (it would bypass set)
    lists_trees = False  # likewise: a wrapper may change what listings show

    @pytest.fixture
    async def store(self, sync_store):
        s = WrapperStore(ThreadedStore(sync_store))
        yield s
        await s.close()


class TestFaultyStoreConformance(test_memory.TestMemoryStore):
    """Disarmed, a FaultyStore is transparent."""

    @pytest.fixture
    async def store(self, sync_store):
        s = FaultyStore(ThreadedStore(sync_store))
        yield s
        await s.close()


@pytest.fixture
def mem() -> MemoryStore:
    return MemoryStore("faulty")


async def test_fail_before_leaves_the_medium_alone(mem):
    s = FaultyStore(ThreadedStore(mem))
    s.fail("set", key="k")
    with pytest.raises(BackendError) as info:
        await s.set("k", b"v")
    assert to_errno(info.value) == errno.EIO
    with pytest.raises(KeyNotFound):
        mem.get("k")
    await s.set("other", b"o")  # other keys are not affected
    assert mem.get("other") == b"o"


async def test_fail_times_and_heal(mem):
    s = FaultyStore(ThreadedStore(mem))
    s.fail("get", times=2)
    mem.set("k", b"v")
    for _ in range(2):
        with pytest.raises(BackendError):
            await s.get("k")
    assert await s.get("k") == b"v"
    s.fail("get")
    s.fail("stat")
    s.heal("get")
    assert await s.get("k") == b"v"
    with pytest.raises(BackendError):
        await s.stat("k")
    s.heal()
    assert (await s.stat("k")).size == 1
    assert s.calls["get"] == 4 and s.calls["stat"] == 2


async def test_fail_after_changes_the_medium(mem):
    s = FaultyStore(ThreadedStore(mem))
    s.fail("set", after=True, times=1)
    with pytest.raises(BackendError):
        await s.set("k", b"stored anyway")
    assert mem.get("k") == b"stored anyway"


async def test_custom_exception_and_key_predicate(mem):
    s = FaultyStore(ThreadedStore(mem))
    s.fail("list_dir", OSError(errno.ETIMEDOUT, "timed out"), key=lambda p: p.startswith("slow"))
    with pytest.raises(OSError) as info:
        await s.list_dir("slow/x")
    assert to_errno(info.value) == errno.ETIMEDOUT
    assert await s.list_dir("fast") == []
    with pytest.raises(ValueError):
        s.fail("no_such_op")


async def test_latency(mem):
    s = FaultyStore(ThreadedStore(mem), latency=0.001)
    await s.set("k", b"v")
    assert await s.get("k") == b"v"
