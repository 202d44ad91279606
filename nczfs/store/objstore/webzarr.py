"""A Zarr published on a web server (``https://host/path/x.zarr``), read-only, through obstore.

A web server lists no directories, so the tree comes from the store's consolidated metadata:
Zarr v2's ``.zmetadata`` or a Zarr v3 root ``zarr.json`` holding ``consolidated_metadata``.
Every metadata document it names is a file; the chunk names of each array come from its chunk
grid (shape / chunk shape) and chunk key encoding, without asking the server. A chunk the
grid names but the server does not hold (never written: the fill value) answers 404, and the
file is missing (ENOENT). Sizes and versions come from a HEAD the first time a file is looked
up. A Zarr without consolidated metadata cannot be mounted from a web server: the error says so.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import obstore as obs

from nczfs.store.capabilities import Capabilities
from nczfs.toolbox.errors import BackendError, InvalidKey, KeyNotFound, NczfsError, SourceError
from nczfs.store.base import SyncStore, check_writable
from nczfs.store.keys import check_key, check_prefix, join, parent_of
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.objstore.errors import first_line, translate_obstore, unsatisfiable
from nczfs.store.objstore.obprefix import mtime_ns, plain_etag
from nczfs.store.objstore.transport import Bounds

if TYPE_CHECKING:
    from obstore import GetOptions

#: how many chunk names one listing may hold (a directory of more is refused, not built in memory)
MAX_LISTING = 1_000_000


@dataclass(frozen=True)
class Grid:
    """The chunk keys of one array below its path: one path level per entry of ``levels``, each
    a fixed name (``"c"``), the indexes ``0..n-1`` of one dimension, or (separator ``.``) every
    ``i.j.k`` of the grid, optionally after a leading ``c.``."""

    path: str
    counts: tuple[int, ...]  # chunks along each dimension
    separator: str
    lead: str | None  # "c" (Zarr v3's default encoding) or None

    def levels(self) -> list[tuple[str, Any]]:
        if not self.counts:  # a 0-d array: one chunk
            return [("fixed", self.lead or "0")]
        if self.separator == "/":
            return ([("fixed", self.lead)] if self.lead else []) + [("index", n) for n in self.counts]
        return [("dotted", None)]

    def names(self, level: tuple[str, Any]) -> Iterator[str]:
        kind, value = level
        if kind == "fixed":
            yield value
        elif kind == "index":
            yield from map(str, range(value))
        else:
            head = [self.lead] if self.lead else []
            for idx in itertools.product(*(range(n) for n in self.counts)):
                yield ".".join(head + [str(i) for i in idx])

    def has(self, level: tuple[str, Any], name: str) -> bool:
        kind, value = level
        if kind == "fixed":
            return name == value
        if kind == "index":
            return name.isdigit() and str(int(name)) == name and int(name) < value
        parts = name.split(".")
        if self.lead:
            if not parts or parts[0] != self.lead:
                return False
            parts = parts[1:]
        return len(parts) == len(self.counts) and all(
            p.isdigit() and str(int(p)) == p and int(p) < n for p, n in zip(parts, self.counts))

    def count(self, level: tuple[str, Any]) -> int:
        kind, value = level
        return 1 if kind == "fixed" else value if kind == "index" else math.prod(self.counts)


def _grid_v2(path: str, meta: dict) -> Grid:
    shape, chunks = meta["shape"], meta["chunks"]
    counts = tuple(-(-s // c) if c else 0 for s, c in zip(shape, chunks))
    return Grid(path, counts, meta.get("dimension_separator") or ".", None)


def _grid_v3(path: str, meta: dict) -> Grid:
    grid = meta.get("chunk_grid") or {}
    if grid.get("name") != "regular":
        raise ValueError(f"chunk grid {grid.get('name')!r} (only 'regular' is known)")
    chunks = grid["configuration"]["chunk_shape"]
    counts = tuple(-(-s // c) if c else 0 for s, c in zip(meta["shape"], chunks))
    enc = meta.get("chunk_key_encoding") or {"name": "default"}
    sep = (enc.get("configuration") or {}).get("separator") or ("/" if enc.get("name") == "default" else ".")
    if enc.get("name") not in ("default", "v2"):
        raise ValueError(f"chunk key encoding {enc.get('name')!r}")
    return Grid(path, counts, sep, "c" if enc.get("name") == "default" else None)


def read_tree(get_json) -> tuple[set[str], list[Grid]]:
    """The metadata keys and the arrays' chunk grids of a Zarr, from its consolidated metadata
    (``get_json(key)``: the document at ``key``, KeyNotFound if there is none)."""
    try:
        zmeta = get_json(".zmetadata")
    except KeyNotFound:
        zmeta = None
    if zmeta is not None:
        docs = zmeta.get("metadata")
        if not isinstance(docs, dict):
            raise ValueError(".zmetadata holds no 'metadata' object")
        keys = {".zmetadata", *docs}
        grids = [_grid_v2(parent_of(k), v) for k, v in docs.items() if k.rpartition("/")[2] == ".zarray"]
        return keys, grids
    root = get_json("zarr.json")
    consolidated = root.get("consolidated_metadata") if isinstance(root, dict) else None
    if root.get("node_type") == "array":
        return {"zarr.json"}, [_grid_v3("", root)]
    if not isinstance(consolidated, dict) or not isinstance(consolidated.get("metadata"), dict):
        raise KeyNotFound("zarr.json", "holds no consolidated_metadata")
    keys = {"zarr.json"}
    grids = []
    for path, doc in consolidated["metadata"].items():
        keys.add(join(path.strip("/"), "zarr.json"))
        if isinstance(doc, dict) and doc.get("node_type") == "array":
            grids.append(_grid_v3(path.strip("/"), doc))
    return keys, grids


class WebZarrStore(SyncStore):
    capabilities = Capabilities(supports_writes=False, read_only=True, remote=True)

    def __init__(self, store: Any, url: str):
        self.store = store
        self.url = url
        self._counts: dict[str, int] = {}
        #: the tree's files (None while it is being read: any key may be asked for)
        self._files: set[str] | None = None
        try:
            keys, grids = read_tree(self._json)
        except KeyNotFound:
            raise SourceError(f"{url}: no consolidated metadata (.zmetadata, or zarr.json with consolidated_metadata): "
                              "a web server lists no directories, so nczfs reads the tree from it") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise SourceError(f"{url}: consolidated metadata nczfs cannot read: {exc}") from None
        except NczfsError as exc:
            raise SourceError(f"{url}: {exc}") from None
        self._files = keys
        self._grids = {g.path: g for g in grids}
        self._dirs: dict[str, set[str]] = {"": set()}
        self._dir_names: dict[str, set[str]] = {"": set()}
        for key in keys:
            self._add_path(key, is_file=True)
        for g in grids:
            if g.path:
                self._add_path(g.path, is_file=False)

    def _add_path(self, key: str, is_file: bool) -> None:
        parts = key.split("/")
        for depth in range(len(parts)):
            parent = "/".join(parts[:depth])
            name = parts[depth]
            last = depth == len(parts) - 1
            self._dirs.setdefault(parent, set())
            self._dir_names.setdefault(parent, set())
            if last and is_file:
                self._dirs[parent].add(name)
            else:
                self._dir_names[parent].add(name)
                self._dirs.setdefault(join(parent, name), set())
                self._dir_names.setdefault(join(parent, name), set())

    def _count(self, kind: str) -> None:
        self._counts[kind] = self._counts.get(kind, 0) + 1

    def counters(self) -> dict[str, int]:
        return dict(self._counts)

    def _json(self, key: str) -> Any:
        return json.loads(self.get(key))

    # ------------------------------------------------------------------ the tree

    def _in_grid(self, key: str) -> tuple[Grid, int] | None:
        """The array whose chunk subtree holds ``key`` and how deep (None: none)."""
        for g in self._grids.values():
            base = g.path + "/" if g.path else ""
            if not key.startswith(base):
                continue
            rest = key[len(base):].split("/")
            levels = g.levels()
            if len(rest) > len(levels):
                continue
            if all(g.has(level, name) for level, name in zip(levels, rest)):
                return g, len(rest)
        return None

    def _kind(self, key: str) -> str | None:
        """"file", "dir" or None for a key of the tree."""
        if key in (self._files or ()):
            return "file"
        if key in self._dirs:
            return "dir"
        found = self._in_grid(key)
        if found is None:
            return None
        g, depth = found
        return "file" if depth == len(g.levels()) else "dir"

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        kind = self._kind(prefix) if prefix else "dir"
        if kind != "dir":
            return []
        entries: dict[str, DirEntry] = {n: DirEntry(n, False) for n in self._dirs.get(prefix, ())}
        entries.update({n: DirEntry(n, True) for n in self._dir_names.get(prefix, ())})
        for g in self._grids.values():
            self._list_chunks(g, prefix, entries)
        return [entries[n] for n in sorted(entries)]

    @staticmethod
    def _list_chunks(g: Grid, prefix: str, entries: dict[str, DirEntry]) -> None:
        """Add to ``entries`` the chunk names (or chunk directories) of ``g`` in directory ``prefix``."""
        base = g.path
        if not (prefix == base or (prefix.startswith(base + "/") if base else True)):
            return
        rest = [] if prefix == base else prefix[len(base) + 1 if base else 0:].split("/")
        levels = g.levels()
        if len(rest) >= len(levels) or not all(g.has(lv, n) for lv, n in zip(levels, rest)):
            return
        level = levels[len(rest)]
        if g.count(level) > MAX_LISTING:
            raise BackendError(f"{prefix!r}: {g.count(level):,} chunk names in one directory; "
                               f"more than nczfs lists ({MAX_LISTING:,})")
        is_dir = len(rest) + 1 < len(levels)
        for name in g.names(level):
            entries.setdefault(name, DirEntry(name, is_dir))

    def dir_exists(self, prefix: str) -> bool:
        return prefix == "" or self._kind(check_key(prefix)) == "dir"

    def entry(self, key: str) -> DirEntry | None:
        check_key(key)
        kind = self._kind(key)
        name = key.rpartition("/")[2]
        if kind == "dir":
            return DirEntry(name, True)
        if kind is None:
            return None
        try:
            return DirEntry(name, False, self.stat(key))
        except KeyNotFound:
            return None

    # ------------------------------------------------------------------ bytes

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        if self._files is not None and self._kind(key) != "file":
            raise KeyNotFound(key)
        self._count("HEAD")
        try:
            meta = obs.head(self.store, key)
        except Exception as exc:
            raise translate_obstore(exc, key, "HEAD", "HTTP") from None
        return ObjectInfo(key, int(meta["size"]), mtime_ns(meta.get("last_modified")), plain_etag(meta.get("e_tag")))

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        check_key(key)
        if self._files is not None and self._kind(key) != "file":
            raise KeyNotFound(key)
        if rng is not None and rng.end == rng.start:
            self.stat(key)
            return b""
        options: GetOptions = {}
        if rng is not None and not (rng.start == 0 and rng.end is None):
            options["range"] = {"offset": rng.start} if rng.end is None else (rng.start, rng.end)
        self._count("GET")
        try:
            return bytes(obs.get(self.store, key, options=options).bytes())
        except Exception as exc:
            if unsatisfiable(exc) and rng is not None:
                if rng.start >= self.stat(key).size:
                    return b""
            if isinstance(exc, ValueError):
                raise InvalidKey(key, first_line(exc)) from None
            raise translate_obstore(exc, key, "GET", "HTTP") from None

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_writable(self, key)
        raise AssertionError("unreachable")

    def delete(self, key: str) -> None:
        check_writable(self, key)

    def describe(self) -> str:
        return self.url


def open_http(source: str, url: str, bounds: Bounds = Bounds()) -> WebZarrStore:
    """The Zarr at ``url`` (SOURCE ``source`` names it), its requests bounded by ``bounds``; a
    private CA's certificates from ``SSL_CERT_FILE``."""
    from obstore.store import HTTPStore

    try:
        store = HTTPStore.from_url(url + "/", **bounds.obstore(url, os.environ.get("SSL_CERT_FILE") or None))
    except Exception as exc:
        raise SourceError(f"{source}: {first_line(exc)}") from None
    return WebZarrStore(store, url)
