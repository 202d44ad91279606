"""What a store says it can do: the capabilities it declares (one :class:`Capabilities` record,
a store's ``capabilities``, which a wrapper answers from the store below)
and the optional fast paths, each a :class:`typing.Protocol` a store implements or not, asked
with ``isinstance``: :class:`Stages` (data sent now, made the object later), :class:`UploadsInParts`
(an object sent in parts as it is written), :class:`ListsTrees` (a whole tree in one request),
each in a blocking form too; :class:`ReadsOnLoop` (reads awaited without a worker thread),
:class:`JournalsUploads` (uploads a dead mount left are aborted by the next), and
:class:`MergesBothChanged` (told by the layer above how to merge an object both it and another
program changed). A wrapper has each fast path, NCZarr hook and optional operation
(:mod:`nczfs.store.optional`) where the store below has it: :func:`offer`, :func:`offer_hooks`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, cast, runtime_checkable

from nczfs.store.optional import OPTIONAL, OPTIONAL_PREFIX, Refreshes, offers
from nczfs.store.values import Ask, ByteRange, DirEntry, Staged, Upload


#: default metadata TTLs (:attr:`Capabilities.metadata_ttl`): other clients may change a writable
#: object store prefix at any time; a read-only mount, a local directory or an archive is taken
#: to change rarely
SHORT_TTL, LONG_TTL = 1.0, 60.0


@dataclass(frozen=True)
class Capabilities:
    """What a store says of itself, in one record: a SyncStore's ``capabilities`` (its class's,
    or one its ``__init__`` or backend sets with :func:`dataclasses.replace` where an option
    decides it: read-only, the conditional writes a probe finds); a wrapper answers the one of the
    store below. Whether it keeps POSIX attributes is a Protocol (:class:`~.optional.KeepsMeta`),
    as are uploads in parts (:class:`UploadsInParts`) and reads without a thread (:class:`ReadsOnLoop`)."""

    #: the medium accepts writes at all (a read-only mount sets ``read_only`` instead)
    supports_writes: bool = True
    #: this store refuses every write (the mount's ``-o ro``, a tag or snapshot of Icechunk)
    read_only: bool = False
    #: empty directories persist in the medium (a directory tree), instead of being implied by keys
    stores_directories: bool = False
    #: the medium refuses an object named like a directory and objects below an object (a
    #: file tree); S3 does not: there "n" and "n/x" may both exist, and listings show "n" as
    #: a directory (the filesystem never creates such pairs itself)
    keys_form_a_tree: bool = True
    #: ``get_version`` really refuses another version (S3: If-Match), so a successful one
    #: confirms that the version is current (stores without that read the current bytes)
    checks_versions: bool = False
    #: writes take ``if_version=`` and refuse (:class:`~nczfs.toolbox.errors.Conflict`) to replace an
    #: object that is no longer that version, or (:data:`~nczfs.store.values.ABSENT`) to make one
    #: where another appeared (S3: If-Match, If-None-Match: *); stores without it ignore the
    #: argument, the last writer wins there
    checks_writes: bool = False
    #: ``delete`` takes ``if_version=`` (an ETag) and refuses (Conflict) to remove an object that
    #: is no longer that version (S3: DeleteObject's If-Match); stores without it are never given one
    checks_deletes: bool = False
    #: every ``stat``, ``entry`` and listing reports the attributes the medium holds, for
    #: objects and directories alike, and changes made in the medium show there (a local
    #: directory): the mount shows them and keeps none of its own
    live_meta: bool = False
    #: the largest object the medium can hold (None: no bound of its own; its writes fail)
    max_object_size: int | None = None
    #: calls may run inline on the event loop because they never block (memory)
    non_blocking: bool = False
    #: calls that may run at once (ThreadedStore's slots; S3: its connection pool's size)
    max_concurrency: int = 8
    #: a listing may still show a directory a while after its last key was deleted (SeaweedFS
    #: and S3 gateways over a filer); rmdir and directory renames delete those folders explicitly
    emptied_dirs_may_linger: bool = False
    #: ``stat``, ``entry`` and listings report the attributes ``set_meta`` keeps, where it keeps
    #: some (S3: only with ``-o posix_meta``, a HEAD per lookup)
    reads_meta: bool = True
    #: reached over the network: its bytes are worth keeping in memory and in ``--cache-dir`` (a
    #: local directory or archive is in the kernel's page cache already)
    remote: bool = False
    #: seconds a writable mount trusts attributes, listings and missing names when no ``-o
    #: metadata_ttl=`` is given (SHORT_TTL where other clients write while it is mounted); a
    #: read-only mount's default is LONG_TTL whatever its store says (MountConfig.effective_metadata_ttl)
    metadata_ttl: float = LONG_TTL


# ---------------------------------------------------------------------- the optional fast paths
# Each is implemented by a store or not (isinstance tells): an async store's form (the name
# alone) and a sync store's (``...Blocking``), whose methods and Staged/Upload callables block.
# isinstance cannot tell the two forms apart (it sees the method's name only): the types can.


@runtime_checkable
class Stages(Protocol):
    async def stage(self, key: str, data: bytes) -> Staged | None:
        """Send ``data`` for ``key`` without making it visible yet (see
        :class:`~nczfs.store.values.Staged`); None: not this time (an empty object), the caller
        stores the data with ``set`` when it is time."""


@runtime_checkable
class StagesBlocking(Protocol):
    def stage(self, key: str, data: bytes) -> Staged | None:
        """:meth:`Stages.stage`, blocking."""


@runtime_checkable
class UploadsInParts(Protocol):
    async def open_upload(self, key: str) -> Upload | None:
        """Start sending an object ``key`` in parts (see :class:`~nczfs.store.values.Upload`);
        None: not this key, the caller stores the data with ``set`` or ``set_file`` when it is
        complete."""


@runtime_checkable
class UploadsInPartsBlocking(Protocol):
    def open_upload(self, key: str) -> Upload | None:
        """:meth:`UploadsInParts.open_upload`, blocking."""


@runtime_checkable
class ListsTrees(Protocol):
    async def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        """The listings of ``prefix`` and of every directory below it (see
        :func:`~nczfs.store.keys.tree_listings`), where one request of at most ``limit`` keys
        fetches them all (S3: a ListObjectsV2 without a delimiter); None where the tree holds
        more keys (or, this time, cannot be listed so)."""


@runtime_checkable
class ListsTreesBlocking(Protocol):
    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        """:meth:`ListsTrees.list_tree`, blocking."""


@runtime_checkable
class ReadsOnLoop(Protocol):
    """A sync store some of whose reads are awaited on the trio thread, without a worker thread
    (sent on an asyncio loop thread of its own: Icechunk's, large GETs of object stores)."""

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """``get_version``, awaited; None: this read is left to ``get_version`` in a worker thread."""


@runtime_checkable
class SendsReadsTogether(Protocol):
    """A sync store that sends several small reads at once on its own loop (object stores), so
    that a burst costs trio one hand-over (:class:`~nczfs.store.threads.ThreadedStore`)."""

    async def get_versions_async(self, asks: list[Ask]
                                 ) -> list[bytes | Exception | None]:
        """Each ask's bytes or its error, in order; None: left to ``get_version`` in a worker."""


@runtime_checkable
class ReadsTogether(Protocol):
    """An async store that reads several small objects in one hand-over (a burst of siblings the
    cache fetches ahead): offered by a threaded store where its backend can."""

    async def get_versions(self, asks: list[Ask]
                           ) -> list[bytes | Exception]:
        """Each ask's bytes or its error, in order."""


@runtime_checkable
class HoldsBytes(Protocol):
    """An async store (a cache) that may hold a small object's bytes in memory already: the
    mount hands them to the kernel's page cache at the open, sparing the read (fuse/ops.py).
    A wrapper whose reads return what the store below returns offers it where that store does."""

    def held_object(self, key: str, etag: str, size: int) -> bytes | None:
        """The whole object ``key`` of version ``etag``, if it is held now and is ``size`` bytes;
        None otherwise. No I/O, nothing fetched or waited for; bytes handed out count as a read of
        the object from its start (the prefetchers hear of it)."""

    async def object_arrives(self, key: str, etag: str) -> bool:
        """Return once a fetch of the object ``key`` at ``etag`` already on its way (a read ahead)
        has ended, however it ended: True; at once when none is: False. Nothing is fetched or
        started: what it brought is then :meth:`held_object`'s."""


@runtime_checkable
class JournalsUploads(Protocol):
    """A sync store whose multipart uploads outlive a mount that dies (S3): it notes each while
    it is open in ``upload_log`` (given by the mount), and the next mount of its ``scope``
    aborts those a dead one left."""

    upload_log: Any

    @property
    def scope(self) -> str:
        """Where the store's objects live, however its source was spelled (S3: the endpoint, the
        bucket and the prefix)."""

    def abort_uploads(self, uploads: dict[str, str]) -> dict[str, str]:
        """Abort the uploads ``{upload id: key}`` a dead mount left open; returns those that
        could not be aborted."""


# ---------------------------------------------------------------------- the NCZarr layer's hooks
# Asked of a store that has them (isinstance), through the helpers below; a wrapper has each
# that the store below has (:func:`offer_hooks`), unless it answers it itself.


@runtime_checkable
class ChecksContent(Protocol):
    """An async store whose ``set`` refuses some contents (metadata the NCZarr layer checks)."""

    def checks_content(self, key: str) -> bool:
        """Does ``set(key, ...)`` refuse some contents? Then the filesystem calls
        :meth:`check_content` at every write() of that file, so that a refusal reaches a writer
        that ignores what close() returns (netCDF-C does)."""

    async def check_content(self, key: str, data: bytes) -> None:
        """Raise what ``set(key, data)`` would raise because of ``data``, storing nothing; content
        still being written (not yet a whole object) is not judged."""


@runtime_checkable
class HasReadOnlyKeys(Protocol):
    def read_only_key(self, key: str) -> bool:
        """Is ``key`` an object nothing may change (a file a wrapper makes up, as ``-o nc_files``
        does), or a directory whose whole tree refuses writes (Icechunk's ``.icechunk`` history),
        although the store takes others? Only keys already shown by ``entry``/``stat``/``list_dir``
        are asked about."""


@runtime_checkable
class Hides(Protocol):
    def hides(self, key: str) -> bool:
        """Does ``key`` exist without being listed (Icechunk's ``.icechunk``)? Then its parent's
        listing does not tell that it is missing."""


#: each hook, by its methods
HOOKS: dict[type, tuple[str, ...]] = {ChecksContent: ("checks_content", "check_content"),
                                      HasReadOnlyKeys: ("read_only_key",), Hides: ("hides",)}


def offer_hooks(store: object, below: object) -> None:
    """Give ``store`` (a wrapper) each hook ``below`` has and ``store``'s class does not answer
    itself: ``below``'s methods, called directly (the hooks do no I/O but ``check_content``)."""
    for protocol, methods in HOOKS.items():
        if offers(below, protocol) and not _answers_itself(store, methods):
            for method in methods:
                setattr(store, method, getattr(below, method))


def _answers_itself(store: object, methods: Iterable[str]) -> bool:
    """Does ``store``'s class itself define one of ``methods``?"""
    return any(hasattr(type(store), m) for m in methods)


def checks_content(store: object, key: str) -> bool:
    """:meth:`ChecksContent.checks_content`; False for a store without the hook."""
    return offers(store, ChecksContent) and cast(ChecksContent, store).checks_content(key)


async def check_content(store: object, key: str, data: bytes) -> None:
    """:meth:`ChecksContent.check_content`; nothing for a store without the hook."""
    if offers(store, ChecksContent):
        await cast(ChecksContent, store).check_content(key, data)


def read_only_key(store: object, key: str) -> bool:
    """:meth:`HasReadOnlyKeys.read_only_key`; False for a store without the hook."""
    return offers(store, HasReadOnlyKeys) and cast(HasReadOnlyKeys, store).read_only_key(key)


def hides(store: object, key: str) -> bool:
    """:meth:`Hides.hides`; False for a store without the hook."""
    return offers(store, Hides) and cast(Hides, store).hides(key)


#: ``merge(key, theirs, ours, base)``: the object ``key`` that another program (``theirs``) and
#: this mount (``ours``) both changed since ``base`` (None: there was none), merged; None: it cannot be
Merge = Callable[[str, bytes, bytes, "bytes | None"], "bytes | None"]


@runtime_checkable
class MergesBothChanged(Protocol):
    """A store that finds objects another program changed while the mount's own change of them
    was still staged (zip: :mod:`nczfs.store.zip.behind`) and keeps the mount's version beside
    them; told how, it merges the objects ``wants`` names instead."""

    def merge_with(self, merge: Merge, wants: Callable[[str], bool]) -> None:
        """From now on, an object ``key`` both changed with ``wants(key)`` is ``merge``'s answer
        (where it gives one)."""


#: each fast path, by the name of its one method
FAST_PATHS: dict[str, type] = {"stage": Stages, "open_upload": UploadsInParts, "list_tree": ListsTrees}


def offer_fast_paths(store: object, below: object, names: Iterable[str]) -> None:
    """Give ``store`` (a wrapper) each fast path of ``names`` that ``below`` offers: its method
    ``NAME`` is then ``store._NAME`` (which answers it through ``below``); the others it lacks,
    so that ``isinstance(store, Stages)`` and the like say what it really offers."""
    offer(store, below, {FAST_PATHS[name]: (name,) for name in names}, "_")


def offer(store: object, below: object, groups: dict[type, tuple[str, ...]], prefix: str = OPTIONAL_PREFIX) -> None:
    """Give ``store`` (a wrapper) each group of methods whose Protocol ``below`` implements: its
    method ``NAME`` is then ``store.{prefix}NAME`` (which answers it through ``below``), unless its
    class answers ``NAME`` itself; it lacks the others, so that ``isinstance(store, P)`` says what
    it really offers."""
    for protocol, methods in groups.items():
        if offers(below, protocol):
            for name in methods:
                if not _answers_itself(store, (name,)):
                    setattr(store, name, getattr(store, prefix + name))


#: the optional operations a wrapper over an async store has where that store has them
WRAPPED: dict[type, tuple[str, ...]] = {protocol: methods for protocol, (_, methods) in OPTIONAL.items()}
#: those a ThreadedStore has where its SyncStore has them (by their blocking forms)
THREADED: dict[type, tuple[str, ...]] = {blocking: methods for protocol, (blocking, methods) in OPTIONAL.items()
                                         if protocol is not Refreshes}
