"""The optional operations of a store: each group a :class:`typing.Protocol` a store implements or
not, outside the ABC's dozen (:mod:`nczfs.store.base`), and the helpers callers use, which answer
for a store without it what the medium would (ENOTSUP, EINVAL... through :mod:`nczfs.toolbox.errors`).

A group has an async form (the name alone: a :class:`~nczfs.store.base.Store`'s) and, where its
methods do I/O, a blocking one (``...Blocking``: a :class:`~nczfs.store.base.SyncStore`'s); one
that does none (``write_meta``, ``check_new_key``, ``counters``, ``describe``) is one Protocol for
both. A wrapper has a group exactly where the store below has it
(:func:`~nczfs.store.capabilities.offer`, over :data:`OPTIONAL`). Callers ask with :func:`offers`
(``isinstance``, its answer kept per store: a Protocol check is slow, docs/PERFORMANCE.md).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from nczfs.toolbox.errors import InvalidArgument, NotSupported
from nczfs.store.keys import check_key
from nczfs.store.values import DirEntry, FsStats, Meta, ObjectInfo

if TYPE_CHECKING:
    from nczfs.store.base import Store


# ---------------------------------------------------------------------- POSIX attributes
@runtime_checkable
class KeepsMeta(Protocol):
    """Objects' (and maybe directories') POSIX attributes kept in the medium: modes, owners, times."""

    async def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        """Keep the attributes ``changes`` says (the others as they are) for the object (or, with
        ``is_dir``, the directory) ``key``; all those it now has in the medium. NotSupported
        where the medium keeps none for that kind of entry."""


@runtime_checkable
class KeepsMetaBlocking(Protocol):
    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        """:meth:`KeepsMeta.set_meta`, blocking."""


@runtime_checkable
class SendsMetaWithWrites(Protocol):
    """Attributes stored with an object by its writes (S3: the user metadata of its PutObject)."""

    def write_meta(self, key: str, meta: Meta | None) -> None:
        """The attributes the writes of ``key`` store with its object from now on (None: none
        again); a write that stored them says so in its ``ObjectInfo.meta``. No I/O."""


# ---------------------------------------------------------------------- special files, links, truncate
@runtime_checkable
class MakesNodes(Protocol):
    """Symlinks and special files (fifos, sockets, devices) kept in the medium."""

    async def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """Create a symlink to ``target`` (``meta.mode`` says S_IFLNK) or a special file
        (``meta.mode`` and ``meta.rdev``) at ``key``, with these attributes."""

    async def readlink(self, key: str) -> str:
        """The target of the symlink ``key`` (InvalidArgument: not one)."""


@runtime_checkable
class MakesNodesBlocking(Protocol):
    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """:meth:`MakesNodes.make_node`, blocking."""

    def readlink(self, key: str) -> str:
        """:meth:`MakesNodes.readlink`, blocking."""


@runtime_checkable
class HardLinks(Protocol):
    async def link(self, src: str, dst: str) -> ObjectInfo:
        """Make ``dst`` a second name of the object ``src`` (a hard link); NotSupported where
        this medium cannot (the caller copies instead)."""


@runtime_checkable
class HardLinksBlocking(Protocol):
    def link(self, src: str, dst: str) -> ObjectInfo:
        """:meth:`HardLinks.link`, blocking."""


@runtime_checkable
class Truncates(Protocol):
    async def truncate(self, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
        """Cut or extend (with a hole where the medium has them) the object ``key`` in place,
        only while it is version ``if_version`` (None: any; else Conflict)."""


@runtime_checkable
class TruncatesBlocking(Protocol):
    def truncate(self, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
        """:meth:`Truncates.truncate`, blocking."""


# ---------------------------------------------------------------------- directories
@runtime_checkable
class KeepsDirectories(Protocol):
    """Empty directories kept in the medium as entries of their own (a directory tree, a zip)."""

    async def mkdir(self, prefix: str) -> None: ...

    async def rmdir(self, prefix: str) -> None: ...


@runtime_checkable
class KeepsDirectoriesBlocking(Protocol):
    def mkdir(self, prefix: str) -> None: ...

    def rmdir(self, prefix: str) -> None: ...


@runtime_checkable
class RenamesDirectories(Protocol):
    async def rename_dir(self, src: str, dst: str) -> None:
        """Move every key under ``src`` to ``dst`` (which holds none: checked by the caller),
        in one step of the medium's or key by key as the store knows best."""


@runtime_checkable
class RenamesDirectoriesBlocking(Protocol):
    def rename_dir(self, src: str, dst: str) -> None:
        """:meth:`RenamesDirectories.rename_dir`, blocking."""


@runtime_checkable
class ForgetsDirectories(Protocol):
    async def forget_dir(self, prefix: str) -> None:
        """An empty directory was removed on a store that keeps none: drop any trace of it (S3 markers)."""


