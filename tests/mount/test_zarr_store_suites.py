"""zarr-python's own store suites, run against a ``LocalStore`` rooted in a real nczfs mount of
every backend: ``zarr.testing.store.StoreTests`` (each test in a fresh directory of one mount per
backend for the module) and the stateful ``ZarrHierarchyStateMachine`` and
``ZarrStoreStateMachine`` (a fresh directory per example), with short derandomized example counts
and long random ones under ``NCZFS_LONG_SUITES=1``.

The project's tests run coroutines under trio (``trio_mode``); zarr's stores need asyncio, so the
suite's coroutine tests and fixtures run on zarr's own event loop (``zarr.core.sync.sync``).
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

import pytest

from tests.mount.suitemounts import LONG, examples, fresh_dir, mount_backend

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(7200 if LONG else 300)]

zarr = pytest.importorskip("zarr")
from hypothesis import assume, strategies as st  # noqa: E402
from hypothesis.stateful import rule, run_state_machine_as_test  # noqa: E402
from zarr.core.buffer import Buffer, cpu  # noqa: E402
from zarr.core.sync import sync  # noqa: E402
from zarr.storage import LocalStore  # noqa: E402
from zarr.testing.stateful import MAX_BINARY_SIZE, ZarrHierarchyStateMachine, ZarrStoreStateMachine  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402
from zarr.testing.strategies import keys as zarr_keys, node_names, np_array_and_chunks  # noqa: E402

BACKENDS = ["directory", "zip", "s3", "gcs", "azure", "icechunk"]
#: Icechunk holds Zarr v3 nodes only: a ``zarr.json`` must be a node's metadata and every other
#: key a chunk of an existing array, so the suites that store arbitrary keys cannot run there
#: (their keys are refused at write or left uncommittable: docs/SEMANTICS.md)
ARBITRARY_KEYS = [b for b in BACKENDS if b != "icechunk"]


@pytest.fixture(scope="module", params=BACKENDS)
def zmount(request, tmp_path_factory):
    """One mount of the backend for the module (examples work in fresh directories of it), with
    the default strict metadata validation: what zarr writes must never be refused."""
    with mount_backend(request.param, request, tmp_path_factory.mktemp(f"zs-{request.param}")) as m:
        yield m


@pytest.fixture(scope="module", params=ARBITRARY_KEYS)
def zmount_raw(request, tmp_path_factory):
    """The same with ``-o validate=off``: StoreTests stores bytes that are no metadata under
    metadata names (``b"bar"`` as ``foo/zarr.json``), which strict validation refuses by design
    (``EINVAL``, docs/SEMANTICS.md)."""
    base = tmp_path_factory.mktemp(f"zs-raw-{request.param}")
    with mount_backend(request.param, request, base, "-o", "validate=off") as m:
        yield m


def _on_zarr_loop(fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        return sync(fn(*args, **kwargs))

    return run


def _coroutine_tests_on_zarr_loop(cls):
    """Every coroutine ``test_*`` StoreTests has, as a plain test running it on zarr's loop."""
    for name, fn in inspect.getmembers(StoreTests, inspect.iscoroutinefunction):
        if name.startswith("test_") and name not in cls.__dict__:
            setattr(cls, name, _on_zarr_loop(fn))
    return cls


@_coroutine_tests_on_zarr_loop
class TestLocalStoreOnMount(StoreTests[LocalStore, cpu.Buffer]):
    store_cls = LocalStore
    buffer_cls = cpu.Buffer

    async def get(self, store: LocalStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes((store.root / key).read_bytes())

    async def set(self, store: LocalStore, key: str, value: Buffer) -> None:
        (store.root / key).parent.mkdir(parents=True, exist_ok=True)
        (store.root / key).write_bytes(value.to_bytes())

    @pytest.fixture
    def store_kwargs(self, zmount_raw) -> dict[str, str]:
        return {"root": str(fresh_dir(zmount_raw.path))}

    @pytest.fixture
    def store(self, open_kwargs) -> LocalStore:
        return sync(LocalStore.open(**open_kwargs))

    @pytest.fixture
    def store_not_open(self, store_kwargs) -> LocalStore:
        return LocalStore(**store_kwargs)

    def test_store_repr(self, store: LocalStore) -> None:
        assert str(store) == f"file://{store.root.as_posix()}"

    def test_store_supports_writes(self, store: LocalStore) -> None:
        assert store.supports_writes

    def test_store_supports_listing(self, store: LocalStore) -> None:
        assert store.supports_listing

    def test_empty_with_empty_subdir(self, store: LocalStore) -> None:
        assert sync(store.is_empty(""))
        (store.root / "foo" / "bar").mkdir(parents=True)
        assert sync(store.is_empty(""))


class TreeKeysStoreMachine(ZarrStoreStateMachine):
    """zarr's ``ZarrStoreStateMachine`` with keys a tree of files can hold: zarr skips it for
    ``LocalStore`` because its arbitrary keys make a key and a key below it (``a`` and ``a/b``:
    a file and a directory of one name) and ``delete`` leaves directories behind. Here a key is
    set only where no file is its ancestor and no directory (left behind or not) has its name,
    and each name fits a file system (255 bytes). The same machine passes on a local directory
    (``test_zarr_store_state_machine_on_a_local_directory``)."""

    def __init__(self, store) -> None:
        super().__init__(store)
        self.dirs: set[str] = set()

    def fits(self, key: str) -> bool:
        parts = key.split("/")
        ancestors = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if key in self.dirs or any(a in self.model for a in ancestors) or any(len(p) > 255 for p in parts):
            return False
        self.dirs.update(ancestors)
        return True

    @rule(key=zarr_keys(max_num_nodes=3), data=st.binary(min_size=0, max_size=MAX_BINARY_SIZE))
    def set(self, key: str, data: bytes) -> None:
        assume(self.fits(key))
        super().set(key, data)

    @rule()
    def clear(self) -> None:
        super().clear()
        self.dirs.clear()


class IcechunkHierarchyMachine(ZarrHierarchyStateMachine):
    """zarr's ``ZarrHierarchyStateMachine`` without arrays of a chunk length of 0 (zarr-python
    writes ``chunks=(0,)`` for an empty array; Icechunk 1.1 refuses that chunk grid, and the mount
    answers ``EINVAL``: ``tests/store/test_icechunk.py::test_zarr_v2_metadata_and_bad_metadata_are_refused``)."""

    @rule(data=st.data(), name=node_names, array_and_chunks=np_array_and_chunks())
    def add_array(self, data, name, array_and_chunks) -> None:
        assume(0 not in array_and_chunks[1])
        super().add_array(data, name, array_and_chunks)


def run_on(root: Path, machine, settings) -> None:
    run_state_machine_as_test(lambda: machine(LocalStore(fresh_dir(root))), settings=settings)


def test_zarr_hierarchy_state_machine(zmount):
    machine = IcechunkHierarchyMachine if zmount.backend.name == "icechunk" else ZarrHierarchyStateMachine
    # the emulators answer slowly (6 examples took 31 s on fake-gcs-server): fewer in CI
    run_on(zmount.path, machine, examples(2 if zmount.backend.name in ("gcs", "azure") else 4, steps=10))


@pytest.mark.parametrize("zmount", ARBITRARY_KEYS, indirect=True)
def test_zarr_store_state_machine(zmount):
    run_on(zmount.path, TreeKeysStoreMachine, examples(3 if zmount.backend.name in ("gcs", "azure") else 6, steps=15))


def test_zarr_store_state_machine_on_a_local_directory(tmp_path):
    run_on(tmp_path, TreeKeysStoreMachine, examples(6, steps=15))
