"""The zip store's index: objects and directories in memory, changed by journal records.

Every change a mount makes is one record (``set``, ``meta``, ``del``, ``mv``, ``cp``, ``mkdir``,
``rmdir``, ``mvdir``) appended to the staging journal and applied here; a journal left by a
killed mount is replayed through the same :meth:`Tree._apply`. No I/O.
:class:`Tree` is a part of :class:`~nczfs.store.zip.store.ZipStore`.
"""

from __future__ import annotations

import collections
import copy

from nczfs.toolbox.errors import IsADirectory, NotADirectory
from nczfs.store.keys import join, parent_of
from nczfs.store.values import Meta
from nczfs.store.zip.entries import Entry, StagedFile, meta_from_record


class Tree:
    """Objects (``_files``), directories with their children's names (``_dirs``) and attributes
    (``_dir_meta``), and how many keys refer to each staged file (``_refs``)."""

    _files: dict[str, Entry]
    _dirs: dict[str, set[str]]
    _dir_meta: dict[str, Meta]
    _refs: collections.Counter[str]

    def _add_dir(self, path: str) -> None:
        while path not in self._dirs:
            if path in self._files:
                raise NotADirectory(f"{path!r} is both a file and a directory")
            self._dirs[path] = set()
            parent = parent_of(path)
            self._add_dir(parent)
            self._dirs[parent].add(path.rpartition("/")[2])

    def _add_file(self, key: str, src: Entry) -> None:
        if key in self._dirs:
            raise IsADirectory(f"{key!r} is both a file and a directory")
        parent = parent_of(key)
        self._add_dir(parent)
        self._files[key] = src
        self._dirs[parent].add(key.rpartition("/")[2])
        if isinstance(src, StagedFile):
            self._refs[src.file] += 1

    def _remove_file(self, key: str) -> None:
        src = self._files.pop(key, None)
        if src is not None:
            self._dirs[parent_of(key)].discard(key.rpartition("/")[2])
            if isinstance(src, StagedFile):
                self._refs[src.file] -= 1

    def _subtree(self, prefix: str) -> tuple[list[str], list[str]]:
        """Directories (prefix first) and files at or below a directory."""
        dirs: list[str] = []
        files: list[str] = []
        todo = [prefix]
        while todo:
            d = todo.pop()
            dirs.append(d)
            for name in self._dirs[d]:
                child = join(d, name)
                (todo if child in self._dirs else files).append(child)
        return dirs, files

    def _apply(self, rec: dict) -> None:
        """Apply one journal record to the tree (also used to replay a journal)."""
        apply = getattr(self, f"_apply_{rec['op']}", None)
        if apply is None:
            raise ValueError(f"unknown journal record {rec!r}")
        apply(rec)

    def _apply_set(self, rec: dict) -> None:
        self._remove_file(rec["key"])
        self._add_file(rec["key"], StagedFile(rec["file"], rec["size"], rec["mtime"], meta_from_record(rec.get("meta")),
                                                crc=rec.get("crc")))

    def _apply_meta(self, rec: dict) -> None:
        meta = meta_from_record(rec["meta"])
        if rec.get("dir"):
            if rec["key"] not in self._dirs:
                raise KeyError(rec["key"])
            self._dir_meta[rec["key"]] = meta  # type: ignore[assignment]  # a directory's record carries its meta
            return
        src = copy.copy(self._files[rec["key"]])
        src.meta, src.meta_changed = meta, True
        if meta is not None and meta.mtime_ns is not None:
            src.mtime_ns = meta.mtime_ns
        self._remove_file(rec["key"])
        self._add_file(rec["key"], src)

    def _apply_del(self, rec: dict) -> None:
        self._remove_file(rec["key"])

    def _apply_mv(self, rec: dict, keep: bool = False) -> None:
        src = self._files[rec["src"]]
        if keep:
            src = copy.copy(src)
        else:
            self._remove_file(rec["src"])
        self._remove_file(rec["dst"])
        self._add_file(rec["dst"], src)

    def _apply_cp(self, rec: dict) -> None:
        self._apply_mv(rec, keep=True)

    def _apply_mkdir(self, rec: dict) -> None:
        self._add_dir(rec["key"])

    def _apply_rmdir(self, rec: dict) -> None:
        del self._dirs[rec["key"]]
        self._dir_meta.pop(rec["key"], None)
        self._dirs[parent_of(rec["key"])].discard(rec["key"].rpartition("/")[2])

    def _apply_mvdir(self, rec: dict) -> None:
        """A directory renamed with what is below it; a rebased record (:mod:`.rebase`) leaves
        the members in ``keep`` where they are and puts those landing on a name in ``beside``
        under the name it gives."""
        src, dst = rec["src"], rec["dst"]
        keep, beside = set(rec.get("keep", ())), rec.get("beside", {})
        if src not in self._dirs and "keep" in rec:  # another program removed it: nothing of it is moved
            self._add_dir(dst)
            return
        dirs, files = self._subtree(src)
        moved = {f: self._files[f] for f in files if f not in keep}
        for f in moved:
            self._remove_file(f)
        staying = {d for f in files if f in keep for d in dirs if f.startswith(d + "/")}
        metas = {d: self._dir_meta[d] for d in dirs if d in self._dir_meta}
        for d in dirs:
            if d not in staying:
                del self._dirs[d]
                self._dir_meta.pop(d, None)
                if parent_of(d) in self._dirs:
                    self._dirs[parent_of(d)].discard(d.rpartition("/")[2])
        for d in dirs:
            self._add_dir(dst + d[len(src):])
        for d, meta in metas.items():
            self._dir_meta[dst + d[len(src):]] = meta
        for f, s in moved.items():
            self._add_file(beside.get(dst + f[len(src):], dst + f[len(src):]), s)

    def _staged_files(self) -> set[str]:
        return {f for f, n in self._refs.items() if n > 0}
