"""WrapperStore forwards everything (it passes the conformance suite); FaultyStore fails on demand."""

from __future__ import annotations

import errno
import io

import pytest

from nczfs.toolbox.errors import BackendError, KeyNotFound, NotSupported, to_errno
from nczfs.store.capabilities import Stages
from nczfs.store.values import ABSENT, Meta, Staged
from nczfs.store.memory.store import MemoryStore
from nczfs.store.testing import FaultyStore
from nczfs.store.wrapper import WrapperStore
from nczfs.store.threads import ThreadedStore
from nczfs.store import optional
from nczfs.store.optional import OPTIONAL_PREFIX
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


class Watching(WrapperStore):
    """Records what reaches the write hook; ``whole``: the keys it must see whole."""

    passes = ("stage", "open_upload")

    def __init__(self, inner, whole=()):
        super().__init__(inner)
        self.seen: list[tuple] = []
        self.whole = whole

    def _whole(self, key):
        return key in self.whole

    async def _write(self, op, keys, call, data=None):
        self.seen.append((op, keys, None if data is None else bytes(data)))
        return await call()


class StagingMemory(MemoryStore):
    def stage(self, key: str, data: bytes) -> Staged:
        return Staged(key, lambda if_version=None: self.set(key, data, if_version), lambda: None)


class EveryWrite(MemoryStore):
    """A memory store with every optional write, each refused as the medium would."""

    def mkdir(self, prefix):
        raise NotSupported(prefix)

    rmdir = forget_dir = mkdir

    def link(self, src, dst):
        raise NotSupported(src)

    def truncate(self, key, size, if_version=None):
        raise NotSupported(key)


async def test_every_write_passes_the_hook_with_its_keys_and_what_set_stores():
    s = Watching(ThreadedStore(EveryWrite()))
    await s.set("a", b"1")
    await s.set_file("b", io.BytesIO(b"22"), 2)
    await s.copy("a", "c")
    await s.rename("c", "d")
    await optional.rename_dir(s, "x", "y")
    await s.delete("d")
    for call in (lambda: optional.mkdir(s, "m"), lambda: optional.rmdir(s, "m"), lambda: optional.set_meta(s, "a", Meta(mode=0o100600)),
                 lambda: optional.make_node(s, "n", Meta(mode=0o010644)), lambda: optional.link(s, "a", "l"), lambda: optional.truncate(s, "a", 0)):
        try:
            await call()
        except NotSupported:  # the store below refused: the call still passed the hook
            pass
    with pytest.raises(NotSupported):
        await optional.forget_dir(s, "m")
    assert s.seen == [
        ("set", ("a",), b"1"), ("set_file", ("b",), None), ("copy", ("a", "c"), None), ("rename", ("c", "d"), None),
        ("rename_dir", ("x", "y"), None), ("delete", ("d",), None), ("mkdir", ("m",), None), ("rmdir", ("m",), None),
        ("set_meta", ("a",), None), ("make_node", ("n",), None), ("link", ("a", "l"), None),
        ("truncate", ("a",), None), ("forget_dir", ("m",), None),
    ]


class Given(WrapperStore):
    """Records the keywords each write's hook is told of (``call.given``)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.given: list[tuple] = []

    async def _write(self, op, keys, call, data=None):
        self.given.append((op, dict(call.given)))
        return await call()


async def test_a_writes_version_condition_reaches_the_hook_however_it_is_passed(mem):
    """The forwarded writes bind their arguments as the Store method's signature says: an
    ``if_version`` given by position or by name is the hook's ``given``; None is none."""
    s = Given(ThreadedStore(mem))
    first = await s.set("a", b"1")
    await s.set("a", b"2", first.etag)
    second = await mem_stat(s, "a")
    await s.set("a", b"3", if_version=second)
    await s.copy("a", "b", None)
    moved = await s.rename("b", "c", ABSENT)  # only while "c" is absent
    await s.delete("c")
    assert moved.key == "c" and await s.get("a") == b"3"
    assert s.given == [("set", {}), ("set", {"if_version": first.etag}), ("set", {"if_version": second}),
                       ("copy", {}), ("rename", {"if_version": ABSENT}), ("delete", {})]


