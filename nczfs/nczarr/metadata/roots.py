"""Where datasets are: a dataset is the topmost folder holding one of :data:`ROOT_MARKERS`."""

from __future__ import annotations

import time

from nczfs.toolbox.errors import NczfsError
from nczfs.store.base import Store
from nczfs.store.keys import join

ROOT_MARKERS = (".zgroup", "zarr.json", ".nczarr", ".zmetadata")


async def holds_marker(store: Store, folder: str) -> bool:
    """Does ``folder`` hold a dataset's root object? (A store that fails to say: no.)"""
    for name in ROOT_MARKERS:
        try:
            if await store.entry(join(folder, name)) is not None:
                return True
        except NczfsError:
            return False
    return False


class Roots:
    """Which folders hold a dataset's root object, each answer kept ``ttl`` seconds."""

    def __init__(self, store: Store, ttl: float):
        self.store, self.ttl = store, ttl
        self._seen: dict[str, tuple[float, bool]] = {}

    async def is_root(self, folder: str) -> bool:
        now = time.monotonic()
        cached = self._seen.get(folder)
        if cached and now - cached[0] < self.ttl:
            return cached[1]
        found = await holds_marker(self.store, folder)
        self._seen[folder] = (now, found)
        return found

    def forget(self, key: str) -> None:
        """``key`` changed: the answers for it, the folders above it and those below it go."""
        for folder in list(self._seen):
            if folder == "" or key == folder or key.startswith(folder + "/") or folder.startswith(key + "/"):
                del self._seen[folder]
