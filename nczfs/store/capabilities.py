"""What a store says it can do: the capabilities it declares (:data:`CAPABILITIES`, class
attributes of :class:`~nczfs.store.base.SyncStore`, which a wrapper answers from the store below)
and the optional fast paths, each a :class:`typing.Protocol` a store implements or not, asked
with ``isinstance``: :class:`Stages` (data sent now, made the object later), :class:`UploadsInParts`
(an object sent in parts as it is written), :class:`ListsTrees` (a whole tree in one request),
:class:`ReadsOnLoop` (reads awaited without a worker thread); and :class:`MergesBothChanged` (told
by the layer above how to merge an object both it and another program changed)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Protocol, runtime_checkable

from nczfs.store.values import ByteRange


#: what a store says of itself, as class attributes of :class:`~nczfs.store.base.SyncStore`
#: (documented there); a wrapper answers each from the store below (:func:`forwards_capabilities`)
CAPABILITIES = ("supports_writes", "stores_directories", "read_only", "keys_form_a_tree", "checks_versions",
                "checks_writes", "checks_deletes", "keeps_meta", "live_meta", "max_object_size")


def forwards_capabilities(cls: type) -> type:
    """Class decorator: each of :data:`CAPABILITIES` a property answering what ``self.below``
    (the store a wrapper wraps) says, unless the class sets it itself."""
    for name in CAPABILITIES:
        if name not in cls.__dict__:
            setattr(cls, name, _below(name))
    return cls


def _below(name: str) -> property:
    """A property answering what ``self.below`` says of ``name``."""
    return property(lambda self: getattr(self.below, name))


# ---------------------------------------------------------------------- the optional fast paths
# Each is implemented by a store or not (isinstance tells); a sync store's method blocks, an
# async store's is a coroutine, and its Staged/Upload callables likewise.


@runtime_checkable
class Stages(Protocol):
    def stage(self, key: str, data: bytes) -> Any:
        """Send ``data`` for ``key`` without making it visible yet (see
        :class:`~nczfs.store.values.Staged`); None: not this time (an empty object), the caller
        stores the data with ``set`` when it is time."""


@runtime_checkable
class UploadsInParts(Protocol):
    def open_upload(self, key: str) -> Any:
        """Start sending an object ``key`` in parts (see :class:`~nczfs.store.values.Upload`);
        None: not this key, the caller stores the data with ``set`` or ``set_file`` when it is
        complete."""


@runtime_checkable
class ListsTrees(Protocol):
    def list_tree(self, prefix: str, limit: int) -> Any:
        """The listings of ``prefix`` and of every directory below it (see
        :func:`~nczfs.store.keys.tree_listings`), where one request of at most ``limit`` keys
        fetches them all (S3: a ListObjectsV2 without a delimiter); None where the tree holds
        more keys (or, this time, cannot be listed so)."""


@runtime_checkable
class ReadsOnLoop(Protocol):
    """A sync store some of whose reads are awaited on the trio thread, without a worker thread
    (sent on an asyncio loop thread of its own: Icechunk's, large GETs over https)."""

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """``get_version``, awaited; None: this read is left to ``get_version`` in a worker thread."""


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
    for name in names:
        if isinstance(below, FAST_PATHS[name]):
            setattr(store, name, getattr(store, f"_{name}"))
