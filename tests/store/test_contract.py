"""The store contract is narrow (issue 47): the ABCs hold the dozen operations every backend has;
each optional one is a Protocol a store implements or not, asked with ``isinstance`` (through
:mod:`nczfs.store.optional`), which answers for a store without it what the medium would.

Which backend has which Protocol: the table in ``tests/store/offers.py``, asked here of each
backend and of every wrapper over it, and by each backend's conformance class of the stacks it
runs over a real medium
(``ReadConformance.test_the_optional_operations_are_the_backends_through_every_layer``).
"""

from __future__ import annotations

import errno
from dataclasses import FrozenInstanceError, replace
import inspect
import re
from pathlib import Path

import pytest

from nczfs.toolbox.errors import InvalidKey, NczfsError, to_errno
from nczfs.store import optional
from nczfs.store.base import Store, SyncStore
from nczfs.store.capabilities import HOOKS, Capabilities
from nczfs.store.memory.store import MemoryStore
from nczfs.store.optional import OPTIONAL, ReportsProblems
from nczfs.store.threads import ThreadedStore
from nczfs.store.values import ByteRange, DirEntry, Meta, ObjectInfo
from nczfs.store.wrapper import WrapperStore
from tests.store.offers import OFFERS, assert_each_layer_offers

#: the operations every store has: get, versioned get, entry/stat, set, set from a file, delete,
#: list a directory, list a tree, copy, rename, sync, close
DOZEN = {"get", "get_version", "stat", "entry", "set", "set_file", "delete", "list_dir", "list_prefix", "copy",
         "rename", "sync", "close"}

NCZFS = Path(__file__).resolve().parents[2] / "nczfs"


def _operations(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if not name.startswith("_") and inspect.isfunction(value)}


@pytest.mark.parametrize("abc", [SyncStore, Store])
def test_the_abcs_declare_the_dozen_operations_and_nothing_else(abc):
    assert _operations(abc) == DOZEN
    assert abc.__abstractmethods__ <= DOZEN | {"capabilities"}  # the async face's: the one record, from below
    optional_names = {m for _, methods in OPTIONAL.values() for m in methods}
    assert not optional_names & DOZEN and not any(hasattr(abc, m) for m in optional_names)


def test_each_optional_group_is_a_checkable_protocol_in_both_forms():
    for protocol, (blocking, methods) in OPTIONAL.items():
        for form in (protocol, blocking):
            assert getattr(form, "_is_runtime_protocol", False), form.__name__
            assert set(methods) <= set(dir(form)), form.__name__
            if form is blocking and form is not protocol:  # the blocking form's methods do not await
                assert not any(inspect.iscoroutinefunction(getattr(form, m)) for m in methods), form.__name__