@runtime_checkable
class ForgetsDirectoriesBlocking(Protocol):
    def forget_dir(self, prefix: str) -> None:
        """:meth:`ForgetsDirectories.forget_dir`, blocking."""


@runtime_checkable
class TellsDirectories(Protocol):
    async def dir_exists(self, prefix: str) -> bool:
        """Is ``prefix`` a directory (the root, a stored directory, a key prefix)? Asked of the
        medium more cheaply than a listing."""


@runtime_checkable
class TellsDirectoriesBlocking(Protocol):
    def dir_exists(self, prefix: str) -> bool:
        """:meth:`TellsDirectories.dir_exists`, blocking."""


# ---------------------------------------------------------------------- small files read together
#: what :meth:`ReadsSmallFiles.read_small` answers per key it found: the key, its entry, and its
#: bytes (None: a directory, a special file, or a file over the limit)
SmallFile = tuple[str, DirEntry, bytes | None]


@runtime_checkable
class ReadsSmallFiles(Protocol):
    """A medium where reading a few small files in one call costs less than a call each (a local
    directory: one worker thread's hop instead of two a file)."""

    async def read_small(self, keys: list[str], limit: int) -> list[SmallFile]:
        """Each key of ``keys`` that exists: its entry, and its bytes if it is a regular file of
        at most ``limit`` bytes (the version the entry names); missing keys are left out."""


@runtime_checkable
class ReadsSmallFilesBlocking(Protocol):
    def read_small(self, keys: list[str], limit: int) -> list[SmallFile]:
        """:meth:`ReadsSmallFiles.read_small`, blocking."""


# ---------------------------------------------------------------------- what a store says of itself
@runtime_checkable
class ReportsSpace(Protocol):
    async def statfs(self) -> FsStats | None:
        """The medium's capacity figures (None: it has none to give)."""


@runtime_checkable
class ReportsSpaceBlocking(Protocol):
    def statfs(self) -> FsStats | None:
        """:meth:`ReportsSpace.statfs`, blocking."""


@runtime_checkable
class LimitsKeys(Protocol):
    def check_new_key(self, key: str) -> None:
        """Refuse, before anything is written, a key the medium could not name (S3: longer than
        1,024 bytes) with the error its write would give. No I/O."""


@runtime_checkable
class Counts(Protocol):
    def counters(self) -> dict[str, int]:
        """Request counts by kind, for ``nczfs stats``."""


@runtime_checkable
class Describes(Protocol):
    def describe(self) -> str:
        """The medium, in a line for messages (its URL or path)."""


@runtime_checkable
class ReportsProblems(Protocol):
    """A sync store that finds faults in the medium itself."""

    def problems(self) -> list[str]:
        """What is wrong with the medium, one line each (``nczfs validate``; warned at mount
        time): duplicate zip members, reference targets no read may reach."""


@runtime_checkable
class Refreshes(Protocol):
    """An async store that keeps answers (a cache)."""

    async def refresh(self, key: str) -> None:
        """Forget what is kept about ``key``, so the next read of it asks the medium."""


#: each optional group: its async form -> (its blocking form, its methods)
OPTIONAL: dict[type, tuple[type, tuple[str, ...]]] = {
    KeepsMeta: (KeepsMetaBlocking, ("set_meta",)),
    SendsMetaWithWrites: (SendsMetaWithWrites, ("write_meta",)),
    MakesNodes: (MakesNodesBlocking, ("make_node", "readlink")),
    HardLinks: (HardLinksBlocking, ("link",)),
    Truncates: (TruncatesBlocking, ("truncate",)),
    KeepsDirectories: (KeepsDirectoriesBlocking, ("mkdir", "rmdir")),
    RenamesDirectories: (RenamesDirectoriesBlocking, ("rename_dir",)),
    ForgetsDirectories: (ForgetsDirectoriesBlocking, ("forget_dir",)),
    TellsDirectories: (TellsDirectoriesBlocking, ("dir_exists",)),
    ReportsSpace: (ReportsSpaceBlocking, ("statfs",)),
    ReadsSmallFiles: (ReadsSmallFilesBlocking, ("read_small",)),
    LimitsKeys: (LimitsKeys, ("check_new_key",)),
    Counts: (Counts, ("counters",)),
    Describes: (Describes, ("describe",)),
    Refreshes: (Refreshes, ("refresh",)),
}

#: a wrapper's method that answers the optional operation NAME is ``_optional_NAME``
OPTIONAL_PREFIX = "_optional_"

#: the Protocols each live store was asked about (by ``id``; an entry goes with its store)
_ANSWERS: dict[int, dict[type, bool]] = {}


