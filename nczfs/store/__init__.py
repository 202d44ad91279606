"""Open the store a mount's :class:`~nczfs.source.Source` names.

Each backend gets one branch here; it reads what it needs from the whole :class:`MountConfig`
(the source, ``read_only`` and its own options).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nczfs.errors import SourceError
from nczfs.store.base import SyncStore

if TYPE_CHECKING:
    from nczfs.config import MountConfig


def open_store(config: MountConfig) -> SyncStore:
    source, read_only = config.source, config.read_only
    if source.backend == "directory":
        from nczfs.store.directory import DirectoryStore

        return DirectoryStore(source.location, read_only=read_only)
    if source.backend == "memory":
        from nczfs.store.memory import MemoryStore

        return MemoryStore(source.location, read_only=read_only)
    if source.backend == "reference":
        from nczfs.store.reference.store import ReferenceStore

        return ReferenceStore(source.location, allow_roots=config.allow_roots, config=config)
    if source.backend == "zip":
        from nczfs.store.zip.store import ZipStore

        return ZipStore(source.location, read_only=read_only, layout=config.zip_layout)
    if source.backend == "s3":
        from nczfs.store.s3.store import open_s3

        return open_s3(config)
    if source.backend == "gcs":
        from nczfs.store.s3.cloud import open_gcs

        return open_gcs(config)
    if source.backend == "azure":
        from nczfs.store.s3.cloud import open_azure

        return open_azure(config)
    if source.backend == "http":
        from nczfs.store.s3.webzarr import open_http

        return open_http(config)
    if source.backend == "icechunk":
        from nczfs.store.icechunk import open_icechunk

        return open_icechunk(config)
    raise SourceError(f"{source.text}: the {source.backend} backend is not available in this version")