class OnlyTheDozen(SyncStore):
    """A backend with nothing but the operations every store must have."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.objects[key] if rng is None else rng.slice(self.objects[key])

    def stat(self, key: str) -> ObjectInfo:
        if key not in self.objects:
            from nczfs.toolbox.errors import KeyNotFound
            raise KeyNotFound(key)
        return ObjectInfo(key, len(self.objects[key]), 0, str(hash(self.objects[key])))

    def set(self, key, data, if_version=None) -> ObjectInfo:
        self.objects[key] = bytes(data)
        return self.stat(key)

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def list_dir(self, prefix: str) -> list[DirEntry]:
        start = prefix + "/" if prefix else ""
        names = {k[len(start):].split("/")[0]: "/" in k[len(start):] for k in self.objects if k.startswith(start)}
        return [DirEntry(n, d, None if d else self.stat(start + n)) for n, d in sorted(names.items())]


async def _errno_of(call) -> int | None:
    try:
        await call
    except NczfsError as exc:
        return to_errno(exc)
    return None


async def test_a_store_without_an_optional_operation_answers_as_its_medium_would():
    """What the ABCs' defaults answered before the Protocols: ENOTSUP where the medium cannot,
    EINVAL for a symlink it cannot hold, nothing to do for the hooks that only tell."""
    backend = OnlyTheDozen()
    for store in (ThreadedStore(backend), WrapperStore(ThreadedStore(backend))):
        await store.set("d/a", b"xy")
        assert not any(isinstance(store, p) for p in OPTIONAL if p is not optional.Counts)
        assert await _errno_of(optional.set_meta(store, "d/a", Meta(mode=0o100600))) == errno.ENOTSUP
        assert await _errno_of(optional.make_node(store, "d/f", Meta(mode=0o010644))) == errno.ENOTSUP
        assert await _errno_of(optional.readlink(store, "d/a")) == errno.EINVAL
        assert await _errno_of(optional.link(store, "d/a", "d/b")) == errno.ENOTSUP
        assert await _errno_of(optional.truncate(store, "d/a", 1)) == errno.ENOTSUP
        assert await _errno_of(optional.mkdir(store, "e")) == errno.ENOTSUP
        assert await _errno_of(optional.rmdir(store, "d")) == errno.ENOTSUP
        assert await optional.statfs(store) is None
        await optional.forget_dir(store, "gone")
        await optional.refresh(store, "d/a")
        optional.write_meta(store, "d/a", Meta(mode=0o100600))
        optional.check_new_key(store, "/".join(["n" * 200] * 6))  # no bound of its own (S3's: 1,024 bytes)
        with pytest.raises(InvalidKey):
            optional.check_new_key(store, "d//a")
        assert optional.describe(store) == type(store).__name__
        assert optional.problems(backend) == []
        assert await optional.dir_exists(store, "d") and not await optional.dir_exists(store, "d/a")
        await optional.rename_dir(store, "d", "m")  # key by key
        assert await store.list_prefix("") == ["m/a"] and backend.objects == {"m/a": b"xy"}
        await store.delete("m/a")
    assert optional.counters(WrapperStore(ThreadedStore(backend))) == {}


async def test_a_wrapper_offers_an_optional_operation_exactly_where_the_store_below_does():
    memory = MemoryStore()  # attributes, symlinks; no links, no truncate
    over = WrapperStore(WrapperStore(ThreadedStore(memory)))
    for protocol, (blocking, _) in OPTIONAL.items():
        below = isinstance(memory, blocking) or protocol is optional.Counts  # ThreadedStore counts its own
        assert isinstance(over, protocol) is below, protocol.__name__
    made = await optional.make_node(over, "l", Meta(mode=0o120777), "t")
    assert made.key == "l" and await optional.readlink(over, "l") == "t"
    assert await _errno_of(optional.link(over, "l", "m")) == errno.ENOTSUP
    assert not isinstance(ThreadedStore(memory), ReportsProblems)  # asked of the sync store only


def _wrappers() -> dict[str, object]:
    from nczfs.cache.store import CachingStore
    from nczfs.nczarr.consolidating import ConsolidatingStore
    from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
    from nczfs.nczarr.validating import ValidatingStore
    from nczfs.nczarr.views.presenting import PresentingStore
    from nczfs.store.testing import FaultyStore
    return {"WrapperStore": WrapperStore, "FaultyStore": FaultyStore, "CachingStore": CachingStore,
            "ValidatingStore": ValidatingStore, "ConsolidatingStore": ConsolidatingStore,
            "PresentingStore": lambda s: PresentingStore(s, "xarray"), "NcFilesStore": NcFilesStore,
            "mount stack": lambda s: ValidatingStore(ConsolidatingStore(CachingStore(s)))}


@pytest.mark.parametrize("backend", OFFERS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("wrap", list(_wrappers().values()), ids=list(_wrappers()))
def test_every_wrapper_over_every_backend_has_the_optional_operations_the_backend_has(backend, wrap):
    """The table: each backend class has the blocking form of its row's Protocols and no other;
    each layer over it (ThreadedStore, then the wrapper, or the mount's stack) has their async
    forms, and those it answers itself. What a store offers is its class's methods, so the
    backend here is one never opened (no medium is needed to ask it)."""
    row = OFFERS[backend]
    for protocol, (blocking, _) in OPTIONAL.items():
        assert issubclass(backend, blocking) is (protocol in row), protocol.__name__
    assert issubclass(backend, ReportsProblems) is (ReportsProblems in row)
    assert_each_layer_offers(wrap(ThreadedStore(object.__new__(backend), max_threads=1)), row)


#: where a ``hasattr``/``getattr`` may name a store's member: the machinery that forwards them
#: (a capability flag, a method made from its name, a method offered in place of another)
MACHINERY = {
    "store/forwarding.py": 4,  # in_thread, awaited, at_once, through_write: the method NAME below
    "store/capabilities.py": 3,  # offer_hooks, _answers_itself, offer
}
_ON_A_STORE = re.compile(r"\b(?:has|get)attr\(\s*(?:type\()?(?:self\.)?(?:store|inner|below|impl|backend|sync_store)\b")


def test_no_caller_asks_a_store_for_an_operation_by_its_name():
    """Callers ask with isinstance (through :mod:`nczfs.store.optional`), never hasattr/getattr."""
    found: dict[str, int] = {}
    for path in NCZFS.rglob("*.py"):
        n = len(_ON_A_STORE.findall(path.read_text()))
        if n:
            found[str(path.relative_to(NCZFS))] = n
    assert found == MACHINERY


def test_the_hooks_and_the_optional_operations_do_not_share_a_name():
    hooks = {m for methods in HOOKS.values() for m in methods}
    assert not hooks & {m for _, methods in OPTIONAL.values() for m in methods}


@pytest.mark.parametrize("backend", OFFERS, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("wrap", list(_wrappers().values()), ids=list(_wrappers()))
def test_every_wrapper_over_every_backend_answers_the_backends_capabilities(backend, wrap):
    """One frozen record a store: each layer over a backend answers the very record the store
    below holds, one its options or a probe set included (here: read-only, 3 slots)."""
    store = object.__new__(backend)
    assert isinstance(backend.capabilities, Capabilities)
    store.capabilities = replace(backend.capabilities, read_only=True, max_concurrency=3)
    assert store.capabilities != backend.capabilities
    top = wrap(ThreadedStore(store))
    assert top.capabilities is store.capabilities
    with pytest.raises(FrozenInstanceError):
        top.capabilities.checks_writes = True  # type: ignore[misc]


def test_a_stores_options_set_its_capabilities_and_not_its_classs():
    assert MemoryStore(read_only=True).capabilities.read_only and not MemoryStore().capabilities.read_only
    assert not MemoryStore.capabilities.read_only