def offers(store: object, protocol: type) -> bool:
    """``isinstance(store, protocol)``, asked once per store (what it offers is settled when it
    is made: a wrapper's in its ``__init__``)."""
    known = _ANSWERS.get(id(store))
    if known is None:
        try:
            weakref.finalize(store, _ANSWERS.pop, id(store), None)
        except TypeError:  # no weak reference to it: asked each time
            return isinstance(store, protocol)
        known = _ANSWERS[id(store)] = {}
    answer = known.get(protocol)
    if answer is None:
        answer = known[protocol] = isinstance(store, protocol)
    return answer


# ---------------------------------------------------------------------- asked of any async store
async def set_meta(store: object, key: str, changes: Meta, is_dir: bool = False) -> Meta:
    if offers(store, KeepsMeta):
        return await cast(KeepsMeta, store).set_meta(key, changes, is_dir)
    raise NotSupported(f"{key!r}: this store keeps no file attributes")


def write_meta(store: object, key: str, meta: Meta | None) -> None:
    """:meth:`SendsMetaWithWrites.write_meta`; nothing where the writes store no attributes."""
    if offers(store, SendsMetaWithWrites):
        cast(SendsMetaWithWrites, store).write_meta(key, meta)


async def make_node(store: object, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
    if offers(store, MakesNodes):
        return await cast(MakesNodes, store).make_node(key, meta, target)
    raise NotSupported(f"{key!r}: this store holds regular files only")


async def readlink(store: object, key: str) -> str:
    if offers(store, MakesNodes):
        return await cast(MakesNodes, store).readlink(key)
    raise InvalidArgument(f"{key!r}: not a symlink")


async def link(store: object, src: str, dst: str) -> ObjectInfo:
    if offers(store, HardLinks):
        return await cast(HardLinks, store).link(src, dst)
    raise NotSupported(f"{src!r}: this store has no hard links")


async def truncate(store: object, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
    if offers(store, Truncates):
        return await cast(Truncates, store).truncate(key, size, if_version=if_version)
    raise NotSupported(f"{key!r}: objects are written whole")


async def mkdir(store: object, prefix: str) -> None:
    if not offers(store, KeepsDirectories):
        raise NotSupported(f"{prefix!r}: this store keeps no empty directories")
    await cast(KeepsDirectories, store).mkdir(prefix)


async def rmdir(store: object, prefix: str) -> None:
    if not offers(store, KeepsDirectories):
        raise NotSupported(f"{prefix!r}: this store keeps no empty directories")
    await cast(KeepsDirectories, store).rmdir(prefix)


async def rename_dir(store: Store, src: str, dst: str) -> None:
    """:meth:`RenamesDirectories.rename_dir`; elsewhere each key below ``src`` renamed."""
    if offers(store, RenamesDirectories):
        await cast(RenamesDirectories, store).rename_dir(src, dst)
    else:
        for key in await store.list_prefix(src):
            await store.rename(key, dst + key[len(src):])


async def dir_exists(store: Store, prefix: str) -> bool:
    """:meth:`TellsDirectories.dir_exists`; elsewhere: the root, or a prefix that lists something."""
    if offers(store, TellsDirectories):
        return await cast(TellsDirectories, store).dir_exists(prefix)
    return prefix == "" or bool(await store.list_dir(prefix))


async def forget_dir(store: object, prefix: str) -> None:
    """:meth:`ForgetsDirectories.forget_dir`; nothing where no trace is left."""
    if offers(store, ForgetsDirectories):
        await cast(ForgetsDirectories, store).forget_dir(prefix)


async def statfs(store: object) -> FsStats | None:
    return await cast(ReportsSpace, store).statfs() if offers(store, ReportsSpace) else None


def check_new_key(store: object, key: str) -> None:
    """A key the store could not name refused (every store: :func:`~nczfs.store.keys.check_key`)."""
    check_key(key)
    if offers(store, LimitsKeys):
        cast(LimitsKeys, store).check_new_key(key)


def counters(store: object) -> dict[str, int]:
    """:meth:`Counts.counters`; {} for a store that counts nothing."""
    return cast(Counts, store).counters() if offers(store, Counts) else {}


def describe(store: object) -> str:
    """:meth:`Describes.describe`; the store's class name where it says nothing more."""
    return cast(Describes, store).describe() if offers(store, Describes) else type(store).__name__


def problems(store: object) -> list[str]:
    """:meth:`ReportsProblems.problems`; none for a store that finds none."""
    return cast(ReportsProblems, store).problems() if offers(store, ReportsProblems) else []


async def refresh(store: object, key: str) -> None:
    """:meth:`Refreshes.refresh`; nothing where nothing is kept."""
    if offers(store, Refreshes):
        await cast(Refreshes, store).refresh(key)
