"""The directory backend's registry entry: any local path nothing else claims, or a ``file://``
URL (netCDF-C's ``file`` map). A module of its own so that finding the backend does not import
the store (:mod:`.store`), which a mount imports when it opens one."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nczfs.store.directory.options import DirectoryOptions
from nczfs.store.registry import Backend, register

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _directory(opening: Opening) -> SyncStore:
    from nczfs.store.directory.store import DirectoryStore

    options = DirectoryOptions.of(opening)
    store = DirectoryStore(options.location, read_only=options.read_only)
    checked = options.overwrite == "checked"
    store.capabilities = replace(store.capabilities, checks_writes=checked, checks_deletes=checked)
    return store


DIRECTORY = register(Backend("directory", _directory, schemes=("file",), modes=("file",), paths=True,
                             rows=DirectoryOptions.rows, directory=True,
                             forms="a directory, a file:// URL (with #mode=...)"))
