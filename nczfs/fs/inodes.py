"""The inode table: key <-> inode number, lookup counts, and per-path state kept for the mount's life.

A file keeps its inode number while the kernel holds it and, once forgotten, when the kernel
looks it up again (the number is remembered for its path, the most recent NUMBERS_KEPT of them):
tools that compare ``st_ino`` between two ``stat`` calls see one file. A number is never given
to another file the kernel still holds, so the generation is always 0. A node whose path was
unlinked or replaced stays reachable by number until the kernel forgets it.
"""

from __future__ import annotations

import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TypeVar

from nczfs.toolbox.errors import Stale
from nczfs.fs.content import Content
from nczfs.fs.localdirs import count_below
from nczfs.store.values import Meta

T = TypeVar("T")

ROOT_INO = 1
#: inode numbers of files the kernel forgot, remembered by path for when it looks them up again
NUMBERS_KEPT = 65536


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
    #: the version whose bytes this mount last opened for reading, loaded to rewrite, or stored
    #: itself ("" none): a rename over the file replaces only that one (conflicts.py)
    seen: str = ""
    #: the file type: S_IFREG, S_IFDIR, or a symlink's or special file's
    ftype: int = stat.S_IFREG
    #: the POSIX attributes the store last reported for it (None: it keeps none)
    meta: Meta | None = None
    #: every name of the file (its hard links), ``path`` among them
    names: set[str] = field(default_factory=set)
    #: a symlink's target, once known
    target: str | None = None
    #: when its attributes last changed through the mount (link, rename) where the store keeps
    #: no ctime: known while the kernel holds the file, then its mtime stands for it
    ctime_ns: int | None = None
    #: what the mount knows of it is known nowhere else it could look (a special file in a store
    #: whose listings do not tell types): kept while its name lasts, not only while the kernel holds it
    keep: bool = False

    def __post_init__(self) -> None:
        if self.is_dir:
            self.ftype = stat.S_IFDIR
        self.names.add(self.path)

    @property
    def in_store(self) -> bool:
        """Named in the store: neither created and not stored yet, nor unlinked or replaced."""
        return not self.pending and not self.detached

    @property
    def held(self) -> bool:
        """The mount holds what the file is (its content being written, or a file not stored
        yet): its size and bytes are not asked of the store."""
        return self.pending or self.content is not None

    @property
    def unstored(self) -> bool:
        """It has writes the store is to get and does not have yet."""
        return self.content is not None and self.content.dirty and not self.detached


def _rekey(table: dict[str, T], old: str, new: str, subtree: bool) -> list[tuple[str, str, T]]:
    """Re-key ``old`` (with ``subtree``, also every key below it) to ``new`` in ``table``, one
    key at a time; each old key, its new key and the item moved."""
    keys = [p for p in table if p == old or p.startswith(old + "/")] if subtree else [old] if old in table else []
    moved = []
    for p in keys:
        item = table.pop(p)
        np = new + p[len(old) :]
        table[np] = item
        moved.append((p, np, item))
    return moved


def _is(node: Node, is_dir: bool, ftype: int, ident: tuple[int, int] | None) -> bool:
    """Is ``node`` the file of that type (``ftype`` 0: any) and store identity (None: any)?"""
    return (node.is_dir == is_dir and (not ftype or node.ftype == ftype)
            and (ident is None or node.meta is None or node.meta.ident in (None, ident)))


