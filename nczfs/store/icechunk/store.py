"""Icechunk repositories: a branch, tag or snapshot as a store, and its history under ``.icechunk/``.

Keys are the Zarr v3 keys zarr-python uses (``zarr.json``, ``v/zarr.json``, ``v/c/0/1``), read and
written through the ``icechunk`` package's store, whose calls are coroutines run on one asyncio
loop (:mod:`nczfs.aiobridge`): reads from trio without a worker thread (``get_version_async``),
the rest from the worker threads every SyncStore runs in.

A branch mount writes in one writable session; :meth:`IcechunkStore.sync` (``nczfs sync``, fsync,
unmount) makes its changes one commit, rebased onto commits made elsewhere meanwhile when they do
not conflict. Files Icechunk cannot hold (yet) wait in the session: a chunk written before its
array's ``zarr.json`` is stored when the array is; any other file (not Zarr v3) makes the commit
fail, naming it, until it is removed or renamed. Objects' etags name the snapshot their bytes come
from (and a write counter for bytes written in the session), so nczfs's cache is keyed by
snapshot and chunk.

``.icechunk/`` is never listed in the root but can be looked up: ``branches/NAME/``,
``tags/NAME/`` and ``snapshots/ID/`` (the ancestry of what is mounted), each a read-only tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from nczfs.aiobridge import AsyncioBridge
from nczfs.errors import (
    BackendError,
    InvalidArgument,
    IsADirectory,
    KeyNotFound,
    NotADirectory,
    ReadOnly,
    SourceError,
)
from nczfs.store.base import ByteRange, DirEntry, ObjectInfo, SyncStore, check_key, check_prefix, join, usable_name

log = logging.getLogger(__name__)

#: the hidden directory of branches, tags and snapshots
HISTORY = ".icechunk"
HISTORY_KINDS = ("branches", "snapshots", "tags")
#: Zarr v2 metadata names, which Icechunk refuses
V2_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})
#: seconds a branch tip, the branch and tag lists and the ancestry are reused under .icechunk/
REF_TTL = 1.0
#: read-only sessions kept open for .icechunk/ (one per snapshot)
TREES_KEPT = 32


def reason(exc: BaseException) -> str:
    """Icechunk's error text on one line: its message and the causes it lists."""
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    lines = [ln.strip() for ln in str(exc).splitlines()]
    head = next((ln.removeprefix("x ").strip() for ln in lines if ln), type(exc).__name__)
    causes = [ln.split("-> ", 1)[1].strip() for ln in lines if "-> " in ln and ln[:1] in "|`"]
    return ": ".join(dict.fromkeys([head, *causes]))


def _refused_key(exc: BaseException) -> bool:
    """Did Icechunk refuse a write because of the key (not yet or never a Zarr v3 key of a node
    it has), rather than because of the data?"""
    text = str(exc)
    return isinstance(exc, KeyError) or "invalid zarr key" in text or "invalid chunk index" in text or "node not found" in text


def _missing(exc: BaseException) -> bool:
    return isinstance(exc, KeyError) or "invalid zarr key" in str(exc) or "not found" in str(exc)


@dataclass(frozen=True)
class ChunkLayout:
    """Where an array's chunk keys lie: how many key segments a chunk key has below the array."""

    depth: int

    @classmethod
    def of(cls, meta: dict[str, Any]) -> "ChunkLayout":
        ndim = len(meta.get("shape") or ())
        enc = meta.get("chunk_key_encoding") or {}
        name = enc.get("name", "default")
        sep = (enc.get("configuration") or {}).get("separator", "/" if name == "default" else ".")
        if sep != "/":
            return cls(1)
        return cls(ndim + 1 if name == "default" else max(ndim, 1))


