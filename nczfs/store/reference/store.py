"""A kerchunk/fsspec reference set as a read-only store.

The JSON (or kerchunk's parquet directory) is parsed once (:mod:`nczfs.store.reference.spec`,
:mod:`nczfs.store.reference.parquet`) into ``{key: bytes | Ref}`` and the
directory tree implied by the keys is built from it. Inline values are served from memory;
references are read from their targets (:mod:`nczfs.store.reference.targets`). Sizes are exact: a
range's length, or for a whole-target reference the target's size, found by stat/HEAD on
first use and then kept. A range that reaches past the end of its target is refused with
EIO (and a log line) on every read of that key.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from nczfs.store.capabilities import Capabilities
from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError, SourceError
from nczfs.store.base import SyncStore, check_writable
from nczfs.store.keys import check_key, check_prefix, join
from nczfs.store.values import ByteRange, DirEntry, ObjectInfo
from nczfs.store.reference.parquet import is_parquet_references, load_parquet_references
from nczfs.store.reference.spec import Ref, Value, load_references
from nczfs.store.reference.targets import Targets

if TYPE_CHECKING:
    from nczfs.store.objstore.options import S3Options

log = logging.getLogger(__name__)


class ReferenceStore(SyncStore):
    capabilities = Capabilities(supports_writes=False, read_only=True, remote=True)  # targets mostly on servers

    def __init__(self, path: str, allow_roots: list[str] | tuple[str, ...] = (), mountpoint: str | None = None,
                 s3: S3Options | None = None):
        self.path = os.path.abspath(path)
        try:
            st = os.stat(self.path)
            self.mtime_ns = st.st_mtime_ns
            self.etag = f"refs-{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"
        except OSError as exc:
            raise SourceError(f"{self.path}: cannot read the reference set ({exc.strerror})") from None
        if is_parquet_references(self.path):
            self.refs: dict[str, Value] = load_parquet_references(self.path)
        else:
            self.refs = load_references(self.path)
        self.dirs = _tree(self.refs)
        refs = [v for v in self.refs.values() if isinstance(v, Ref)]
        log.info(
            "reference set %s: %d keys (%d inline), %d targets, local targets below %s",
            self.path, len(self.refs), len(self.refs) - len(refs), len({r.url for r in refs}),
            ", ".join(allow_roots) or os.path.dirname(self.path),
        )
        # s3:// targets are read with the mount's S3 options
        self.targets = Targets(list(allow_roots) or [os.path.dirname(self.path)], mountpoint, s3)
        self._sizes: dict[str, int] = {}  # target url -> size
        self._sizing: dict[str, threading.Lock] = {}  # target url -> held while it is being sized
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"reference://{self.path}"

    def problems(self) -> list[str]:
        """One line if local targets lie outside the allowed roots (kerchunk writes absolute
        paths, the default root is the JSON's folder): their keys would answer EACCES. It names
        the first such target and the --allow-root that admits it."""
        outside: list[str] = []
        checked: dict[str, bool] = {}  # folder -> allowed (targets are checked by their folder)
        for value in self.refs.values():
            if not isinstance(value, Ref) or "://" in value.url:
                continue
            folder = os.path.dirname(value.url)
            if folder not in checked:
                checked[folder] = self.targets.local.allows(os.path.join(os.path.realpath(folder), "x"))
            if not checked[folder]:
                outside.append(value.url)
        if not outside:
            return []
        first = outside[0]
        targets = len({u for u in outside})
        return [f"reference target {first} lies outside the allowed roots ({', '.join(self.targets.local.roots)}): "
                f"reads of its keys fail with EACCES; --allow-root {os.path.dirname(os.path.realpath(first))} admits it"
                + (f" ({targets} targets outside)" if targets > 1 else "")]

    # ------------------------------------------------------------------ reading

    def _value(self, key: str) -> Value:
        check_key(key)
        try:
            return self.refs[key]
        except KeyError:
            raise KeyNotFound(key) from None

    def _target_size(self, key: str, url: str) -> int:
        """The target's size, asked once per URL (concurrent first askers wait for one answer)."""
        with self._lock:
            size = self._sizes.get(url)
            if size is not None:
                return size
            sizing = self._sizing.setdefault(url, threading.Lock())
        with sizing:
            size = self._sizes.get(url)
            if size is None:
                size = self._logged(key, url, lambda: self.targets.reader(url).size(url))
                with self._lock:
                    self._sizes[url] = size
                    self._sizing.pop(url, None)
        return size

    def _logged(self, key, url, call):
        """Run a target call; failures are logged with the key and URL and re-raised as nczfs errors."""
        try:
            return call()
        except NczfsError as exc:
            log.warning("key %r: %s", key, exc)  # the message names the target
            raise
        except Exception as exc:  # a reader's unexpected failure must not kill the daemon
            log.warning("key %r -> %s: %s: %s", key, url, type(exc).__name__, exc)
            raise BackendError(f"{key!r}: reading {url} failed ({exc})") from exc

    def _size(self, key: str, value: Value) -> int:
        if isinstance(value, bytes):
            return len(value)
        if value.length is None:
            return max(0, self._target_size(key, value.url) - value.offset)
        return value.length

    def _checked_range(self, key: str, ref: Ref) -> int:
        """The reference's length, after checking its range lies inside the target."""
        size = self._target_size(key, ref.url)
        length = size - ref.offset if ref.length is None else ref.length
        if ref.offset + length > size or length < 0:
            log.warning(
                "key %r -> %s: bytes %d..%d lie past the end of the target (%d bytes)",
                key, ref.url, ref.offset, ref.offset + max(length, 0), size,
            )
            raise BackendError(f"{key!r}: its range lies past the end of {ref.url}")
        return length

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        value = self._value(key)
        if isinstance(value, bytes):
            return value if rng is None else rng.slice(value)
        length = self._checked_range(key, value)
        start = 0 if rng is None else min(rng.start, length)
        end = length if rng is None or rng.end is None else min(rng.end, length)
        if end <= start:
            return b""
        url = value.url
        data = self._logged(key, url, lambda: self.targets.reader(url).read(url, value.offset + start, value.offset + end))
        if len(data) != end - start:
            log.warning("key %r -> %s: short read (%d of %d bytes)", key, url, len(data), end - start)
            raise BackendError(f"{key!r}: short read from {url}")
        return data

    def stat(self, key: str) -> ObjectInfo:
        return self._info(key, self._value(key))

    def _info(self, key: str, value: Value) -> ObjectInfo:
        # a key's value is fixed for one version of the JSON: its mtime tags the object
        return ObjectInfo(key, self._size(key, value), self.mtime_ns, self.etag)

    # ------------------------------------------------------------------ the tree

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        out = []
        for name in self.dirs.get(prefix, ()):
            key = join(prefix, name)
            value = self.refs.get(key)
            if value is None:
                out.append(DirEntry(name, True))
                continue
            try:
                info: ObjectInfo | None = self._info(key, value)
            except NczfsError:  # an unreachable whole target: listed, and its own lookup fails
                info = None
            out.append(DirEntry(name, False, info))
        return out

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        start = prefix + "/" if prefix else ""
        return sorted(k for k in self.refs if k.startswith(start))

    def dir_exists(self, prefix: str) -> bool:
        check_prefix(prefix)
        return prefix in self.dirs

    def entry(self, key: str) -> DirEntry | None:
        check_key(key)
        name = key.rpartition("/")[2]
        if key in self.dirs:
            return DirEntry(name, True)
        value = self.refs.get(key)
        return None if value is None else DirEntry(name, False, self._info(key, value))

    # ------------------------------------------------------------------ writes: never

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        raise AssertionError("unreachable")  # pragma: no cover

    def delete(self, key: str) -> None:
        check_key(key)
        check_writable(self, key)

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        check_key(dst)
        check_writable(self, dst)
        raise AssertionError("unreachable")  # pragma: no cover

    def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        check_key(dst)
        check_writable(self, dst)
        raise AssertionError("unreachable")  # pragma: no cover

    def rename_dir(self, src: str, dst: str) -> None:
        check_key(dst)
        check_writable(self, dst)

    def close(self) -> None:
        self.targets.close()


def _tree(refs: dict[str, Value]) -> dict[str, list[str]]:
    """Every directory implied by the keys (``""`` is the root) -> its sorted child names."""
    children: dict[str, set[str]] = {"": set()}
    for key in refs:
        parent, _, name = key.rpartition("/")
        while True:
            kids = children.get(parent)
            known = kids is not None
            if kids is None:
                kids = children[parent] = set()
            kids.add(name)
            if known or not parent:
                break  # a known directory's ancestors were linked when it was first seen
            parent, _, name = parent.rpartition("/")
    return {d: sorted(names) for d, names in children.items()}