@dataclass
class InodeTable:
    by_ino: dict[int, Node] = field(default_factory=dict)
    by_path: dict[str, Node] = field(default_factory=dict)
    #: files by the store's identity of them (hard links: several names, one node)
    by_ident: dict[tuple[int, int], Node] = field(default_factory=dict)
    #: path -> (inode number, type, identity) of nodes dropped once the kernel forgot them
    forgotten: OrderedDict[str, tuple[int, int, tuple[int, int] | None]] = field(default_factory=OrderedDict)
    #: attributes set through the mount (create, chmod, chown, utimens, and the times changes
    #: give), by path: kept for the mount's life where the store does not show them itself
    #: (``live_meta``), and written to it where it keeps them
    overrides: dict[str, Meta] = field(default_factory=dict)
    #: how many times a path stopped naming its node (unlink, rename, replacement): a directory
    #: listing handed out in parts checks it to learn that names it holds may be gone
    removals: int = 0
    #: directory path -> how many pending files (created through the mount, not stored yet) are
    #: below it, at any depth: such a directory exists while they do (the store may show none)
    pending_below: dict[str, int] = field(default_factory=dict)
    #: inode number -> the path a pending file is counted at in ``pending_below``
    _pending_at: dict[int, str] = field(default_factory=dict)
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

    def node_for(self, path: str, is_dir: bool, ftype: int = 0, ident: tuple[int, int] | None = None) -> Node:
        """The node at ``path``, made anew if there is none or it is of another type (``ftype``,
        0: a regular file unless the node has a type already). ``ident``: the store's identity
        of the file; a file known under another name of it is that node (a hard link)."""
        node = self.by_path.get(path)
        if is_dir:
            ftype = stat.S_IFDIR
        if node is not None and _is(node, is_dir, ftype, ident):
            return node
        other = self.by_ident.get(ident) if ident is not None and not is_dir else None
        if other is not None and not other.detached and (not ftype or other.ftype == ftype):
            if node is not None:
                self.unname(node, path)
            self.add_name(other, path)
            return other
        if node is not None:
            self.unname(node, path)
        return self._new(path, is_dir, ftype or stat.S_IFREG, ident)

    def _new(self, path: str, is_dir: bool, ftype: int, ident: tuple[int, int] | None) -> Node:
        node = Node(self._number(path, ftype, ident), path, is_dir, ftype=ftype)
        self.by_ino[node.ino] = node
        self.by_path[path] = node
        if ident is not None and not is_dir:
            self.by_ident[ident] = node
        return node

    def _number(self, path: str, ftype: int, ident: tuple[int, int] | None) -> int:
        """The number a file forgotten at ``path`` had, if it is that file still (its type and,
        where the store tells, its identity) and no node has the number; else a new one."""
        old = self.forgotten.pop(path, None)
        if old is not None and old[1] == ftype and (ident is None or old[2] in (None, ident)) and old[0] not in self.by_ino:
            return old[0]
        self._next += 1
        return self._next - 1

    def set_pending(self, node: Node, pending: bool) -> None:
        """``node`` is (True) or no longer is (stored, or failed) a file not stored yet."""
        node.pending = pending
        self._recount(node)

    def _recount(self, node: Node) -> None:
        """Count a pending file below the directories of its path now (and no longer below those
        of its old one): one step per level of the path, whatever the number of files."""
        now = node.path if node.pending and not node.detached else None
        was = self._pending_at.pop(node.ino, None)
        if now is not None:
            self._pending_at[node.ino] = now
        if was == now:
            return
        if was is not None:
            count_below(self.pending_below, was, -1)
        if now is not None:
            count_below(self.pending_below, now, 1)

    def add_name(self, node: Node, path: str) -> None:
        """``path`` is one more name of ``node`` (a hard link made through the mount)."""
        self.by_path[path] = node
        node.names.add(path)

    def identify(self, node: Node, ident: tuple[int, int] | None) -> None:
        """The store names ``node``'s file ``ident`` (its other names will find it)."""
        if ident is not None and not node.is_dir and not node.detached:
            self.by_ident[ident] = node

    def unname(self, node: Node, path: str) -> None:
        """``path`` no longer names ``node`` (unlinked, or replaced); a node left without a name is
        detached (see :meth:`detach`), one with other names (hard links) lives on under them."""
        self.forgotten.pop(path, None)
        node.names.discard(path)
        if self.by_path.get(path) is node:
            del self.by_path[path]
        if not any(self.by_path.get(p) is node for p in node.names):
            node.names = {node.path}
            self.detach(node)
            return
        self.removals += 1
        if node.path == path:
            node.path = min(p for p in node.names if self.by_path.get(p) is node)
            self._recount(node)

    def detach(self, node: Node) -> None:
        """The path no longer names this node (unlinked or replaced); drop it once unused."""
        for p in node.names | {node.path}:
            if self.by_path.get(p) is node:
                del self.by_path[p]
        self._unidentify(node)
        node.detached = True
        self._recount(node)
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
        if (node.pending or node.keep) and not node.detached:
            return  # a created file not yet uploaded is still the truth for its path
        self.by_ino.pop(node.ino, None)
        for p in node.names | {node.path}:
            if self.by_path.get(p) is node:
                del self.by_path[p]
                if not node.detached:
                    self._remember(p, node)
        self._unidentify(node)

    def _remember(self, path: str, node: Node) -> None:
        """Keep the number of a file dropped from the table for when ``path`` is looked up again."""
        self.forgotten[path] = (node.ino, node.ftype, node.meta.ident if node.meta is not None else None)
        if len(self.forgotten) > NUMBERS_KEPT:
            self.forgotten.popitem(last=False)

    def _unidentify(self, node: Node) -> None:
        if node.meta is not None and node.meta.ident is not None and self.by_ident.get(node.meta.ident) is node:
            del self.by_ident[node.meta.ident]

    def move(self, old: str, new: str, *, subtree: bool) -> None:
        """Re-key ``old`` (with ``subtree``, also everything below it) to ``new``: nodes and overrides.

        A file rename touches one entry per table (zarr renames every chunk it writes); only a
        directory rename scans the tables.
        """
        self.removals += 1
        self.forgotten.pop(new, None)
        for p, np, item in _rekey(self.by_path, old, new, subtree):
            item.names.discard(p)
            item.names.add(np)
            if item.path == p:
                item.path = np
                self._recount(item)
        _rekey(self.overrides, old, new, subtree)

    def under(self, prefix: str) -> list[Node]:
        start = prefix + "/" if prefix else ""
        return [n for p, n in self.by_path.items() if p.startswith(start) and p != prefix]
