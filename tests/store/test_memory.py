import time

import pytest

from nczfs.store.values import ObjectInfo
from nczfs.store.memory.store import MemoryStore
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS


class TestMemoryStore(StoreConformance):
    optional = OFFERS[MemoryStore]
    uploads_in_parts = True
    checks_writes = True
    checks_deletes = True
    lists_trees = True

    @pytest.fixture
    def sync_store(self) -> MemoryStore:
        self.medium = MemoryStore("conformance", part_size=256 * 1024)
        return self.medium

    def read_only_store(self) -> MemoryStore:
        ro = MemoryStore("conformance", read_only=True)
        ro._objects = self.medium._objects  # the same medium, seen read-only
        return ro

    def put_raw(self, key: str, data: bytes) -> None:
        self.medium._objects[key] = (bytes(data), ObjectInfo(key, len(data), time.time_ns(), f"raw-{time.time_ns()}"))

    def get_raw(self, key: str) -> bytes | None:
        item = self.medium._objects.get(key)
        return None if item is None else item[0]
