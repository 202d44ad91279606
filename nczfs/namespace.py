"""The inode table: key <-> inode number, lookup counts, and per-path state kept for the mount's life.

Inode numbers are never reused, so the generation is always 0. A node whose path was
unlinked or replaced stays reachable by number until the kernel forgets it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nczfs.errors import Stale
from nczfs.handles import Content

ROOT_INO = 1


@dataclass
class Node:
    ino: int
    path: str  # "" for the root
    is_dir: bool
    lookups: int = 0
    open_count: int = 0
    #: the whole file while it is open for writing (shared by all its handles)
    content: Content | None = None
    #: created through the mount and never uploaded: the store does not have it yet
    pending: bool = False
    #: unlinked or replaced while the kernel still knows it; its writes go nowhere
    detached: bool = False
    #: size/mtime from the store, and when they were fetched (monotonic seconds)
    size: int = 0
    mtime_ns: int = 0
    fetched: float = -1.0
    #: the object's version tag as last seen (reads through a handle are pinned to it)
    etag: str = ""


@dataclass
class Overrides:
    """chmod/chown/utimens results: kept in memory (no backend stores them) for the mount's life."""

    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    atime_ns: int | None = None
    mtime_ns: int | None = None


@dataclass
class InodeTable:
    by_ino: dict[int, Node] = field(default_factory=dict)
    by_path: dict[str, Node] = field(default_factory=dict)
    overrides: dict[str, Overrides] = field(default_factory=dict)
    #: how many times a path stopped naming its node (unlink, rename, replacement): a directory
    #: listing handed out in parts checks it to learn that names it holds may be gone
    removals: int = 0
    _next: int = ROOT_INO + 1

    def __post_init__(self) -> None:
        root = Node(ROOT_INO, "", True, lookups=1)
        self.by_ino[ROOT_INO] = root
        self.by_path[""] = root

    def __getitem__(self, ino: int) -> Node:
        try:
            return self.by_ino[ino]
        except KeyError:
            raise Stale(f"inode {ino} is not known") from None

    def at(self, path: str) -> Node | None:
        return self.by_path.get(path)

    def node_for(self, path: str, is_dir: bool) -> Node:
        """The node at ``path``, made anew if there is none or it is of the other kind."""
        node = self.by_path.get(path)
        if node is not None and node.is_dir == is_dir:
            return node
        if node is not None:
            self.detach(node)
        node = Node(self._next, path, is_dir)
        self._next += 1
        self.by_ino[node.ino] = node
        self.by_path[path] = node
        return node

    def detach(self, node: Node) -> None:
        """The path no longer names this node (unlinked or replaced); drop it once unused."""
        if self.by_path.get(node.path) is node:
            del self.by_path[node.path]
        node.detached = True
        self.removals += 1
        self._maybe_drop(node)

    def forget(self, ino: int, n: int) -> None:
        node = self.by_ino.get(ino)
        if node is None or ino == ROOT_INO:
            return
        node.lookups = max(0, node.lookups - n)
        self._maybe_drop(node)

    def release(self, node: Node) -> None:
        self._maybe_drop(node)

    def _maybe_drop(self, node: Node) -> None:
        if node.lookups > 0 or node.open_count > 0 or node.ino == ROOT_INO:
            return
        if node.pending and not node.detached:
            return  # a created file not yet uploaded is still the truth for its path
        self.by_ino.pop(node.ino, None)
        if self.by_path.get(node.path) is node:
            del self.by_path[node.path]

    def move(self, old: str, new: str, *, subtree: bool) -> None:
        """Re-key ``old`` (with ``subtree``, also everything below it) to ``new``: nodes and overrides.

        A file rename touches one entry per table (zarr renames every chunk it writes); only a
        directory rename scans the tables.
        """
        self.removals += 1
        for table in (self.by_path, self.overrides):
            if subtree:
                keys = [p for p in table if p == old or p.startswith(old + "/")]
            else:
                keys = [old] if old in table else []
            for p in keys:
                item = table.pop(p)
                np = new + p[len(old) :]
                if isinstance(item, Node):
                    item.path = np
                table[np] = item  # type: ignore[index]

    def under(self, prefix: str) -> list[Node]:
        start = prefix + "/" if prefix else ""
        return [n for p, n in self.by_path.items() if p.startswith(start) and p != prefix]
