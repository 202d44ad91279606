"""The store conformance suite, its read-only subset included, through each wrapper a mount
stacks, over real backends.

The wrappers' own modules run the suite over a memory store; here each runs over the directory
backend, and the cache (alone and as the whole default stack) over S3 (SeaweedFS), each built
as a mount with default options builds it (:mod:`nczfs.daemon.stack`). ``ThreadedStore`` is
the plain backend suites' own lift (``tests/store/test_directory.py``, ``test_s3.py``).
"""

from __future__ import annotations

import trio

from nczfs.config.mountconfig import MountConfig
from nczfs.config.source import Source, parse_source
from nczfs.daemon.stack import build, cached
from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfile.ncfiles import NcFilesStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.nczarr.views.presenting import PresentingStore
from nczfs.store.base import Store
from nczfs.store.directory.store import DirectoryStore
from nczfs.store.objstore.store import S3Store
from nczfs.store.threads import ThreadedStore
from tests.store import test_directory, test_s3


def directory_config(store: DirectoryStore) -> MountConfig:
    """A mount's default options for a directory source: the store's (its metadata TTL the store's default)."""
    src = Source("directory", store.root, text=store.root)
    return MountConfig(src, store.root)


#: a writable S3 mount's default metadata TTL, the store's
S3_TTL = S3Store.capabilities.metadata_ttl


def s3_config(store: S3Store) -> MountConfig:
    """A mount's default options for an S3 source: the store's bucket and prefix (its metadata TTL
    the store's default)."""
    return MountConfig(parse_source(f"s3://{store.bucket}/{store.prefix}"), "/mnt")


class TestCachedDirectory(test_directory.TestDirectoryStore):
    def lift(self, store: DirectoryStore) -> Store:
        return cached(ThreadedStore(store), directory_config(store))


class TestValidatingDirectory(test_directory.TestDirectoryStore):
    def lift(self, store: DirectoryStore) -> Store:
        return ValidatingStore(ThreadedStore(store), "strict")


class TestConsolidatingDirectory(test_directory.TestDirectoryStore):
    def lift(self, store: DirectoryStore) -> Store:
        return ConsolidatingStore(ThreadedStore(store))


class TestPresentingDirectory(test_directory.TestDirectoryStore):
    def lift(self, store: DirectoryStore) -> Store:
        return PresentingStore(ThreadedStore(store), "xarray", ttl=0)


class TestNcFilesDirectory(test_directory.TestDirectoryStore):
    def lift(self, store: DirectoryStore) -> Store:
        return NcFilesStore(ThreadedStore(store), ttl=0)


class TestMountStackDirectory(test_directory.TestDirectoryStore):
    """validate(consolidate(cache(threads(directory)))): a mount with default options."""

    def lift(self, store: DirectoryStore) -> Store:
        return build(store, directory_config(store))


class TestCachedS3(test_s3.TestS3Store):
    lists_trees = False  # the cache uses the trees S3 lists; it offers none to the layers above

    def lift(self, store: S3Store) -> Store:
        return cached(ThreadedStore(store), s3_config(store))

    async def test_medium_writes_reach_the_store(self, store):
        """A documented difference of the cache (docs/SEMANTICS.md, Caching): a change behind it
        is seen once ``metadata_ttl`` (1 s for a writable S3 mount) has passed, up to twice it
        where a listing answered, not at once."""
        self.put_raw("bd/x", b"from the backdoor")
        assert await store.get("bd/x") == b"from the backdoor"
        assert [e.name for e in await store.list_dir("bd")] == ["x"]
        self.put_raw("bd/x", b"changed")
        self.put_raw("bd/y", b"yy")
        await trio.sleep(2 * S3_TTL + 0.1)
        assert await store.get("bd/x") == b"changed"
        assert [e.name for e in await store.list_dir("bd")] == ["x", "y"]


class TestMountStackS3(TestCachedS3):
    """validate(consolidate(cache(threads(S3)))): a mount with default options."""

    def lift(self, store: S3Store) -> Store:
        return build(store, s3_config(store))
