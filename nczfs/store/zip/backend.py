"""The zip backend's registry entry: a ``.zip`` path (or ``#mode=zip``), its ``-o`` rows, where
a writable mount's writes wait to be committed. The store is imported when a mount opens one."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from nczfs.store.registry import Backend, register
from nczfs.store.zip.options import ZipOptions

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore
    from nczfs.store.opening import Opening


def _zip(opening: Opening) -> SyncStore:
    from nczfs.store.zip.store import ZipStore

    options = ZipOptions.of(opening)
    store = ZipStore(options.location, read_only=options.read_only, layout=options.layout)
    checked = options.overwrite == "checked"
    store.capabilities = replace(store.capabilities, checks_writes=checked, checks_deletes=checked)
    return store


def _zip_staging(location: str) -> str:
    from nczfs.store.zip.staging import staging_dir

    return staging_dir(location)


def _zip_staged(directory: str) -> int:
    from nczfs.store.zip.staging import staged_changes

    return staged_changes(directory)


ZIP = register(Backend("zip", _zip, modes=("zip",), suffixes=(".zip",), rows=ZipOptions.rows, one_file=True,
                       staging=_zip_staging, staged=_zip_staged, forms="a zip file"))