class SnapshotTree:
    """The Zarr tree of one Icechunk session, read through its store."""

    def __init__(self, bridge: AsyncioBridge, session: Any, etag: str, mtime_ns: int):
        self.bridge = bridge
        self.session = session
        self.py = session.store._store  # the coroutines of icechunk's IcechunkStore, without zarr's buffers
        self.etag = etag
        self.mtime_ns = mtime_ns
        #: node path -> its chunk layout (None: not an array)
        self._layouts: dict[str, ChunkLayout | None] = {}

    # -------------------------------------------------------------- coroutines (run in the loop)

    async def _get(self, key: str, rng: ByteRange | None) -> bytes:
        try:
            if rng is not None and key.rpartition("/")[2] == "zarr.json":
                # Icechunk 1.1 panics on a range past the end of metadata (chunks are clipped)
                return rng.slice(await self.py.get(key, (None, None)))
            return bytes(await self.py.get(key, (None, None) if rng is None else (rng.start, rng.end)))
        except Exception as exc:  # noqa: BLE001 - icechunk raises KeyError and IcechunkError
            if _missing(exc):
                raise KeyNotFound(key) from None
            if "virtual chunk container" in str(exc):
                raise BackendError(f"{key!r}: a virtual chunk whose container the mount does not name: mount with "
                                   f"-o virtual_chunk_container=PREFIX[=URL] ({reason(exc).split(', see http')[0]})") from None
            raise BackendError(f"{key!r}: {reason(exc)}") from exc

    async def _size(self, key: str) -> int | None:
        try:
            if not await self.py.exists(key):  # getsize answers 0 for a missing chunk
                return None
            return await self.py.getsize(key)
        except Exception as exc:  # noqa: BLE001
            if _missing(exc):
                return None
            raise BackendError(f"{key!r}: {reason(exc)}") from exc

    async def _names(self, method: str, prefix: str) -> list[str]:
        try:
            return [k async for k in getattr(self.py, method)(prefix)]
        except Exception as exc:  # noqa: BLE001
            if _missing(exc):
                return []
            raise BackendError(f"{prefix or '/'}: listing failed: {reason(exc)}") from exc

    # -------------------------------------------------------------- blocking face

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.bridge.run(self._get, key, rng)

    async def get_async(self, key: str, rng: ByteRange | None) -> bytes:
        return await self.bridge.trio_run(self._get, key, rng)

    def size(self, key: str) -> int | None:
        return self.bridge.run(self._size, key)

    def layout(self, node: str) -> ChunkLayout | None:
        if node in self._layouts:
            return self._layouts[node]
        try:
            meta = json.loads(self.get(join(node, "zarr.json")))
        except (KeyNotFound, ValueError):
            meta = None
        found = ChunkLayout.of(meta) if isinstance(meta, dict) and meta.get("node_type") == "array" else None
        self._layouts[node] = found
        return found

    def forget_layouts(self) -> None:
        self._layouts.clear()

    def file_test(self, prefix: str) -> Callable[[str], bool]:
        """Which children of ``prefix`` are files: ``zarr.json``, and chunk keys at their depth."""
        segs = prefix.split("/") if prefix else []
        for i in range(len(segs), -1, -1):
            layout = self.layout("/".join(segs[:i]))
            if layout is not None:
                below = len(segs) - i
                return lambda name: (below == 0 and name == "zarr.json") or below + 1 == layout.depth
        return lambda name: name == "zarr.json"

    async def _sizes(self, keys: list[str]) -> list[int]:
        try:
            return list(await asyncio.gather(*(self.py.getsize(k) for k in keys)))
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"{keys[0] if keys else ''!r}...: sizes not read: {reason(exc)}") from exc

    def list_dir(self, prefix: str) -> list[DirEntry]:
        names = self.bridge.run(self._names, "list_dir", prefix)
        if not names:
            return []
        is_file = self.file_test(prefix)
        names = [n for n in sorted(set(names)) if usable_name(n)]
        files = [n for n in names if is_file(n)]
        # sizes come with the listing, as every store's do (ls -l, readdirplus)
        sizes = dict(zip(files, self.bridge.run(self._sizes, [join(prefix, n) for n in files]))) if files else {}
        return [
            DirEntry(n, False, ObjectInfo(join(prefix, n), sizes[n], self.mtime_ns, self.etag)) if n in sizes else DirEntry(n, True)
            for n in names
        ]

    def has_children(self, prefix: str) -> bool:
        """Is ``prefix`` a directory of the tree (names only: no sizes asked for)?"""
        return bool(self.bridge.run(self._names, "list_dir", prefix))

    def list_prefix(self, prefix: str) -> list[str]:
        # Icechunk lists below a node only: below a chunk directory its array is listed, below
        # anything else that is no node the whole tree, and the keys filtered
        segs = prefix.split("/") if prefix else []
        node = next(("/".join(segs[:i]) for i in range(len(segs), -1, -1) if self.layout("/".join(segs[:i]))), None)
        try:
            keys = self.bridge.run(self._names, "list_prefix", prefix if node is None else node)
        except BackendError:
            keys = self.bridge.run(self._names, "list_prefix", "")
        return sorted(k for k in keys if not prefix or k.startswith(prefix + "/"))

    def info(self, key: str) -> ObjectInfo | None:
        size = self.size(key)
        return None if size is None else ObjectInfo(key, size, self.mtime_ns, self.etag)


