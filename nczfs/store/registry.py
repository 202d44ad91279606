"""The scheme registry: which backend opens which SOURCE, and with which options.

Each backend is registered once (:func:`register`) with the SOURCE kinds it opens (URL
schemes, or a local path's form), whether it is remote (its bytes are worth caching in memory
and in ``--cache-dir``), what tells two of its sources apart in a shared cache directory, and
its opener: a function that builds the backend's own options from the mount's
:class:`~nczfs.config.MountConfig` (in this one place) and opens it. Openers import their
backend on first use, so a mount loads only the client libraries its backend needs.
:func:`open_store` looks the backend up by ``config.source.backend``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable
from urllib.parse import SplitResult

from nczfs.errors import SourceError

if TYPE_CHECKING:
    from nczfs.config import MountConfig
    from nczfs.store.base import SyncStore


def _no_identity(config: MountConfig) -> tuple[str | None, str | None]:
    return None, None


@dataclass(frozen=True)
class Backend:
    #: ``Source.backend``
    name: str
    #: the SOURCE kinds it opens: URL schemes (``s3``), or ``path`` / ``*.ext`` for local ones
    sources: tuple[str, ...]
    #: builds the backend's options from the mount's config and opens it
    opener: Callable[[MountConfig], SyncStore]
    #: reached over the network: its bytes are worth keeping in memory and in --cache-dir
    remote: bool = False
    #: (endpoint, region or account) telling its sources apart in a shared --cache-dir
    identity: Callable[[MountConfig], tuple[str | None, str | None]] = field(default=_no_identity)
    #: its SOURCE is one file with a format's extension (an archive, a reference set): the .nc files
    #: of a dataset at the mount's root are named after it without the extension
    one_file: bool = False
    #: other clients write to it while it is mounted: a writable mount trusts its metadata for
    #: config.SHORT_TTL seconds by default, not LONG_TTL
    shared: bool = False
    #: for a URL scheme among ``sources`` that source.py has no rule of its own for: the location
    #: of a ``scheme://...`` SOURCE, from its text and its parts (urlsplit's)
    location: Callable[[str, SplitResult], str] | None = None


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    BACKENDS[backend.name] = backend
    return backend


def backend_of(config: MountConfig) -> Backend:
    """The registered backend of the mount's source; SourceError if none is."""
    found = BACKENDS.get(config.source.backend)
    if found is None:
        raise SourceError(f"{config.source.text}: the {config.source.backend} backend is not available in this version")
    return found


def by_scheme(scheme: str) -> Backend | None:
    """The backend that parses ``scheme://`` URLs itself (its ``location``), if one is registered."""
    return next((b for b in BACKENDS.values() if b.location is not None and scheme in b.sources), None)


def open_store(config: MountConfig) -> SyncStore:
    """The backend a mount's SOURCE names, opened with the options its config gives it."""
    return backend_of(config).opener(config)


# ---------------------------------------------------------------------- the backends


def _directory(config: MountConfig) -> SyncStore:
    from nczfs.store.directory import DirectoryStore

    store = DirectoryStore(config.source.location, read_only=config.read_only)
    store.checks_writes = store.checks_deletes = config.overwrite == "checked"
    return store


def _memory(config: MountConfig) -> SyncStore:
    from nczfs.store.memory import MemoryStore

    return MemoryStore(config.source.location, read_only=config.read_only)


def _zip(config: MountConfig) -> SyncStore:
    from nczfs.store.zip.store import ZipStore

    store = ZipStore(config.source.location, read_only=config.read_only, layout=config.zip_layout)
    store.checks_writes = store.checks_deletes = config.overwrite == "checked"
    return store


def _reference(config: MountConfig) -> SyncStore:
    from nczfs.store.reference.store import ReferenceStore
    from nczfs.store.s3.options import S3Options

    # s3:// targets are read with the mount's S3 options
    return ReferenceStore(config.source.location, allow_roots=config.allow_roots, mountpoint=config.mountpoint,
                          s3=S3Options.of(config))


def _s3(config: MountConfig) -> SyncStore:
    from nczfs.store.s3.options import S3Options
    from nczfs.store.s3.store import open_s3

    assert config.source.s3 is not None  # parse_source parsed the URL
    return open_s3(S3Options.of(config), config.source.s3)


def _s3_identity(config: MountConfig) -> tuple[str | None, str | None]:
    loc = config.source.s3
    endpoint = (config.endpoint_url or (loc.endpoint_url if loc else None) or os.environ.get("AWS_ENDPOINT_URL_S3")
                or os.environ.get("AWS_ENDPOINT_URL"))
    return endpoint, config.region or (loc.region if loc else None)


def _cloud_location(text: str, parts: SplitResult) -> str:
    from nczfs.store.s3.cloudurl import parse_cloud_url

    return parse_cloud_url(text).location


def _gcs(config: MountConfig) -> SyncStore:
    from nczfs.store.s3.cloud import CloudOptions, open_gcs

    return open_gcs(CloudOptions.of(config))


def _azure(config: MountConfig) -> SyncStore:
    from nczfs.store.s3.cloud import CloudOptions, open_azure

    return open_azure(CloudOptions.of(config))


def _cloud_identity(config: MountConfig) -> tuple[str | None, str | None]:
    endpoint = config.endpoint_url or os.environ.get("STORAGE_EMULATOR_HOST") or os.environ.get("AZURE_STORAGE_ENDPOINT")
    return endpoint, config.azure_storage_account


def _http(config: MountConfig) -> SyncStore:
    from nczfs.store.s3.transport import Bounds
    from nczfs.store.s3.webzarr import open_http

    return open_http(config.source.text, config.source.location, Bounds(**Bounds.given(config)))


def _icechunk(config: MountConfig) -> SyncStore:
    from nczfs.store.icechunk.options import IcechunkOptions
    from nczfs.store.icechunk.repository import open_icechunk

    return open_icechunk(IcechunkOptions(
        config.source.text, config.source.location, branch=config.branch, tag=config.tag, snapshot=config.snapshot,
        read_only=config.read_only, commit_message=config.commit_message,
        virtual_chunk_containers=config.virtual_chunk_containers, profile=config.profile, region=config.region,
        endpoint_url=config.endpoint_url, anonymous=config.no_sign_request,
    ))


register(Backend("directory", ("path", "file"), _directory))
register(Backend("memory", ("memory",), _memory))
register(Backend("zip", ("*.zip", "#mode=zip"), _zip, one_file=True))
register(Backend("reference", ("*.json", "*.parq", "*.parquet", "reference", "#mode=refs"), _reference, remote=True,
                 one_file=True))
register(Backend("s3", ("s3", "gs3", "https#mode=s3", "https://*.amazonaws.com"), _s3, remote=True,
                 identity=_s3_identity, shared=True))
register(Backend("gcs", ("gs",), _gcs, remote=True, identity=_cloud_identity, shared=True, location=_cloud_location))
register(Backend("azure", ("az", "abfs", "abfss", "adl", "https://*.blob.core.windows.net"), _azure, remote=True,
                 identity=_cloud_identity, shared=True, location=_cloud_location))
register(Backend("http", ("http", "https"), _http, remote=True))
register(Backend("icechunk", ("icechunk", "icechunk+s3"), _icechunk, remote=True, shared=True))
