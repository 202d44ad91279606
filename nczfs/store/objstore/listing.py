"""Listings of an object store through obstore: one directory (the ``/`` delimiter), a whole
tree (no delimiter, one request up to a bound), and the lookups they answer.

:class:`Listings` is a part of :class:`~nczfs.store.objstore.obprefix.ObjectStoreBackend`, given
what it lists with when it is made.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator, Mapping, Sequence

import obstore as obs

from nczfs.toolbox.errors import KeyNotFound, NczfsError
from nczfs.store.keys import check_key, check_prefix, join, tree_listings, usable_name
from nczfs.store.values import DirEntry, ObjectInfo
from nczfs.store.objstore.counting import RequestCounts
from nczfs.store.objstore.errors import unnamable
from nczfs.store.objstore.paths import ObjectPaths

log = logging.getLogger(__name__)

#: keys one listing page holds (S3's, GCS's and Azure's most)
LIST_PAGE = 1000


def _pages(n: int) -> int:
    """The fewest listing pages that hold ``n`` entries (S3, GCS, Azure: 1,000 to a page):
    obstore pages by itself and does not say how many requests it sent."""
    return max(1, -(-n // LIST_PAGE))


#: a listed (or HEAD's) object: obstore's ``ObjectMeta``, or the same keys from a listing made
#: the other way (a directory marker's with ``"marker"``)
Listed = Mapping[str, Any]
#: a listing of a path where obstore cannot give one (``other_way(base, delimiter)``), or None
OtherWay = Callable[[str | None, bool], Iterator[Any] | None]


class Listings:
    """Directory and tree listings, ``dir_exists`` and ``entry`` of the obstore ``store``'s
    ``paths``: each request counted in ``requests``; a listed object's info is ``info(key,
    meta)``, an object's ``stat(key)`` (the store's, which may ask for more than obstore's HEAD
    gives); ``other_way``: the listing of a path holding a key obstore cannot name (a control
    character), shaped as obstore's, or None (the listing fails, naming the key)."""

    def __init__(self, store: Any, paths: ObjectPaths, requests: RequestCounts, *,
                 info: Callable[[str, Listed], ObjectInfo], stat: Callable[[str], ObjectInfo], other_way: OtherWay):
        self.store = store
        self.paths = paths
        self.requests = requests
        self.info = info
        self.stat = stat
        self.other_way = other_way

    def _listing(self, prefix: str) -> tuple[str | None, Listed]:
        base = self.paths.dir_path(prefix)
        try:
            page = obs.list_with_delimiter(self.store, base)
        except Exception as exc:
            self.requests.count("list")
            if unnamable(exc) and (other := self.other_way(base, True)) is not None:
                return base, next(other)
            raise self.requests.error(exc, prefix or "/", "list") from None
        self.requests.count("list", _pages(len(page["objects"]) + len(page["common_prefixes"])))
        return base, page

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        base, page = self._listing(prefix)
        entries: dict[str, DirEntry] = {}
        for cp in page["common_prefixes"]:
            name = self.paths.rel(cp.rstrip("/"), base)
            if self._usable(name, cp):
                entries[name] = DirEntry(name, True)
        for meta in page["objects"]:
            name = self.paths.rel(meta["path"], base)
            if name == "" or not self._usable(name, meta["path"]):
                continue
            if name not in entries:  # an object and a directory of one name: the directory wins
                entries[name] = DirEntry(name, False, self.info(join(prefix, name), meta))
        return [entries[n] for n in sorted(entries)]

    def walk(self, prefix: str, chunk_size: int = 1000) -> Iterator[Sequence[Listed]]:
        base = self.paths.dir_path(prefix)
        given = 0
        try:
            stream = obs.list(self.store, base, chunk_size=chunk_size)
            while True:
                try:
                    chunk = next(stream)
                except StopIteration:
                    if not given:
                        self.requests.count("list")  # the request that found nothing
                    return
                self.requests.count("list", _pages(len(chunk)))
                given += len(chunk)
                yield chunk
        except NczfsError:
            raise
        except Exception as exc:
            other = self.other_way(base, False) if unnamable(exc) else None
            if other is None:
                raise self.requests.error(exc, prefix or "/", "list") from None
        skip = given  # the same order: from past what obstore gave already
        for chunk in other:
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            yield chunk[skip:]
            skip = 0

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        check_prefix(prefix)
        base = self.paths.dir_path(prefix)
        objects: list[Listed] = []
        for chunk in self.walk(prefix, limit + 1):
            objects.extend(chunk)
            break
        if len(objects) > limit:
            return None
        listed = []
        for m in objects:
            rel = self.paths.rel(m["path"], base)
            # a directory marker ("rel/") is a directory: tree_listings knows keys ending in "/"
            listed.append((rel + "/" if self.is_marker(m) else rel, self.info(join(prefix, rel), m)))
        return tree_listings(prefix, listed)

    def is_marker(self, meta: Listed) -> bool:
        """Is this listed object a directory marker (a key ``path/`` other tools write)? obstore
        lists ``path/`` as ``path``: an empty object whose HEAD finds nothing under ``path``."""
        if "marker" in meta or meta["size"] != 0:
            return bool(meta.get("marker"))
        self.requests.count("head")
        try:
            obs.head(self.store, meta["path"])
        except FileNotFoundError:
            return True
        except Exception as exc:
            raise self.requests.error(exc, meta["path"], "head") from None
        return False

    @staticmethod
    def _usable(name: str, path: str) -> bool:
        if not usable_name(name):
            log.debug("object key %r has no file name nczfs can show; skipped", path)
            return False
        return True

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        out = []
        for chunk in self.walk(prefix):
            for meta in chunk:
                key = self.paths.rel(meta["path"], self.paths.prefix or None)
                try:
                    check_key(key)
                except NczfsError:
                    log.debug("object key %r cannot be shown; skipped", meta["path"])
                    continue
                if not self.is_marker(meta):
                    out.append(key)
        return sorted(out)

    def dir_exists(self, prefix: str) -> bool:
        if prefix == "":
            return True
        check_key(prefix)
        self.paths.full(prefix)
        for chunk in self.walk(prefix, 1):
            return bool(chunk)
        return False

    def probe(self) -> None:
        """One LIST of at most one key below the prefix: raises what the store answers (no such
        bucket, credentials refused, endpoint down)."""
        for _ in self.walk("", 1):
            return

    def entry(self, key: str) -> DirEntry | None:
        """One LIST of at most one key says whether ``key`` is a directory (which wins over an
        object of the same name, as in listings); else a HEAD answers for an object."""
        name = key.rpartition("/")[2]
        if self.dir_exists(key):
            return DirEntry(name, True)
        try:
            return DirEntry(name, False, self.stat(key))
        except KeyNotFound:
            return None

