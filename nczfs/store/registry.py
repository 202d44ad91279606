"""The scheme registry: which backend opens which SOURCE, with which ``-o`` options.

Each backend is registered once (:func:`register`) with what it declares: the SOURCE forms it
opens (URL schemes, ``#mode=`` words, local paths and their extensions) and the parser of its
location, its ``-o`` rows (its options dataclass's), its default metadata TTL, its capabilities
(remote, one file, a directory, staged writes, read-only options) and its opener, which builds its options dataclass
from the :class:`Opening` and opens it. nczfs/config/source.py (netCDF-C's URL rules) and nczfs/config/mountconfig.py
(the -o table) read these entries and nothing else about a backend. Openers import their backend
on first use, so a mount loads only the client libraries its backend needs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

from nczfs.toolbox.errors import SourceError
from nczfs.store.opening import Given, Located, Opening, Opens
from nczfs.store.options import OVERWRITE, OptionRow
from nczfs.store.icechunk.options import IcechunkOptions, read_only_point
from nczfs.store.icechunk.sources import locate_icechunk
from nczfs.store.reference.options import ReferenceOptions
from nczfs.store.objstore.options import CloudOptions
from nczfs.store.objstore.options import S3Options
from nczfs.store.objstore.sources import claims_azure, claims_s3, locate_cloud, locate_s3, locate_web
from nczfs.store.objstore.transport import Bounds
from nczfs.store.zip.options import ZipOptions

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore


def _no_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    return None, None, None


#: default metadata TTLs: other clients may change a writable S3 prefix at any time; a read-only
#: mount, a local directory or an archive is taken to change rarely
SHORT_TTL, LONG_TTL = 1.0, 60.0


@dataclass(frozen=True)
class Backend:
    #: ``Source.backend``
    name: str
    #: opens it: builds its options dataclass from the opening
    opener: Callable[[Opening], SyncStore]
    #: URL schemes it opens
    schemes: tuple[str, ...] = ()
    #: ``#mode=`` words that choose it
    modes: tuple[str, ...] = ()
    #: the local paths it opens (if it is :attr:`local`): those with these extensions, those a mode
    #: word chooses it for, and (``paths``) those nothing else claims
    suffixes: tuple[str, ...] = ()
    paths: bool = False
    #: of a URL whose scheme other backends open too: is it this backend's (tried in the order
    #: registered; None: the one left when no other claims it)
    claims: Callable[[Given], bool] | None = None
    #: the location of its SOURCE (None: a local backend's path); raises SourceError for a SOURCE it
    #: refuses, a mode word that does not fit it among them
    locate: Callable[[Given], Located] | None = None
    #: what one of its SOURCEs is, in messages (default: "NAME sources")
    noun: str = ""
    #: its -o rows (its options dataclass's ``rows``)
    rows: tuple[OptionRow, ...] = ()
    #: reached over the network: its bytes are worth keeping in memory and in --cache-dir
    remote: bool = False
    #: (endpoint, region or account, profile) telling its sources apart in a shared --cache-dir
    identity: Callable[[Opening], tuple[str | None, str | None, str | None]] = field(default=_no_identity)
    #: its SOURCE is one file with a format's extension (an archive, a reference set): the .nc files
    #: of a dataset at the mount's root are named after it without the extension
    one_file: bool = False
    #: seconds a writable mount trusts its metadata when no -o metadata_ttl= is given (SHORT_TTL
    #: where other clients write to it while it is mounted); a read-only mount's is LONG_TTL
    metadata_ttl: float = LONG_TTL
    #: its location is a directory: it must exist, and the mount point must not lie inside it
    directory: bool = False
    #: where a writable mount's writes wait to be committed, given its location (None: nowhere)
    staging: Callable[[str], str] | None = None
    #: how many writes wait in a staging directory it made (a dead mount's, left behind)
    staged: Callable[[str], int] | None = None
    #: whether its -o values make the mount read-only (an Icechunk tag)
    read_only_if: Callable[[Mapping[str, object]], bool] | None = None

    @property
    def local(self) -> bool:
        """It opens local paths (and file:// URLs, and its own schemes' as paths): it has no
        :attr:`locate` of its own, its location is the path."""
        return self.locate is None


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    BACKENDS[backend.name] = backend
    return backend


def backend_of(mount: Opens) -> Backend:
    """The registered backend of the mount's source; SourceError if none is."""
    source = mount.source
    found = BACKENDS.get(source.backend)
    if found is None:
        raise SourceError(f"{source.text}: the {source.backend} backend is not available in this version")
    return found


def by_scheme(scheme: str) -> list[Backend]:
    """The backends that open ``scheme://`` URLs, in the order registered."""
    return [b for b in BACKENDS.values() if scheme in b.schemes]


def open_store(mount: Opens) -> SyncStore:
    """The backend a mount's SOURCE names, opened with the options its config gives it."""
    return backend_of(mount).opener(mount.opening())


# ---------------------------------------------------------------------- the backends


def _directory(opening: Opening) -> SyncStore:
    from nczfs.store.directory import DirectoryStore

    store = DirectoryStore(opening.source.location, read_only=opening.read_only)
    store.checks_writes = store.checks_deletes = opening.options.get("overwrite", "checked") == "checked"
    return store


def _memory(opening: Opening) -> SyncStore:
    from nczfs.store.memory import MemoryStore

    return MemoryStore(opening.source.location, read_only=opening.read_only)


def _memory_location(given: Given) -> Located:
    assert given.parts is not None
    if given.chosen is not None:
        raise SourceError(f"{given.text}: mode {given.words} does not fit memory://")
    return Located(given.parts.netloc + given.parts.path)


def _zip(opening: Opening) -> SyncStore:
    from nczfs.store.zip.store import ZipStore

    options = ZipOptions.of(opening)
    store = ZipStore(options.location, read_only=options.read_only, layout=options.layout)
    store.checks_writes = store.checks_deletes = options.overwrite == "checked"
    return store


def _zip_staging(location: str) -> str:
    from nczfs.store.zip.staging import staging_dir

    return staging_dir(location)


def _zip_staged(directory: str) -> int:
    from nczfs.store.zip.staging import staged_changes

    return staged_changes(directory)


def _reference(opening: Opening) -> SyncStore:
    from nczfs.store.reference.store import ReferenceStore

    options = ReferenceOptions.of(opening)
    # s3:// targets are read with the mount's S3 options
    return ReferenceStore(options.location, allow_roots=options.allow_roots, mountpoint=options.mountpoint,
                          s3=options.s3)


def _s3(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.store import open_s3

    assert opening.source.parsed is not None  # parse_source parsed the URL
    return open_s3(S3Options.of(opening), opening.source.parsed)


def _s3_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    """Where S3 is reached and as whom (an S3 source's, or a reference set's s3:// targets'): the
    profile as S3Options reads it (-o profile=, else the URL's #aws.profile=)."""
    loc, options = opening.source.parsed, S3Options.of(opening)
    endpoint = (options.endpoint_url or (loc.endpoint_url if loc else None)
                or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    return endpoint, options.region or (loc.region if loc else None) or options.url_region, options.profile


def _gcs(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.cloud import open_gcs

    return open_gcs(CloudOptions.of(opening))


def _azure(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.cloud import open_azure

    return open_azure(CloudOptions.of(opening))


def _cloud_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    values = opening.options
    endpoint = (values.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")
                or os.environ.get("AZURE_STORAGE_ENDPOINT"))
    return endpoint, values.get("azure_storage_account"), values.get("profile")


def _http(opening: Opening) -> SyncStore:
    from nczfs.store.objstore.webzarr import open_http

    return open_http(opening.source.text, opening.source.location, Bounds(**Bounds.given(opening.options)))


def _icechunk(opening: Opening) -> SyncStore:
    from nczfs.store.icechunk.repository import open_icechunk

    return open_icechunk(IcechunkOptions.of(opening))


register(Backend("directory", _directory, schemes=("file",), modes=("file",), paths=True,
                 rows=(OVERWRITE,), directory=True))
register(Backend("memory", _memory, schemes=("memory",), locate=_memory_location))
register(Backend("zip", _zip, modes=("zip",), suffixes=(".zip",), rows=ZipOptions.rows, one_file=True,
                 staging=_zip_staging, staged=_zip_staged))
register(Backend("reference", _reference, schemes=("reference",), modes=("refs",), noun="a reference set",
                 suffixes=(".json", ".parq", ".parquet"), rows=ReferenceOptions.rows, remote=True, one_file=True,
                 identity=_s3_identity))
register(Backend("s3", _s3, schemes=("s3", "gs3", "http", "https"), modes=("s3", "gs3"), claims=claims_s3,
                 locate=locate_s3, rows=S3Options.rows, remote=True, identity=_s3_identity, metadata_ttl=SHORT_TTL))
register(Backend("gcs", _gcs, schemes=("gs",), locate=locate_cloud, rows=CloudOptions.rows, remote=True,
                 identity=_cloud_identity, metadata_ttl=SHORT_TTL))
register(Backend("azure", _azure, schemes=("az", "abfs", "abfss", "adl", "https"), claims=claims_azure,
                 locate=locate_cloud, rows=CloudOptions.rows, remote=True, identity=_cloud_identity, metadata_ttl=SHORT_TTL))
register(Backend("http", _http, schemes=("http", "https"), locate=locate_web, rows=Bounds.rows, remote=True))
register(Backend("icechunk", _icechunk, schemes=("icechunk", "icechunk+s3"), locate=locate_icechunk, noun="Icechunk sources",
                 rows=IcechunkOptions.rows, remote=True, metadata_ttl=SHORT_TTL,
                 read_only_if=read_only_point))
