"""Stores against a reference model: a dict of objects (plus, for a directory tree, its directories).

Keys come from a tiny alphabet with 1-3 segments so that the same names keep coming back as
objects, as directories and as both: a key cannot be an object and the prefix of another
object at once, and the stores must say so (NotADirectory / IsADirectory) without changing
anything. The sync API is driven directly; ThreadedStore adds nothing but threads.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from nczfs.toolbox.errors import IsADirectory, KeyNotFound, NotADirectory
from nczfs.store.base import SyncStore
from nczfs.store.keys import join, parent_of
from nczfs.store.values import ByteRange
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.memory.store import MemoryStore

SEGMENTS = ["a", "b", "c"]
KEYS = ["/".join(p) for n in (1, 2, 3) for p in itertools.product(SEGMENTS, repeat=n)]
keys = st.sampled_from(KEYS)
prefixes = st.sampled_from([""] + KEYS)
data = st.binary(max_size=24)


def ancestors(key: str) -> list[str]:
    parts = key.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class StoreModel(RuleBasedStateMachine):
    """Subclasses set ``make_store``; ``teardown`` cleans the medium up."""

    def __init__(self) -> None:
        super().__init__()
        self.store: SyncStore = self.make_store()
        self.objects: dict[str, bytes] = {}
        #: directories a directory tree keeps (they survive the deletion of their objects)
        self.kept_dirs: set[str] = set()

    def make_store(self) -> SyncStore:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ the model

    def dirs(self) -> set[str]:
        implied = {a for k in self.objects for a in ancestors(k)}
        return implied | self.kept_dirs if self.store.capabilities.stores_directories else implied

    def expected_error(self, key: str) -> type[Exception] | None:
        """Why ``key`` cannot hold an object now, if it cannot."""
        if any(a in self.objects for a in ancestors(key)):
            return NotADirectory
        if key in self.dirs():
            return IsADirectory
        return None

    def put(self, key: str, value: bytes) -> None:
        self.objects[key] = value
        self.kept_dirs.update(ancestors(key))

    # ------------------------------------------------------------------ rules

    @rule(key=keys, value=data)
    def set(self, key, value):
        err = self.expected_error(key)
        if err is not None:
            with pytest.raises(err):
                self.store.set(key, value)
            return
        info = self.store.set(key, value)
        assert (info.key, info.size) == (key, len(value))
        self.put(key, value)

    @rule(key=keys)
    def get(self, key):
        if key in self.objects:
            assert self.store.get(key) == self.objects[key]
            assert self.store.stat(key).size == len(self.objects[key])
        else:
            with pytest.raises(KeyNotFound):
                self.store.get(key)
            with pytest.raises(KeyNotFound):
                self.store.stat(key)

    @rule(key=keys, start=st.integers(0, 30), length=st.one_of(st.none(), st.integers(0, 30)))
    def get_range(self, key, start, length):
        rng = ByteRange(start, None if length is None else start + length)
        if key in self.objects:
            assert self.store.get(key, rng) == self.objects[key][rng.start : rng.end]
        else:
            with pytest.raises(KeyNotFound):
                self.store.get(key, rng)

    @rule(key=keys)
    def delete(self, key):
        self.store.delete(key)
        self.objects.pop(key, None)

    @rule(src=keys, dst=keys)
    def rename(self, src, dst):
        if src not in self.objects:
            with pytest.raises(KeyNotFound):
                self.store.rename(src, dst)
            return
        if src == dst:
            self.store.rename(src, dst)
            return
        err = self.expected_error(dst)
        if err is not None:
            with pytest.raises(err):
                self.store.rename(src, dst)
            return
        self.store.rename(src, dst)
        self.put(dst, self.objects.pop(src))

    @rule(prefix=prefixes)
    def list_dir(self, prefix):
        start = prefix + "/" if prefix else ""
        want = {}
        for d in self.dirs():
            if d.startswith(start) and "/" not in d[len(start) :]:
                want[d[len(start) :]] = (True, None)
        for k, v in self.objects.items():
            if k.startswith(start) and "/" not in k[len(start) :]:
                want[k[len(start) :]] = (False, len(v))
        got = self.store.list_dir(prefix)
        assert [e.name for e in got] == sorted(want)
        for e in got:
            assert (e.is_dir, None if e.info is None else e.info.size) == want[e.name]
            if e.info is not None:
                assert e.info.key == join(prefix, e.name)

    @rule(prefix=prefixes)
    def list_prefix(self, prefix):
        start = prefix + "/" if prefix else ""
        assert self.store.list_prefix(prefix) == sorted(k for k in self.objects if k.startswith(start))

    @rule(prefix=prefixes)
    def dir_exists(self, prefix):
        found = prefix == "" or ((e := self.store.entry(prefix)) is not None and e.is_dir)
        assert found == (prefix == "" or prefix in self.dirs())

    @invariant()
    def no_object_is_a_directory(self):
        # the model itself keeps the rule the stores enforce
        for k in self.objects:
            assert k not in self.dirs()
            assert parent_of(k) == "" or parent_of(k) in self.dirs()


class MemoryModel(StoreModel):
    def make_store(self) -> SyncStore:
        return MemoryStore("model")


class DirectoryModel(StoreModel):
    def make_store(self) -> SyncStore:
        self.root = tempfile.mkdtemp(prefix="nczfs-model-")
        return DirectoryStore(self.root)

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


FAST = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

TestMemoryModel = MemoryModel.TestCase
TestMemoryModel.settings = FAST
TestDirectoryModel = DirectoryModel.TestCase
TestDirectoryModel.settings = FAST
