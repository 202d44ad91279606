"""The NCZarr layer's wrappers pass the store conformance suite without a kernel: over objects
that are not NCZarr metadata each is transparent (a view shows what is stored, validation and
consolidation have nothing to check or follow, no dataset makes .nc files), and each offers
the fast paths it says it passes."""

from __future__ import annotations

import pytest

from nczfs.nczarr.consolidating import ConsolidatingStore
from nczfs.nczarr.ncfiles import NcFilesStore
from nczfs.nczarr.presenting import PresentingStore
from nczfs.nczarr.validating import ValidatingStore
from nczfs.threads import ThreadedStore
from tests.store import test_memory


class TestValidatingStoreConformance(test_memory.TestMemoryStore):
    lists_trees = False  # not passed: wrappers above the cache list no trees

    @pytest.fixture
    async def store(self, sync_store):
        s = ValidatingStore(ThreadedStore(sync_store), "strict")
        yield s
        await s.close()


class TestConsolidatingStoreConformance(test_memory.TestMemoryStore):
    lists_trees = False

    @pytest.fixture
    async def store(self, sync_store):
        s = ConsolidatingStore(ThreadedStore(sync_store))
        yield s
        await s.close()


class TestPresentingStoreConformance(test_memory.TestMemoryStore):
    uploads_in_parts = False  # a view translates writes: every one goes through set
    lists_trees = False

    @pytest.fixture(params=["netcdf-4.10", "xarray"])
    async def store(self, sync_store, request):
        s = PresentingStore(ThreadedStore(sync_store), request.param, ttl=0)
        yield s
        await s.close()


class TestNcFilesStoreConformance(test_memory.TestMemoryStore):
    uploads_in_parts = False  # every write drops the files built from it: through set
    lists_trees = False

    @pytest.fixture
    async def store(self, sync_store):
        s = NcFilesStore(ThreadedStore(sync_store), ttl=0)
        yield s
        await s.close()