class _SharedExclusive:
    """Writes share it; a commit has it alone."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive)
            self._exclusive = True
            self._cond.wait_for(lambda: self._shared == 0)
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def _written_ns(info: Any) -> int:
    return int(info.written_at.timestamp() * 1e9)


class IcechunkStore(SyncStore):
    stores_directories = False
    keys_form_a_tree = True

    def __init__(
        self,
        repo: Any,
        *,
        branch: str | None = None,
        tag: str | None = None,
        snapshot: str | None = None,
        read_only: bool = False,
        commit_message: str | None = None,
        where: str = "",
        bridge: AsyncioBridge | None = None,
    ):
        if sum(x is not None for x in (branch, tag, snapshot)) > 1:
            raise SourceError("choose one of -o branch=, -o tag= and -o snapshot=")
        self.repo = repo
        self.where = where or "icechunk repository"
        self.tag, self.snapshot = tag, snapshot
        self.branch = branch if branch is not None or tag is not None or snapshot is not None else "main"
        self.read_only = read_only or tag is not None or snapshot is not None
        self.commit_message = commit_message
        self.bridge = bridge or AsyncioBridge("icechunk-io")
        self._own_bridge = bridge is None
        self._rw = _SharedExclusive()
        self._meta_lock = threading.Lock()
        #: files written in the session that Icechunk does not take (yet): key -> (bytes, info)
        self._waiting: dict[str, tuple[bytes, ObjectInfo]] = {}
        #: etag and mtime of objects written in this session
        self._written: dict[str, tuple[str, int]] = {}
        self._writes = 0
        self._refs: dict[tuple[str, str], tuple[float, Any]] = {}
        self._trees: OrderedDict[str, SnapshotTree] = OrderedDict()
        self.commits = 0
        #: the branch the uncommitted writes were kept on at close (None: there were none)
        self.unmerged_branch: str | None = None
        self.tree = self._open_main()

    # ------------------------------------------------------------------ sessions

    def _open_main(self) -> SnapshotTree:
        try:
            if self.tag is not None:
                session = self.repo.readonly_session(tag=self.tag)
            elif self.snapshot is not None:
                session = self.repo.readonly_session(snapshot_id=self.snapshot)
            elif self.read_only:
                session = self.repo.readonly_session(branch=self.branch)
            else:
                session = self.repo.writable_session(self.branch)
        except Exception as exc:  # noqa: BLE001 - a missing ref is an IcechunkError
            what = f"tag {self.tag!r}" if self.tag else f"snapshot {self.snapshot!r}" if self.snapshot else f"branch {self.branch!r}"
            raise SourceError(f"{self.where}: cannot open {what}: {reason(exc)}") from None
        snap = session.snapshot_id
        return SnapshotTree(self.bridge, session, snap, self._snapshot_ns(snap))

    def _snapshot_ns(self, snap: str) -> int:
        try:
            return _written_ns(self.repo.lookup_snapshot(snap))
        except Exception:  # noqa: BLE001 - a time is only decoration
            return time.time_ns()

    # ------------------------------------------------------------------ routing

    @staticmethod
    def _history(key: str) -> list[str] | None:
        if key == HISTORY or key.startswith(HISTORY + "/"):
            return key.split("/")[1:]
        return None

    def _ref(self, kind: str, name: str, fetch: Callable[[], Any]) -> Any:
        now = time.monotonic()
        hit = self._refs.get((kind, name))
        if hit is not None and now - hit[0] < REF_TTL:
            return hit[1]
        value = fetch()
        self._refs[(kind, name)] = (now, value)
        return value

    def _ancestry(self) -> list[str]:
        def fetch() -> list[str]:
            if self.tag is not None:
                infos = self.repo.ancestry(tag=self.tag)
            elif self.snapshot is not None:
                infos = self.repo.ancestry(snapshot_id=self.snapshot)
            else:
                infos = self.repo.ancestry(branch=self.branch)
            return [i.id for i in infos]

        return self._ref("ancestry", "", fetch)

    def _kind_names(self, kind: str) -> list[str]:
        if kind == "branches":
            names = self._ref("list", kind, lambda: sorted(self.repo.list_branches()))
        elif kind == "tags":
            names = self._ref("list", kind, lambda: sorted(self.repo.list_tags()))
        else:
            names = sorted(self._ancestry())
        return [n for n in names if usable_name(n)]

    def _resolve(self, kind: str, name: str) -> str | None:
        """The snapshot id ``.icechunk/KIND/NAME`` shows, or None."""
        if kind not in HISTORY_KINDS:
            return None
        if kind == "snapshots":
            return name if name in self._ancestry() else None
        lookup = self.repo.lookup_branch if kind == "branches" else self.repo.lookup_tag

        def fetch() -> str | None:
            try:
                return lookup(name)
            except Exception:  # noqa: BLE001 - no such branch or tag
                return None

        return self._ref(kind, name, fetch)

    def _tree_for(self, snap: str) -> SnapshotTree:
        with self._meta_lock:
            tree = self._trees.get(snap)
            if tree is not None:
                self._trees.move_to_end(snap)
                return tree
        session = self.repo.readonly_session(snapshot_id=snap)
        tree = SnapshotTree(self.bridge, session, snap, self._snapshot_ns(snap))
        with self._meta_lock:
            self._trees[snap] = tree
            while len(self._trees) > TREES_KEPT:
                self._trees.popitem(last=False)
        return tree

    def _history_tree(self, parts: list[str]) -> tuple[SnapshotTree, str] | None:
        """The tree and key within it that ``.icechunk/KIND/NAME/rest`` names (None: no such ref)."""
        snap = self._resolve(parts[0], parts[1])
        if snap is None:
            return None
        return self._tree_for(snap), "/".join(parts[2:])

    # ------------------------------------------------------------------ reads

    def _main_info(self, key: str) -> ObjectInfo | None:
        waiting = self._waiting.get(key)
        if waiting is not None:
            return waiting[1]
        info = self.tree.info(key)
        if info is not None and key in self._written:
            etag, mtime = self._written[key]
            info = ObjectInfo(key, info.size, mtime, etag)
        return info

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        check_key(key)
        parts = self._history(key)
        if parts is not None:
            found = self._history_tree(parts) if len(parts) > 2 else None
            if found is None:
                raise KeyNotFound(key)
            return found[0].get(found[1], rng)
        waiting = self._waiting.get(key)
        if waiting is not None:
            return waiting[0] if rng is None else rng.slice(waiting[0])
        return self.tree.get(key, rng)

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """Reads of the mounted tree from trio, through the loop without a worker thread (None:
        let a worker thread do it: history keys, whose refs may need looking up)."""
        check_key(key)
        if self._history(key) is not None or key in self._waiting:
            return None
        return await self.tree.get_async(key, rng)

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        parts = self._history(key)
        if parts is not None:
            found = self._history_tree(parts) if len(parts) > 2 else None
            info = found[0].info(found[1]) if found is not None and found[1] else None
            if info is None:
                raise KeyNotFound(key)
            return ObjectInfo(key, info.size, info.mtime_ns, info.etag)
        info = self._main_info(key)
        if info is None:
            raise KeyNotFound(key)
        return info

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        parts = self._history(prefix)
        if parts is not None:
            return self._list_history(prefix, parts)
        entries = {}
        for e in self.tree.list_dir(prefix):
            written = self._written.get(join(prefix, e.name)) if e.info is not None else None
            entries[e.name] = e if written is None else DirEntry(e.name, False, ObjectInfo(e.info.key, e.info.size, written[1], written[0]))
        self._add_waiting(prefix, entries)
        return [entries[n] for n in sorted(entries)]

    def _list_history(self, prefix: str, parts: list[str]) -> list[DirEntry]:
        """A directory of ``.icechunk/``: the kinds, a kind's names, or a snapshot's tree."""
        if not parts:
            return [DirEntry(k, True) for k in HISTORY_KINDS]
        if len(parts) == 1:
            return [DirEntry(n, True) for n in self._kind_names(parts[0])] if parts[0] in HISTORY_KINDS else []
        found = self._history_tree(parts)
        if found is None:
            return []
        return [e if e.info is None else DirEntry(e.name, False, ObjectInfo(join(prefix, e.name), e.info.size, e.info.mtime_ns, e.info.etag))
                for e in found[0].list_dir(found[1])]

    def _add_waiting(self, prefix: str, entries: dict[str, DirEntry]) -> None:
        """Writes not committed yet, below ``prefix``: their names (and the directories they imply)."""
        start = prefix + "/" if prefix else ""
        for key in list(self._waiting):
            if key.startswith(start):
                name, _, rest = key[len(start):].partition("/")
                if rest:
                    entries[name] = DirEntry(name, True)
                elif name not in entries:
                    entries[name] = DirEntry(name, False, self._waiting[key][1])

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        if self._history(prefix) is not None:
            return super().list_prefix(prefix)
        start = prefix + "/" if prefix else ""
        keys = set(self.tree.list_prefix(prefix)) | {k for k in self._waiting if k.startswith(start)}
        return sorted(keys)

    def dir_exists(self, prefix: str) -> bool:
        parts = self._history(prefix)
        if parts is not None and len(parts) == 2:
            return parts[0] in HISTORY_KINDS and self._resolve(parts[0], parts[1]) is not None
        if parts is not None and len(parts) < 2:
            return not parts or parts[0] in HISTORY_KINDS
        if parts is not None:
            found = self._history_tree(parts)
            return found is not None and found[0].has_children(found[1])
        start = prefix + "/" if prefix else ""
        return prefix == "" or any(k.startswith(start) for k in self._waiting) or self.tree.has_children(prefix)

    def hides(self, key: str) -> bool:
        return key == HISTORY

    def read_only_key(self, key: str) -> bool:
        return self._history(key) is not None

    # ------------------------------------------------------------------ writes

    def _check_main_write(self, key: str) -> None:
        check_key(key)
        if self._history(key) is not None:
            raise ReadOnly(f"{key!r}: {HISTORY}/ shows the repository's history, read-only")
        self.check_writable(key)
        if key.rpartition("/")[2] in V2_NAMES:
            raise InvalidArgument(f"{key!r}: an Icechunk repository holds Zarr v3 only (zarr.json), not Zarr v2 metadata")

    def _note_write(self, key: str, size: int) -> ObjectInfo:
        with self._meta_lock:
            self._writes += 1
            etag, mtime = f"{self.tree.etag}.w{self._writes}", time.time_ns()
            self._written[key] = (etag, mtime)
        return ObjectInfo(key, size, mtime, etag)

    def _set_in_session(self, key: str, data: bytes) -> bool:
        """Store ``data`` in the session; False if Icechunk refuses the key (for now)."""
        try:
            self.bridge.run(self.tree.py.set, key, data)
        except Exception as exc:  # noqa: BLE001
            if _refused_key(exc):
                return False
            if "bad metadata" in str(exc) or "V2 metadata" in str(exc):
                raise InvalidArgument(f"{key!r}: Icechunk refuses this metadata: {reason(exc)}") from None
            raise BackendError(f"{key!r}: not stored: {reason(exc)}") from exc
        if key == "zarr.json" or key.endswith("/zarr.json"):
            self.tree.forget_layouts()
        return True

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        self._check_main_write(key)
        data = bytes(data)
        with self._rw.shared():
            stored = self._set_in_session(key, data)
            if not stored:
                self._check_tree(key)
            info = self._note_write(key, len(data))
            if stored:
                self._waiting.pop(key, None)
                if key == "zarr.json" or key.endswith("/zarr.json"):
                    self._settle(key.rpartition("/")[0])
            else:
                self._waiting[key] = (data, info)
        return info

    def _check_tree(self, key: str) -> None:
        """A file waiting in the session keeps the tree a tree: no file where a directory is, none
        below a file (Icechunk's own keys are a tree by construction)."""
        if self.dir_exists(key):
            raise IsADirectory(f"{key!r}: a directory has that name")
        parent = key.rpartition("/")[0]
        while parent:
            if self._main_info(parent) is not None:
                raise NotADirectory(f"{key!r}: {parent!r} is a file")
            parent = parent.rpartition("/")[0]

    def _settle(self, node: str) -> None:
        """Chunks of ``node`` written before its zarr.json go into the session now that it is there."""
        start = node + "/" if node else ""
        for key in [k for k in self._waiting if k.startswith(start)]:
            if self._set_in_session(key, self._waiting[key][0]):
                self._waiting.pop(key, None)

    def delete(self, key: str) -> None:
        self._check_main_write(key)
        with self._rw.shared():
            self._waiting.pop(key, None)
            self._written.pop(key, None)
            try:
                self.bridge.run(self.tree.py.delete, key)
            except Exception as exc:  # noqa: BLE001
                if not _missing(exc):
                    raise BackendError(f"{key!r}: not deleted: {reason(exc)}") from exc
            if key == "zarr.json" or key.endswith("/zarr.json"):
                self.tree.forget_layouts()

    def rename_dir(self, src: str, dst: str) -> None:
        # metadata first: the chunks follow their array at once instead of waiting for it
        keys = self.list_prefix(src)
        for key in sorted(keys, key=lambda k: (not k.endswith("zarr.json"), k)):
            self.copy(key, dst + key[len(src):])
        for key in sorted(keys, key=lambda k: (k.endswith("zarr.json"), k)):
            self.delete(key)

    # ------------------------------------------------------------------ commits

    def default_message(self) -> str:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"nczfs: writes on {socket.gethostname()} at {now}"

    def sync(self) -> None:
        """Commit the session's changes (one commit), or follow the branch if there are none."""
        if self.read_only:
            return
        with self._rw.exclusive():
            for key in list(self._waiting):
                if self._set_in_session(key, self._waiting[key][0]):
                    self._waiting.pop(key)
            if self._waiting:
                keys = sorted(self._waiting)
                shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
                raise BackendError(
                    f"{self.where}: not committed: Icechunk holds Zarr v3 keys of existing nodes only, "
                    f"not {shown}; remove or rename them (the session keeps every write) and sync again"
                )
            committed = self.tree.session.has_uncommitted_changes
            if committed:
                self._commit(self.tree.session)
            tree = self._open_main()  # the branch's tip: this commit, or commits made elsewhere
            if committed or tree.etag != self.tree.etag:
                with self._meta_lock:
                    self.tree = tree
                    self._written.clear()

    def _commit(self, session: Any) -> None:
        import icechunk

        message = self.commit_message or self.default_message()
        try:
            session.commit(message, rebase_with=icechunk.ConflictDetector())
        except icechunk.RebaseFailedError as exc:
            conflicts = "; ".join(f"{c.path}: {c.conflict_type}" for c in getattr(exc, "conflicts", [])[:5])
            raise BackendError(
                f"{self.where}: not committed: branch {self.branch!r} moved on with conflicting changes "
                f"({conflicts or reason(exc)}); the session keeps every write: run nczfs sync again "
                "once the conflict is resolved"
            ) from None
        except Exception as exc:  # noqa: BLE001
            raise BackendError(
                f"{self.where}: not committed: {reason(exc)}; the session keeps every write: run nczfs sync again"
            ) from None
        self.commits += 1

    # ------------------------------------------------------------------ the rest

    def counters(self) -> dict[str, int]:
        return {"icechunk.commits": self.commits, "icechunk.waiting-files": len(self._waiting)}

    def describe(self) -> str:
        what = f"tag {self.tag}" if self.tag else f"snapshot {self.snapshot}" if self.snapshot else f"branch {self.branch}"
        return f"icechunk {self.where} ({what})"

    def close(self) -> None:
        try:
            self._keep_uncommitted()
        finally:
            if self._own_bridge:
                self.bridge.close()

    def _keep_uncommitted(self) -> None:
        """Writes still uncommitted at the end (their sync failed: a conflict) are not lost: they
        become a snapshot on a branch of their own, named in the log."""
        if self.read_only or not self.tree.session.has_uncommitted_changes:
            return
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        name = f"nczfs-unmerged-{self.branch}-{stamp}"
        try:
            snap = self.tree.session.flush(f"{self.commit_message or self.default_message()} (not merged into {self.branch})")
            self.repo.create_branch(name, snap)
        except Exception as exc:  # noqa: BLE001 - logged: nothing else can be done at exit
            log.error("%s: writes not committed and not kept: %s", self.where, reason(exc))
            return
        self.unmerged_branch = name
        log.error("%s: writes not committed to branch %r kept on branch %r (snapshot %s): merge them from there",
                  self.where, self.branch, name, snap)
