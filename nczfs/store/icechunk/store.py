"""IcechunkStore: a branch, tag or snapshot of an Icechunk repository as a store.

Keys are the Zarr v3 keys zarr-python uses (``zarr.json``, ``v/zarr.json``, ``v/c/0/1``), read and
written through the ``icechunk`` package's store, whose calls are coroutines run on one asyncio
loop (:mod:`nczfs.store.aiobridge`): reads from trio without a worker thread (``get_version_async``),
the rest from the worker threads every SyncStore runs in.

A branch mount writes in one writable session; :meth:`IcechunkStore.sync` (``nczfs sync``, fsync,
unmount) makes its changes one commit (:mod:`.commits`). Files Icechunk cannot hold (yet) wait in
the session (:mod:`.overlay`): a chunk written before its array's ``zarr.json`` is stored when the
array is; any other file (not Zarr v3) makes the commit fail, naming it, until it is removed or
renamed. Objects' etags name the snapshot their bytes come from (and a write counter for bytes
written in the session), so nczfs's cache is keyed by snapshot and chunk. ``.icechunk/`` is the
repository's history (:mod:`.history`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nczfs.store.capabilities import SHORT_TTL, Capabilities
from nczfs.store.aiobridge import AsyncioBridge
from nczfs.toolbox.errors import (
    BackendError,
    InvalidArgument,
    IsADirectory,
    KeyNotFound,
    NotADirectory,
    ReadOnly,
    SourceError,
)
from nczfs.store.base import SyncStore, check_writable
from nczfs.store.keys import check_key, check_prefix
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.icechunk.commits import commit, default_message, held_back, keep_uncommitted
from nczfs.store.icechunk.errors import missing, reason, refused_key, refused_metadata
from nczfs.store.icechunk.history import HISTORY, History, history_parts
from nczfs.store.icechunk.overlay import WriteOverlay
from nczfs.store.icechunk.rwlock import SharedExclusive
from nczfs.store.icechunk.tree import SnapshotTree

#: Zarr v2 metadata names, which Icechunk refuses
V2_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def _is_metadata(key: str) -> bool:
    return key == "zarr.json" or key.endswith("/zarr.json")


class IcechunkStore(SyncStore):
    # other writers commit to a branch while it is mounted: a short default TTL; reads at once (a
    # burst holds a slot a read), as many as an object store's: large chunks read faster than with
    # the default 8 (docs/PERFORMANCE.md, "Icechunk: reads sent in bursts")
    capabilities = Capabilities(remote=True, metadata_ttl=SHORT_TTL, max_concurrency=16)

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
        self.capabilities = replace(self.capabilities, read_only=read_only or tag is not None or snapshot is not None)
        self.commit_message = commit_message
        self.bridge = bridge or AsyncioBridge("icechunk-io")
        self._own_bridge = bridge is None
        self._rw = SharedExclusive()
        self.overlay = WriteOverlay()
        self.history = History(repo, self.bridge, self._ref())
        self.commits = 0
        #: the branch the uncommitted writes were kept on at close (None: there were none)
        self.unmerged_branch: str | None = None
        self.tree = self._open_main()

    def _ref(self) -> dict[str, str]:
        """What is mounted, as Icechunk's sessions and ancestry name it."""
        if self.tag is not None:
            return {"tag": self.tag}
        if self.snapshot is not None:
            return {"snapshot_id": self.snapshot}
        return {"branch": self.branch}  # type: ignore[dict-item]  # no tag, no snapshot: the branch is set

    def _open_main(self) -> SnapshotTree:
        try:
            if self.capabilities.read_only:
                session = self.repo.readonly_session(**self._ref())
            else:
                session = self.repo.writable_session(self.branch)
        except Exception as exc:  # noqa: BLE001 - a missing ref is an IcechunkError
            what = f"tag {self.tag!r}" if self.tag else f"snapshot {self.snapshot!r}" if self.snapshot else f"branch {self.branch!r}"
            raise SourceError(f"{self.where}: cannot open {what}: {reason(exc)}") from None
        return SnapshotTree.of(self.bridge, self.repo, session, session.snapshot_id)

    # ------------------------------------------------------------------ reads

    def _main_info(self, key: str) -> ObjectInfo | None:
        return self.overlay.info(key, self.tree.info)

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        check_key(key)
        parts = history_parts(key)
        if parts is not None:
            return self.history.get(key, parts, rng)
        waiting = self.overlay.waiting.get(key)
        if waiting is not None:
            return waiting[0] if rng is None else rng.slice(waiting[0])
        return self.tree.get(key, rng)

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """Reads of the mounted tree from trio, through the loop without a worker thread (None:
        let a worker thread do it: history keys, whose refs may need looking up)."""
        check_key(key)
        if history_parts(key) is not None or key in self.overlay.waiting:
            return None
        return await self.tree.get_async(key, rng)

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        parts = history_parts(key)
        if parts is not None:
            return self.history.stat(key, parts)
        info = self._main_info(key)
        if info is None:
            raise KeyNotFound(key)
        return info

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        parts = history_parts(prefix)
        if parts is not None:
            return self.history.list_dir(prefix, parts)
        return self.overlay.listed(prefix, self.tree.list_dir(prefix))

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        if history_parts(prefix) is not None:
            return super().list_prefix(prefix)
        return sorted(set(self.tree.list_prefix(prefix)) | set(self.overlay.waiting_below(prefix)))

    def dir_exists(self, prefix: str) -> bool:
        parts = history_parts(prefix)
        if parts is not None:
            return self.history.dir_exists(parts)
        return prefix == "" or bool(self.overlay.waiting_below(prefix)) or self.tree.has_children(prefix)

    def hides(self, key: str) -> bool:
        return key == HISTORY

    def read_only_key(self, key: str) -> bool:
        return history_parts(key) is not None

    # ------------------------------------------------------------------ writes

    def _check_main_write(self, key: str) -> None:
        check_key(key)
        if history_parts(key) is not None:
            raise ReadOnly(f"{key!r}: {HISTORY}/ shows the repository's history, read-only")
        check_writable(self, key)
        if key.rpartition("/")[2] in V2_NAMES:
            raise InvalidArgument(f"{key!r}: an Icechunk repository holds Zarr v3 only (zarr.json), not Zarr v2 metadata")

    def _set_in_session(self, key: str, data: bytes) -> bool:
        """Store ``data`` in the session; False if Icechunk refuses the key (for now)."""
        try:
            with self.tree.apart.writing():
                self.bridge.run(self.tree.py.set, key, data)
        except Exception as exc:  # noqa: BLE001
            if refused_key(exc):
                return False
            if refused_metadata(exc):
                raise InvalidArgument(f"{key!r}: Icechunk refuses this metadata: {reason(exc)}") from None
            raise BackendError(f"{key!r}: not stored: {reason(exc)}") from exc
        self.tree.changed(key)
        return True

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        self._check_main_write(key)
        data = bytes(data)
        with self._rw.shared():
            stored = self._set_in_session(key, data)
            if not stored:
                self._check_tree(key)
            info = self.overlay.note(key, len(data), self.tree.etag)
            if stored:
                self.overlay.waiting.pop(key, None)
                if _is_metadata(key):
                    self._settle(key.rpartition("/")[0])
            else:
                self.overlay.waiting[key] = (data, info)
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
        """Files waiting below ``node`` (chunks written before its zarr.json) go into the session
        if Icechunk takes them now."""
        for key in self.overlay.waiting_below(node):
            if self._set_in_session(key, self.overlay.waiting[key][0]):
                self.overlay.waiting.pop(key, None)

    def delete(self, key: str) -> None:
        self._check_main_write(key)
        with self._rw.shared():
            self.overlay.forget(key)
            try:
                with self.tree.apart.writing():
                    self.bridge.run(self.tree.py.delete, key)
            except Exception as exc:  # noqa: BLE001
                if not missing(exc):
                    raise BackendError(f"{key!r}: not deleted: {reason(exc)}") from exc
            self.tree.changed(key)

    def rename_dir(self, src: str, dst: str) -> None:
        # metadata first: the chunks follow their array at once instead of waiting for it
        keys = self.list_prefix(src)
        for key in sorted(keys, key=lambda k: (not k.endswith("zarr.json"), k)):
            self.copy(key, dst + key[len(src):])
        for key in sorted(keys, key=lambda k: (k.endswith("zarr.json"), k)):
            self.delete(key)

    # ------------------------------------------------------------------ commits

    def _message(self) -> str:
        return self.commit_message or default_message()

    def sync(self) -> None:
        """Commit the session's changes (one commit), or follow the branch if there are none."""
        if self.capabilities.read_only:
            return
        with self._rw.exclusive():
            self._settle("")
            if self.overlay.waiting:
                raise held_back(self.where, list(self.overlay.waiting))
            committed = self.tree.session.has_uncommitted_changes
            if committed:
                with self.tree.apart.writing():
                    commit(self.tree.session, self._message(), where=self.where, branch=self.branch)
                self.commits += 1
            tree = self._open_main()  # the branch's tip: this commit, or commits made elsewhere
            if committed or tree.etag != self.tree.etag:
                self.tree = tree
                self.overlay.committed()

    # ------------------------------------------------------------------ the rest

    def counters(self) -> dict[str, int]:
        return {"icechunk.commits": self.commits, "icechunk.waiting-files": len(self.overlay.waiting),
                **self.tree.bursts.counters()}

    def describe(self) -> str:
        what = f"tag {self.tag}" if self.tag else f"snapshot {self.snapshot}" if self.snapshot else f"branch {self.branch}"
        return f"icechunk {self.where} ({what})"

    def close(self) -> None:
        try:
            if not self.capabilities.read_only:
                with self.tree.apart.writing():
                    kept = keep_uncommitted(self.repo, self.tree.session, self._message(), where=self.where, branch=self.branch)
                self.unmerged_branch = kept or self.unmerged_branch
        finally:
            if self._own_bridge:
                self.bridge.close()
