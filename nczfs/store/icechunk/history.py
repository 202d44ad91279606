"""``.icechunk/``: the repository's history beside the mounted tree, never listed in the root.

``branches/NAME/``, ``tags/NAME/`` and ``snapshots/ID/`` (the ancestry of what is mounted) are
each a read-only tree of one snapshot. Branch tips, the branch and tag lists and the ancestry are
asked of the repository again after :data:`REF_TTL`; the sessions of the last :data:`TREES_KEPT`
snapshots shown stay open.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable

from nczfs.store.aiobridge import AsyncioBridge
from nczfs.toolbox.errors import KeyNotFound
from nczfs.store.keys import join, usable_name
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.icechunk.tree import SnapshotTree

#: the hidden directory of branches, tags and snapshots
HISTORY = ".icechunk"
HISTORY_KINDS = ("branches", "snapshots", "tags")
#: seconds a branch tip, the branch and tag lists and the ancestry are reused under .icechunk/
REF_TTL = 1.0
#: read-only sessions kept open for .icechunk/ (one per snapshot)
TREES_KEPT = 32


def history_parts(key: str) -> list[str] | None:
    """The segments of ``key`` below ``.icechunk/`` (None: a key of the mounted tree)."""
    if key == HISTORY or key.startswith(HISTORY + "/"):
        return key.split("/")[1:]
    return None


class History:
    """The keys below ``.icechunk/`` of a repository whose ``ref`` (``branch=``, ``tag=`` or
    ``snapshot_id=``, as Icechunk names them) is mounted; ``parts`` are a key's segments below it."""

    def __init__(self, repo: Any, bridge: AsyncioBridge, ref: dict[str, str]):
        self.repo = repo
        self.bridge = bridge
        self.ref = ref
        self._lock = threading.Lock()
        self._refs: dict[tuple[str, str], tuple[float, Any]] = {}
        self._trees: OrderedDict[str, SnapshotTree] = OrderedDict()

    # ------------------------------------------------------------------ refs

    def _ref(self, kind: str, name: str, fetch: Callable[[], Any]) -> Any:
        now = time.monotonic()
        hit = self._refs.get((kind, name))
        if hit is not None and now - hit[0] < REF_TTL:
            return hit[1]
        value = fetch()
        self._refs[(kind, name)] = (now, value)
        return value

    def ancestry(self) -> list[str]:
        return self._ref("ancestry", "", lambda: [i.id for i in self.repo.ancestry(**self.ref)])

    def kind_names(self, kind: str) -> list[str]:
        if kind == "branches":
            names = self._ref("list", kind, lambda: sorted(self.repo.list_branches()))
        elif kind == "tags":
            names = self._ref("list", kind, lambda: sorted(self.repo.list_tags()))
        else:
            names = sorted(self.ancestry())
        return [n for n in names if usable_name(n)]

    def resolve(self, kind: str, name: str) -> str | None:
        """The snapshot id ``.icechunk/KIND/NAME`` shows, or None."""
        if kind not in HISTORY_KINDS:
            return None
        if kind == "snapshots":
            return name if name in self.ancestry() else None
        lookup = self.repo.lookup_branch if kind == "branches" else self.repo.lookup_tag

        def fetch() -> str | None:
            try:
                return lookup(name)
            except Exception:  # noqa: BLE001 - no such branch or tag
                return None

        return self._ref(kind, name, fetch)

    # ------------------------------------------------------------------ trees

    def tree_for(self, snap: str) -> SnapshotTree:
        with self._lock:
            tree = self._trees.get(snap)
            if tree is not None:
                self._trees.move_to_end(snap)
                return tree
        tree = SnapshotTree.of(self.bridge, self.repo, self.repo.readonly_session(snapshot_id=snap), snap)
        with self._lock:
            self._trees[snap] = tree
            while len(self._trees) > TREES_KEPT:
                self._trees.popitem(last=False)
        return tree

    def tree_at(self, parts: list[str]) -> tuple[SnapshotTree, str] | None:
        """The tree and key within it that ``.icechunk/KIND/NAME/rest`` names (None: no such ref)."""
        snap = self.resolve(parts[0], parts[1])
        if snap is None:
            return None
        return self.tree_for(snap), "/".join(parts[2:])

    # ------------------------------------------------------------------ the store's face

    def get(self, key: str, parts: list[str], rng: ByteRange | None) -> bytes:
        found = self.tree_at(parts) if len(parts) > 2 else None
        if found is None:
            raise KeyNotFound(key)
        return found[0].get(found[1], rng)

    def stat(self, key: str, parts: list[str]) -> ObjectInfo:
        found = self.tree_at(parts) if len(parts) > 2 else None
        info = found[0].info(found[1]) if found is not None and found[1] else None
        if info is None:
            raise KeyNotFound(key)
        return ObjectInfo(key, info.size, info.mtime_ns, info.etag)

    def list_dir(self, prefix: str, parts: list[str]) -> list[DirEntry]:
        """A directory of ``.icechunk/``: the kinds, a kind's names, or a snapshot's tree."""
        if not parts:
            return [DirEntry(k, True) for k in HISTORY_KINDS]
        if len(parts) == 1:
            return [DirEntry(n, True) for n in self.kind_names(parts[0])] if parts[0] in HISTORY_KINDS else []
        found = self.tree_at(parts)
        if found is None:
            return []
        return [e if e.info is None else DirEntry(e.name, False, ObjectInfo(join(prefix, e.name), e.info.size, e.info.mtime_ns, e.info.etag))
                for e in found[0].list_dir(found[1])]

    def dir_exists(self, parts: list[str]) -> bool:
        if len(parts) < 2:
            return not parts or parts[0] in HISTORY_KINDS
        if len(parts) == 2:
            return parts[0] in HISTORY_KINDS and self.resolve(parts[0], parts[1]) is not None
        found = self.tree_at(parts)
        return found is not None and found[0].has_children(found[1])
