"""The scheme registry: the mechanism by which a SOURCE finds the backend that opens it, with
which ``-o`` options.

Each backend registers itself once (:func:`register`), in its own package (its ``backend``
module: ``nczfs/store/zip/backend.py``, ...; the package ``nczfs.store`` imports each, in the
order they are tried), with what it declares before a store is open: the SOURCE forms it opens
(URL schemes, ``#mode=`` words, local paths and their extensions; in words for the help) and the
parser of its location, its ``-o`` rows (its options dataclass's), what it is (one file, a directory, staged
writes, read-only options, what tells its sources apart in a shared ``--cache-dir``) and its
opener, which builds its options dataclass from the :class:`Opening` and opens it. What the
opened store can do, whether it is remote and its default metadata TTL among them, its store
declares (its :class:`~nczfs.store.capabilities.Capabilities`). nczfs/config/source.py
(netCDF-C's URL rules) and nczfs/config/mountconfig.py (the -o table) read these entries and
nothing else about a backend. This module names no backend. Openers import their store on first
use, so a mount loads only the client libraries its backend needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Mapping

from nczfs.toolbox.errors import SourceError
from nczfs.store.opening import Given, Located, Opening, Opens
from nczfs.store.options import OptionRow

if TYPE_CHECKING:
    from nczfs.store.base import SyncStore


def _no_identity(opening: Opening) -> tuple[str | None, str | None, str | None]:
    return None, None, None


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
    #: its SOURCE forms in words, as the help of mount, inspect and validate lists them
    #: (:func:`source_forms`; empty: not listed)
    forms: str = ""
    #: its -o rows (its options dataclass's ``rows``)
    rows: tuple[OptionRow, ...] = ()
    #: (endpoint, region or account, profile) telling its sources apart in a shared --cache-dir
    identity: Callable[[Opening], tuple[str | None, str | None, str | None]] = field(default=_no_identity)
    #: its SOURCE is one file with a format's extension (an archive, a reference set): the .nc files
    #: of a dataset at the mount's root are named after it without the extension
    one_file: bool = False
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


def source_forms() -> str:
    """The SOURCE forms of every registered backend, in the order registered: SOURCE's help."""
    return ", ".join(b.forms for b in BACKENDS.values() if b.forms)


def open_store(mount: Opens) -> SyncStore:
    """The backend a mount's SOURCE names, opened with the options its config gives it."""
    return backend_of(mount).opener(mount.opening())