@pytest.mark.parametrize("args, kwargs, error", [
    ((), {}, "missing a required argument: 'key'"), (("a",), {}, "missing a required argument: 'data'"),
    (("a", b"", None, 1), {}, "too many positional"), (("a", b""), {"key": "b"}, "multiple values for argument 'key'"),
    (("a", b""), {"bogus": 1}, "unexpected keyword argument 'bogus'")])
async def test_a_forwarded_write_called_wrongly_is_a_type_error(mem, args, kwargs, error):
    """The forwarded writes refuse what ``Store.set``'s signature refuses, as a call of it would."""
    with pytest.raises(TypeError, match=error):
        await WrapperStore(ThreadedStore(mem)).set(*args, **kwargs)
    assert (await WrapperStore(ThreadedStore(mem)).set(data=b"x", key="a")).key == "a"


async def mem_stat(s, key: str) -> str:
    return (await s.stat(key)).etag


def test_the_forwarded_methods_carry_their_names():
    for cls, name in ((WrapperStore, "rename"), (WrapperStore, "stat"), (ThreadedStore, "list_dir")):
        method = getattr(cls, name)
        assert method.__name__ == name and method.__qualname__ == f"{cls.__name__}.{name}" and method.__doc__


async def test_a_key_seen_whole_is_stored_through_set_never_staged():
    below = StagingMemory("staging")
    s = Watching(ThreadedStore(below), whole={"w"})
    assert isinstance(s, Stages)
    await s.set_file("w", io.BytesIO(b"whole"), 5)
    await s.set_file("p", io.BytesIO(b"part"), 4)
    assert s.seen == [("set", ("w",), b"whole"), ("set_file", ("p",), None)]
    assert await s.stage("w", b"x") is None and await s.open_upload("w") is None
    assert await s.stage("p", b"x") is not None
    assert below.get("w") == b"whole" and below.get("p") == b"part"


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


#: the writes a wrapper forwards (the optional ones by the methods that answer them where offered)
WRITES = ("set", "set_file", "delete", "copy", "rename",
          *(OPTIONAL_PREFIX + m for m in ("rename_dir", "mkdir", "rmdir", "forget_dir", "set_meta", "make_node", "link",
                                          "truncate")))


def test_each_wrapper_changes_writes_through_the_hook_but_where_it_sends_other_keys_or_bytes():
    """Issue 35: a wrapper overrides the write hook, not each write. The exceptions store other
    bytes (ValidatingStore.set: the JSON its writer meant; NcFilesStore.copy: a shown file's
    bytes) or need what the hook is not told (PresentingStore.set_meta: is the key a folder)."""
    from nczfs.cache.store import CachingStore
    from nczfs.nczarr.consolidating import ConsolidatingStore
    from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
    from nczfs.nczarr.validating import ValidatingStore
    from nczfs.nczarr.views.presenting import PresentingStore

    expected = {
        FaultyStore: set(), CachingStore: set(), ConsolidatingStore: set(), ValidatingStore: {"set"},
        NcFilesStore: {"copy"},
        PresentingStore: {OPTIONAL_PREFIX + "set_meta"},
    }
    for cls, own in expected.items():
        overridden = {m for m in WRITES if getattr(cls, m) is not getattr(WrapperStore, m)}
        assert overridden == own, cls.__name__


def test_held_bytes_pass_only_wrappers_whose_reads_are_those_below():
    """A cache's held bytes (``HoldsBytes``) reach the layers above through wrappers that read
    what is below, never through one that changes what reads return (a view, the .nc files)."""
    from nczfs.cache import CachingStore
    from nczfs.store.capabilities import HoldsBytes

    class Recoding(WrapperStore):
        async def get_version(self, key, rng, etag):
            return b"recoded"

    cache = CachingStore(ThreadedStore(MemoryStore()))
    assert isinstance(WrapperStore(WrapperStore(cache)), HoldsBytes)
    assert not isinstance(WrapperStore(Recoding(cache)), HoldsBytes)
    assert not isinstance(WrapperStore(ThreadedStore(MemoryStore())), HoldsBytes)
